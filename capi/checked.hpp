// Overflow-checked size arithmetic and address ranges, for the argument checks of capi/.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attn {
namespace capi {

inline bool mul_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
inline bool add_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

// The bytes [lo, hi) of a buffer; empty ranges overlap nothing.
struct Range {
    uintptr_t lo, hi;
};
inline Range range_of(const void *p, size_t bytes) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return Range{a, a + bytes};
}
inline bool overlaps(Range a, Range b) {
    return a.lo < b.hi && b.lo < a.hi && a.lo != a.hi && b.lo != b.hi;
}

} // namespace capi
} // namespace attn
