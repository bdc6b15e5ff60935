// A per-thread buffer that grows and is kept, 64-byte aligned: no allocation per call once warm
// (the kernels' scratch, the K/V copies of kv_pack).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#ifdef __linux__
#include <sys/mman.h>
#endif

namespace attn {
namespace core {

struct ScratchBuf {
    void *ptr = nullptr;
    size_t cap = 0;
    bool huge = false; // Linux: blocks of >= kHuge on transparent huge pages where granted
    static constexpr size_t kHuge = size_t(2) << 20;
    ScratchBuf() = default;
    explicit ScratchBuf(bool huge_pages) : huge(huge_pages) {}
    ~ScratchBuf() { release(); }
    // Whether the block came from aligned_alloc (a huge-page block), else from operator new.
    bool on_huge_pages() const {
#ifdef __linux__
        return huge && cap >= kHuge;
#else
        return false;
#endif
    }
    void release() {
        if (on_huge_pages())
            std::free(ptr);
        else
            ::operator delete(ptr, std::align_val_t(64));
        ptr = nullptr;
        cap = 0;
    }
    // At least `bytes`; the previous contents are not kept when it grows. Throws std::bad_alloc.
    void *get(size_t bytes) {
#ifdef ATTN_FAULT_INJECTION // test builds: ATTN_FAULT_SCRATCH_LIMIT=n fails scratch above n bytes
        if (const char *env = std::getenv("ATTN_FAULT_SCRATCH_LIMIT"))
            if (bytes > std::strtoull(env, nullptr, 10)) throw std::bad_alloc();
#endif
        if (bytes > cap) {
            release();
#ifdef __linux__
            if (huge && bytes >= kHuge) {
                if (bytes > ~size_t(0) - kHuge) throw std::bad_alloc();
                const size_t n = (bytes + kHuge - 1) / kHuge * kHuge;
                ptr = std::aligned_alloc(kHuge, n);
                if (!ptr) throw std::bad_alloc();
                madvise(ptr, n, MADV_HUGEPAGE); // advice only: 4 KiB pages where it is refused
                cap = n;
                return ptr;
            }
#endif
            ptr = ::operator new(bytes, std::align_val_t(64)); // throws std::bad_alloc
            cap = bytes;
        }
        return ptr;
    }
};

} // namespace core
} // namespace attn
