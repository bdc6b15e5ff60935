// Ad-hoc driver of the public C API for A/B measurements (bench/README.md, "Lab tools"); not a
// benchmark with targets.
// paged_step <seq_k> <threads> <reps>: hot decode dense vs paged token-major vs head-major (page
// 16, shuffled), GQA 32/8 d128, and dense-bshd: the token-major pool read as one dense BSHD
// tensor (the same bytes in address order; its output differs when the pages are shuffled).
// PAGED_STEP_ORDER=1 keeps the page ids in order (the pool is then exactly BSHD).
// PAGED_STEP_SQ=<n>: n queries per call instead of 1 (a prefill chunk: the last n positions,
// bottom-right causal); the ns figure is then per (key, KV head) of the call, not per visible pair.
#include <attn.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include <numeric>
#include <algorithm>
#include "../page_alloc.hpp"

// PAGED_STEP_HUGE=1: K/V buffers 2 MiB-aligned and madvised for transparent huge pages.
constexpr char kHugeEnv[] = "PAGED_STEP_HUGE";
using Buf = std::vector<float, attn_bench::PageAlloc<float>>;
int main(int argc, char **argv) {
    if (argc < 4) {
        std::fprintf(
            stderr,
            "usage: paged_step <seq_k> <threads> <reps> [dense|paged-tm|paged-hm|dense-bshd]\n");
        return 2;
    }
    attn_bench::default_pages() = attn_bench::pages_from_env(kHugeEnv);
    size_t N = atol(argv[1]);
    int th = atoi(argv[2]);
    int reps = atoi(argv[3]);
    const char *only = argc > 4 ? argv[4] : nullptr;
    const size_t HQ = 32, HKV = 8, PS = 16, D = 128, pages = N / PS;
    const char *sq_env = std::getenv("PAGED_STEP_SQ");
    const size_t SQ = sq_env ? std::max(1L, atol(sq_env)) : 1;
    attn_set_num_threads(th);
    std::mt19937 g(1);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> q(HQ * SQ * D), out(HQ * SQ * D);
    Buf dk(HKV * N * D), dv(dk.size());
    for (auto &x : q) x = u(g);
    for (auto &x : dk) x = u(g);
    for (auto &x : dv) x = u(g);
    std::vector<int32_t> table(pages), lens = {int32_t(N)};
    std::iota(table.begin(), table.end(), 0);
    const char *order = std::getenv("PAGED_STEP_ORDER");
    if (!order || std::strcmp(order, "1"))
        std::shuffle(table.begin(), table.end(), std::mt19937(7));
    Buf tk(dk.size()), tv(dk.size()), hk(dk.size()), hv(dk.size());
    for (size_t h = 0; h < HKV; ++h)
        for (size_t j = 0; j < N; ++j) {
            const size_t pg = size_t(table[j / PS]), t = j % PS, src = (h * N + j) * D;
            const size_t tm = ((pg * PS + t) * HKV + h) * D, hm = ((pg * HKV + h) * PS + t) * D;
            memcpy(&tk[tm], &dk[src], D * 4);
            memcpy(&tv[tm], &dv[src], D * 4);
            memcpy(&hk[hm], &dk[src], D * 4);
            memcpy(&hv[hm], &dv[src], D * 4);
        }
    const char *names[4] = {"dense", "paged-tm", "paged-hm", "dense-bshd"};
    attn_desc *desc[4];
    attn_args *a[4];
    for (int m = 0; m < 4; ++m) {
        attn_desc_create(&desc[m], 1, HQ, HKV, SQ, N, D);
        attn_desc_set_int(desc[m], ATTN_PARAM_CAUSAL, ATTN_CAUSAL_BOTTOM_RIGHT);
        attn_args_create(&a[m]);
        attn_args_set_f32(a[m], ATTN_Q, q.data(), q.size());
        attn_args_set_out_f32(a[m], ATTN_OUT, out.data(), out.size());
        const float *K = m == 0 ? dk.data() : m == 2 ? hk.data() : tk.data();
        const float *V = m == 0 ? dv.data() : m == 2 ? hv.data() : tv.data();
        attn_args_set_f32(a[m], ATTN_K, K, dk.size());
        attn_args_set_f32(a[m], ATTN_V, V, dk.size());
        if (m == 3) {
            attn_desc_set_strides(desc[m], ATTN_K, N * HKV * D, D, HKV * D);
            attn_desc_set_strides(desc[m], ATTN_V, N * HKV * D, D, HKV * D);
        } else if (m) {
            attn_desc_set_int(desc[m], ATTN_PARAM_PAGE_SIZE, PS);
            if (m == 2) {
                attn_desc_set_strides(desc[m], ATTN_K, HKV * PS * D, PS * D, D);
                attn_desc_set_strides(desc[m], ATTN_V, HKV * PS * D, PS * D, D);
            }
            attn_args_set_i32(a[m], ATTN_BLOCK_TABLE, table.data(), table.size());
            attn_args_set_i32(a[m], ATTN_SEQ_LENS_K, lens.data(), lens.size());
        }
    }
    std::vector<double> t[4];
    for (int r = 0; r < reps; ++r)
        for (int m = 0; m < 4; ++m) {
            if (only && strcmp(only, names[m])) continue;
            auto t0 = std::chrono::steady_clock::now();
            if (attn_run(desc[m], ATTN_OP_FORWARD, a[m])) {
                printf("err %s\n", attn_last_error());
                return 1;
            }
            t[m].push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
    for (int m = 0; m < 4; ++m) {
        if (t[m].empty()) continue;
        std::sort(t[m].begin(), t[m].end());
        printf("%-9s median %.3f ms  %.1f ns/(key,kvhead)  ratio to dense %.3f\n", names[m],
               t[m][t[m].size() / 2] * 1e3, t[m][t[m].size() / 2] * 1e9 * th / (N * HKV),
               t[0].empty() ? 0 : t[0][t[0].size() / 2] / t[m][t[m].size() / 2]);
    }
}
