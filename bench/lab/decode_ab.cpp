// Ad-hoc driver of the public C API for A/B measurements (bench/README.md, "Lab tools"); not a
// benchmark with targets.
// decode_ab <libA.so> <libB.so> <libB> <type> <sk> <threads> <reps> [hq hkv]: alternates calls of
// two libattn copies in one process. DECODE_AB_PAGED=tm|hm: K/V in a pool of 16-token pages with
// shuffled ids (DECODE_AB_PAGE=n: pages of n tokens), token-major or head-major (int8: one scale
// per pool row, in the pool's order).
#include <attn.h>

#include "alternate.hpp"
#include <dlfcn.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include <numeric>
#include <algorithm>
struct Lib {
    void *h;
#define F(n) decltype(&::n) n = (decltype(&::n))dlsym(h, #n)
    Lib(const char *p) : h(dlopen(p, RTLD_NOW | RTLD_LOCAL)) {}
};
int main(int argc, char **argv) {
    if (argc < 7) {
        std::fprintf(stderr, "usage: decode_ab <libA.so> <libB.so> <f32|f16|bf16|i8> <seq_k> "
                             "<threads> <reps> [hq hkv]\n");
        return 2;
    }
    const char *ty = argv[3];
    size_t sk = atol(argv[4]);
    int th = atoi(argv[5]);
    int reps = atoi(argv[6]);
    size_t hq = argc > 7 ? atol(argv[7]) : 32, hkv = argc > 8 ? atol(argv[8]) : 8, d = 128;
    std::mt19937 g(1);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> q(hq * d), k(hkv * sk * d), v(k.size()), ks(hkv * sk), vs(hkv * sk);
    for (auto &x : q) x = u(g);
    for (auto &x : k) x = u(g);
    for (auto &x : v) x = u(g);
    const char *paged = std::getenv("DECODE_AB_PAGED");
    const size_t PS = std::getenv("DECODE_AB_PAGE") ? std::atoi(std::getenv("DECODE_AB_PAGE")) : 16;
    std::vector<int32_t> table(sk / PS), lens = {static_cast<int32_t>(sk)};
    if (paged) { // the same rows, moved into their pages
        if (sk % PS) {
            std::fprintf(stderr, "DECODE_AB_PAGED: seq_k a multiple of 16\n");
            return 2;
        }
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), std::mt19937(7));
        std::vector<float> pk(k.size()), pv(v.size());
        for (size_t h = 0; h < hkv; ++h)
            for (size_t j = 0; j < sk; ++j) {
                const size_t pg = size_t(table[j / PS]), t = j % PS, src = (h * sk + j) * d;
                const size_t dst = !std::strcmp(paged, "hm") ? ((pg * hkv + h) * PS + t) * d
                                                             : ((pg * PS + t) * hkv + h) * d;
                std::memcpy(&pk[dst], &k[src], d * 4);
                std::memcpy(&pv[dst], &v[src], d * 4);
            }
        k.swap(pk);
        v.swap(pv);
    }
    std::vector<uint16_t> k16(k.size()), v16(k.size());
    std::vector<int8_t> k8(k.size()), v8(k.size());
    size_t n = k.size();
    std::vector<double> t[2];
    std::vector<float> out[2];
    attn_desc *desc[2];
    attn_args *a[2];
    decltype(&attn_run) run[2];
    for (int l = 0; l < 2; ++l) {
        void *h = dlopen(argv[1 + l], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            printf("dlopen %s\n", dlerror());
            return 1;
        }
#define G(n) auto n = (decltype(&::n))dlsym(h, #n)
        G(attn_desc_create);
        G(attn_set_num_threads);
        G(attn_args_create);
        G(attn_args_set_f32);
        G(attn_args_set_f16);
        G(attn_args_set_bf16);
        G(attn_args_set_i8);
        G(attn_args_set_out_f32);
        G(attn_convert_f32_to_f16);
        G(attn_convert_f32_to_bf16);
        G(attn_quantize_i8);
        G(attn_desc_set_int);
        G(attn_desc_set_strides);
        G(attn_args_set_i32);
        run[l] = (decltype(&::attn_run))dlsym(h, "attn_run");
        attn_desc_create(&desc[l], 1, hq, hkv, 1, sk, d);
        attn_set_num_threads(th);
        out[l].resize(hq * d);
        attn_args_create(&a[l]);
        attn_args_set_f32(a[l], ATTN_Q, q.data(), q.size());
        if (!strcmp(ty, "f32")) {
            attn_args_set_f32(a[l], ATTN_K, k.data(), n);
            attn_args_set_f32(a[l], ATTN_V, v.data(), n);
        } else if (!strcmp(ty, "f16")) {
            attn_convert_f32_to_f16(k.data(), k16.data(), n);
            attn_convert_f32_to_f16(v.data(), v16.data(), n);
            attn_args_set_f16(a[l], ATTN_K, k16.data(), n);
            attn_args_set_f16(a[l], ATTN_V, v16.data(), n);
        } else if (!strcmp(ty, "bf16")) {
            attn_convert_f32_to_bf16(k.data(), k16.data(), n);
            attn_convert_f32_to_bf16(v.data(), v16.data(), n);
            attn_args_set_bf16(a[l], ATTN_K, k16.data(), n);
            attn_args_set_bf16(a[l], ATTN_V, v16.data(), n);
        } else {
            attn_quantize_i8(k.data(), hkv * sk, d, k8.data(), ks.data());
            attn_quantize_i8(v.data(), hkv * sk, d, v8.data(), vs.data());
            attn_args_set_i8(a[l], ATTN_K, k8.data(), n);
            attn_args_set_i8(a[l], ATTN_V, v8.data(), n);
            attn_args_set_f32(a[l], ATTN_K_SCALE, ks.data(), ks.size());
            attn_args_set_f32(a[l], ATTN_V_SCALE, vs.data(), vs.size());
        }
        attn_args_set_out_f32(a[l], ATTN_OUT, out[l].data(), out[l].size());
        if (paged) {
            attn_desc_set_int(desc[l], ATTN_PARAM_PAGE_SIZE, PS);
            attn_desc_set_int(desc[l], ATTN_PARAM_CAUSAL, ATTN_CAUSAL_BOTTOM_RIGHT);
            if (!std::strcmp(paged, "hm")) {
                attn_desc_set_strides(desc[l], ATTN_K, hkv * PS * d, PS * d, d);
                attn_desc_set_strides(desc[l], ATTN_V, hkv * PS * d, PS * d, d);
                // int8: one scale per pool row, in the pool's order
                attn_desc_set_strides(desc[l], ATTN_K_SCALE, hkv * PS, PS, 1);
                attn_desc_set_strides(desc[l], ATTN_V_SCALE, hkv * PS, PS, 1);
            }
            attn_args_set_i32(a[l], ATTN_BLOCK_TABLE, table.data(), table.size());
            attn_args_set_i32(a[l], ATTN_SEQ_LENS_K, lens.data(), lens.size());
        }
    }
    if (!alternate(reps, 2, run, desc, a, t)) return 1;
    double md = 0;
    for (size_t x = 0; x < out[0].size(); ++x)
        md = std::max(md, (double)std::fabs(out[0][x] - out[1][x]));
    for (int l = 0; l < 2; ++l) {
        std::sort(t[l].begin(), t[l].end());
        printf("%s %s: median %.3f ms min %.3f ms  %.1f ns/(key,kvhead)\n", l ? "B" : "A", ty,
               t[l][t[l].size() / 2] * 1e3, t[l][0] * 1e3,
               t[l][t[l].size() / 2] * 1e9 * th / (sk * hkv));
    }
    printf("B/A median %.3f  min %.3f  max|dA-dB| %.2e\n",
           t[1][t[1].size() / 2] / t[0][t[0].size() / 2], t[1][0] / t[0][0], md);
}
