// ONNX Attention conformance: every case of tests/data/onnx-attention/index.txt marked `run`
// goes through the C API with every kernel ISA this CPU supports, and its output Y must match
// ONNX's within 1e-5 absolute. Every `skip` case is printed with its reason, and the counts are
// asserted so that skips can never make the test pass vacuously.
//
// index.txt is generated from cases.json by tests/data/onnx-attention/make_index.py; its README
// gives the source (onnx/onnx, Apache-2.0), the file format and what was changed.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "attn.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#ifndef ATTN_ONNX_DATA_DIR
#error "ATTN_ONNX_DATA_DIR must name tests/data/onnx-attention"
#endif

namespace {

// The contents of the data set at ONNX commit 6be0677f (see the data README): 76 cases, of which
// 16 are supported by the API and 4 more have an output Y the API can check already.
constexpr int kTotalCases = 76;
constexpr int kSupported = 16;
constexpr int kYCheckable = 4;
constexpr int kSkipped = kTotalCases - kSupported - kYCheckable;

constexpr double kTolerance = 1e-5; // max abs error on Y and on the probabilities

const char *const kIsas[] = {"scalar", "sse2", "avx2", "avx512"};

struct Line {
    std::string verb;                      // "run" or "skip"
    std::map<std::string, std::string> kv; // key=value tokens
    std::string reason;                    // skip: rest of the line after "reason="
};

std::string data_path(const std::string &file) {
    return std::string(ATTN_ONNX_DATA_DIR) + "/" + file;
}

std::vector<Line> read_index() {
    std::ifstream in(data_path("index.txt"));
    REQUIRE_MESSAGE(in.good(), "cannot open ", data_path("index.txt"));
    std::vector<Line> lines;
    std::string text;
    while (std::getline(in, text)) {
        if (text.empty() || text[0] == '#') continue;
        Line line;
        std::string::size_type r = text.find(" reason=");
        if (r != std::string::npos) {
            line.reason = text.substr(r + 8);
            text.resize(r);
        }
        std::istringstream tokens(text);
        tokens >> line.verb;
        std::string tok;
        while (tokens >> tok) {
            std::string::size_type eq = tok.find('=');
            REQUIRE_MESSAGE(eq != std::string::npos, "index token without '=': ", tok);
            line.kv[tok.substr(0, eq)] = tok.substr(eq + 1);
        }
        REQUIRE_MESSAGE((line.verb == "run" || line.verb == "skip"), "bad index line: ", text);
        REQUIRE_MESSAGE(line.kv.count("name"), "index line without name: ", text);
        lines.push_back(line);
    }
    return lines;
}

std::string get(const Line &l, const char *key) {
    auto it = l.kv.find(key);
    REQUIRE_MESSAGE(it != l.kv.end(), l.kv.at("name"), ": index has no ", key);
    return it->second;
}

size_t get_size(const Line &l, const char *key) {
    std::string s = get(l, key);
    char *end = nullptr;
    unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    REQUIRE_MESSAGE((*end == '\0' && !s.empty()), l.kv.at("name"), ": bad ", key, "=", s);
    return static_cast<size_t>(v);
}

// Reads a whole file; its size must be exactly `count` elements of T.
template <class T> std::vector<T> read_exact(const std::string &file, size_t count) {
    std::ifstream in(data_path(file), std::ios::binary | std::ios::ate);
    REQUIRE_MESSAGE(in.good(), "cannot open ", data_path(file));
    std::streamoff bytes = in.tellg();
    REQUIRE_MESSAGE(bytes == static_cast<std::streamoff>(count * sizeof(T)), file, " holds ", bytes,
                    " bytes, expected ", count * sizeof(T));
    std::vector<T> v(count);
    in.seekg(0);
    in.read(reinterpret_cast<char *>(v.data()), static_cast<std::streamsize>(bytes));
    REQUIRE(in.good());
    return v;
}

struct Case {
    std::string name, kind, layout, causal;
    size_t batch, heads_q, heads_kv, seq_q, seq_k, head_dim;
    bool default_scale;
    float scale;
    bool has_mask, has_weights;
    size_t fully_masked_rows;
    std::vector<float> q, k, v, out, qk;
    std::unique_ptr<bool[]> allowed; // [seq_q][seq_k], or null
};

Case load_case(const Line &l) {
    Case c;
    c.name = get(l, "name");
    c.kind = get(l, "kind");
    c.layout = get(l, "layout");
    c.causal = get(l, "causal");
    c.batch = get_size(l, "batch");
    c.heads_q = get_size(l, "heads_q");
    c.heads_kv = get_size(l, "heads_kv");
    c.seq_q = get_size(l, "seq_q");
    c.seq_k = get_size(l, "seq_k");
    c.head_dim = get_size(l, "head_dim");
    std::string scale = get(l, "scale");
    c.default_scale = scale == "default";
    c.scale = c.default_scale ? 0.0f : std::strtof(scale.c_str(), nullptr);
    c.has_mask = get(l, "mask") == "1";
    c.has_weights = get(l, "weights") == "1";
    c.fully_masked_rows = get_size(l, "fully_masked_rows");
    REQUIRE_MESSAGE((c.layout == "BHSD" || c.layout == "BSHD"), c.name, ": layout ", c.layout);
    REQUIRE_MESSAGE((c.causal == "none" || c.causal == "top_left" || c.causal == "bottom_right"),
                    c.name, ": causal ", c.causal);

    const size_t nq = c.batch * c.heads_q * c.seq_q * c.head_dim;
    const size_t nkv = c.batch * c.heads_kv * c.seq_k * c.head_dim;
    c.q = read_exact<float>(c.name + ".q.f32", nq);
    c.k = read_exact<float>(c.name + ".k.f32", nkv);
    c.v = read_exact<float>(c.name + ".v.f32", nkv);
    c.out = read_exact<float>(c.name + ".out.f32", nq);
    if (c.has_mask) {
        std::vector<unsigned char> m =
            read_exact<unsigned char>(c.name + ".mask.u8", c.seq_q * c.seq_k);
        c.allowed.reset(new bool[m.size()]);
        for (size_t i = 0; i < m.size(); ++i) c.allowed[i] = m[i] != 0;
    }
    if (c.has_weights)
        c.qk = read_exact<float>(c.name + ".qk.f32", c.batch * c.heads_q * c.seq_q * c.seq_k);
    return c;
}

// Independent of the library: may query i see key j? (causal rule AND the bool mask)
bool visible(const Case &c, size_t i, size_t j) {
    if (c.causal == "top_left" && j > i) return false;
    if (c.causal == "bottom_right" && j + c.seq_q > i + c.seq_k) return false; // j > i + sk - sq
    if (c.allowed && !c.allowed[i * c.seq_k + j]) return false;
    return true;
}

std::string describe(const Case &c) {
    std::ostringstream s;
    s << c.layout << ", B=" << c.batch << " Hq=" << c.heads_q << " Hkv=" << c.heads_kv
      << (c.heads_q != c.heads_kv ? " (GQA)" : "") << " Sq=" << c.seq_q << " Sk=" << c.seq_k
      << " D=" << c.head_dim << ", causal " << c.causal << ", scale "
      << (c.default_scale ? std::string("default") : std::to_string(c.scale))
      << (c.has_mask ? ", bool mask" : "");
    return s.str();
}

#define CALL_OK(call)                                                                              \
    do {                                                                                           \
        attn_status st_ = (call);                                                                  \
        if (st_ != ATTN_OK) {                                                                      \
            errors.push_back(std::string(#call) + " -> " + attn_status_string(st_) + ": " +        \
                             attn_last_error());                                                   \
            return;                                                                                \
        }                                                                                          \
    } while (0)

// Runs one case with the current ISA; appends every discrepancy to `errors` and records the
// largest errors seen in *max_err_y / *max_err_w.
void run_case(const Case &c, std::vector<std::string> &errors, double *max_err_y,
              double *max_err_w) {
    attn_desc *raw = nullptr;
    CALL_OK(attn_desc_create(&raw, c.batch, c.heads_q, c.heads_kv, c.seq_q, c.seq_k, c.head_dim));
    std::unique_ptr<attn_desc, void (*)(attn_desc *)> desc(raw, attn_desc_destroy);
    const size_t D = c.head_dim;
    if (c.layout == "BSHD") {
        // ONNX 3-D input [B, S, H*D]: element (b, h, s, d) at b*S*H*D + s*H*D + h*D + d.
        CALL_OK(
            attn_desc_set_strides(desc.get(), ATTN_Q, c.seq_q * c.heads_q * D, D, c.heads_q * D));
        CALL_OK(
            attn_desc_set_strides(desc.get(), ATTN_K, c.seq_k * c.heads_kv * D, D, c.heads_kv * D));
        CALL_OK(
            attn_desc_set_strides(desc.get(), ATTN_V, c.seq_k * c.heads_kv * D, D, c.heads_kv * D));
        CALL_OK(
            attn_desc_set_strides(desc.get(), ATTN_OUT, c.seq_q * c.heads_q * D, D, c.heads_q * D));
    }
    if (!c.default_scale) CALL_OK(attn_desc_set_scale(desc.get(), c.scale));
    CALL_OK(attn_desc_set_causal(desc.get(), c.causal == "top_left"       ? ATTN_CAUSAL_TOP_LEFT
                                             : c.causal == "bottom_right" ? ATTN_CAUSAL_BOTTOM_RIGHT
                                                                          : ATTN_CAUSAL_NONE));
    // The files hold exactly the elements the layout addresses.
    const struct {
        attn_operand op;
        size_t have;
    } lens[] = {
        {ATTN_Q, c.q.size()}, {ATTN_K, c.k.size()}, {ATTN_V, c.v.size()}, {ATTN_OUT, c.out.size()}};
    for (const auto &l : lens) {
        size_t want = attn_desc_required_len(desc.get(), l.op);
        if (want != l.have)
            errors.push_back("required_len(" + std::to_string(l.op) + ") = " +
                             std::to_string(want) + ", file holds " + std::to_string(l.have));
    }
    if (!errors.empty()) return;

    // Forward: out starts as NaN so that an element the library forgot to write is caught.
    std::vector<float> out(c.out.size(), std::nanf(""));
    std::vector<float> lse(c.batch * c.heads_q * c.seq_q, std::nanf(""));
    CALL_OK(attn_forward(desc.get(), c.q.data(), c.k.data(), c.v.data(), nullptr, c.allowed.get(),
                         out.data(), lse.data()));
    for (size_t n = 0; n < out.size(); ++n) {
        double err = std::fabs(static_cast<double>(out[n]) - c.out[n]);
        if (std::isnan(out[n]) || !(err <= kTolerance)) {
            errors.push_back("Y[" + std::to_string(n) + "] = " + std::to_string(out[n]) +
                             ", ONNX expects " + std::to_string(c.out[n]));
            if (errors.size() > 8) return;
        }
        if (err > *max_err_y) *max_err_y = err;
    }

    // Weights: hidden keys exactly 0, visible rows sum to 1, fully masked rows as cases.json says
    // (lse -inf there), and ONNX's softmax probabilities (qk_matmul_output mode 3) when stored.
    std::vector<float> w(c.batch * c.heads_q * c.seq_q * c.seq_k, std::nanf(""));
    CALL_OK(attn_weights(desc.get(), c.q.data(), c.k.data(), nullptr, c.allowed.get(), w.data()));
    size_t empty_rows = 0, lse_inf_rows = 0;
    for (size_t row = 0; row < c.batch * c.heads_q * c.seq_q; ++row) {
        const size_t i = row % c.seq_q;
        const float *wr = &w[row * c.seq_k];
        double sum = 0.0;
        size_t nvis = 0;
        for (size_t j = 0; j < c.seq_k; ++j) {
            if (visible(c, i, j)) {
                ++nvis;
                sum += wr[j];
            } else if (wr[j] != 0.0f) {
                errors.push_back("weight of hidden key (row " + std::to_string(row) + ", key " +
                                 std::to_string(j) + ") is " + std::to_string(wr[j]));
            }
            if (c.has_weights) {
                double err = std::fabs(static_cast<double>(wr[j]) - c.qk[row * c.seq_k + j]);
                if (std::isnan(wr[j]) || !(err <= kTolerance))
                    errors.push_back("weights[" + std::to_string(row * c.seq_k + j) +
                                     "] = " + std::to_string(wr[j]) + ", ONNX qk mode 3 expects " +
                                     std::to_string(c.qk[row * c.seq_k + j]));
                if (err > *max_err_w) *max_err_w = err;
            }
        }
        if (nvis == 0) {
            ++empty_rows;
            if (sum != 0.0)
                errors.push_back("fully masked row " + std::to_string(row) + " has weights");
        } else if (!(std::fabs(sum - 1.0) <= kTolerance)) {
            errors.push_back("weights of row " + std::to_string(row) + " sum to " +
                             std::to_string(sum));
        }
        if (std::isinf(lse[row]) && lse[row] < 0)
            ++lse_inf_rows;
        else if (nvis == 0 || std::isnan(lse[row]))
            errors.push_back("lse of row " + std::to_string(row) + " is " +
                             std::to_string(lse[row]));
    }
    if (empty_rows != c.fully_masked_rows || lse_inf_rows != c.fully_masked_rows)
        errors.push_back("fully masked rows: " + std::to_string(empty_rows) + " by the mask, " +
                         std::to_string(lse_inf_rows) + " with lse -inf, cases.json says " +
                         std::to_string(c.fully_masked_rows));
}

} // namespace

TEST_CASE("ONNX Attention conformance: every runnable case matches, the rest are listed") {
    const std::vector<Line> index = read_index();

    // The ISAs to run: every one this CPU and build offer (scalar always).
    std::vector<const char *> isas;
    std::string isa_list;
    for (const char *isa : kIsas) {
        attn_status st = attn_set_isa(isa);
        if (st == ATTN_OK) {
            CHECK(std::string(attn_isa()) == isa);
            isas.push_back(isa);
            isa_list += (isa_list.empty() ? "" : ",") + std::string(isa);
        } else {
            CHECK_MESSAGE(st == ATTN_ERR_UNSUPPORTED, "attn_set_isa(", isa,
                          "): ", attn_last_error());
        }
    }
    REQUIRE(attn_set_isa(nullptr) == ATTN_OK);
    REQUIRE_MESSAGE((!isas.empty() && std::string(isas[0]) == "scalar"), "scalar ISA unavailable");
    std::printf("ONNX Attention conformance, ISAs: %s, tolerance %g abs\n", isa_list.c_str(),
                kTolerance);

    int total = 0, skipped = 0, supported = 0, y_checkable = 0, passed = 0;
    std::vector<std::string> skip_report;
    for (const Line &l : index) {
        ++total;
        const std::string name = l.kv.at("name");
        if (l.verb == "skip") {
            ++skipped;
            CHECK_MESSAGE(!l.reason.empty(), name, " is skipped without a reason");
            skip_report.push_back("SKIP " + name + " [" + get(l, "features") + "]: " + l.reason);
            continue;
        }
        Case c = load_case(l);
        if (c.kind == "supported")
            ++supported;
        else if (c.kind == "y_checkable")
            ++y_checkable;
        else
            FAIL_CHECK(name, ": unknown kind ", c.kind);

        std::vector<std::string> errors;
        double max_err_y = 0.0, max_err_w = 0.0;
        for (const char *isa : isas) {
            REQUIRE(attn_set_isa(isa) == ATTN_OK);
            std::vector<std::string> e;
            run_case(c, e, &max_err_y, &max_err_w);
            for (const std::string &s : e) errors.push_back(std::string(isa) + ": " + s);
        }
        REQUIRE(attn_set_isa(nullptr) == ATTN_OK);
        for (const std::string &e : errors) FAIL_CHECK(name, " (", describe(c), "): ", e);
        if (errors.empty()) ++passed;
        std::string extra;
        if (c.has_weights) {
            char buf[64];
            std::snprintf(buf, sizeof buf, " max|dP|=%.3g", max_err_w);
            extra += buf;
        }
        if (get(l, "unchecked") != "-") extra += " not checked: " + get(l, "unchecked");
        std::printf("%s %s [%s] (%s) max|dY|=%.3g%s\n", errors.empty() ? "PASS" : "FAIL",
                    name.c_str(), c.kind.c_str(), describe(c).c_str(), max_err_y, extra.c_str());
    }
    for (const std::string &s : skip_report) std::printf("%s\n", s.c_str());
    std::printf("ONNX Attention conformance: %d cases, %d passed (%d supported + %d y_checkable), "
                "%d failed, %d skipped\n",
                total, passed, supported, y_checkable, supported + y_checkable - passed, skipped);
    std::fflush(stdout);

    // The counts pin the data set: a lost file, a lost index line or a case that silently turned
    // into a skip fails here.
    CHECK(total == kTotalCases);
    CHECK(supported == kSupported);
    CHECK(y_checkable == kYCheckable);
    CHECK(skipped == kSkipped);
    CHECK(passed == kSupported + kYCheckable);
}
