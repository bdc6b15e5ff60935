// attn_args, the per-call binding object, and its typed setters.
#include "internal.hpp"

using namespace attn::capi;

namespace {

// The bit of a setter's element type in the operand table's type sets.
unsigned type_bit(Kind kind, core::DType type) {
    if (kind == Kind::U8) return ATTN_T_U8;
    if (kind == Kind::I32) return ATTN_T_I32;
    switch (type) {
    case core::DType::F16:
        return ATTN_T_F16;
    case core::DType::BF16:
        return ATTN_T_BF16;
    case core::DType::I8:
        return ATTN_T_I8;
    case core::DType::E4M3:
        return ATTN_T_FP8_E4M3;
    case core::DType::E5M2:
        return ATTN_T_FP8_E5M2;
    default:
        return ATTN_T_F32;
    }
}

// Binds `which` if the operand table lists the setter's type in its input set (or, for the
// output setters, its output set).
attn_status bind(const char *fn, attn_args *args, int which, const void *data, size_t len,
                 Kind kind, core::DType type = core::DType::F32) {
    if (!args) return fail(ATTN_ERR_NULL_POINTER, "%s: args is NULL", fn);
    if (which < 0 || which >= kOperands)
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: which (%d) is not an attn_operand", fn, which);
    const OperandInfo &o = kOperandInfo[which];
    const bool output = kind == Kind::F32Out;
    if (!((output ? o.out_types : o.in_types) & type_bit(kind, type))) {
        if (output && type != core::DType::F32)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s cannot be bound with %s (it binds a writable K or V cache)", fn,
                        o.name, fn);
        if (type != core::DType::F32)
            return fail(
                ATTN_ERR_INVALID_ARGUMENT, "%s: %s cannot be bound with %s (%s)", fn, o.name, fn,
                type == core::DType::I8 ? "int8 storage is for K, V, NEW_K and NEW_V"
                : core::is_fp8(type)    ? "fp8 storage is for K, V, NEW_K and NEW_V"
                                        : "16-bit storage is for Q, K, V, DOUT, NEW_K and NEW_V");
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s is bound with %s, not %s", fn, o.name,
                    kind_setter(operand_kind(which)), fn);
    }
    if (!data && len != 0)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: %s is NULL with len %zu (NULL unbinds the operand: pass len 0)", fn,
                    o.name, len);
    // an output setter binds a K / V cache (or its scales) writable for attn_kv_append_args;
    // attn_run reads it as an input
    args->slot[which] =
        Slot{data, data ? len : 0, type, data != nullptr && output && is_cache(which)};
    return ATTN_OK;
}

} // namespace

namespace attn {
namespace capi {

bool fp8_format(const char *fn, int fmt, core::DType *type) {
    if (fmt == ATTN_DTYPE_FP8_E4M3 || fmt == ATTN_DTYPE_FP8_E5M2) {
        *type = fmt == ATTN_DTYPE_FP8_E4M3 ? core::DType::E4M3 : core::DType::E5M2;
        return true;
    }
    fail(ATTN_ERR_INVALID_ARGUMENT,
         "%s: fmt (%d) is not an fp8 format (ATTN_DTYPE_FP8_E4M3 = 6 or ATTN_DTYPE_FP8_E5M2 = 7)",
         fn, fmt);
    return false;
}

} // namespace capi
} // namespace attn

