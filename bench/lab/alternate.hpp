// Shared by the A/B drivers of bench/lab: nl (1 or 2) forward calls alternating reps times,
// each call's seconds appended to t[l]; false when a call fails.
#pragma once
#include <attn.h>

#include <chrono>
#include <cstdio>
#include <vector>

inline bool alternate(int reps, int nl, decltype(&attn_run) const *run, attn_desc *const *desc,
                      attn_args *const *a, std::vector<double> *t) {
    for (int r = 0; r < reps; ++r)
        for (int l = 0; l < nl; ++l) {
            const auto t0 = std::chrono::steady_clock::now();
            if (run[l](desc[l], ATTN_OP_FORWARD, a[l]) != ATTN_OK) {
                std::printf("library %d: attn_run failed\n", l);
                return false;
            }
            t[l].push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
    return true;
}
