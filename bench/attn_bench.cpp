// attn_bench: libattn's speed against this machine's limits and against two baselines, measured
// in one run (issue 4). See bench/README.md for what each figure means.
//
//   attn_bench [--quick] [--sweep-only] [--no-sweep] [--peak-only] [--only LIST] [--json PATH]
//              [--n N] [--scalar-max-n N] [--openblas-coretype NAME|auto|none] [--patience S]
//
// Sections, in the order they run:
//   peak      register-only FMA (mul+add for SSE2) loops per ISA the CPU has, one thread, GFLOP/s
//   stream    streaming read of a 1 GiB buffer, 1 and 2 threads, GB/s: one loop per ISA the CPU
//             has (stream_*.cpp, each compiled with its own flags); the fastest is "stream"
//   prefill   libattn, B=1, H=8, n=2048, head_dim 128/64, causal/non-causal, BHSD/BSHD,
//             no mask / 10% padded keys + block-structured `allowed`, 1 and 2 threads, every ISA
//   decode    libattn, seq_q=1, seq_k=32768, heads 32/8 (GQA), head_dim 128, BOTTOM_RIGHT;
//             cold (1 GiB of other memory read before each timed call, evict.cpp) and hot
//   small     libattn vs the plain scalar loop, n = 16..128, ns per call
//   memory    peak RSS growth of attn_forward at n=16384 beyond its operands (child process)
//   openblas  unfused attention on cblas_sgemm + plain softmax, as OpenBLAS picks its kernels,
//             then (child process) with OPENBLAS_CORETYPE forced to the CPU's best kernels
//   scalar    the plain scalar reference (naive loops), only at n <= --scalar-max-n
//   sweep     GFLOP/s against n = 128..4096 for libattn and the baselines (for plot.py)
//
// FLOPs = 4 * B * H * seq_q * seq_k * head_dim; causal counts the visible half:
// 4 * B * H * head_dim * n(n+1)/2. Masked runs count the same FLOPs as unmasked ones, so their
// GFLOP/s compare directly with the unmasked figure (the time ratio is the mask slowdown).
//
// --peak-only runs the first two sections only (the machine's limits, for bench/peers/peers.py);
// --only prefill,decode,... runs peak, stream and the sections named.
//
// Environment: OpenBLAS reads OPENBLAS_CORETYPE when it is loaded, and libattn reads ATTN_ISA /
// ATTN_NUM_THREADS. The benchmark decides what it measures: if any of those (or OpenBLAS'
// thread/L2 variables) is set, it re-executes itself once without them; the forced-OpenBLAS
// baseline and the memory figure run in child processes of /proc/self/exe.
#include <attn.h>

#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "baselines.hpp"
#include "evict.hpp"
#include "peak.hpp"
#include "stream.hpp"

extern char **environ;

namespace {

using namespace attn_bench;

// ====================================  Options  ====================================

struct Options {
    bool quick = false;
    bool sweep_only = false;
    bool no_sweep = false;
    bool peak_only = false; // FMA peaks and stream only
    std::string only;       // comma-separated sections to run besides peak and stream ("": all)
    std::string json = "bench_results.json";
    size_t n = 2048;               // prefill sequence length
    size_t scalar_max_n = 1024;    // the scalar reference runs only up to this n (at H=8, d=128)
    std::string coretype = "auto"; // forced OPENBLAS_CORETYPE for the second baseline
    double patience = -1;          // seconds the run may wait for a quiet machine (-1: default)
    // child modes (internal)
    std::string child;     // "openblas" or "mem"
    std::string child_out; // file the child writes its records to
    std::string isa;       // mem child
    size_t threads = 1;    // mem child
};

// Whether --only (if given) names section `sec`.
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

// ===================================  Records  =====================================
// A record is an ordered list of key -> JSON-encoded value. It prints as a JSON object, and as
// one line of key=value tokens (how child processes hand their figures back).

std::string json_string(const std::string &s) {
    std::string r = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            r += '\\';
            r += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            r += buf;
        } else {
            r += c;
        }
    }
    return r + "\"";
}

std::string json_number(double x) {
    if (!std::isfinite(x)) return "null";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", x);
    return buf;
}

struct Record {
    std::vector<std::pair<std::string, std::string>> kv;

    Record &str(const std::string &k, const std::string &v) { return raw(k, json_string(v)); }
    Record &num(const std::string &k, double v) { return raw(k, json_number(v)); }
    Record &integer(const std::string &k, long long v) { return raw(k, std::to_string(v)); }
    Record &boolean(const std::string &k, bool v) { return raw(k, v ? "true" : "false"); }
    Record &raw(const std::string &k, const std::string &v) {
        for (auto &p : kv)
            if (p.first == k) {
                p.second = v;
                return *this;
            }
        kv.emplace_back(k, v);
        return *this;
    }
    const std::string *find(const std::string &k) const {
        for (auto &p : kv)
            if (p.first == k) return &p.second;
        return nullptr;
    }
    double get_num(const std::string &k) const {
        const std::string *v = find(k);
        return v && *v != "null" ? std::atof(v->c_str()) : NAN;
    }
    std::string get_str(const std::string &k) const {
        const std::string *v = find(k);
        if (!v || v->size() < 2 || (*v)[0] != '"') return v ? *v : "";
        std::string s = v->substr(1, v->size() - 2), r;
        for (size_t i = 0; i < s.size(); ++i) {
            if (s[i] == '\\' && i + 5 < s.size() + 0 && s[i + 1] == 'u') {
                r += static_cast<char>(std::strtol(s.substr(i + 2, 4).c_str(), nullptr, 16));
                i += 5;
            } else if (s[i] == '\\' && i + 1 < s.size()) {
                r += s[++i];
            } else {
                r += s[i];
            }
        }
        return r;
    }
    std::string json() const {
        std::string r = "{";
        for (size_t i = 0; i < kv.size(); ++i)
            r += (i ? ", " : "") + json_string(kv[i].first) + ": " + kv[i].second;
        return r + "}";
    }
    std::string line() const {
        std::string r;
        for (size_t i = 0; i < kv.size(); ++i) {
            std::string v = kv[i].second; // JSON text: spaces occur only inside strings
            for (size_t p = v.find(' '); p != std::string::npos; p = v.find(' ', p))
                v.replace(p, 1, "\\u0020");
            r += (i ? " " : "") + kv[i].first + "=" + v;
        }
        return r;
    }
    static Record parse_line(const std::string &line) {
        Record r;
        std::istringstream in(line);
        std::string tok;
        while (in >> tok) {
            const size_t eq = tok.find('=');
            if (eq != std::string::npos) r.raw(tok.substr(0, eq), tok.substr(eq + 1));
        }
        return r;
    }
};

// All results, by section, in the order sections were first written.
struct Results {
    Record machine;
    std::vector<std::pair<std::string, std::vector<Record>>> sections;

    std::vector<Record> &section(const std::string &name) {
        for (auto &s : sections)
            if (s.first == name) return s.second;
        sections.emplace_back(name, std::vector<Record>{});
        return sections.back().second;
    }
    void add(const std::string &name, const Record &r) { section(name).push_back(r); }
    const Record *find(const std::string &name,
                       const std::function<bool(const Record &)> &pred) const {
        for (auto &s : sections)
            if (s.first == name)
                for (auto &r : s.second)
                    if (pred(r)) return &r;
        return nullptr;
    }
    bool write_json(const std::string &path) const {
        std::ofstream f(path);
        if (!f) return false;
        f << "{\n  \"machine\": " << machine.json();
        for (auto &s : sections) {
            f << ",\n  " << json_string(s.first) << ": [";
            for (size_t i = 0; i < s.second.size(); ++i)
                f << (i ? ",\n    " : "\n    ") << s.second[i].json();
            f << (s.second.empty() ? "]" : "\n  ]");
        }
        f << "\n}\n";
        return static_cast<bool>(f);
    }
};

// ================================  Small utilities  ================================

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void check(attn_status st, const char *what) {
    if (st != ATTN_OK) {
        std::fprintf(stderr, "attn_bench: %s failed: %s (%s)\n", what, attn_status_string(st),
                     attn_last_error());
        std::exit(1);
    }
}

// 64-byte aligned array, released with free().
template <class T> struct Array {
    std::unique_ptr<T, void (*)(void *)> p{nullptr, std::free};
    size_t len = 0;
    Array() = default;
    explicit Array(size_t n) : len(n) {
        const size_t bytes = ((n * sizeof(T) + 63) / 64) * 64;
        p.reset(static_cast<T *>(std::aligned_alloc(64, bytes ? bytes : 64)));
        if (!p) {
            std::fprintf(stderr, "attn_bench: out of memory (%zu bytes)\n", bytes);
            std::exit(1);
        }
    }
    T *data() const { return p.get(); }
    T &operator[](size_t i) const { return p.get()[i]; }
};

