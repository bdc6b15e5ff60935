// Threads and ISA: attn_set_num_threads, attn_get_num_threads, attn_isa, attn_set_isa,
// attn_isa_info, attn_compute_unit.
#include "internal.hpp"
#include "thread_pool.hpp"

using namespace attn::capi;

namespace {
constexpr size_t kMaxThreads = 256;
} // namespace

extern "C" {

attn_status attn_set_num_threads(size_t n) {
    static const char fn[] = "attn_set_num_threads";
    return guarded(fn, [&]() -> attn_status {
        if (n > kMaxThreads)
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: n (%zu) exceeds the limit %zu", fn, n,
                        kMaxThreads);
        core::pool_set_threads(n);
        return ATTN_OK;
    });
}

size_t attn_get_num_threads(void) {
    return core::pool_threads();
}

const char *attn_isa(void) {
    return core::isa_name(core::active_isa());
}

const char *attn_compute_unit(int mode) {
    if (mode < ATTN_COMPUTE_EXACT || mode > ATTN_COMPUTE_BF16) return nullptr;
    return core::compute_unit(static_cast<core::Compute>(mode), core::active_isa());
}

attn_status attn_set_isa(const char *name) {
    static const char fn[] = "attn_set_isa";
    return guarded(fn, [&]() -> attn_status {
        if (!name || !*name) {
            core::reset_isa_cap();
            return ATTN_OK;
        }
        core::Isa isa;
        if (!core::isa_from_name(name, &isa))
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: name \"%.64s\" is not one of %s", fn, name,
                        core::isa_names());
        if (!core::isa_supported(isa))
            return fail(ATTN_ERR_UNSUPPORTED, "%s: this CPU or build does not support %s", fn,
                        name);
        core::set_isa_cap(isa);
        return ATTN_OK;
    });
}

attn_status attn_isa_info(int index, const char **name, int *supported) {
    static const char fn[] = "attn_isa_info";
    return guarded(fn, [&]() -> attn_status {
        if (index < 0 || index >= core::kIsaCount)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: index (%d) is outside [0, %d]: the ISAs are %s", fn, index,
                        core::kIsaCount - 1, core::isa_names());
        const core::Isa isa = static_cast<core::Isa>(index);
        if (name) *name = core::isa_name(isa);
        if (supported) *supported = core::isa_supported(isa) ? 1 : 0;
        return ATTN_OK;
    });
}

} // extern "C"
