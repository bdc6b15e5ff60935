// Ad-hoc driver of the public C API for A/B measurements (bench/README.md, "Lab tools"); not a
// benchmark with targets.
// decode_step <f32|f16|bf16|i8> <seq_k> <threads> <reps>: one decode step (GQA 32/8, d 128), hot,
// repeated; median, min and ns per (key, KV head).
#include <attn.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include <algorithm>
int main(int argc, char **argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: decode_step <f32|f16|bf16|i8> <seq_k> <threads> <reps>\n");
        return 2;
    }
    const char *ty = argv[1];
    size_t sk = atol(argv[2]);
    int th = atoi(argv[3]);
    int reps = atoi(argv[4]);
    size_t hq = 32, hkv = 8, d = 128;
    attn_desc *desc;
    attn_desc_create(&desc, 1, hq, hkv, 1, sk, d);
    attn_set_num_threads(th);
    std::mt19937 g(1);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> q(hq * d), k(hkv * sk * d), v(k.size()), out(hq * d), lse(hq), ks(hkv * sk),
        vs(hkv * sk);
    for (auto &x : q) x = u(g);
    for (auto &x : k) x = u(g);
    for (auto &x : v) x = u(g);
    std::vector<uint16_t> k16(k.size()), v16(k.size());
    std::vector<int8_t> k8(k.size()), v8(k.size());
    attn_args *a;
    attn_args_create(&a);
    attn_args_set_f32(a, ATTN_Q, q.data(), q.size());
    size_t n = k.size();
    if (!strcmp(ty, "f32")) {
        attn_args_set_f32(a, ATTN_K, k.data(), n);
        attn_args_set_f32(a, ATTN_V, v.data(), n);
    } else if (!strcmp(ty, "f16")) {
        attn_convert_f32_to_f16(k.data(), k16.data(), n);
        attn_convert_f32_to_f16(v.data(), v16.data(), n);
        attn_args_set_f16(a, ATTN_K, k16.data(), n);
        attn_args_set_f16(a, ATTN_V, v16.data(), n);
    } else if (!strcmp(ty, "bf16")) {
        attn_convert_f32_to_bf16(k.data(), k16.data(), n);
        attn_convert_f32_to_bf16(v.data(), v16.data(), n);
        attn_args_set_bf16(a, ATTN_K, k16.data(), n);
        attn_args_set_bf16(a, ATTN_V, v16.data(), n);
    } else {
        attn_quantize_i8(k.data(), hkv * sk, d, k8.data(), ks.data());
        attn_quantize_i8(v.data(), hkv * sk, d, v8.data(), vs.data());
        attn_args_set_i8(a, ATTN_K, k8.data(), n);
        attn_args_set_i8(a, ATTN_V, v8.data(), n);
        attn_args_set_f32(a, ATTN_K_SCALE, ks.data(), ks.size());
        attn_args_set_f32(a, ATTN_V_SCALE, vs.data(), vs.size());
    }
    attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size());
    attn_args_set_out_f32(a, ATTN_LSE, lse.data(), lse.size());
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        int st = attn_run(desc, ATTN_OP_FORWARD, a);
        if (st) {
            printf("err %s\n", attn_last_error());
            return 1;
        }
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    double cs = 0;
    for (auto x : out) cs += x;
    printf("%s sk %zu th %d: median %.3f ms  min %.3f ms  %.1f ns/(key,kvhead)  checksum %.6f\n",
           ty, sk, th, t[t.size() / 2] * 1e3, t[0] * 1e3, t[0] * 1e9 * th / (sk * hkv), cs);
}