// Deterministic values in [-1, 1).
void fill(float *x, size_t len, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = static_cast<float>(static_cast<uint32_t>(s >> 40)) / static_cast<float>(1u << 23) -
               1.0f;
    }
}

// ---- Contention. Every figure assumes the run has the CPUs to itself. Linux' pressure stall
// information (/proc/pressure/cpu, "some ... total=<us>") counts the time in which some runnable
// task waited for a CPU: over a measurement, stall time / wall time is the share of it spent
// competing with something else (our own threads never exceed the 2 CPUs we ask for).
// A measurement whose share exceeds kBusy is repeated, after waiting for a quiet machine, up to
// twice; the waiting has a budget for the whole run. Each record keeps its share (cpu_pressure).
constexpr double kBusy = 0.05;
double g_patience_s = 300.0; // total seconds the run may wait for a quiet machine

// Cumulative CPU stall time in microseconds, or NaN without PSI.
double psi_some_total_us() {
    std::ifstream f("/proc/pressure/cpu");
    std::string word;
    while (f >> word)
        if (word.rfind("total=", 0) == 0) return std::atof(word.c_str() + 6);
    return NAN;
}

// Waits (at most 30 s, within the run's patience) until one second passes without stalls.
void wait_for_quiet() {
    const double t0 = now_s();
    while (g_patience_s > 0 && now_s() - t0 < 30.0) {
        const double p0 = psi_some_total_us(), w0 = now_s();
        std::this_thread::sleep_for(std::chrono::seconds(1));
        const double share = (psi_some_total_us() - p0) / ((now_s() - w0) * 1e6);
        g_patience_s -= now_s() - w0;
        if (!(share > 0.01)) break;
    }
}

// Runs `f` (one measurement); repeats it while the machine was busy during it. Returns the stall
// share of the attempt kept (NaN without PSI).
double run_quiet(const std::function<void()> &f) {
    double share = NAN;
    for (int attempt = 0; attempt < 3; ++attempt) {
        if (attempt) wait_for_quiet();
        const double p0 = psi_some_total_us(), t0 = now_s();
        f();
        share = (psi_some_total_us() - p0) / ((now_s() - t0) * 1e6);
        if (!(share > kBusy) || g_patience_s <= 0) break;
    }
    return share;
}

std::string fmt3(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", x);
    return buf;
}

std::string busy_note(double share) {
    if (!(share > kBusy)) return "";
    char buf[48];
    std::snprintf(buf, sizeof buf, "  [busy %.0f%%]", 100.0 * share);
    return buf;
}

struct Timing {
    double best = 0, median = 0;
    int samples = 0;
    long inner = 1;
    double pressure = NAN; // CPU stall share during the samples (see run_quiet)
};

struct Budget {
    double seconds;      // time to spend on samples (after warm-up), roughly
    int min_samples;     // at least this many samples
    int max_samples;     // at most; 0 = the single (cold) warm-up call is the figure
    double min_sample_s; // a sample repeats the call until it lasts this long (short calls)
};

// Warm-up call, then samples of `inner` calls each; per-call best and median. With `before`
// (e.g. a cache eviction), every sample is one call preceded by before(), which is not timed.
Timing measure(const std::function<void()> &f, const Budget &b,
               const std::function<void()> &before = nullptr) {
    Timing r;
    if (b.max_samples == 0) { // slow configurations: one call is the figure
        r.pressure = run_quiet([&] {
            if (before) before();
            const double t = now_s();
            f();
            r.best = r.median = now_s() - t;
        });
        r.samples = 1;
        return r;
    }
    if (before) before();
    double t = now_s();
    f(); // warm-up: thread pool, scratch, page faults, caches
    double once = now_s() - t;
    if (once < 0.05) { // short call: a second, warm estimate
        if (before) before();
        t = now_s();
        f();
        once = std::min(once, now_s() - t);
    }
    once = std::max(once, 1e-9);
    r.inner = before ? 1 : std::max(1L, static_cast<long>(std::ceil(b.min_sample_s / once)));
    const double per_sample = once * static_cast<double>(r.inner);
    r.samples = static_cast<int>(
        std::clamp(b.seconds / per_sample, double(b.min_samples), double(b.max_samples)));
    std::vector<double> v;
    r.pressure = run_quiet([&] {
        v.clear();
        for (int s = 0; s < r.samples; ++s) {
            if (before) before();
            t = now_s();
            for (long i = 0; i < r.inner; ++i) f();
            v.push_back((now_s() - t) / static_cast<double>(r.inner));
        }
    });
    std::sort(v.begin(), v.end());
    r.best = v.front();
    r.median = v[v.size() / 2];
    return r;
}

double attention_gflop(size_t b, size_t h, size_t sq, size_t sk, size_t d, bool causal_square) {
    const double pairs =
        causal_square ? double(sq) * double(sq + 1) / 2.0 : double(sq) * double(sk);
    return 4.0 * double(b) * double(h) * double(d) * pairs * 1e-9;
}

double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = std::fabs(double(a[i]) - double(b[i]));
        if (!(d <= m)) m = d; // NaN propagates as "large"
    }
    return m;
}

std::string read_first_line_matching(const char *path, const char *prefix) {
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(prefix, 0) == 0) return line;
    return "";
}

std::string cpu_model() {
    std::string l = read_first_line_matching("/proc/cpuinfo", "model name");
    const size_t c = l.find(':');
    return c == std::string::npos ? "unknown" : l.substr(c + 2);
}

// VmHWM (peak resident set) of this process, in KiB.
long vm_hwm_kib() {
    const std::string l = read_first_line_matching("/proc/self/status", "VmHWM:");
    return l.empty() ? -1 : std::atol(l.c_str() + 6);
}

bool cpu_has(const char *feature) {
    __builtin_cpu_init();
    if (!std::strcmp(feature, "avx512f")) return __builtin_cpu_supports("avx512f");
    if (!std::strcmp(feature, "avx2")) return __builtin_cpu_supports("avx2");
    if (!std::strcmp(feature, "fma")) return __builtin_cpu_supports("fma");
    if (!std::strcmp(feature, "sse2")) return __builtin_cpu_supports("sse2");
    return false;
}

bool iequals(const std::string &a, const std::string &b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

// Runs /proc/self/exe with `args`, the current environment plus `env_set`; returns the records
// the child wrote to its --child-out file (empty on failure).
std::vector<Record> run_child(std::vector<std::string> args,
                              const std::vector<std::pair<std::string, std::string>> &env_set) {
    static int counter = 0;
    const std::string out = "/tmp/attn_bench_child_" + std::to_string(getpid()) + "_" +
                            std::to_string(counter++) + ".txt";
    args.insert(args.begin(), "attn_bench");
    args.push_back("--child-out=" + out);
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e) {
        const std::string s = *e;
        bool replaced = false;
        for (auto &kv : env_set)
            if (s.rfind(kv.first + "=", 0) == 0) replaced = true;
        if (!replaced) env.push_back(s);
    }
    for (auto &kv : env_set) env.push_back(kv.first + "=" + kv.second);
    std::vector<char *> argv, envp;
    for (auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    for (auto &e : env) envp.push_back(const_cast<char *>(e.c_str()));
    envp.push_back(nullptr);
    std::fflush(stdout);
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data()) != 0) {
        std::fprintf(stderr, "attn_bench: cannot start a child process\n");
        return {};
    }
    int status = 0;
    waitpid(pid, &status, 0);
    std::vector<Record> recs;
    std::ifstream f(out);
    std::string line;
    while (std::getline(f, line))
        if (!line.empty()) recs.push_back(Record::parse_line(line));
    std::remove(out.c_str());
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        std::fprintf(stderr, "attn_bench: child %s failed (status %d)\n", args[1].c_str(), status);
    return recs;
}

void write_child_records(const Options &o, const std::vector<Record> &recs) {
    std::ofstream f(o.child_out);
    for (auto &r : recs) f << r.line() << "\n";
}

// ================================  Peak and stream  ================================

