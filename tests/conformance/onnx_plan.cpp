// How each ONNX Attention feature is expressed through the C API, and the descriptors and calls
// that run a case. The mapping (details and the evidence in the data README):
//   3-D inputs [B, S, H*D]      -> BSHD strides for Q, K, V, OUT
//   GQA                         -> heads_q > heads_kv
//   scale                       -> ATTN_PARAM_SCALE
//   is_causal, no cache         -> ATTN_CAUSAL_TOP_LEFT (j <= i)
//   is_causal + past_key        -> j <= i + past: BOTTOM_RIGHT when past == seq_k - seq_q, else
//                                  CAUSAL_NONE + ATTN_PARAM_WINDOW_RIGHT = past
//   is_causal + nonpad_kv_seqlen-> BOTTOM_RIGHT with ATTN_SEQ_LENS_K (j <= i + nonpad[b] - seq_q)
//   nonpad_kv_seqlen            -> ATTN_SEQ_LENS_K
//   past_key / past_value       -> the .k/.v files already hold present = concat(past, new)
//   bool mask [seq_q][seq_k]    -> ATTN_ALLOWED
//   bool mask per batch/head    -> ATTN_BIAS of 0 / -INFINITY (ALLOWED is broadcast over B, H)
//   additive float mask         -> ATTN_BIAS, strides 0 on broadcast axes; a key axis shorter
//                                  than seq_k is padded with -INFINITY (as ONNX pads it)
//   softcap                     -> ATTN_PARAM_SOFTCAP with ATTN_PARAM_BIAS_FIRST = 0: ONNX's
//                                  data adds the mask AFTER the softcap (test_onnx_mask_order.cpp)
//   head size of V != of Q/K    -> ATTN_PARAM_HEAD_DIM_V
//   qk_matmul_output mode 0     -> ATTN_WEIGHTS_SCORES
//   qk_matmul_output mode 1     -> ATTN_WEIGHTS_CAPPED on a descriptor without any mask: ONNX's
//                                  mode 1 is softcap(scale * QK^T), no mask added
//   qk_matmul_output mode 2     -> ATTN_WEIGHTS_CAPPED with every mask (-inf where hidden)
//   qk_matmul_output mode 3     -> ATTN_WEIGHTS_SOFTMAX
//   float16 data                -> the files hold the exact float32 widening; libattn computes in
//                                  fp32; Y is compared within ONNX's own backend-test tolerance
//   softmax_precision           -> only the softmax's precision (libattn's is fp32): nothing to set
#include "onnx_case.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

