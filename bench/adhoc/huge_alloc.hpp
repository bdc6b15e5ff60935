// Buffers for the ad-hoc tools: 64-byte aligned, or, when the environment variable Env is "1",
// 2 MiB-aligned and madvised for transparent huge pages (the kernel's setting "madvise" then
// backs them with 2 MiB pages: a few TLB entries where 4 KiB pages need thousands).
#pragma once
#include <cstdlib>
#include <cstring>
#include <new>
#include <sys/mman.h>
#include <vector>

template <class T, const char *Env> struct HugeAlloc {
    using value_type = T;
    HugeAlloc() = default;
    template <class U> HugeAlloc(const HugeAlloc<U, Env> &) {}
    template <class U> struct rebind { using other = HugeAlloc<U, Env>; };
    T *allocate(size_t n) {
        const char *e = std::getenv(Env);
        const bool huge = e && !std::strcmp(e, "1");
        const size_t a = huge ? size_t(2) << 20 : 64;
        const size_t bytes = (n * sizeof(T) + a - 1) / a * a;
        void *p = std::aligned_alloc(a, bytes);
        if (!p) throw std::bad_alloc();
        if (huge) madvise(p, bytes, MADV_HUGEPAGE);
        return static_cast<T *>(p);
    }
    void deallocate(T *p, size_t) { std::free(p); }
    bool operator==(const HugeAlloc &) const { return true; }
    bool operator!=(const HugeAlloc &) const { return false; }
};