// FMA peaks per ISA with 1 and 2 threads (each thread runs the loop on its own core).
struct Peaks {
    double avx512[2] = {NAN, NAN}, avx2[2] = {NAN, NAN}, sse2[2] = {NAN, NAN};
    double for_isa(const std::string &isa, size_t threads = 1) const {
        const size_t t = threads >= 2 ? 1 : 0;
        // avx512fp16 runs the avx512 kernels (fp32); its fp16 path has its own bench
        if (isa == "avx512" || isa == "avx512fp16") return avx512[t];
        if (isa == "avx2") return avx2[t];
        if (isa == "sse2") return sse2[t];
        return NAN; // no meaningful peak for the scalar kernel
    }
};

// Best GFLOP/s of `threads` threads each running `loop` at once (time: start signal to last join).
double measure_peak(float (*loop)(long), double flops_per_iter, double seconds, int threads,
                    double *pressure) {
    volatile float sink = 0;
    long iters = 1 << 20;
    double t = now_s();
    sink = sink + loop(iters);
    double dt = now_s() - t;
    iters = std::max(1L << 20, static_cast<long>(double(iters) * 0.05 / std::max(dt, 1e-6)));
    double best = 0;
    const int samples = std::max(3, static_cast<int>(seconds / 0.05));
    *pressure = run_quiet([&] {
        best = 0;
        for (int s = 0; s < samples; ++s) {
            std::atomic<int> ready{0};
            std::atomic<bool> go{false};
            std::vector<float> sums(threads);
            std::vector<std::thread> pool;
            for (int k = 0; k < threads; ++k)
                pool.emplace_back([&, k] {
                    ready.fetch_add(1);
                    while (!go.load(std::memory_order_acquire)) {
                    }
                    sums[k] = loop(iters);
                });
            while (ready.load() < threads) {
            }
            t = now_s();
            go.store(true, std::memory_order_release);
            for (auto &th : pool) th.join();
            dt = now_s() - t;
            for (float x : sums) sink = sink + x;
            best = std::max(best, threads * double(iters) * flops_per_iter / dt * 1e-9);
        }
    });
    return best;
}

// The FMA peak of `isa` on `threads` threads, measured briefly (~0.1 s) right now: the reference
// next to each prefill figure. On a shared host the speed of a core drifts during a run (other
// guests on its sibling hyperthread, clock changes); a ratio to a peak measured a second earlier
// is immune to that drift. NaN for the scalar kernel.
double adjacent_peak(const std::string &isa, size_t threads) {
    double pr = NAN;
    const int t = threads >= 2 ? 2 : 1;
    if (isa == "avx512") return measure_peak(peak_loop_avx512, kFlopsPerIterAvx512, 0.1, t, &pr);
    if (isa == "avx2") return measure_peak(peak_loop_avx2, kFlopsPerIterAvx2, 0.1, t, &pr);
    if (isa == "sse2") return measure_peak(peak_loop_sse2, kFlopsPerIterSse2, 0.1, t, &pr);
    return NAN;
}

Peaks run_peaks(Results &res, const Options &o) {
    std::printf("\n== FMA peak (register-only loops; 1 thread, and 2 threads at once) ==\n");
    Peaks p;
    const double sec = o.quick ? 0.15 : 0.5;
    struct Loop {
        const char *isa, *what;
        float (*fn)(long);
        double flops_per_iter, flops_per_cycle; // per core, two vector ports
        double *out;
        bool available;
    };
    const Loop loops[] = {
        {"avx512", "16 chains vfmadd zmm", peak_loop_avx512, kFlopsPerIterAvx512, 64, p.avx512,
         cpu_has("avx512f")},
        {"avx2", "12 chains vfmadd ymm", peak_loop_avx2, kFlopsPerIterAvx2, 32, p.avx2,
         cpu_has("avx2") && cpu_has("fma")},
        {"sse2", "12 chains mulps+addps xmm", peak_loop_sse2, kFlopsPerIterSse2, 16, p.sse2, true},
    };
    for (const Loop &l : loops) {
        if (!l.available) continue;
        for (int threads : {1, 2}) {
            double pr = NAN;
            const double g = measure_peak(l.fn, l.flops_per_iter, sec, threads, &pr);
            l.out[threads - 1] = g;
            std::printf("  %-7s %-26s t=%d %7.1f GFLOP/s  (= %.2f GHz x %.0f flop/cycle x %d)%s\n",
                        l.isa, l.what, threads, g, g / l.flops_per_cycle / threads,
                        l.flops_per_cycle, threads, busy_note(pr).c_str());
            res.add("peak", Record()
                                .str("isa", l.isa)
                                .str("loop", l.what)
                                .integer("threads", threads)
                                .num("gflops", g)
                                .num("implied_ghz_at_2_ports", g / l.flops_per_cycle / threads)
                                .num("cpu_pressure", pr));
        }
    }
    return p;
}

struct Stream {
    double gbs1 = NAN, gbs2 = NAN, pressure1 = NAN, pressure2 = NAN;
    std::string isa1, isa2; // the loop that read fastest
};

// Every read loop the CPU has (stream_*.cpp), 1 and 2 threads, over the 1 GiB buffer `ev` holds
// (the eviction buffer of the decode section: its contents do not matter). "stream" is the
// fastest loop at each thread count.
Stream run_stream(Results &res, const Options &o, const Evictor &ev) {
    std::printf("\n== Streaming read (1 GiB buffer, one loop per ISA, best of several passes; the "
                "fastest loop is \"stream\") ==\n");
    const size_t bytes = ev.bytes();
    Stream s;
    const int reps = o.quick ? 3 : 8;
    for (const StreamLoop &loop : available_stream_loops()) {
        for (int t = 1; t <= 2; ++t) {
            double g = NAN;
            const double pr = run_quiet(
                [&] { g = stream_read_gbs(loop, ev.data(), bytes / sizeof(float), t, reps); });
            std::printf("  %-6s %-21s threads=%d  %6.2f GB/s%s\n", loop.isa, loop.what, t, g,
                        busy_note(pr).c_str());
            res.add("stream_loops", Record()
                                        .str("isa", loop.isa)
                                        .str("loop", loop.what)
                                        .integer("threads", t)
                                        .integer("buffer_bytes", static_cast<long long>(bytes))
                                        .num("gbs", g)
                                        .num("cpu_pressure", pr));
            double &best = t == 1 ? s.gbs1 : s.gbs2;
            if (!(g <= best)) { // NaN-safe: the first finite value wins over NaN
                best = g;
                (t == 1 ? s.pressure1 : s.pressure2) = pr;
                (t == 1 ? s.isa1 : s.isa2) = loop.isa;
            }
        }
    }
    for (int t = 1; t <= 2; ++t) {
        const double g = t == 1 ? s.gbs1 : s.gbs2, pr = t == 1 ? s.pressure1 : s.pressure2;
        const std::string &isa = t == 1 ? s.isa1 : s.isa2;
        std::printf("  stream threads=%d  %6.2f GB/s (%s loop)%s\n", t, g, isa.c_str(),
                    busy_note(pr).c_str());
        res.add("stream", Record()
                              .integer("threads", t)
                              .str("isa", isa)
                              .integer("buffer_bytes", static_cast<long long>(bytes))
                              .num("gbs", g)
                              .num("cpu_pressure", pr));
    }
    return s;
}

// ===================================  libattn  =====================================

std::vector<std::string> supported_isas() {
    std::vector<std::string> r;
    for (const char *isa : {"avx512", "avx2", "sse2", "scalar"})
        if (attn_set_isa(isa) == ATTN_OK) r.push_back(isa);
    check(attn_set_isa(nullptr), "attn_set_isa(NULL)");
    return r;
}

void use(const std::string &isa, size_t threads) {
    check(attn_set_isa(isa.c_str()), "attn_set_isa");
    check(attn_set_num_threads(threads), "attn_set_num_threads");
}

// One prefill problem's operands: logical BHSD values, stored once in BHSD and once in BSHD.
struct PrefillData {
    size_t h, n, d;
    Array<float> q, k, v, qs, ks, vs; // BHSD, then BSHD copies of the same values
    Array<uint8_t> key_valid, allowed, ones_valid, ones_allowed;
    double visible_fraction_masked = 0;

