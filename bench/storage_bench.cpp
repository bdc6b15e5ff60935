// Storage types against fp32, ratios in one run:
//   decode  seq_q 1, 32k keys, GQA 32/8, head_dim 128: K/V in f32, f16, bf16 and int8, each call
//           after a 1 GiB eviction read (bench/evict.hpp), against the fastest streaming read
//           loop of the same run (bench/stream.hpp) on the same thread count
//   prefill n = 2048, H = 8, head_dim 128 and 64, causal and not, 1 thread: 16-bit and int8
//           K/V (widened on load, exact mode) against fp32 K/V, hot
// Every configuration runs once per round, interleaved; a figure is the median over rounds (of
// the best of --reps calls per round for prefill; one evicted call per round for decode).
//
//   storage_bench [--rounds N] [--reps N] [--threads T] [--seq-k N] [--hot] [--no-decode]
//                 [--no-prefill]
#include <attn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "evict.hpp"
#include "stream.hpp"

#include "timing.hpp"

using attn_bench::check;
using attn_bench::median;
using attn_bench::now;

namespace {

enum Store { F32 = 0, F16 = 1, BF16 = 2, I8 = 3 };
const char *const kStoreName[4] = {"f32", "f16", "bf16", "int8"};

// One K/V pair in every storage type (converted by the library's helpers), and a call of it.
struct Problem {
    size_t hq, hkv, sq, sk, d;
    int causal;
    std::vector<float> q, out, lse;
    std::vector<float> k32, v32, ks, vs;
    std::vector<uint16_t> k16, v16, kb, vb;
    std::vector<int8_t> k8, v8;
    attn_desc *desc = nullptr;

    Problem(size_t hq_, size_t hkv_, size_t sq_, size_t sk_, size_t d_, int causal_)
        : hq(hq_), hkv(hkv_), sq(sq_), sk(sk_), d(d_), causal(causal_) {
        check(attn_desc_create(&desc, 1, hq, hkv, sq, sk, d), "desc");
        check(attn_desc_set_int(desc, ATTN_PARAM_CAUSAL, causal), "causal");
        std::mt19937 g(1);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        q.resize(hq * sq * d);
        for (auto &x : q) x = u(g);
        const size_t n = hkv * sk * d, rows = hkv * sk;
        k32.resize(n);
        v32.resize(n);
        for (auto &x : k32) x = u(g);
        for (auto &x : v32) x = u(g);
        k16.resize(n), v16.resize(n), kb.resize(n), vb.resize(n), k8.resize(n), v8.resize(n);
        ks.resize(rows), vs.resize(rows);
        check(attn_convert_f32_to_f16(k32.data(), k16.data(), n), "f16");
        check(attn_convert_f32_to_f16(v32.data(), v16.data(), n), "f16");
        check(attn_convert_f32_to_bf16(k32.data(), kb.data(), n), "bf16");
        check(attn_convert_f32_to_bf16(v32.data(), vb.data(), n), "bf16");
        check(attn_quantize_i8(k32.data(), rows, d, k8.data(), ks.data()), "i8");
        check(attn_quantize_i8(v32.data(), rows, d, v8.data(), vs.data()), "i8");
        out.resize(hq * sq * d);
        lse.resize(hq * sq);
    }
    ~Problem() { attn_desc_destroy(desc); }

    // Bytes of K and V (and int8 scales) a call reads.
    double kv_bytes(int s) const {
        const double n = 2.0 * static_cast<double>(hkv * sk * d);
        return s == F32 ? 4 * n : s == I8 ? n + 2.0 * 4 * static_cast<double>(hkv * sk) : 2 * n;
    }

    void run(int s) {
        attn_args *a = nullptr;
        check(attn_args_create(&a), "args");
        const size_t n = k32.size();
        check(attn_args_set_f32(a, ATTN_Q, q.data(), q.size()), "q");
        switch (s) {
        case F32:
            check(attn_args_set_f32(a, ATTN_K, k32.data(), n), "k");
            check(attn_args_set_f32(a, ATTN_V, v32.data(), n), "v");
            break;
        case F16:
            check(attn_args_set_f16(a, ATTN_K, k16.data(), n), "k");
            check(attn_args_set_f16(a, ATTN_V, v16.data(), n), "v");
            break;
        case BF16:
            check(attn_args_set_bf16(a, ATTN_K, kb.data(), n), "k");
            check(attn_args_set_bf16(a, ATTN_V, vb.data(), n), "v");
            break;
        default:
            check(attn_args_set_i8(a, ATTN_K, k8.data(), n), "k");
            check(attn_args_set_i8(a, ATTN_V, v8.data(), n), "v");
            check(attn_args_set_f32(a, ATTN_K_SCALE, ks.data(), ks.size()), "k_scale");
            check(attn_args_set_f32(a, ATTN_V_SCALE, vs.data(), vs.size()), "v_scale");
        }
        check(attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size()), "out");
        check(attn_args_set_out_f32(a, ATTN_LSE, lse.data(), lse.size()), "lse");
        check(attn_run(desc, ATTN_OP_FORWARD, a), "run");
        attn_args_destroy(a);
    }
};

} // namespace

