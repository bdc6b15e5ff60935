// The operand and parameter tables (operands.def, params.def) and the queries that answer from
// them: attn_operand_info, attn_operand_dims, attn_param_info, attn_param_bounds.
#include <cmath>

#include "internal.hpp"

namespace attn {
namespace capi {

// Each row of the tables sits at its operand's / parameter's pinned value in attn.h.
enum OperandRow : int {
#define ATTN_OPERAND(id, ...) kRow_##id,
#include "operands.def"
#undef ATTN_OPERAND
};
// Words of a dims string (words separated by single spaces).
constexpr int words(const char *s) {
    int n = *s ? 1 : 0;
    for (; *s; ++s) n += *s == ' ';
    return n;
}
#define ATTN_OPERAND(id, name, in, out, rank, strided, grad_of, dims)                              \
    static_assert(static_cast<int>(kRow_##id) == static_cast<int>(id),                             \
                  "capi/operands.def: the row of " #id " is not at its pinned value in attn.h");   \
    static_assert(words(dims) == rank, "capi/operands.def: the dims of " #id " are not its rank");
#include "operands.def"
#undef ATTN_OPERAND
enum ParamRow : int {
#define ATTN_PARAM_ROW(id, ...) kRow_##id,
#include "params.def"
#undef ATTN_PARAM_ROW
};
#define ATTN_PARAM_ROW(id, ...)                                                                    \
    static_assert(static_cast<int>(kRow_##id) == static_cast<int>(id),                             \
                  "capi/params.def: the row of " #id " is not at its pinned value in attn.h");
#include "params.def"
#undef ATTN_PARAM_ROW

const ParamInfo kParamInfo[] = {
#define ATTN_PARAM_ROW(id, name, is_float, min, max, def) {#id, name, is_float != 0, min, max, def},
#include "params.def"
#undef ATTN_PARAM_ROW
};

const char *dtype_name(core::DType t) {
    switch (t) {
    case core::DType::F16:
        return "f16";
    case core::DType::BF16:
        return "bf16";
    case core::DType::I8:
        return "int8";
    case core::DType::E4M3:
        return "fp8_e4m3";
    case core::DType::E5M2:
        return "fp8_e5m2";
    default:
        return "f32";
    }
}

const char *kind_setter(Kind k) {
    switch (k) {
    case Kind::F32Out:
        return "attn_args_set_out_f32";
    case Kind::U8:
        return "attn_args_set_u8";
    case Kind::I32:
        return "attn_args_set_i32";
    default:
        return "attn_args_set_f32";
    }
}
core::Strided strided_role(int which) {
    switch (which) {
    case ATTN_Q:
        return core::Strided::Q;
    case ATTN_K:
        return core::Strided::K;
    case ATTN_V:
        return core::Strided::V;
    case ATTN_OUT:
        return core::Strided::Out;
    case ATTN_BIAS:
        return core::Strided::Bias;
    case ATTN_K_SCALE:
        return core::Strided::KScale;
    default:
        return core::Strided::VScale;
    }
}

} // namespace capi
} // namespace attn

using namespace attn::capi;

extern "C" {

attn_status attn_param_bounds(attn_param param, int *is_float, double *min, double *max) {
    static const char fn[] = "attn_param_bounds";
    return guarded(fn, [&]() -> attn_status {
        const int id = raw_enum(param);
        if (id < 0 || id >= kParams)
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: param (%d) is not an attn_param", fn, id);
        if (is_float) *is_float = kParamInfo[id].is_float ? 1 : 0;
        if (min) *min = kParamInfo[id].min;
        if (max) *max = kParamInfo[id].max;
        return ATTN_OK;
    });
}

attn_status attn_param_info(attn_param param, const char **name, int *is_float, double *min,
                            double *max, double *default_value) {
    static const char fn[] = "attn_param_info";
    return guarded(fn, [&]() -> attn_status {
        const int id = raw_enum(param);
        if (id < 0 || id >= kParams)
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: param (%d) is not an attn_param", fn, id);
        const ParamInfo &pi = kParamInfo[id];
        if (name) *name = pi.name;
        if (is_float) *is_float = pi.is_float ? 1 : 0;
        if (min) *min = pi.min;
        if (max) *max = pi.max;
        if (default_value) *default_value = pi.default_value;
        return ATTN_OK;
    });
}

attn_status attn_operand_info(attn_operand which, const char **name, unsigned *in_types,
                              unsigned *out_types, int *rank, int *strided) {
    static const char fn[] = "attn_operand_info";
    return guarded(fn, [&]() -> attn_status {
        const int w = raw_enum(which);
        if (w < 0 || w >= kOperands)
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: which (%d) is not an attn_operand", fn, w);
        const OperandInfo &o = kOperandInfo[w];
        if (name) *name = o.name;
        if (in_types) *in_types = o.in_types;
        if (out_types) *out_types = o.out_types;
        if (rank) *rank = o.rank;
        if (strided) *strided = o.strided != ATTN_S_NONE ? 1 : 0;
        return ATTN_OK;
    });
}

attn_status attn_operand_dims(attn_operand which, const char **dims) {
    static const char fn[] = "attn_operand_dims";
    return guarded(fn, [&]() -> attn_status {
        const int w = raw_enum(which);
        if (w < 0 || w >= kOperands)
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: which (%d) is not an attn_operand", fn, w);
        if (!dims) return fail(ATTN_ERR_NULL_POINTER, "%s: dims is NULL", fn);
        *dims = kOperandInfo[w].dims;
        return ATTN_OK;
    });
}

} // extern "C"