    PrefillData(size_t heads, size_t n_, size_t d_)
        : h(heads), n(n_), d(d_), q(h * n * d), k(h * n * d), v(h * n * d), qs(h * n * d),
          ks(h * n * d), vs(h * n * d), key_valid(n), allowed(n * n), ones_valid(n),
          ones_allowed(n * n) {
        fill(q.data(), q.len, 11 + d);
        fill(k.data(), k.len, 12 + d);
        fill(v.data(), v.len, 13 + d);
        to_bshd(q, qs);
        to_bshd(k, ks);
        to_bshd(v, vs);
        // 10% padded keys at the end of the sequence; `allowed` forbids about one 64x64 block
        // in seven, in a fixed pattern.
        size_t vis = 0;
        for (size_t j = 0; j < n; ++j) key_valid[j] = j < n - n / 10;
        for (size_t i = 0; i < n; ++i)
            for (size_t j = 0; j < n; ++j) {
                allowed[i * n + j] = ((i / 64) + 2 * (j / 64)) % 7 != 0;
                vis += key_valid[j] && allowed[i * n + j];
            }
        visible_fraction_masked = double(vis) / (double(n) * double(n));
        std::memset(ones_valid.data(), 1, n);
        std::memset(ones_allowed.data(), 1, n * n);
    }
    void to_bshd(const Array<float> &src, Array<float> &dst) const {
        for (size_t hh = 0; hh < h; ++hh)
            for (size_t s = 0; s < n; ++s)
                std::memcpy(&dst[(s * h + hh) * d], &src[(hh * n + s) * d], d * sizeof(float));
    }
    void from_bshd(const Array<float> &src, Array<float> &dst) const {
        for (size_t hh = 0; hh < h; ++hh)
            for (size_t s = 0; s < n; ++s)
                std::memcpy(&dst[(hh * n + s) * d], &src[(s * h + hh) * d], d * sizeof(float));
    }
    const uint8_t *valid_for(const std::string &mask) const {
        return mask == "pad10_block" ? key_valid.data()
               : mask == "ones"      ? ones_valid.data()
                                     : nullptr;
    }
    const uint8_t *allowed_for(const std::string &mask) const {
        return mask == "pad10_block" ? allowed.data()
               : mask == "ones"      ? ones_allowed.data()
                                     : nullptr;
    }
};

// attn_forward on a PrefillData. Returns the timing; `out` receives the output (BHSD order).
Timing time_prefill(const PrefillData &pd, bool causal, const std::string &layout,
                    const std::string &mask, const Budget &b, Array<float> &out_bhsd) {
    attn_desc *desc = nullptr;
    check(attn_desc_create(&desc, 1, pd.h, pd.h, pd.n, pd.n, pd.d), "attn_desc_create");
    check(attn_desc_set_causal(desc, causal ? ATTN_CAUSAL_TOP_LEFT : ATTN_CAUSAL_NONE),
          "attn_desc_set_causal");
    const bool bshd = layout == "bshd";
    if (bshd)
        for (attn_operand w : {ATTN_Q, ATTN_K, ATTN_V, ATTN_OUT})
            check(attn_desc_set_strides(desc, w, pd.n * pd.h * pd.d, pd.d, pd.h * pd.d),
                  "attn_desc_set_strides");
    Array<float> out(pd.h * pd.n * pd.d);
    const float *q = bshd ? pd.qs.data() : pd.q.data();
    const float *k = bshd ? pd.ks.data() : pd.k.data();
    const float *v = bshd ? pd.vs.data() : pd.v.data();
    const bool *kv = reinterpret_cast<const bool *>(pd.valid_for(mask));
    const bool *al = reinterpret_cast<const bool *>(pd.allowed_for(mask));
    const Timing t = measure(
        [&] { check(attn_forward(desc, q, k, v, kv, al, out.data(), nullptr), "attn_forward"); },
        b);
    attn_desc_destroy(desc);
    if (bshd)
        pd.from_bshd(out, out_bhsd);
    else
        std::memcpy(out_bhsd.data(), out.data(), out.len * sizeof(float));
    return t;
}

// Reference outputs (OpenBLAS unfused, 1 thread) per (head_dim, causal, mask), computed once.
struct References {
    std::map<std::string, Array<float>> outs;
    const Array<float> &get(const PrefillData &pd, bool causal, const std::string &mask) {
        const std::string m = mask == "ones" ? "none" : mask; // all-true masks change nothing
        const std::string key = std::to_string(pd.d) + "/" + std::to_string(causal) + "/" + m;
        auto it = outs.find(key);
        if (it != outs.end()) return it->second;
        Problem p;
        p.heads = pd.h;
        p.seq_q = p.seq_k = pd.n;
        p.head_dim = pd.d;
        p.causal = causal;
        p.key_valid = pd.valid_for(m);
        p.allowed = pd.allowed_for(m);
        Array<float> out(pd.h * pd.n * pd.d), scores(pd.n * pd.n);
        double g = 0, s = 0;
        openblas_threads(1);
        unfused_openblas(p, pd.q.data(), pd.k.data(), pd.v.data(), out.data(), scores.data(), &g,
                         &s);
        return outs.emplace(key, std::move(out)).first->second;
    }
};

void run_prefill(Results &res, const Options &o, const Peaks &pk,
                 const std::vector<std::string> &isas) {
    const size_t H = 8, n = o.n;
    std::printf("\n== Prefill: libattn attn_forward, B=1, H=%zu, n=%zu (FLOPs = 4*B*H*n*n*d, "
                "causal: visible half) ==\n",
                H, n);
    const Budget big = o.quick ? Budget{0.0, 1, 1, 0.0} : Budget{1.2, 3, 15, 0.0};
    const Budget slow = Budget{0.0, 1, 0, 0.0}; // scalar/sse2 kernels: a single call
    References refs;
    for (size_t d : {size_t(128), size_t(64)}) {
        PrefillData pd(H, n, d);
        std::printf("  [head_dim %zu; masked = last 10%% of keys padded + block `allowed`: %.1f%% "
                    "of (i,j) visible before causal]\n",
                    d, 100.0 * pd.visible_fraction_masked);
        for (const std::string &isa : isas) {
            const bool full = isa == isas.front() || isa == "avx2"; // the default ISA and AVX2
            const bool fast = isa == "avx512" || isa == "avx2";
            if (o.quick && !fast) continue;
            for (bool causal : {false, true}) {
                const std::vector<std::string> layouts =
                    full ? std::vector<std::string>{"bhsd", "bshd"}
                         : std::vector<std::string>{"bhsd"};
                for (const std::string &layout : layouts) {
                    std::vector<std::string> masks = {"none", "pad10_block"};
                    if (isa == isas.front() && layout == "bhsd") masks.push_back("ones");
                    for (const std::string &mask : masks) {
                        const std::vector<size_t> thread_counts = full && mask != "ones"
                                                                      ? std::vector<size_t>{1, 2}
                                                                      : std::vector<size_t>{1};
                        Array<float> out1(H * n * d), out(H * n * d);
                        const Array<float> &ref = refs.get(pd, causal, mask);
                        for (size_t threads : thread_counts) {
                            use(isa, threads);
                            Array<float> &dst = threads == 1 ? out1 : out;
                            const Timing t =
                                time_prefill(pd, causal, layout, mask, fast ? big : slow, dst);
                            const double gflop = attention_gflop(1, H, n, n, d, causal);
                            const double gflops = gflop / t.best;
                            const double peak = pk.for_isa(isa, threads);
                            const double adj = adjacent_peak(isa, threads);
                            const double err = max_abs_diff(dst.data(), ref.data(), dst.len);
                            Record r;
                            r.str("isa", isa)
                                .integer("heads", H)
                                .integer("n", n)
                                .integer("head_dim", d)
                                .boolean("causal", causal)
                                .str("layout", layout)
                                .str("mask", mask)
                                .integer("threads", threads)
                                .num("gflop", gflop)
                                .num("best_s", t.best)
                                .num("median_s", t.median)
                                .num("cpu_pressure", t.pressure)
                                .integer("samples", t.samples)
                                .num("gflops", gflops)
                                .num("peak_gflops", peak) // same ISA, same thread count
                                .num("peak_ratio", gflops / peak)
                                .num("adjacent_peak_gflops", adj)
                                .num("adjacent_peak_ratio", gflops / adj)

                                .num("max_abs_err_vs_openblas", err);
                            bool same = true;
                            if (threads != 1) {
                                same = std::memcmp(out.data(), out1.data(),
                                                   out.len * sizeof(float)) == 0;
                                r.boolean("identical_to_1_thread", same);
                            }
                            res.add("prefill", r);
                            std::printf("  %-6s d=%-3zu %-10s %s %-11s t=%zu  %9.2f ms  %7.2f "
                                        "GFLOP/s",
                                        isa.c_str(), d, causal ? "causal" : "non-causal",
                                        layout.c_str(), mask.c_str(), threads, t.best * 1e3,
                                        gflops);
                            if (std::isfinite(peak))
                                std::printf("  %.3f of %zut peak (%.3f of adjacent)", gflops / peak,
                                            threads, gflops / adj);
                            std::printf("  err %.1e%s%s%s\n", err, err > 1e-4 ? " (LARGE)" : "",
                                        threads == 1 ? ""
                                        : same       ? "  ==1t"
                                                     : "  DIFFERS FROM 1t",
                                        busy_note(t.pressure).c_str());
                        }
                    }
                }
            }
        }
    }
}

