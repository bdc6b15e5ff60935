// Helpers shared by the small benches (storage, serving, variants, backward, compute): a
// monotonic clock in seconds, the median of a sample, and exit-on-error for a library call.
#pragma once

#include <attn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace attn_bench {

inline double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Exits with the status and the library's message when st is not ATTN_OK.
inline void check(attn_status st, const char *what) {
    if (st != ATTN_OK) {
        std::fprintf(stderr, "%s: %s (%s)\n", what, attn_status_string(st), attn_last_error());
        std::exit(1);
    }
}

} // namespace attn_bench
