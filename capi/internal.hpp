// What the files of capi/ share: the operand and parameter tables, the descriptor and binding
// structs, the error state and the exception barrier, and the checks more than one entry point
// runs. Each exported function lives in the file of its job:
//   status.cpp   error state, status strings, version
//   model.cpp    the operand and parameter tables and their queries
//   desc.cpp     descriptor life cycle, parameters, strides, required lengths
//   args.cpp     attn_args and its setters
//   run.cpp      attn_run, attn_forward, attn_weights, attn_simple
//   serving.cpp  attn_kv_append(_args), attn_merge, and the checks they share with run.cpp
//   convert.cpp  16-bit conversions, int8 quantization
//   runtime.cpp  threads and ISA
#pragma once

#include <atomic>
#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <vector>

#include "attention.hpp" // with layout.hpp
#include "attn.h"

namespace attn {
namespace capi {

namespace core = attn::core;

// The operand table (operands.def): one row per attn_operand, each at its pinned value
// (model.cpp checks the order).
struct OperandInfo {
    attn_operand id;
    const char *name;
    unsigned in_types, out_types; // bits 1u << attn_dtype
    int rank;
    int strided;      // ATTN_S_*
    int grad_of;      // the operand it is the gradient of, or -1
    const char *dims; // its dense shape in attn.h's names, `rank` words
};
inline constexpr OperandInfo kOperandInfo[] = {
#define ATTN_OPERAND(id, name, in, out, rank, strided, grad_of, dims)                              \
    {id, name, in, out, rank, strided, grad_of, dims},
#include "operands.def"
#undef ATTN_OPERAND
};
constexpr int kOperands = sizeof kOperandInfo / sizeof kOperandInfo[0];

// The parameter table (params.def), defined in model.cpp.
struct ParamInfo {
    const char *id_name; // "ATTN_PARAM_CAUSAL", as messages name it
    const char *name;    // "causal"
    bool is_float;
    double min, max, default_value;
};
extern const ParamInfo kParamInfo[];
constexpr int kParams = 0
#define ATTN_PARAM_ROW(...) +1
#include "params.def"
#undef ATTN_PARAM_ROW
    ;

constexpr size_t kMaxDim = 0x7fffffff;

// One bound operand of an attn_args.
struct Slot {
    const void *ptr = nullptr;
    size_t len = 0;
    core::DType type = core::DType::F32; // storage type of Q, K, V (the setter that bound it)
    bool writable = false;               // bound with an attn_args_set_out_* setter
};

} // namespace capi
} // namespace attn

struct attn_desc {
    attn::core::Params p;
    size_t len[attn::capi::kOperands] = {};          // attn_desc_required_len per operand
    bool custom_strides[attn::capi::kOperands] = {}; // set by attn_desc_set_strides
    size_t max_pages_param = 0;                      // ATTN_PARAM_MAX_PAGES as set (0 = from seq_k)
    // Set by the first call that uses the descriptor (which may share it between threads);
    // configuration is refused from then on. Not configuration itself, hence mutable.
    mutable std::atomic<bool> used{false};
};

struct attn_args {
    attn::capi::Slot slot[attn::capi::kOperands];
};