void run_decode(Results &res, const Options &o, const Stream &st,
                const std::vector<std::string> &isas, Evictor &ev) {
    const size_t HQ = 32, HKV = 8, SK = 32768, D = 128;
    const double kv_bytes = 2.0 * HKV * SK * D * sizeof(float);
    std::printf("\n== Decode: seq_q=1, seq_k=%zu, heads_q=%zu, heads_kv=%zu, head_dim=%zu, "
                "BOTTOM_RIGHT; K+V = %.0f MiB per call ==\n"
                "  cold = %.0f MiB of other memory read before each timed call (not timed: K/V "
                "come from DRAM); hot = back-to-back calls\n",
                SK, HQ, HKV, D, kv_bytes / 1048576.0, ev.bytes() / 1048576.0);
    Array<float> q(HQ * D), out(HQ * D), out1(HQ * D), ref(HQ * D), row(SK);
    fill(q.data(), q.len, 21);
    Array<float> k(HKV * SK * D), v(HKV * SK * D);
    fill(k.data(), k.len, 22);
    fill(v.data(), v.len, 23);
    // Reference: the plain scalar loop per query head (its KV head is h / (HQ / HKV)).
    for (size_t h = 0; h < HQ; ++h) {
        Problem p;
        p.heads = 1;
        p.seq_q = 1;
        p.seq_k = SK;
        p.head_dim = D;
        const size_t kvh = h / (HQ / HKV);
        scalar_reference(p, q.data() + h * D, k.data() + kvh * SK * D, v.data() + kvh * SK * D,
                         ref.data() + h * D, row.data());
    }
    attn_desc *desc = nullptr;
    check(attn_desc_create(&desc, 1, HQ, HKV, 1, SK, D), "attn_desc_create");
    check(attn_desc_set_causal(desc, ATTN_CAUSAL_BOTTOM_RIGHT), "attn_desc_set_causal");
    const Budget b = o.quick ? Budget{0.3, 3, 10, 0.0} : Budget{1.0, 5, 40, 0.0};
    // cold samples each cost an eviction read (~40-80 ms) besides the call: fewer of them
    const Budget b_cold = o.quick ? Budget{0.1, 3, 5, 0.0} : Budget{0.3, 5, 12, 0.0};
    const double gflop = attention_gflop(1, HQ, 1, SK, D, false);
    for (const std::string &isa : isas) {
        for (size_t threads : {size_t(1), size_t(2)}) {
            use(isa, threads);
            for (const char *mode : {"cold", "hot"}) {
                const bool cold = !std::strcmp(mode, "cold");
                const Timing t = measure(
                    [&] {
                        check(attn_forward(desc, q.data(), k.data(), v.data(), nullptr, nullptr,
                                           out.data(), nullptr),
                              "attn_forward");
                    },
                    isa == "scalar" ? Budget{0.0, 2, 2, 0.0}
                    : cold          ? b_cold
                                    : b,
                    cold ? std::function<void()>([&] { ev.run(); }) : nullptr);
                const double gbs = kv_bytes / t.best * 1e-9;
                const double stream = threads == 1 ? st.gbs1 : st.gbs2;
                const double err = max_abs_diff(out.data(), ref.data(), out.len);
                Record r;
                r.str("isa", isa)
                    .integer("threads", threads)
                    .str("mode", mode)
                    .num("kv_bytes", kv_bytes)
                    .num("evict_bytes_before_each_call", cold ? double(ev.bytes()) : 0.0)
                    .num("best_s", t.best)
                    .num("median_s", t.median)
                    .num("cpu_pressure", t.pressure)
                    .integer("samples", t.samples)
                    .num("gbs", gbs)
                    .num("stream_gbs_same_threads", stream)
                    .num("ratio_to_stream_same_threads", gbs / stream)
                    .num("ratio_to_stream_2_threads", gbs / st.gbs2)
                    .num("gflops", gflop / t.best)
                    .num("max_abs_err_vs_scalar_ref", err);
                std::printf("  %-6s t=%zu %-4s  %8.3f ms  %6.2f GB/s  %.3f of %d-thread stream "
                            "(%.3f of 2-thread)  %6.2f GFLOP/s  err %.1e",
                            isa.c_str(), threads, mode, t.best * 1e3, gbs, gbs / stream,
                            int(threads), gbs / st.gbs2, gflop / t.best, err);
                if (cold) {
                    if (threads == 1) {
                        std::memcpy(out1.data(), out.data(), out.len * sizeof(float));
                    } else {
                        const bool same =
                            std::memcmp(out.data(), out1.data(), out.len * sizeof(float)) == 0;
                        r.boolean("identical_to_1_thread", same);
                        std::printf("  %s", same ? "==1t" : "DIFFERS FROM 1t");
                    }
                }
                std::printf("%s\n", busy_note(t.pressure).c_str());
                res.add("decode", r);
            }
        }
    }
    attn_desc_destroy(desc);
}

void run_small(Results &res, const Options &o, const std::string &default_isa) {
    const size_t D = 64;
    std::printf("\n== Small shapes: B=1, H=1, head_dim %zu, non-causal, ns per call "
                "(libattn %s vs the plain scalar loop) ==\n",
                D, default_isa.c_str());
    const Budget b = o.quick ? Budget{0.1, 3, 10, 0.005} : Budget{0.4, 7, 30, 0.01};
    for (size_t n : {size_t(16), size_t(32), size_t(64), size_t(128)}) {
        Array<float> q(n * D), k(n * D), v(n * D), out(n * D), row(n);
        fill(q.data(), q.len, 31);
        fill(k.data(), k.len, 32);
        fill(v.data(), v.len, 33);
        Problem p;
        p.seq_q = p.seq_k = n;
        p.head_dim = D;
        const Timing ref = measure(
            [&] { scalar_reference(p, q.data(), k.data(), v.data(), out.data(), row.data()); }, b);
        res.add("small", Record()
                             .str("impl", "scalar_ref")
                             .integer("n", n)
                             .integer("head_dim", D)
                             .num("ns_per_call", ref.best * 1e9)
                             .num("gflops", attention_gflop(1, 1, n, n, D, false) / ref.best)
                             .num("cpu_pressure", ref.pressure));
        std::printf("  n=%-4zu scalar loop          %10.0f ns%s\n", n, ref.best * 1e9,
                    busy_note(ref.pressure).c_str());
        attn_desc *desc = nullptr;
        check(attn_desc_create(&desc, 1, 1, 1, n, n, D), "attn_desc_create");
        for (size_t threads : {size_t(1), size_t(2)}) {
            use(default_isa, threads);
            const Timing t = measure(
                [&] {
                    check(attn_forward(desc, q.data(), k.data(), v.data(), nullptr, nullptr,
                                       out.data(), nullptr),
                          "attn_forward");
                },
                b);
            res.add("small", Record()
                                 .str("impl", "libattn")
                                 .str("isa", default_isa)
                                 .integer("threads", threads)
                                 .integer("n", n)
                                 .integer("head_dim", D)
                                 .num("ns_per_call", t.best * 1e9)
                                 .num("ns_per_call_median", t.median * 1e9)
                                 .num("ratio_to_scalar_ref", t.best / ref.best)
                                 .num("gflops", attention_gflop(1, 1, n, n, D, false) / t.best)
                                 .num("cpu_pressure", t.pressure));
            std::printf("  n=%-4zu libattn %s t=%zu  %10.0f ns  (%.2fx the scalar loop's time)%s\n",
                        n, default_isa.c_str(), threads, t.best * 1e9, t.best / ref.best,
                        busy_note(t.pressure).c_str());
        }
        attn_desc_destroy(desc);
    }
}

