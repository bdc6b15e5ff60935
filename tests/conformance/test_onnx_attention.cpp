// ONNX Attention conformance: all 76 cases of tests/data/onnx-attention/index.txt go through the
// 0.2 C API (attn_run) with every kernel ISA this CPU supports. Y must match ONNX's within the
// tolerance of the case's dtype, and ONNX's 4th output qk_matmul_output (modes 0..3) must match
// attn_run(ATTN_OP_WEIGHTS) wherever the case stores it. No case may be skipped: the counts are
// asserted, so a lost file, a lost index line or a case that cannot be expressed fails the test.
// The data set and its mapping onto the API: onnx_case.hpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "onnx_case.hpp"

using namespace onnx_conformance;

namespace {

// The data set at ONNX commit 6be0677f (see the data README): 76 cases, every one runs.
constexpr int kTotalCases = 76;
// How many cases exercise each mapping (pinned so that no feature silently drops out).
constexpr int kAdditiveMask = 35;   // float attn_mask -> ATTN_BIAS
constexpr int kBoolAllowed = 6;     // bool [seq_q][seq_k] mask -> ATTN_ALLOWED
constexpr int kBoolAsBias = 2;      // bool mask per batch/head -> ATTN_BIAS 0 / -inf
constexpr int kSoftcap = 10;        // ATTN_PARAM_SOFTCAP
constexpr int kHeadDimV = 15;       // ATTN_PARAM_HEAD_DIM_V
constexpr int kSeqLensK = 7;        // nonpad_kv_seqlen -> ATTN_SEQ_LENS_K
constexpr int kPast = 20;           // past_key/past_value (present K/V in the files)
constexpr int kTopLeft = 9;         // ATTN_CAUSAL_TOP_LEFT
constexpr int kBottomRight = 1;     // ATTN_CAUSAL_BOTTOM_RIGHT, no seq_lens_k
constexpr int kBottomRightLens = 6; // ATTN_CAUSAL_BOTTOM_RIGHT aligned to ATTN_SEQ_LENS_K
constexpr int kWindowRight = 2;     // CAUSAL_NONE + ATTN_PARAM_WINDOW_RIGHT = past
constexpr int kFp16 = 4;
constexpr int kQkMode[4] = {3, 2, 7, 5}; // cases storing qk_matmul_output of mode 0, 1, 2, 3

const char *const kIsas[] = {"scalar", "sse2", "avx2", "avx512"};

// Error of one element as a fraction of the allowed tolerance (> 1 fails); abs error in *abs.
double tol_fraction(const Case &c, double got, double want, double *abs) {
    *abs = std::fabs(got - want);
    const double tol = c.fp16() ? kF16Atol + kF16Rtol * std::fabs(want) : kTolF32;
    return *abs / tol;
}

struct Worst {
    double abs_y = 0, frac_y = 0, abs_qk = 0, frac_qk = 0;
};

// Runs one case with the current ISA; appends every discrepancy to `err`.
void run_case(const Case &c, const Plan &p, Errors &err, Worst &worst) {
    // Forward.
    std::vector<float> out, lse;
    if (!run_forward(c, p, Stage::Full, out, lse, err)) return;
    for (size_t n = 0; n < out.size(); ++n) {
        double abs = 0;
        const double frac = tol_fraction(c, out[n], c.out[n], &abs);
        if (std::isnan(out[n]) || !(frac <= 1.0))
            err.add("Y[" + std::to_string(n) + "] = " + std::to_string(out[n]) + ", ONNX expects " +
                    std::to_string(c.out[n]));
        worst.abs_y = std::max(worst.abs_y, std::isnan(abs) ? INFINITY : abs);
        worst.frac_y = std::max(worst.frac_y, std::isnan(frac) ? INFINITY : frac);
    }

    // Probabilities: hidden keys exactly 0, visible rows sum to 1, fully masked rows as
    // cases.json says (with lse -inf there), and ONNX's mode 3 output when stored.
    std::vector<float> w;
    if (!run_weights(c, p, Stage::Full, w, err)) return;
    size_t empty_rows = 0, lse_inf_rows = 0;
    for (size_t b = 0; b < c.B; ++b)
        for (size_t h = 0; h < c.Hq; ++h)
            for (size_t i = 0; i < c.Sq; ++i) {
                const size_t row = (b * c.Hq + h) * c.Sq + i;
                const float *wr = &w[row * c.Sk];
                double sum = 0.0;
                size_t nvis = 0;
                for (size_t j = 0; j < c.Sk; ++j) {
                    if (visible(c, b, h, i, j)) {
                        ++nvis;
                        sum += wr[j];
                    } else if (wr[j] != 0.0f) {
                        err.add("weight of hidden key (row " + std::to_string(row) + ", key " +
                                std::to_string(j) + ") is " + std::to_string(wr[j]));
                    }
                }
                if (nvis == 0) {
                    ++empty_rows;
                    if (sum != 0.0) err.add("fully masked row " + std::to_string(row));
                    for (size_t d = 0; d < c.Dv; ++d) {
                        const size_t n = c.layout == "BHSD"
                                             ? row * c.Dv + d
                                             : ((b * c.Sq + i) * c.Hq + h) * c.Dv + d;
                        if (out[n] != 0.0f)
                            err.add("Y of fully masked row " + std::to_string(row) + " is " +
                                    std::to_string(out[n]));
                    }
                } else if (!(std::fabs(sum - 1.0) <= 1e-5)) {
                    err.add("weights of row " + std::to_string(row) + " sum to " +
                            std::to_string(sum));
                }
                if (std::isinf(lse[row]) && lse[row] < 0)
                    ++lse_inf_rows;
                else if (nvis == 0 || std::isnan(lse[row]))
                    err.add("lse of row " + std::to_string(row) + " is " +
                            std::to_string(lse[row]));
            }
    if (empty_rows != c.fully_masked_rows || lse_inf_rows != c.fully_masked_rows)
        err.add("fully masked rows: " + std::to_string(empty_rows) + " by ONNX's masks, " +
                std::to_string(lse_inf_rows) + " with lse -inf, cases.json says " +
                std::to_string(c.fully_masked_rows));

    // ONNX's qk_matmul_output, every entry.
    if (c.qk_mode < 0) return;
    if (c.qk_mode != 3) {
        const Stage st = c.qk_mode == 0   ? Stage::Scores
                         : c.qk_mode == 1 ? Stage::CapOnly
                                          : Stage::Capped;
        if (!run_weights(c, p, st, w, err)) return;
    }
    for (size_t n = 0; n < w.size(); ++n) {
        const float want = c.qk[n], got = w[n];
        const bool want_ninf = std::isinf(want) && want < 0, got_ninf = std::isinf(got) && got < 0;
        if (want_ninf || got_ninf) {
            // Hidden entries of mode 2: -inf in both, exactly.
            if (want_ninf != got_ninf)
                err.add("qk mode " + std::to_string(c.qk_mode) + " [" + std::to_string(n) +
                        "] = " + std::to_string(got) + ", ONNX expects " + std::to_string(want));
            continue;
        }
        double abs = 0;
        const double frac = tol_fraction(c, got, want, &abs);
        if (std::isnan(got) || !(frac <= 1.0))
            err.add("qk mode " + std::to_string(c.qk_mode) + " [" + std::to_string(n) +
                    "] = " + std::to_string(got) + ", ONNX expects " + std::to_string(want));
        worst.abs_qk = std::max(worst.abs_qk, std::isnan(abs) ? INFINITY : abs);
        worst.frac_qk = std::max(worst.frac_qk, std::isnan(frac) ? INFINITY : frac);
    }
}

std::vector<const char *> available_isas(std::string *list) {
    std::vector<const char *> isas;
    for (const char *isa : kIsas) {
        attn_status st = attn_set_isa(isa);
        if (st == ATTN_OK) {
            CHECK(std::string(attn_isa()) == isa);
            isas.push_back(isa);
            *list += (list->empty() ? "" : ",") + std::string(isa);
        } else {
            CHECK_MESSAGE(st == ATTN_ERR_UNSUPPORTED, "attn_set_isa(", isa,
                          "): ", attn_last_error());
        }
    }
    REQUIRE(attn_set_isa(nullptr) == ATTN_OK);
    REQUIRE_MESSAGE((!isas.empty() && std::string(isas[0]) == "scalar"), "scalar ISA unavailable");
    return isas;
}

} // namespace

