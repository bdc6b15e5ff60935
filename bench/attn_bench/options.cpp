// See options.hpp.
#include "options.hpp"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace attn_bench {

bool wanted(const Options &o, const char *sec) {
    if (o.only.empty()) return true;
    std::stringstream list(o.only);
    for (std::string s; std::getline(list, s, ',');)
        if (s == sec) return true;
    return false;
}

[[noreturn]] void usage(const char *msg) {
    std::fprintf(stderr,
                 "%s\nusage: attn_bench [--quick] [--sweep-only] [--no-sweep] [--peak-only] "
                 "[--only prefill,decode,small,memory,sweep,openblas,scalar]\n"
                 "                  [--json PATH] [--n N] [--scalar-max-n N] [--openblas-coretype "
                 "NAME|auto|none] [--patience SECONDS]\n",
                 msg);
    std::exit(2);
}

Options parse_options(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i], val;
        const size_t eq = a.find('=');
        bool has_val = false;
        if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
            val = a.substr(eq + 1);
            a = a.substr(0, eq);
            has_val = true;
        }
        auto value = [&]() -> std::string {
            if (has_val) return val;
            if (i + 1 >= argc) usage(("missing value for " + a).c_str());
            return argv[++i];
        };
        auto size_value = [&]() -> size_t {
            const std::string s = value();
            char *end = nullptr;
            const unsigned long long x = std::strtoull(s.c_str(), &end, 10);
            if (s.empty() || *end || x == 0) usage(("bad number for " + a + ": " + s).c_str());
            return static_cast<size_t>(x);
        };
        if (a == "--quick")
            o.quick = true;
        else if (a == "--sweep-only")
            o.sweep_only = true;
        else if (a == "--no-sweep")
            o.no_sweep = true;
        else if (a == "--peak-only")
            o.peak_only = true;
        else if (a == "--only")
            o.only = value();
        else if (a == "--json")
            o.json = value();
        else if (a == "--n")
            o.n = size_value();
        else if (a == "--scalar-max-n")
            o.scalar_max_n = size_value();
        else if (a == "--openblas-coretype")
            o.coretype = value();
        else if (a == "--patience")
            o.patience = std::atof(value().c_str());
        else if (a == "--child")
            o.child = value();
        else if (a == "--child-out")
            o.child_out = value();
        else if (a == "--isa")
            o.isa = value();
        else if (a == "--threads")
            o.threads = size_value();
        else if (a == "--help" || a == "-h")
            usage("attn_bench: libattn speed benchmark");
        else
            usage(("unknown argument " + a).c_str());
    }
    if (!o.only.empty()) {
        std::stringstream list(o.only);
        for (std::string sec; std::getline(list, sec, ',');)
            if (sec != "prefill" && sec != "decode" && sec != "small" && sec != "memory" &&
                sec != "sweep" && sec != "openblas" && sec != "scalar")
                usage(("unknown section for --only: " + sec).c_str());
    }
    if (o.quick && o.scalar_max_n == 1024) o.scalar_max_n = 256;
    if (o.patience < 0) o.patience = o.quick ? 60 : 300;
    return o;
}

std::vector<size_t> sweep_sizes(const Options &o) {
    if (o.quick) return {128, 256, 512, 1024};
    return {128, 256, 512, 1024, 2048, 4096};
}

} // namespace attn_bench