// Child: peak RSS growth of one attn_forward at n=16384, d=64 beyond the operands. VmHWM of this
// fresh process is the measure; getrusage's ru_maxrss is not: after posix_spawn (vfork + exec) it
// carries the parent's peak.
int child_mem(const Options &o) {
    const size_t n = 16384, d = 64;
    Array<float> q(n * d), k(n * d), v(n * d), out(n * d);
    fill(q.data(), q.len, 41);
    fill(k.data(), k.len, 42);
    fill(v.data(), v.len, 43);
    std::memset(out.data(), 0, out.len * sizeof(float));
    attn_desc *desc = nullptr;
    check(attn_desc_create(&desc, 1, 1, 1, n, n, d), "attn_desc_create");
    const long h0 = vm_hwm_kib();
    use(o.isa, o.threads);
    double t = now_s();
    check(attn_forward(desc, q.data(), k.data(), v.data(), nullptr, nullptr, out.data(), nullptr),
          "attn_forward");
    t = now_s() - t;
    const long h1 = vm_hwm_kib();
    check(attn_forward(desc, q.data(), k.data(), v.data(), nullptr, nullptr, out.data(), nullptr),
          "attn_forward");
    const long h2 = vm_hwm_kib();
    attn_desc_destroy(desc);
    Record r;
    r.str("isa", o.isa)
        .integer("threads", o.threads)
        .integer("n", n)
        .integer("head_dim", d)
        .num("operands_mib", 4.0 * n * d * sizeof(float) / 1048576.0)
        .num("seq_x_seq_buffer_mib", double(n) * n * sizeof(float) / 1048576.0)
        .num("hwm_before_mib", h0 / 1024.0)
        .num("hwm_after_mib", h1 / 1024.0)
        .num("growth_mib", (h1 - h0) / 1024.0)
        .num("growth_second_call_mib", (h2 - h1) / 1024.0)
        .num("first_call_s", t)
        .num("first_call_gflops", attention_gflop(1, 1, n, n, d, false) / t);
    write_child_records(o, {r});
    return 0;
}

void run_memory(Results &res, const std::string &default_isa) {
    std::printf("\n== Memory: peak RSS (VmHWM) growth of attn_forward, B=1, H=1, n=16384, d=64, "
                "beyond its operands (fresh child process) ==\n");
    for (size_t threads : {size_t(1), size_t(2)}) {
        auto recs = run_child(
            {"--child=mem", "--isa=" + default_isa, "--threads=" + std::to_string(threads)}, {});
        for (auto &r : recs) {
            std::printf("  %s t=%zu  growth %.2f MiB (second call +%.2f MiB); operands %.0f MiB; "
                        "a seq x seq fp32 buffer would be %.0f MiB; first call %.2f s\n",
                        default_isa.c_str(), threads, r.get_num("growth_mib"),
                        r.get_num("growth_second_call_mib"), r.get_num("operands_mib"),
                        r.get_num("seq_x_seq_buffer_mib"), r.get_num("first_call_s"));
            res.add("memory", r);
        }
    }
}

// ==================================  Baselines  ====================================

// The OpenBLAS unfused baseline at the prefill shapes, with the kernels OpenBLAS runs in this
// process. Returns records (section "openblas").
std::vector<Record> openblas_prefill(const Options &o, bool forced, const std::string &pfx) {
    std::vector<Record> recs;
    const std::string core = openblas_corename();
    const size_t H = 8, n = o.n;
    const Budget b = o.quick ? Budget{0.0, 1, 1, 0.0} : Budget{2.0, 2, 5, 0.0};
    Array<float> scores(n * n);
    for (size_t d : {size_t(128), size_t(64)}) {
        if (o.quick && d != 128) continue;
        PrefillData pd(H, n, d);
        Array<float> out(H * n * d);
        for (bool causal : {false, true}) {
            if (o.quick && causal) continue;
            const std::vector<int> thread_counts =
                d == 128 && !causal && !o.quick ? std::vector<int>{1, 2} : std::vector<int>{1};
            for (int threads : thread_counts) {
                openblas_threads(threads);
                Problem p;
                p.heads = H;
                p.seq_q = p.seq_k = n;
                p.head_dim = d;
                p.causal = causal;
                double gemm = 0, soft = 0;
                long calls = 0;
                const Timing t = measure(
                    [&] {
                        unfused_openblas(p, pd.q.data(), pd.k.data(), pd.v.data(), out.data(),
                                         scores.data(), &gemm, &soft);
                        ++calls;
                    },
                    b);
                const double gflop = attention_gflop(1, H, n, n, d, causal);
                const double full_gflop = attention_gflop(1, H, n, n, d, false);
                Record r;
                r.str("corename", core)
                    .boolean("forced", forced)
                    .integer("heads", H)
                    .integer("n", n)
                    .integer("head_dim", d)
                    .boolean("causal", causal)
                    .integer("threads", threads)
                    .num("gflop", gflop)
                    .num("best_s", t.best)
                    .num("median_s", t.median)
                    .num("cpu_pressure", t.pressure)
                    .integer("samples", t.samples)
                    .num("gflops", gflop / t.best)
                    .num("gemm_share", gemm / (gemm + soft))
                    .num("gemm_only_gflops", full_gflop / (gemm / calls))
                    .num("softmax_s_per_call", soft / calls);
                std::printf("  %sOpenBLAS %-9s d=%-3zu %-10s t=%d  %9.2f ms  %7.2f GFLOP/s "
                            "end to end; GEMMs alone %7.2f GFLOP/s, softmax %.0f%% of the time%s\n",
                            pfx.c_str(), core.c_str(), d, causal ? "causal" : "non-causal", threads,
                            t.best * 1e3, gflop / t.best, full_gflop / (gemm / calls),
                            100.0 * soft / (gemm + soft), busy_note(t.pressure).c_str());
                recs.push_back(r);
            }
        }
    }
    openblas_threads(1);
    return recs;
}

std::vector<size_t> sweep_sizes(const Options &o) {
    if (o.quick) return {128, 256, 512, 1024};
    return {128, 256, 512, 1024, 2048, 4096};
}

// The OpenBLAS baseline on the sweep shapes (H=8, d=128, non-causal, 1 thread).
std::vector<Record> openblas_sweep(const Options &o, bool forced) {
    std::vector<Record> recs;
    const std::string core = openblas_corename();
    openblas_threads(1);
    for (size_t n : sweep_sizes(o)) {
        PrefillData pd(8, n, 128);
        Array<float> out(8 * n * 128), scores(n * n);
        Problem p;
        p.heads = 8;
        p.seq_q = p.seq_k = n;
        p.head_dim = 128;
        double g = 0, s = 0;
        const Timing t = measure(
            [&] {
                unfused_openblas(p, pd.q.data(), pd.k.data(), pd.v.data(), out.data(),
                                 scores.data(), &g, &s);
            },
            o.quick ? Budget{0.1, 1, 3, 0.0} : Budget{1.0, 2, 10, 0.01});
        const double gflops = attention_gflop(1, 8, n, n, 128, false) / t.best;
        std::printf("  sweep OpenBLAS %-9s n=%-5zu %7.2f GFLOP/s%s\n", core.c_str(), n, gflops,
                    busy_note(t.pressure).c_str());
        recs.push_back(Record()
                           .str("impl", "openblas")
                           .str("label", "OpenBLAS " + core + " unfused" +
                                             (forced ? " (CORETYPE forced)" : " (default pick)"))
                           .str("corename", core)
                           .boolean("forced", forced)
                           .integer("n", n)
                           .num("best_s", t.best)
                           .num("gflops", gflops)
                           .num("cpu_pressure", t.pressure));
    }
    return recs;
}

// Child: the OpenBLAS baselines with OPENBLAS_CORETYPE as set in this process' environment.
int child_openblas(const Options &o) {
    std::vector<Record> recs;
    if (!o.sweep_only)
        for (auto &r : openblas_prefill(o, true, "[child] "))
            recs.push_back(r.str("section", "openblas"));
    if (!o.no_sweep)
        for (auto &r : openblas_sweep(o, true)) recs.push_back(r.str("section", "sweep"));
    write_child_records(o, recs);
    return 0;
}

std::string forced_coretype(const Options &o) {
    if (o.coretype == "none") return "";
    if (o.coretype != "auto") return o.coretype;
    if (cpu_has("avx512f")) return "SkylakeX";
    if (cpu_has("avx2")) return "Haswell";
    return "";
}