int main(int argc, char **argv) {
    int rounds = 9, reps = 3, threads = 2;
    size_t seq_k = 32768;
    bool decode = true, prefill = true, hot = false;
    for (int x = 1; x < argc; ++x) {
        if (!std::strcmp(argv[x], "--rounds") && x + 1 < argc)
            rounds = std::atoi(argv[++x]);
        else if (!std::strcmp(argv[x], "--reps") && x + 1 < argc)
            reps = std::atoi(argv[++x]);
        else if (!std::strcmp(argv[x], "--threads") && x + 1 < argc)
            threads = std::atoi(argv[++x]);
        else if (!std::strcmp(argv[x], "--seq-k") && x + 1 < argc)
            seq_k = std::strtoull(argv[++x], nullptr, 10);
        else if (!std::strcmp(argv[x], "--hot"))
            hot = true;
        else if (!std::strcmp(argv[x], "--no-decode"))
            decode = false;
        else if (!std::strcmp(argv[x], "--no-prefill"))
            prefill = false;
        else {
            std::fprintf(stderr,
                         "usage: %s [--rounds N] [--reps N] [--threads T] [--seq-k N] [--hot] "
                         "[--no-decode] [--no-prefill]\n",
                         argv[0]);
            return 2;
        }
    }
    std::printf("storage_bench: libattn %s, isa %s, rounds %d\n", attn_version_string(), attn_isa(),
                rounds);
    if (decode) {
        attn_bench::Evictor ev;
        // the read-bandwidth reference of this run: the fastest loop on the same thread count
        double stream = 0.0;
        const char *best = "";
        for (const auto &loop : attn_bench::available_stream_loops()) {
            const double gbs =
                attn_bench::stream_read_gbs(loop, ev.data(), ev.bytes() / 4, threads, 3);
            std::printf("  read loop %-6s %-24s threads=%d  %6.2f GB/s\n", loop.isa, loop.what,
                        threads, gbs);
            if (gbs > stream) stream = gbs, best = loop.isa;
        }
        check(attn_set_num_threads(static_cast<size_t>(threads)), "threads");
        Problem p(32, 8, 1, seq_k, 128, ATTN_CAUSAL_BOTTOM_RIGHT);
        std::vector<double> t[4];
        for (int s = 0; s < 4; ++s) p.run(s); // warm-up (page faults, pool)
        for (int r = 0; r < rounds; ++r)
            for (int s = 0; s < 4; ++s) {
                if (!hot) ev.run();
                const double t0 = now();
                p.run(s);
                t[s].push_back(now() - t0);
            }
        std::printf("decode: seq_q 1, seq_k %zu, GQA 32/8, d 128, %d threads, %s; stream %.2f "
                    "GB/s (%s loop)\n",
                    seq_k, threads,
                    hot ? "hot (K/V stay where the previous call left them)"
                        : "K/V evicted by a 1 GiB read before each call",
                    stream, best);
        const double f32 = median(t[F32]);
        for (int s = 0; s < 4; ++s) {
            const double m = median(t[s]), gbs = p.kv_bytes(s) / m / 1e9;
            std::printf("  %-5s %8.3f ms  %6.2f GB/s  %.3f of stream  time %.3f x f32\n",
                        kStoreName[s], m * 1e3, gbs, gbs / stream, m / f32);
        }
    }
    if (prefill) {
        check(attn_set_num_threads(1), "threads");
        std::printf("prefill: B 1, H 8, n 2048, 1 thread, hot; f32 time / stored time (>= 0.95 "
                    "means the widening is hidden)\n");
        for (size_t d : {128, 64})
            for (int causal : {0, 1}) {
                Problem p(8, 8, 2048, 2048, d, causal);
                std::vector<double> t[4];
                for (int s = 0; s < 4; ++s) p.run(s);
                for (int r = 0; r < rounds; ++r)
                    for (int s = 0; s < 4; ++s) {
                        double best = 1e30;
                        for (int x = 0; x < reps; ++x) {
                            const double t0 = now();
                            p.run(s);
                            best = std::min(best, now() - t0);
                        }
                        t[s].push_back(best);
                    }
                const double f32 = median(t[F32]);
                const double flops = 4.0 * 8 * d * 2048.0 * (causal ? 2049.0 / 2 : 2048.0);
                std::printf("  d %3zu %-10s f32 %7.2f ms (%6.1f GFLOP/s)", d,
                            causal ? "causal" : "non-causal", f32 * 1e3, flops / f32 / 1e9);
                for (int s = 1; s < 4; ++s)
                    std::printf("  %s %.3f", kStoreName[s], f32 / median(t[s]));
                std::printf("\n");
            }
    }
    return 0;
}
