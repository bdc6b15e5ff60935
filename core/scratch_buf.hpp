// A per-thread buffer that grows and is kept, 64-byte aligned: no allocation per call once warm
// (the kernels' scratch, the K/V copies of kv_pack).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace attn {
namespace core {

struct ScratchBuf {
    void *ptr = nullptr;
    size_t cap = 0;
    ~ScratchBuf() { ::operator delete(ptr, std::align_val_t(64)); }
    // At least `bytes`; the previous contents are not kept when it grows. Throws std::bad_alloc.
    void *get(size_t bytes) {
#ifdef ATTN_FAULT_INJECTION // test builds: ATTN_FAULT_SCRATCH_LIMIT=n fails scratch above n bytes
        if (const char *env = std::getenv("ATTN_FAULT_SCRATCH_LIMIT"))
            if (bytes > std::strtoull(env, nullptr, 10)) throw std::bad_alloc();
#endif
        if (bytes > cap) {
            ::operator delete(ptr, std::align_val_t(64));
            ptr = nullptr;
            cap = 0;
            ptr = ::operator new(bytes, std::align_val_t(64)); // throws std::bad_alloc
            cap = bytes;
        }
        return ptr;
    }
};

} // namespace core
} // namespace attn