// OpenBLAS baselines: (a) in this process, as OpenBLAS picks its kernels; (b) in a child process
// with OPENBLAS_CORETYPE forced to the CPU's best kernels (OpenBLAS reads it only at load time).
void run_openblas(Results &res, const Options &o) {
    const std::string core = openblas_corename();
    std::printf("\n== Baseline: unfused attention on OpenBLAS cblas_sgemm + plain softmax, B=1, "
                "H=8 ==\n  (a) as OpenBLAS picks its kernels on this CPU: corename %s\n",
                core.c_str());
    if (!o.sweep_only)
        for (auto &r : openblas_prefill(o, false, "")) res.add("openblas", r);
    if (!o.no_sweep)
        for (auto &r : openblas_sweep(o, false)) res.add("sweep", r);
    const std::string forced = forced_coretype(o);
    if (forced.empty() || iequals(forced, core)) {
        std::printf("  (b) forced kernels: skipped (%s)\n",
                    forced.empty() ? "none requested" : "the default pick already");
        return;
    }
    std::printf("  (b) child process with OPENBLAS_CORETYPE=%s\n", forced.c_str());
    std::vector<std::string> args = {"--child=openblas", "--n=" + std::to_string(o.n),
                                     "--patience=" + std::to_string(std::max(0.0, g_patience_s))};
    if (o.quick) args.push_back("--quick");
    if (o.no_sweep) args.push_back("--no-sweep");
    if (o.sweep_only) args.push_back("--sweep-only");
    for (auto &r : run_child(args, {{"OPENBLAS_CORETYPE", forced}})) {
        const std::string sec = r.get_str("section");
        Record c;
        for (auto &kv : r.kv)
            if (kv.first != "section") c.raw(kv.first, kv.second);
        c.str("requested_coretype", forced);
        res.add(sec, c);
    }
}

void run_scalar(Results &res, const Options &o) {
    std::printf("\n== Baseline: the plain scalar reference (naive loops), H=8, head_dim 128, "
                "non-causal, only n <= %zu ==\n",
                o.scalar_max_n);
    for (size_t n : sweep_sizes(o)) {
        if (n > o.scalar_max_n) break;
        PrefillData pd(8, n, 128);
        Array<float> out(8 * n * 128), row(n);
        Problem p;
        p.heads = 8;
        p.seq_q = p.seq_k = n;
        p.head_dim = 128;
        const Timing t = measure(
            [&] {
                scalar_reference(p, pd.q.data(), pd.k.data(), pd.v.data(), out.data(), row.data());
            },
            Budget{0.0, 1, 0, 0.0});
        const double gflops = attention_gflop(1, 8, n, n, 128, false) / t.best;
        std::printf("  scalar reference n=%-5zu %9.2f ms  %6.2f GFLOP/s%s\n", n, t.best * 1e3,
                    gflops, busy_note(t.pressure).c_str());
        res.add("sweep", Record()
                             .str("impl", "scalar_ref")
                             .str("label", "scalar reference (plain loops)")
                             .integer("n", n)
                             .num("best_s", t.best)
                             .num("gflops", gflops)
                             .num("cpu_pressure", t.pressure));
    }
}

void run_sweep_libattn(Results &res, const Options &o, const std::vector<std::string> &isas) {
    std::printf("\n== Sweep: GFLOP/s vs n, B=1, H=8, head_dim 128, non-causal, 1 thread ==\n");
    for (const std::string &isa : isas) {
        if (isa != "avx512" && isa != "avx2" && isa != isas.front()) continue;
        use(isa, 1);
        for (size_t n : sweep_sizes(o)) {
            PrefillData pd(8, n, 128);
            Array<float> out(8 * n * 128);
            const Timing t =
                time_prefill(pd, false, "bhsd", "none",
                             o.quick ? Budget{0.1, 1, 3, 0.0} : Budget{1.0, 3, 20, 0.01}, out);
            const double gflops = attention_gflop(1, 8, n, n, 128, false) / t.best;
            std::printf("  sweep libattn %-6s n=%-5zu %7.2f GFLOP/s%s\n", isa.c_str(), n, gflops,
                        busy_note(t.pressure).c_str());
            res.add("sweep", Record()
                                 .str("impl", "libattn")
                                 .str("label", "libattn " + isa)
                                 .str("isa", isa)
                                 .integer("n", n)
                                 .num("best_s", t.best)
                                 .num("gflops", gflops)
                                 .num("cpu_pressure", t.pressure));
        }
    }
}

// ==================================  Summary  ======================================

void summarize(Results &res, const Peaks &pk, const Stream &st, const std::string &default_isa,
               const Options &o) {
    std::printf("\n== Targets of issue 4 (ratios measured in this run; n=%zu) ==\n", o.n);
    auto prefill = [&](const std::string &isa, size_t d, bool causal, const std::string &layout,
                       const std::string &mask, size_t threads) -> const Record * {
        return res.find("prefill", [&](const Record &r) {
            return r.get_str("isa") == isa && size_t(r.get_num("head_dim")) == d &&
                   (*r.find("causal") == "true") == causal && r.get_str("layout") == layout &&
                   r.get_str("mask") == mask && size_t(r.get_num("threads")) == threads;
        });
    };
    // Largest CPU stall share among the figures a target is made of (NaN-safe).
    auto pressure = [](std::initializer_list<const Record *> rs) {
        double m = 0;
        for (const Record *r : rs) {
            const double x = r ? r->get_num("cpu_pressure") : NAN;
            if (x > m) m = x;
        }
        return m;
    };
    auto target = [&](const std::string &name, const std::string &isa, double value, double goal,
                      bool at_least, const std::string &ref, double busy) {
        const bool pass = std::isfinite(value) && (at_least ? value >= goal : value <= goal);
        std::printf("  %-46s %-6s %8.3f  target %s %.2f  %s   (%s)%s\n", name.c_str(), isa.c_str(),
                    value, at_least ? ">=" : "<=", goal, pass ? "PASS" : "MISS", ref.c_str(),
                    busy_note(busy).c_str());
        res.add("targets", Record()
                               .str("target", name)
                               .str("isa", isa)
                               .num("value", value)
                               .num("goal", goal)
                               .str("comparison", at_least ? ">=" : "<=")
                               .boolean("pass", pass)
                               .str("reference", ref)
                               .num("cpu_pressure", busy));
    };
    std::vector<std::string> isas = {default_isa};
    if (default_isa != "avx2" && std::isfinite(pk.for_isa("avx2"))) isas.push_back("avx2");
    for (const std::string &isa : isas) {
        const double peak = pk.for_isa(isa);
        char ref[96];
        std::snprintf(ref, sizeof ref, "%s FMA peak %.1f GFLOP/s", isa.c_str(), peak);
        for (size_t d : {size_t(128), size_t(64)}) {
            for (bool causal : {false, true}) {
                const Record *r = prefill(isa, d, causal, "bhsd", "none", 1);
                if (!r) continue;
                const double goal = causal ? 0.60 : d == 128 ? 0.70 : 0.60;
                target("prefill d=" + std::to_string(d) + (causal ? " causal" : " non-causal") +
                           " 1t: of FMA peak",
                       isa, r->get_num("peak_ratio"), goal, true,
                       std::string(ref) + "; " + fmt3(r->get_num("adjacent_peak_ratio")) +
                           " of the adjacent peak",
                       pressure({r}));
            }
        }
        for (size_t d : {size_t(128), size_t(64)})
            for (bool causal : {false, true})
                for (const char *layout : {"bhsd", "bshd"}) {
                    const Record *a = prefill(isa, d, causal, layout, "none", 1);
                    const Record *m = prefill(isa, d, causal, layout, "pad10_block", 1);
                    if (!a || !m) continue;
                    target("mask time / no-mask time d=" + std::to_string(d) +
                               (causal ? " causal " : " non-causal ") + layout,
                           isa, m->get_num("best_s") / a->get_num("best_s"), 1.10, false,
                           "same run, no mask", pressure({a, m}));
                }
        for (size_t d : {size_t(128), size_t(64)})
            for (bool causal : {false, true}) {
                const Record *a = prefill(isa, d, causal, "bhsd", "ones", 1);
                const Record *b = prefill(isa, d, causal, "bhsd", "none", 1);
                if (!a || !b) continue;
                target("all-true masks / no-mask time d=" + std::to_string(d) +
                           (causal ? " causal" : " non-causal"),
                       isa, a->get_num("best_s") / b->get_num("best_s"), 1.10, false,
                       "same run, no mask", pressure({a, b}));
            }
        for (size_t d : {size_t(128), size_t(64)})
            for (bool causal : {false, true})
                for (const char *layout : {"bhsd", "bshd"}) {
                    const Record *a = prefill(isa, d, causal, layout, "none", 1);
                    const Record *b = prefill(isa, d, causal, layout, "none", 2);
                    if (!a || !b) continue;
                    target("2-thread speedup d=" + std::to_string(d) +
                               (causal ? " causal " : " non-causal ") + layout,
                           isa, a->get_num("best_s") / b->get_num("best_s"), 1.8, true,
                           "same run, 1 thread", pressure({a, b}));
                }
        for (size_t d : {size_t(128), size_t(64)}) {
            const Record *c = prefill(isa, d, true, "bhsd", "none", 1);
            const Record *nc = prefill(isa, d, false, "bhsd", "none", 1);
            if (!c || !nc) continue;
            target("causal time / non-causal time d=" + std::to_string(d), isa,
                   c->get_num("best_s") / nc->get_num("best_s"), 0.55, false,
                   "same run, non-causal", pressure({c, nc}));
        }
        const Record *dec = res.find("decode", [&](const Record &r) {
            return r.get_str("isa") == isa && r.get_num("threads") == 2 &&
                   r.get_str("mode") == "cold";
        });
        if (dec) {
            char sref[64];
            std::snprintf(sref, sizeof sref, "2-thread stream %.2f GB/s", st.gbs2);
            target("decode 2t K+V GB/s / stream GB/s (cold)", isa,
                   dec->get_num("ratio_to_stream_2_threads"), 0.80, true, sref,
                   std::max(pressure({dec}), st.pressure2 > 0 ? st.pressure2 : 0.0));
        }
    }
    for (auto &r : res.section("small"))
        if (r.get_str("impl") == "libattn")
            target("small n=" + std::to_string(size_t(r.get_num("n"))) + " t=" +
                       std::to_string(size_t(r.get_num("threads"))) + ": time / scalar loop",
                   r.get_str("isa"), r.get_num("ratio_to_scalar_ref"), 1.0, false,
                   "same run, plain scalar loop", pressure({&r}));
    for (auto &r : res.section("memory"))
        target("memory growth MiB n=16384 t=" + std::to_string(size_t(r.get_num("threads"))),
               r.get_str("isa"), r.get_num("growth_mib"), 64.0, false, "VmHWM before the call",
               0.0);
    // Bit identity across thread counts: every 2-thread run against its 1-thread run.
    size_t compared = 0, same = 0;
    for (const char *sec : {"prefill", "decode"})
        for (auto &r : res.section(sec))
            if (const std::string *v = r.find("identical_to_1_thread")) {
                ++compared;
                same += *v == "true";
            }
    if (compared)
        target("2-thread outputs bit-identical to 1 thread (share)", "all",
               double(same) / double(compared), 1.0, true,
               std::to_string(compared) + " configurations", 0.0);
    // For the reader: the baselines next to libattn at the headline shape.
    const Record *lib = prefill(default_isa, 128, false, "bhsd", "none", 1);
    for (auto &r : res.section("openblas"))
        if (lib && r.get_num("head_dim") == 128 && *r.find("causal") == "false" &&
            r.get_num("threads") == 1)
            std::printf("  headline d=128 non-causal 1t: libattn %s %.1f GFLOP/s = %.2fx OpenBLAS "
                        "%s unfused (%.1f GFLOP/s; its GEMMs alone %.1f)\n",
                        default_isa.c_str(), lib->get_num("gflops"),
                        lib->get_num("gflops") / r.get_num("gflops"), r.get_str("corename").c_str(),
                        r.get_num("gflops"), r.get_num("gemm_only_gflops"));
}