namespace onnx_conformance {

Plan make_plan(const Case &c) {
    Plan p;
    const long long sq = static_cast<long long>(c.Sq), sk = static_cast<long long>(c.Sk);
    p.seq_lens = !c.nonpad.empty();
    if (!c.offset.empty()) {
        bool lens_aligned = p.seq_lens, uniform = true;
        for (size_t b = 0; b < c.B; ++b) {
            if (p.seq_lens && c.offset[b] != c.nonpad[b] - sq) lens_aligned = false;
            if (c.offset[b] != c.offset[0]) uniform = false;
        }
        const long long o = c.offset[0];
        if (lens_aligned) {
            // ONNX with an external cache: j <= i + nonpad[b] - seq_q = BOTTOM_RIGHT's diagonal
            // when it aligns to ATTN_SEQ_LENS_K.
            p.causal = ATTN_CAUSAL_BOTTOM_RIGHT;
            p.causal_how = "bottom_right(seq_lens_k)";
        } else if (uniform && o == 0) {
            p.causal = ATTN_CAUSAL_TOP_LEFT;
            p.causal_how = "top_left";
        } else if (uniform && o == sk - sq && !p.seq_lens) {
            p.causal = ATTN_CAUSAL_BOTTOM_RIGHT;
            p.causal_how = "bottom_right";
        } else if (uniform && o > 0) {
            // j <= i + o with o != seq_k - seq_q (a past cache plus more new keys than queries):
            // no causal rule, a sliding window bounded on the right only.
            p.causal = ATTN_CAUSAL_NONE;
            p.window_right = o;
            p.causal_how = "window_right=" + std::to_string(o);
        } else {
            FAIL(c.name, ": causal offsets the API cannot express");
        }
    }

    if (c.mask_kind == "-") return p;
    const size_t *m = c.mdim;
    if (c.mask_kind == "bool" && m[0] == 1 && m[1] == 1) {
        // One [seq_q][seq_k] matrix for every batch and head: ALLOWED (a short key axis and a
        // query axis of 1 are expanded here).
        p.allowed.assign(c.Sq * c.Sk, 0);
        for (size_t i = 0; i < c.Sq; ++i)
            for (size_t j = 0; j < m[3]; ++j)
                p.allowed[i * c.Sk + j] = c.mask_u8[mask_index(c, 0, 0, i, j)] != 0;
        p.mask_how = "allowed";
        return p;
    }
    // ATTN_BIAS in the mask's own (broadcast) shape with the key axis padded to seq_k.
    p.bias.assign(m[0] * m[1] * m[2] * c.Sk, -INFINITY);
    for (size_t b = 0; b < m[0]; ++b)
        for (size_t h = 0; h < m[1]; ++h)
            for (size_t i = 0; i < m[2]; ++i)
                for (size_t j = 0; j < m[3]; ++j) {
                    const size_t n = mask_index(c, b, h, i, j);
                    float x =
                        c.mask_kind == "bool" ? (c.mask_u8[n] ? 0.0f : -INFINITY) : c.mask_f32[n];
                    p.bias[((b * m[1] + h) * m[2] + i) * c.Sk + j] = x;
                }
    p.bias_stride[0] = m[0] > 1 ? m[1] * m[2] * c.Sk : 0;
    p.bias_stride[1] = m[1] > 1 ? m[2] * c.Sk : 0;
    p.bias_stride[2] = m[2] > 1 ? c.Sk : 0;
    std::ostringstream s;
    s << (c.mask_kind == "bool" ? "bool->bias" : "bias") << "[" << m[0] << "," << m[1] << ","
      << m[2] << "," << m[3] << (m[3] < c.Sk ? "->" + std::to_string(c.Sk) : std::string()) << "]";
    p.mask_how = s.str();
    return p;
}

std::string describe(const Case &c, const Plan &p) {
    std::ostringstream s;
    s << c.layout << " " << c.dtype << ", B=" << c.B << " Hq=" << c.Hq << " Hkv=" << c.Hkv
      << " Sq=" << c.Sq << " Sk=" << c.Sk << " D=" << c.D;
    if (c.Dv != c.D) s << " Dv=" << c.Dv;
    if (c.past) s << " past=" << c.past;
    if (!c.default_scale) s << ", scale " << c.scale;
    if (!p.causal_how.empty()) s << ", causal " << p.causal_how;
    if (c.softcap > 0) s << ", softcap " << c.softcap;
    if (!p.mask_how.empty()) s << ", mask " << p.mask_how;
    if (p.seq_lens) s << ", seq_lens_k";
    if (c.qk_mode >= 0) s << ", qk mode " << c.qk_mode;
    if (c.softmax_precision >= 0) s << ", softmax_precision " << c.softmax_precision;
    return s.str();
}

#define CALL_OK(call)                                                                              \
    do {                                                                                           \
        attn_status st_ = (call);                                                                  \
        if (st_ != ATTN_OK) {                                                                      \
            err.add(std::string(#call) + " -> " + attn_status_string(st_) + ": " +                 \
                    attn_last_error());                                                            \
            return DescPtr(nullptr, attn_desc_destroy);                                            \
        }                                                                                          \
    } while (0)

DescPtr make_desc(const Case &c, const Plan &p, Stage stage, Errors &err) {
    attn_desc *raw = nullptr;
    attn_status st = attn_desc_create(&raw, c.B, c.Hq, c.Hkv, c.Sq, c.Sk, c.D);
    DescPtr desc(raw, attn_desc_destroy);
    if (st != ATTN_OK) {
        err.add(std::string("attn_desc_create -> ") + attn_last_error());
        return DescPtr(nullptr, attn_desc_destroy);
    }
    attn_desc *d = desc.get();
    // Before the strides: setting HEAD_DIM_V resets V and OUT to contiguous BHSD.
    if (c.Dv != c.D)
        CALL_OK(attn_desc_set_int(d, ATTN_PARAM_HEAD_DIM_V, static_cast<int64_t>(c.Dv)));
    if (c.layout == "BSHD") {
        // ONNX 3-D [B, S, H*D]: element (b, h, s, d) at b*S*H*D + s*H*D + h*D + d.
        CALL_OK(attn_desc_set_strides(d, ATTN_Q, c.Sq * c.Hq * c.D, c.D, c.Hq * c.D));
        CALL_OK(attn_desc_set_strides(d, ATTN_K, c.Sk * c.Hkv * c.D, c.D, c.Hkv * c.D));
        CALL_OK(attn_desc_set_strides(d, ATTN_V, c.Sk * c.Hkv * c.Dv, c.Dv, c.Hkv * c.Dv));
        CALL_OK(attn_desc_set_strides(d, ATTN_OUT, c.Sq * c.Hq * c.Dv, c.Dv, c.Hq * c.Dv));
    }
    if (!c.default_scale) CALL_OK(attn_desc_set_float(d, ATTN_PARAM_SCALE, c.scale));
    const bool masks = stage != Stage::CapOnly && stage != Stage::Scores;
    if (masks) {
        CALL_OK(attn_desc_set_int(d, ATTN_PARAM_CAUSAL, p.causal));
        CALL_OK(attn_desc_set_int(d, ATTN_PARAM_WINDOW_RIGHT, p.window_right));
    }
    if (c.softcap > 0) CALL_OK(attn_desc_set_float(d, ATTN_PARAM_SOFTCAP, c.softcap));
    // ONNX's data adds the mask after the softcap: BIAS_FIRST stays 0 (set explicitly).
    CALL_OK(attn_desc_set_int(d, ATTN_PARAM_BIAS_FIRST, stage == Stage::BiasFirst ? 1 : 0));
    int64_t mode = ATTN_WEIGHTS_SOFTMAX;
    if (stage == Stage::Scores) mode = ATTN_WEIGHTS_SCORES;
    if (stage == Stage::CapOnly || stage == Stage::Capped) mode = ATTN_WEIGHTS_CAPPED;
    CALL_OK(attn_desc_set_int(d, ATTN_PARAM_WEIGHTS_MODE, mode));
    if (masks && !p.bias.empty())
        CALL_OK(attn_desc_set_strides(d, ATTN_BIAS, p.bias_stride[0], p.bias_stride[1],
                                      p.bias_stride[2]));
    // The files hold exactly the elements the layout addresses; the bias buffer at least.
    const struct {
        attn_operand op;
        size_t have;
        bool exact;
    } lens[] = {{ATTN_Q, c.q.size(), true},
                {ATTN_K, c.k.size(), true},
                {ATTN_V, c.v.size(), true},
                {ATTN_OUT, c.out.size(), true},
                {ATTN_BIAS, p.bias.size(), false}};
    for (const auto &l : lens) {
        if (l.op == ATTN_BIAS && (p.bias.empty() || !masks)) continue;
        size_t want = attn_desc_required_len(d, l.op);
        if (l.exact ? want != l.have : want > l.have) {
            err.add("required_len(" + std::to_string(l.op) + ") = " + std::to_string(want) +
                    ", buffer holds " + std::to_string(l.have));
            return DescPtr(nullptr, attn_desc_destroy);
        }
    }
    return desc;
}
#undef CALL_OK

#define CALL_OK(call)                                                                              \
    do {                                                                                           \
        attn_status st_ = (call);                                                                  \
        if (st_ != ATTN_OK) {                                                                      \
            err.add(std::string(#call) + " -> " + attn_status_string(st_) + ": " +                 \
                    attn_last_error());                                                            \
            return false;                                                                          \
        }                                                                                          \
    } while (0)

// Binds the inputs (and, unless `no_masks`, every mask operand of the plan).
bool bind_inputs(attn_args *a, const Case &c, const Plan &p, bool no_masks, Errors &err) {
    CALL_OK(attn_args_set_f32(a, ATTN_Q, c.q.data(), c.q.size()));
    CALL_OK(attn_args_set_f32(a, ATTN_K, c.k.data(), c.k.size()));
    CALL_OK(attn_args_set_f32(a, ATTN_V, c.v.data(), c.v.size()));
    if (no_masks) return true;
    if (!p.allowed.empty())
        CALL_OK(attn_args_set_u8(a, ATTN_ALLOWED, p.allowed.data(), p.allowed.size()));
    if (!p.bias.empty()) CALL_OK(attn_args_set_f32(a, ATTN_BIAS, p.bias.data(), p.bias.size()));
    if (p.seq_lens)
        CALL_OK(attn_args_set_i32(a, ATTN_SEQ_LENS_K, c.nonpad.data(), c.nonpad.size()));
    return true;
}

// Y with a descriptor of `stage` (Full or BiasFirst) into out / lse.
bool run_forward(const Case &c, const Plan &p, Stage stage, std::vector<float> &out,
                 std::vector<float> &lse, Errors &err) {
    DescPtr desc = make_desc(c, p, stage, err);
    if (!desc) return false;
    attn_args *raw = nullptr;
    CALL_OK(attn_args_create(&raw));
    ArgsPtr args(raw, attn_args_destroy);
    if (!bind_inputs(args.get(), c, p, false, err)) return false;
    // Outputs start as NaN so that an element the library forgot to write is caught.
    out.assign(c.out.size(), std::nanf(""));
    lse.assign(c.B * c.Hq * c.Sq, std::nanf(""));
    CALL_OK(attn_args_set_out_f32(args.get(), ATTN_OUT, out.data(), out.size()));
    CALL_OK(attn_args_set_out_f32(args.get(), ATTN_LSE, lse.data(), lse.size()));
    CALL_OK(attn_run(desc.get(), ATTN_OP_FORWARD, args.get()));
    return true;
}

bool run_weights(const Case &c, const Plan &p, Stage stage, std::vector<float> &w, Errors &err) {
    DescPtr desc = make_desc(c, p, stage, err);
    if (!desc) return false;
    attn_args *raw = nullptr;
    CALL_OK(attn_args_create(&raw));
    ArgsPtr args(raw, attn_args_destroy);
    const bool no_masks = stage == Stage::CapOnly || stage == Stage::Scores;
    if (!bind_inputs(args.get(), c, p, no_masks, err)) return false;
    w.assign(c.B * c.Hq * c.Sq * c.Sk, std::nanf(""));
    CALL_OK(attn_args_set_out_f32(args.get(), ATTN_WEIGHTS, w.data(), w.size()));
    CALL_OK(attn_run(desc.get(), ATTN_OP_WEIGHTS, args.get()));
    return true;
}
#undef CALL_OK

} // namespace onnx_conformance