extern "C" {

attn_status attn_args_create(attn_args **args) {
    static const char fn[] = "attn_args_create";
    return guarded(fn, [&]() -> attn_status {
        if (!args) return fail(ATTN_ERR_NULL_POINTER, "%s: args is NULL", fn);
        *args = new (std::nothrow) attn_args;
        if (!*args) return fail(ATTN_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        return ATTN_OK;
    });
}

void attn_args_destroy(attn_args *args) {
    delete args;
}

attn_status attn_args_clear(attn_args *args) {
    if (!args) return fail(ATTN_ERR_NULL_POINTER, "attn_args_clear: args is NULL");
    *args = attn_args{};
    return ATTN_OK;
}

attn_status attn_args_set_f32(attn_args *args, attn_operand which, const float *data, size_t len) {
    static const char fn[] = "attn_args_set_f32";
    return guarded(fn, [&]() { return bind(fn, args, raw_enum(which), data, len, Kind::F32In); });
}

attn_status attn_args_set_out_f32(attn_args *args, attn_operand which, float *data, size_t len) {
    static const char fn[] = "attn_args_set_out_f32";
    return guarded(fn, [&]() { return bind(fn, args, raw_enum(which), data, len, Kind::F32Out); });
}

attn_status attn_args_set_u8(attn_args *args, attn_operand which, const uint8_t *data, size_t len) {
    static const char fn[] = "attn_args_set_u8";
    return guarded(fn, [&]() { return bind(fn, args, raw_enum(which), data, len, Kind::U8); });
}

attn_status attn_args_set_i32(attn_args *args, attn_operand which, const int32_t *data,
                              size_t len) {
    static const char fn[] = "attn_args_set_i32";
    return guarded(fn, [&]() { return bind(fn, args, raw_enum(which), data, len, Kind::I32); });
}

attn_status attn_args_set_f16(attn_args *args, attn_operand which, const uint16_t *data,
                              size_t len) {
    static const char fn[] = "attn_args_set_f16";
    return guarded(fn, [&]() {
        return bind(fn, args, raw_enum(which), data, len, Kind::F32In, core::DType::F16);
    });
}

attn_status attn_args_set_bf16(attn_args *args, attn_operand which, const uint16_t *data,
                               size_t len) {
    static const char fn[] = "attn_args_set_bf16";
    return guarded(fn, [&]() {
        return bind(fn, args, raw_enum(which), data, len, Kind::F32In, core::DType::BF16);
    });
}

attn_status attn_args_set_i8(attn_args *args, attn_operand which, const int8_t *data, size_t len) {
    static const char fn[] = "attn_args_set_i8";
    return guarded(fn, [&]() {
        return bind(fn, args, raw_enum(which), data, len, Kind::F32In, core::DType::I8);
    });
}

attn_status attn_args_set_out_f16(attn_args *args, attn_operand which, uint16_t *data, size_t len) {
    static const char fn[] = "attn_args_set_out_f16";
    return guarded(fn, [&]() {
        return bind(fn, args, raw_enum(which), data, len, Kind::F32Out, core::DType::F16);
    });
}

attn_status attn_args_set_out_bf16(attn_args *args, attn_operand which, uint16_t *data,
                                   size_t len) {
    static const char fn[] = "attn_args_set_out_bf16";
    return guarded(fn, [&]() {
        return bind(fn, args, raw_enum(which), data, len, Kind::F32Out, core::DType::BF16);
    });
}

attn_status attn_args_set_out_i8(attn_args *args, attn_operand which, int8_t *data, size_t len) {
    static const char fn[] = "attn_args_set_out_i8";
    return guarded(fn, [&]() {
        return bind(fn, args, raw_enum(which), data, len, Kind::F32Out, core::DType::I8);
    });
}

attn_status attn_args_set_fp8(attn_args *args, attn_operand which, attn_dtype fmt,
                              const uint8_t *data, size_t len) {
    static const char fn[] = "attn_args_set_fp8";
    return guarded(fn, [&]() -> attn_status {
        if (!args) return fail(ATTN_ERR_NULL_POINTER, "%s: args is NULL", fn);
        core::DType type;
        if (!fp8_format(fn, raw_enum(fmt), &type)) return ATTN_ERR_INVALID_ARGUMENT;
        return bind(fn, args, raw_enum(which), data, len, Kind::F32In, type);
    });
}

attn_status attn_args_set_out_fp8(attn_args *args, attn_operand which, attn_dtype fmt,
                                  uint8_t *data, size_t len) {
    static const char fn[] = "attn_args_set_out_fp8";
    return guarded(fn, [&]() -> attn_status {
        if (!args) return fail(ATTN_ERR_NULL_POINTER, "%s: args is NULL", fn);
        core::DType type;
        if (!fp8_format(fn, raw_enum(fmt), &type)) return ATTN_ERR_INVALID_ARGUMENT;
        return bind(fn, args, raw_enum(which), data, len, Kind::F32Out, type);
    });
}

} // extern "C"