// Re-executes without the variables that would change what is measured (see the file comment).
void clean_environment(char **argv) {
    if (std::getenv("ATTN_BENCH_CLEAN_ENV")) return;
    bool dirty = false;
    for (const char *v : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS",
                          "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "ATTN_ISA", "ATTN_NUM_THREADS"})
        if (std::getenv(v)) {
            std::printf("attn_bench: ignoring %s=%s (the benchmark sets what it measures)\n", v,
                        std::getenv(v));
            unsetenv(v);
            dirty = true;
        }
    setenv("ATTN_BENCH_CLEAN_ENV", "1", 1);
    if (!dirty) return;
    std::fflush(stdout);
    execv("/proc/self/exe", argv);
    std::fprintf(stderr, "attn_bench: re-exec failed; continuing with the cleaned environment "
                         "for libattn only\n");
}

// "1-min 5-min 15-min" load averages.
std::string load_average() {
    std::ifstream f("/proc/loadavg");
    std::string a, b, c;
    f >> a >> b >> c;
    return a + " " + b + " " + c;
}

// Share of the last 10 s in which some runnable task waited for a CPU (PSI), or NaN.
double cpu_pressure_avg10() {
    const std::string l = read_first_line_matching("/proc/pressure/cpu", "some");
    const size_t p = l.find("avg10=");
    return p == std::string::npos ? NAN : std::atof(l.c_str() + p + 6) / 100.0;
}

// Warns when other work competes for the CPUs: every figure here assumes an idle machine.
void note_load(Record &machine, const char *when) {
    const std::string la = load_average();
    const double psi = cpu_pressure_avg10();
    machine.str(std::string("load_average_") + when, la)
        .num(std::string("cpu_pressure_avg10_") + when, psi);
    // The load average counts this benchmark itself; only the stall share says "competing".
    if (psi > 0.10)
        std::printf("attn_bench: WARNING (%s): the machine is busy (load average %s, CPU pressure "
                    "%.0f%%); figures will be low and noisy\n",
                    when, la.c_str(), 100.0 * psi);
}

std::string utc_now() {
    char buf[32];
    const std::time_t t = std::time(nullptr);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

} // namespace

int main(int argc, char **argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0); // progress shows line by line in a log file
    const Options o = parse_options(argc, argv);
    g_patience_s = o.patience;
    if (o.child == "mem") return child_mem(o);
    if (o.child == "openblas") return child_openblas(o);
    if (!o.child.empty()) usage(("unknown child mode " + o.child).c_str());
    clean_environment(argv);
    openblas_threads(1);

    const double t_start = now_s();
    Results res;
    const std::vector<std::string> isas = supported_isas();
    const std::string default_isa = attn_isa();
    struct utsname un;
    uname(&un);
    res.machine.str("cpu", cpu_model())
        .integer("hardware_threads", std::thread::hardware_concurrency())
        .str("kernel", std::string(un.sysname) + " " + un.release)
        .str("date_utc", utc_now())
        .str("libattn_version", attn_version_string())
        .str("libattn_default_isa", default_isa)
        .integer("libattn_default_threads", attn_get_num_threads())
        .str("openblas_corename_default", openblas_corename())
        .str("compiler", __VERSION__)
        .str("mode", o.peak_only    ? "peak-only"
                     : o.sweep_only ? "sweep-only"
                     : o.quick      ? "quick"
                                    : "full");
    {
        std::string list;
        for (auto &i : isas) list += (list.empty() ? "" : ",") + i;
        res.machine.str("libattn_isas", list);
    }
    std::printf("attn_bench: libattn %s, default ISA %s (all: %s), %zu threads by default; CPU %s; "
                "OpenBLAS corename %s; mode %s\n",
                attn_version_string(), default_isa.c_str(),
                res.machine.get_str("libattn_isas").c_str(), attn_get_num_threads(),
                res.machine.get_str("cpu").c_str(), openblas_corename(),
                res.machine.get_str("mode").c_str());

    note_load(res.machine, "start");
    const Peaks pk = run_peaks(res, o);
    Stream st;
    if (o.peak_only) {
        Evictor ev; // its 1 GiB buffer is the stream buffer
        st = run_stream(res, o, ev);
    } else {
        if (!o.sweep_only) {
            Evictor ev; // stream buffer, then the eviction read of the cold decode
            st = run_stream(res, o, ev);
            if (wanted(o, "prefill")) run_prefill(res, o, pk, isas);
            if (wanted(o, "decode")) run_decode(res, o, st, isas, ev);
            if (wanted(o, "small")) run_small(res, o, default_isa);
            if (wanted(o, "memory")) run_memory(res, default_isa);
        }
        if (!o.no_sweep && wanted(o, "sweep")) run_sweep_libattn(res, o, isas);
        // Baselines last: OpenBLAS' own threads never overlap a libattn measurement.
        if (wanted(o, "openblas")) run_openblas(res, o);
        if (!o.no_sweep && wanted(o, "scalar")) run_scalar(res, o);
        if (!o.sweep_only) summarize(res, pk, st, default_isa, o);
    }

    note_load(res.machine, "end");
    res.machine.num("run_seconds", now_s() - t_start);
    if (!res.write_json(o.json)) {
        std::fprintf(stderr, "attn_bench: cannot write %s\n", o.json.c_str());
        return 1;
    }
    std::printf("\nattn_bench: %.0f s; figures written to %s\n", now_s() - t_start, o.json.c_str());
    return 0;
}
