// The ONNX Attention conformance data set (tests/data/onnx-attention) and how each of its
// cases is expressed through the C API: shared by the test_onnx_*.cpp files.
//   onnx_case.cpp  reads index.txt and the case files; ONNX's visibility rule
//   onnx_plan.cpp  the mapping of each ONNX feature onto the API, descriptors, calls
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attn.h"

#ifndef ATTN_ONNX_DATA_DIR
#error "ATTN_ONNX_DATA_DIR must name tests/data/onnx-attention"
#endif

namespace onnx_conformance {

// float32 data: max abs error (the converted set's own float64 check sees at most 3e-8).
constexpr double kTolF32 = 1e-5;
// float16 data: ONNX's backend-test criterion, |got - want| <= atol + rtol * |want| with the
// defaults of onnx/backend/test/loader (rtol 1e-3, atol 1e-7; node tests do not override them).
// The expected values were computed and rounded in float16 by ONNX; libattn computes in fp32.
constexpr double kF16Rtol = 1e-3, kF16Atol = 1e-7;

struct Line {
    std::string verb;                      // "run" or "skip"
    std::map<std::string, std::string> kv; // key=value tokens
    std::string reason;                    // skip: rest of the line after "reason="
};

// The index lines of index.txt, in order.
std::vector<Line> read_index();
// The value of `key` on an index line (the test fails when it is absent).
std::string get(const Line &l, const char *key);

// One ONNX case, as the index describes it (ONNX's semantics, nothing of the API yet).
struct Case {
    std::string name, layout, dtype, causal, mask_kind, features;
    int opset = 0;
    size_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Sk = 0, D = 0, Dv = 0, past = 0;
    std::vector<long long> offset; // causal: j <= i + offset[b], one per batch; empty if none
    bool default_scale = true;
    float scale = 0.0f;
    double softcap = 0.0;          // 0 = none
    size_t mdim[4] = {1, 1, 1, 1}; // mask shape right-aligned to [B, Hq, Sq, keys]
    std::vector<int32_t> nonpad;   // nonpad_kv_seqlen per batch; empty if none
    int qk_mode = -1;              // -1: no qk_matmul_output stored
    long long softmax_precision = -1;
    size_t fully_masked_rows = 0;
    std::vector<float> q, k, v, out, qk;
    std::vector<uint8_t> mask_u8; // bool mask, file shape
    std::vector<float> mask_f32;  // additive mask, file shape
    bool fp16() const { return dtype == "float16"; }
};

// The case of one "run" line, with its data files read (their sizes checked).
Case load_case(const Line &l);

// Index of mask element (b, h, i, j) in the file; j must be < mdim[3].
size_t mask_index(const Case &c, size_t b, size_t h, size_t i, size_t j);

// ONNX's rule, independent of the library: may query i of (b, h) see key j?
bool visible(const Case &c, size_t b, size_t h, size_t i, size_t j);

// How a case is expressed through the API.
struct Plan {
    attn_causal causal = ATTN_CAUSAL_NONE;
    long long window_right = -1;  // ATTN_PARAM_WINDOW_RIGHT, -1 = unbounded
    bool seq_lens = false;        // bind nonpad as ATTN_SEQ_LENS_K
    std::vector<uint8_t> allowed; // ATTN_ALLOWED [Sq][Sk], or empty
    std::vector<float> bias;      // ATTN_BIAS, or empty
    size_t bias_stride[3] = {0, 0, 0};
    std::string causal_how, mask_how;
};

// The API mapping of a case (see onnx_plan.cpp); fails the test when there is none.
Plan make_plan(const Case &c);
// One line describing a case and its plan.
std::string describe(const Case &c, const Plan &p);

// What a descriptor is for.
enum class Stage {
    Full,     // FORWARD and ATTN_WEIGHTS_SOFTMAX (ONNX qk mode 3), every mask
    Scores,   // ATTN_WEIGHTS_SCORES (ONNX mode 0)
    CapOnly,  // ATTN_WEIGHTS_CAPPED without any mask (ONNX mode 1: softcap(scale * QK^T))
    Capped,   // ATTN_WEIGHTS_CAPPED with every mask (ONNX mode 2)
    BiasFirst // as Full, but ATTN_PARAM_BIAS_FIRST = 1 (test_onnx_mask_order.cpp)
};

struct Errors {
    std::vector<std::string> list;
    bool ok() const { return list.empty(); }
    void add(const std::string &s) {
        if (list.size() < 12) list.push_back(s);
    }
};

using DescPtr = std::unique_ptr<attn_desc, void (*)(attn_desc *)>;
using ArgsPtr = std::unique_ptr<attn_args, void (*)(attn_args *)>;

// A descriptor of `stage` for the case; null (with the reason in `err`) on failure.
DescPtr make_desc(const Case &c, const Plan &p, Stage stage, Errors &err);
// Binds the inputs (and, unless `no_masks`, every mask operand of the plan).
bool bind_inputs(attn_args *a, const Case &c, const Plan &p, bool no_masks, Errors &err);
// Y with a descriptor of `stage` (Full or BiasFirst) into out / lse.
bool run_forward(const Case &c, const Plan &p, Stage stage, std::vector<float> &out,
                 std::vector<float> &lse, Errors &err);
// The weights of a descriptor of `stage` into w.
bool run_weights(const Case &c, const Plan &p, Stage stage, std::vector<float> &w, Errors &err);

} // namespace onnx_conformance