TEST_CASE("ONNX Attention conformance: all 76 cases run and match on every ISA") {
    const std::vector<Line> index = read_index();
    std::string isa_list;
    const std::vector<const char *> isas = available_isas(&isa_list);
    std::printf("ONNX Attention conformance, ISAs: %s; tolerance float32 %g abs, float16 "
                "rtol %g + atol %g (ONNX backend-test defaults)\n",
                isa_list.c_str(), kTolF32, kF16Rtol, kF16Atol);

    int total = 0, skipped = 0, passed = 0, failed = 0;
    int n_additive = 0, n_allowed = 0, n_bool_bias = 0, n_softcap = 0, n_dv = 0, n_lens = 0,
        n_past = 0, n_top_left = 0, n_bottom_right = 0, n_bottom_right_lens = 0, n_window = 0,
        n_fp16 = 0, n_qk[4] = {0, 0, 0, 0};
    Worst all;
    std::string worst_y_case, worst_qk_case, worst_f32_case;
    double worst_f32 = 0; // max |dY| over the float32 cases
    for (const Line &l : index) {
        ++total;
        const std::string name = l.kv.at("name");
        if (l.verb == "skip") {
            ++skipped;
            FAIL_CHECK("SKIP ", name, " [", get(l, "features"), "]: ", l.reason);
            continue;
        }
        const Case c = load_case(l);
        const Plan p = make_plan(c);
        n_additive += c.mask_kind == "additive";
        n_allowed += !p.allowed.empty();
        n_bool_bias += c.mask_kind == "bool" && !p.bias.empty();
        n_softcap += c.softcap > 0;
        n_dv += c.Dv != c.D;
        n_lens += p.seq_lens;
        n_past += c.past > 0;
        n_top_left += p.causal == ATTN_CAUSAL_TOP_LEFT;
        n_bottom_right += p.causal == ATTN_CAUSAL_BOTTOM_RIGHT && !p.seq_lens;
        n_bottom_right_lens += p.causal == ATTN_CAUSAL_BOTTOM_RIGHT && p.seq_lens;
        n_window += p.window_right >= 0;
        n_fp16 += c.fp16();
        if (c.qk_mode >= 0) ++n_qk[c.qk_mode];

        std::vector<std::string> errors;
        Worst worst;
        for (const char *isa : isas) {
            REQUIRE(attn_set_isa(isa) == ATTN_OK);
            Errors e;
            run_case(c, p, e, worst);
            for (const std::string &s : e.list) errors.push_back(std::string(isa) + ": " + s);
        }
        REQUIRE(attn_set_isa(nullptr) == ATTN_OK);
        for (const std::string &e : errors) FAIL_CHECK(name, " (", describe(c, p), "): ", e);
        if (errors.empty())
            ++passed;
        else
            ++failed;
        if (worst.frac_y >= all.frac_y) worst_y_case = name;
        if (!c.fp16() && worst.abs_y >= worst_f32) {
            worst_f32 = worst.abs_y;
            worst_f32_case = name;
        }
        if (c.qk_mode >= 0 && worst.frac_qk >= all.frac_qk) worst_qk_case = name;
        all.abs_y = std::max(all.abs_y, worst.abs_y);
        all.frac_y = std::max(all.frac_y, worst.frac_y);
        all.abs_qk = std::max(all.abs_qk, worst.abs_qk);
        all.frac_qk = std::max(all.frac_qk, worst.frac_qk);
        char buf[160];
        std::snprintf(buf, sizeof buf, "max|dY|=%.3g (%.2f of tol)", worst.abs_y, worst.frac_y);
        std::string extra = buf;
        if (c.qk_mode >= 0) {
            std::snprintf(buf, sizeof buf, " max|dQK(mode %d)|=%.3g (%.2f of tol)", c.qk_mode,
                          worst.abs_qk, worst.frac_qk);
            extra += buf;
        }
        std::printf("%s %s [%s] (%s) %s\n", errors.empty() ? "PASS" : "FAIL", name.c_str(),
                    c.features.c_str(), describe(c, p).c_str(), extra.c_str());
    }
    std::printf("mappings: additive mask->bias %d, bool mask->allowed %d, bool mask->bias %d, "
                "softcap %d, head_dim_v %d, seq_lens_k %d, past %d, top_left %d, bottom_right "
                "%d, bottom_right(seq_lens_k) %d, window_right %d, fp16 %d, qk modes 0/1/2/3 "
                "%d/%d/%d/%d\n",
                n_additive, n_allowed, n_bool_bias, n_softcap, n_dv, n_lens, n_past, n_top_left,
                n_bottom_right, n_bottom_right_lens, n_window, n_fp16, n_qk[0], n_qk[1], n_qk[2],
                n_qk[3]);
    std::printf("worst: Y %.3g abs, %.2f of tolerance (%s); float32 Y %.3g abs (%s); "
                "qk_matmul_output %.3g abs, %.2f of tolerance (%s)\n",
                all.abs_y, all.frac_y, worst_y_case.c_str(), worst_f32, worst_f32_case.c_str(),
                all.abs_qk, all.frac_qk, worst_qk_case.c_str());
    std::printf("ONNX Attention conformance: %d cases, %d run, %d passed, %d failed, %d skipped, "
                "on %zu ISAs (%s)\n",
                total, total - skipped, passed, failed, skipped, isas.size(), isa_list.c_str());
    std::fflush(stdout);

    // The counts pin the data set: a lost file, a lost index line, a case that turned into a
    // skip or a feature that is no longer exercised fails here.
    CHECK(total == kTotalCases);
    CHECK(skipped == 0);
    CHECK(passed == kTotalCases);
    CHECK(n_additive == kAdditiveMask);
    CHECK(n_allowed == kBoolAllowed);
    CHECK(n_bool_bias == kBoolAsBias);
    CHECK(n_softcap == kSoftcap);
    CHECK(n_dv == kHeadDimV);
    CHECK(n_lens == kSeqLensK);
    CHECK(n_past == kPast);
    CHECK(n_top_left == kTopLeft);
    CHECK(n_bottom_right == kBottomRight);
    CHECK(n_bottom_right_lens == kBottomRightLens);
    CHECK(n_window == kWindowRight);
    CHECK(n_fp16 == kFp16);
    for (int m = 0; m < 4; ++m) CHECK(n_qk[m] == kQkMode[m]);
}
