// Ad-hoc driver of the public C API for A/B measurements (bench/README.md, "Lab tools"); not a
// benchmark with targets.
// prefill_ab <libA.so> <libB.so> <n> <d> <causal 0/1> <reps> [bshd|layouts]: prefill, H 8, 1
// thread, the two libraries' calls alternating in one process; "bshd": both with BSHD strides;
// "layouts": A with BHSD and B with BSHD strides over the same buffers (one library may be named
// twice): the BSHD / BHSD time. PREFILL_AB_BSHD=<letters of qkvo> gives only those operands the
// BSHD strides (default: all four). PREFILL_AB_MASK=pad10 passes attn_bench's pad10_block masks
// (10 % padded keys, one 64 x 64 block in seven hidden), =ones all-true ones; with
// PREFILL_AB_MASK_B=1 only B gets them (the mask's cost, with one library named twice).
// PREFILL_AB_HUGE=1: Q, K, V and OUT on transparent huge pages (bench/page_alloc.hpp).
// PREFILL_AB_F16=1: K and V stored as f16 (attn_args_set_f16), for both libraries;
// PREFILL_AB_I8=1: as int8 with one scale per row (attn_quantize_i8; BSHD scales [n][H]).
#include <attn.h>

#include "alternate.hpp"
#include "../page_alloc.hpp"
#include <dlfcn.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include <algorithm>
int main(int argc, char **argv) {
    if (argc < 7) {
        std::fprintf(stderr, "usage: prefill_ab <libA.so> <libB.so> <n> <d> <causal 0|1> <reps> "
                             "[bshd|layouts]\n");
        return 2;
    }
    size_t n = atol(argv[3]), d = atol(argv[4]);
    int causal = atoi(argv[5]), reps = atoi(argv[6]);
    const bool layouts = argc > 7 && !std::strcmp(argv[7], "layouts");
    const bool bs[2] = {argc > 7 && !layouts, argc > 7};
    size_t H = 8;
    std::mt19937 g(1);
    std::uniform_real_distribution<float> u(-1, 1);
    attn_bench::default_pages() = attn_bench::pages_from_env("PREFILL_AB_HUGE");
    using Buf = std::vector<float, attn_bench::PageAlloc<float>>;
    Buf q(H * n * d), k(q.size()), v(q.size());
    for (auto &x : q) x = u(g);
    for (auto &x : k) x = u(g);
    for (auto &x : v) x = u(g);
    const char *mask = std::getenv("PREFILL_AB_MASK");
    if (mask && !std::strcmp(mask, "none")) mask = nullptr;
    std::vector<uint8_t> key_valid(n, 1), allowed(n * n, 1);
    if (mask && !std::strcmp(mask, "pad10"))
        for (size_t i = 0; i < n; ++i) {
            key_valid[i] = i < n - n / 10;
            for (size_t j = 0; j < n; ++j) allowed[i * n + j] = ((i / 64) + 2 * (j / 64)) % 7 != 0;
        }
    Buf out[2];
    std::vector<uint16_t> k16, v16;
    std::vector<int8_t> k8, v8;
    std::vector<float> ks, vs;
    std::vector<double> t[2];
    attn_desc *desc[2];
    attn_args *a[2];
    decltype(&attn_run) run[2];
    const int nl =
        layouts || std::getenv("PREFILL_AB_MASK_B") || std::strcmp(argv[1], argv[2]) ? 2 : 1;
    for (int l = 0; l < nl; ++l) {
        void *h = dlopen(argv[1 + l], RTLD_NOW | RTLD_LOCAL);
#define G(x) auto x = (decltype(&::x))dlsym(h, #x)
        G(attn_desc_create);
        G(attn_set_num_threads);
        G(attn_args_create);
        G(attn_args_set_f32);
        G(attn_args_set_out_f32);
        G(attn_args_set_u8);
        G(attn_desc_set_int);
        G(attn_desc_set_strides);
        G(attn_args_set_f16);
        G(attn_convert_f32_to_f16);
        G(attn_args_set_i8);
        G(attn_quantize_i8);
        run[l] = (decltype(&::attn_run))dlsym(h, "attn_run");
        attn_desc_create(&desc[l], 1, H, H, n, n, d);
        attn_desc_set_int(desc[l], ATTN_PARAM_CAUSAL, causal);
        const char *ops = std::getenv("PREFILL_AB_BSHD"); // which operands: "qkvo" (default)
        if (bs[l])
            for (attn_operand w : {ATTN_Q, ATTN_K, ATTN_V, ATTN_OUT})
                if (!ops || std::strchr(ops, "qkvo"[w == ATTN_Q   ? 0
                                                    : w == ATTN_K ? 1
                                                    : w == ATTN_V ? 2
                                                                  : 3]))
                    attn_desc_set_strides(desc[l], w, n * H * d, d, H * d);
        attn_set_num_threads(1);
        out[l].resize(q.size());
        attn_args_create(&a[l]);
        attn_args_set_f32(a[l], ATTN_Q, q.data(), q.size());
        if (std::getenv("PREFILL_AB_I8")) {
            k8.resize(k.size());
            v8.resize(v.size());
            ks.resize(H * n);
            vs.resize(H * n);
            attn_quantize_i8(k.data(), H * n, d, k8.data(), ks.data());
            attn_quantize_i8(v.data(), H * n, d, v8.data(), vs.data());
            attn_args_set_i8(a[l], ATTN_K, k8.data(), k8.size());
            attn_args_set_i8(a[l], ATTN_V, v8.data(), v8.size());
            attn_args_set_f32(a[l], ATTN_K_SCALE, ks.data(), ks.size());
            attn_args_set_f32(a[l], ATTN_V_SCALE, vs.data(), vs.size());
            if (bs[l])
                for (attn_operand w : {ATTN_K_SCALE, ATTN_V_SCALE})
                    attn_desc_set_strides(desc[l], w, n * H, 1, H);
        } else if (std::getenv("PREFILL_AB_F16")) {
            k16.resize(k.size());
            v16.resize(v.size());
            attn_convert_f32_to_f16(k.data(), k16.data(), k.size());
            attn_convert_f32_to_f16(v.data(), v16.data(), v.size());
            attn_args_set_f16(a[l], ATTN_K, k16.data(), k16.size());
            attn_args_set_f16(a[l], ATTN_V, v16.data(), v16.size());
        } else {
            attn_args_set_f32(a[l], ATTN_K, k.data(), k.size());
            attn_args_set_f32(a[l], ATTN_V, v.data(), v.size());
        }
        attn_args_set_out_f32(a[l], ATTN_OUT, out[l].data(), out[l].size());
        if (mask && (l == 1 || !std::getenv("PREFILL_AB_MASK_B"))) {
            attn_args_set_u8(a[l], ATTN_KEY_VALID, key_valid.data(), key_valid.size());
            attn_args_set_u8(a[l], ATTN_ALLOWED, allowed.data(), allowed.size());
        }
    }
    if (!alternate(reps, nl, run, desc, a, t)) return 1;
    double flops = 4.0 * H * n * n * d * (causal ? 0.5 : 1.0);
    for (int l = 0; l < nl; ++l) {
        std::sort(t[l].begin(), t[l].end());
        printf("%s: median %.2f ms  %.1f GFLOP/s\n", l ? "B" : "A", t[l][t[l].size() / 2] * 1e3,
               flops / t[l][t[l].size() / 2] * 1e-9);
    }
    if (nl == 2) printf("B/A %.3f\n", t[1][t[1].size() / 2] / t[0][t[0].size() / 2]);
}