namespace attn {
namespace capi {

// ---- status.cpp: the error state and the exception barrier --------------------------------
// Sets this thread's message (attn_last_error) and returns s.
attn_status fail(attn_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *last_error();

// Runs an exported body: any C++ exception becomes a status (onnxruntime's API_IMPL_BEGIN/END
// idea), so nothing throws across the ABI.
template <class F> attn_status guarded(const char *fn, F &&body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return fail(ATTN_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    } catch (const std::exception &e) {
        return fail(ATTN_ERR_INTERNAL, "%s: internal error: %s", fn, e.what());
    } catch (...) {
        return fail(ATTN_ERR_INTERNAL, "%s: internal error: unknown exception", fn);
    }
}

// The integer a caller passed for an enum parameter. A C caller may pass any int; loading it as a
// C++ enum outside the enumerators' range would be undefined, so the bytes are read as an int.
template <class E> int raw_enum(const E &e) {
    static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

// ---- Facts of the operand table (inline: every call's checks ask them per operand) ----------
inline const char *operand_name(int which) { // "?" for an unknown one
    return which >= 0 && which < kOperands ? kOperandInfo[which].name : "?";
}
// The setter family an operand is bound with (messages name it): its input or output type set.
enum class Kind { F32In, F32Out, U8, I32 };
inline Kind operand_kind(int which) {
    const OperandInfo &o = kOperandInfo[which];
    if (o.in_types & ATTN_T_U8) return Kind::U8;
    if (o.in_types & ATTN_T_I32) return Kind::I32;
    return o.in_types ? Kind::F32In : Kind::F32Out;
}
inline size_t kind_bytes(Kind k) {
    return k == Kind::U8 ? 1 : 4;
}
// The int8 scales of K and V: K's view with head_dim 1.
inline bool is_scale(int which) {
    return kOperandInfo[which].strided == ATTN_S_SCALES;
}
// The operands with a [c0][c1][c2][dim] strided view (Q, K, V, OUT, BIAS, K_SCALE, V_SCALE).
inline bool is_strided(int which) {
    return which >= 0 && which < kOperands &&
           (kOperandInfo[which].strided == ATTN_S_DATA ||
            kOperandInfo[which].strided == ATTN_S_SCALES);
}
// A K or V cache (or its int8 scales) that attn_kv_append_args writes: an input that the output
// setters also bind, writable.
inline bool is_cache(int which) {
    return kOperandInfo[which].in_types && kOperandInfo[which].out_types;
}

// ---- model.cpp: the rest of the model's facts ----------------------------------------------
const char *dtype_name(core::DType t);
const char *kind_setter(Kind k);
// The core geometry of a strided operand (is_strided(which)).
core::Strided strided_role(int which);

// The layout geometry (core/layout.hpp) by operand id; `which` is_strided.
inline core::View view_of(const core::Shape &s, const core::Params &mode, int which,
                          const core::Layout &lay) {
    return core::view_of(s, mode, strided_role(which), lay);
}
inline bool strided_len(const core::Shape &s, const core::Params &mode, int which,
                        const core::Layout &lay, size_t *out) {
    return core::strided_len(s, mode, strided_role(which), lay, out);
}
inline const core::Layout &layout_in(const core::Params &p, int which) {
    return core::layout_in(p, strided_role(which));
}

// ---- args.cpp: an fp8 format argument (ATTN_DTYPE_FP8_*) as its core type; false (the
// failure recorded) for anything else.
bool fp8_format(const char *fn, int fmt, core::DType *type);

// An fp8 K / V without a scale operand reads one scale of 1 for every row (strides 0).
inline void unit_scale(core::DType type, const float **scale, core::Layout *lay) {
    static const float kOne = 1.0f;
    if (!core::is_fp8(type) || *scale) return;
    *scale = &kOne;
    *lay = core::Layout{};
}

// ---- desc.cpp ------------------------------------------------------------------------------
attn_status check_desc(const char *fn, const attn_desc *desc);
attn_status create_desc(const char *fn, attn_desc **out, size_t batch, size_t heads_q,
                        size_t heads_kv, size_t seq_q, size_t seq_k, size_t head_dim);

// ---- serving.cpp: the checks run.cpp shares with the serving calls ------------------------
// A buffer of a call, for the aliasing check: outputs must overlap no other buffer.
struct Buffer {
    const void *ptr;
    size_t bytes;
    const char *name;
    bool output;
};
attn_status check_aliasing(const char *fn, const Buffer *bufs, int n);
// "<fn>: <name> has <have> elements, needs at least <need>" when have < need.
attn_status fail_len(const char *fn, const char *name, size_t have, size_t need);
inline attn_status check_len(const char *fn, const char *name, size_t have, size_t need) {
    return have < need ? fail_len(fn, name, have, need) : ATTN_OK;
}

// Call-time facts of the serving layouts: the totals of a varlen pack, the pages of a paged
// cache.
struct CallShape {
    size_t total_q = 0, total_k = 0, num_pages = 0;
};
// Checks the serving-layout operands of a call (which must be bound in which mode, their
// values) and fills need[] (every operand's required length for this call) and cs.
// used[w]: the operation reads or writes w; weights_op: ATTN_OP_WEIGHTS.
attn_status check_serving(const char *fn, const attn_desc *desc, const Slot *slot, const bool *used,
                          bool weights_op, size_t *need, CallShape *cs);
// With a paged cache: the pages the bound K (and V, and their int8 scales) all hold, then the
// block table against them.
attn_status check_pages(const char *fn, const core::Params &p, const Slot *slot, bool with_v,
                        const size_t *need, CallShape *cs);

// ---- run.cpp -------------------------------------------------------------------------------
// Checks the operands of one operation and runs it. slot[w] holds operand w (null = unbound).
attn_status execute(const char *fn, const attn_desc *desc, int op, const Slot *slot);

} // namespace capi
} // namespace attn
