// The benches' large buffers in a chosen kind of memory: no advice, 4 KiB pages, or transparent
// huge pages (2 MiB pages where the kernel's setting is `madvise` or `always`), advised before
// anything touches them. A PageAlloc is a std::vector allocator; a default-constructed one takes
// default_pages(), which a program sets once at its start (a switch or an environment variable).
#pragma once
#include <cstdlib>
#include <cstring>
#include <new>
#include <sys/mman.h>
#include <type_traits>

namespace attn_bench {

enum class Pages {
    any,   // 64-byte aligned, no advice
    small, // 4 KiB-aligned, MADV_NOHUGEPAGE (4 KiB pages even where the setting is `always`)
    huge,  // 2 MiB-aligned, MADV_HUGEPAGE
};

inline Pages &default_pages() {
    static Pages p = Pages::any;
    return p;
}

// Pages::huge when the environment variable `env` is "1", else Pages::any.
inline Pages pages_from_env(const char *env) {
    const char *e = std::getenv(env);
    return e && !std::strcmp(e, "1") ? Pages::huge : Pages::any;
}

template <class T> struct PageAlloc {
    using value_type = T;
    using propagate_on_container_copy_assignment = std::true_type;
    using propagate_on_container_move_assignment = std::true_type;
    using propagate_on_container_swap = std::true_type;
    Pages pages = default_pages();
    PageAlloc() = default;
    explicit PageAlloc(Pages p) : pages(p) {}
    template <class U> PageAlloc(const PageAlloc<U> &o) : pages(o.pages) {}
    T *allocate(size_t n) {
        const size_t align = pages == Pages::huge    ? size_t(2) << 20
                             : pages == Pages::small ? 4096
                                                     : 64;
        const size_t bytes = (n * sizeof(T) + align - 1) / align * align;
        void *p = std::aligned_alloc(align, bytes ? bytes : align);
        if (!p) throw std::bad_alloc();
        if (pages != Pages::any)
            madvise(p, bytes, pages == Pages::huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        return static_cast<T *>(p);
    }
    void deallocate(T *p, size_t) { std::free(p); }
    template <class U> bool operator==(const PageAlloc<U> &o) const { return pages == o.pages; }
    template <class U> bool operator!=(const PageAlloc<U> &o) const { return pages != o.pages; }
};

} // namespace attn_bench
