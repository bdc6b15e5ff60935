// Lab measurement (bench/README.md, "Lab tools"); not a benchmark with targets. What a paged KV
// cache costs the memory system by itself, without libattn: the widest streaming read loop of
// bench/stream.hpp over 256 MiB per thread, once in address order and once in chunks of
// <chunk_bytes> visited in a shuffled order (a head-major page of 16 tokens x 128 fp32 values is
// one 8 KiB chunk; a token-major page of 16 tokens x 8 KV heads one 64 KiB chunk), and in that
// shuffled order again with the best a reader can do about it: while it reads each 1 KiB of a
// chunk, it prefetches the same 1 KiB of the chunk `ahead` places later in the order (a block
// table known in advance; ahead = 1, 2 and 4 chunks). Every pass runs after a 1 GiB eviction
// read; the orders alternate; medians over rounds.
// With "huge", the buffers are 2 MiB-aligned and madvise(MADV_HUGEPAGE)d (transparent huge
// pages: one TLB entry per 2 MiB, so a shuffled order costs no more page walks than address order).
//   chunk_read [chunk_bytes (8192)] [threads (2)] [rounds (5)] [huge]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <cstring>
#include <vector>

#include "../evict.hpp"
#include "../page_alloc.hpp"
#include "../stream.hpp"
#include "../threads.hpp"
#include "../timing.hpp"

using namespace attn_bench;

int main(int argc, char **argv) {
    const size_t chunk = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 8192;
    const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
    const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
    const size_t per_thread = size_t(256) << 20, cf = chunk / sizeof(float);
    if (chunk == 0 || cf % kStreamBlock || per_thread % chunk || threads < 1 || rounds < 1) {
        std::fprintf(stderr,
                     "usage: chunk_read [chunk_bytes: a multiple of %zu] [threads] "
                     "[rounds]\n",
                     kStreamBlock * sizeof(float));
        return 2;
    }
    const StreamLoop loop = available_stream_loops().front();
    const size_t n = per_thread / chunk;
    const bool huge = argc > 4 && !std::strcmp(argv[4], "huge");
    PageAlloc<float> alloc(huge ? Pages::huge : Pages::any);
    std::vector<float *> buf(threads);
    for (auto &b : buf) {
        b = alloc.allocate(per_thread / 4);
        std::fill(b, b + per_thread / 4, 1.0f);
    }
    std::vector<size_t> order[2];
    order[0].resize(n);
    std::iota(order[0].begin(), order[0].end(), 0);
    order[1] = order[0];
    std::shuffle(order[1].begin(), order[1].end(), std::mt19937(7));
    Evictor evict;
    const size_t kAhead[3] = {1, 2, 4};
    std::vector<double> gbs[5];
    volatile float sink = 0;
    const size_t sub = 256; // floats: 1 KiB per prefetch burst
    for (int r = 0; r < rounds; ++r)
        for (int o = 0; o < 5; ++o) {
            evict.run();
            const double s = run_together(threads, [&](int t) {
                float sum = 0;
                const std::vector<size_t> &ord = order[o == 0 ? 0 : 1];
                if (o < 2 || cf % sub) {
                    for (size_t c : ord) sum += loop.fn(buf[t] + c * cf, cf);
                } else {
                    const size_t ahead = kAhead[o - 2];
                    for (size_t x = 0; x < n; ++x) {
                        const float *cur = buf[t] + ord[x] * cf;
                        const char *next =
                            x + ahead < n
                                ? reinterpret_cast<const char *>(buf[t] + ord[x + ahead] * cf)
                                : nullptr;
                        for (size_t f = 0; f < cf; f += sub) {
                            if (next)
                                for (size_t b = 0; b < sub * sizeof(float); b += 64)
                                    __builtin_prefetch(next + f * sizeof(float) + b);
                            sum += loop.fn(cur + f, sub);
                        }
                    }
                }
                sink = sum;
            });
            gbs[o].push_back(threads * per_thread / s / 1e9);
        }
    const double seq = median(gbs[0]), shuf = median(gbs[1]);
    std::printf("chunk_read: %s loop (%s), %d thread(s), 256 MiB each%s, chunks of %zu bytes, "
                "%d rounds, evicted before each pass\n",
                loop.isa, loop.what, threads, huge ? " (transparent huge pages)" : "", chunk,
                rounds);
    std::printf("  address order  %6.2f GB/s\n  shuffled       %6.2f GB/s  (%.3f of address "
                "order)\n",
                seq, shuf, shuf / seq);
    for (int o = 2; o < 5 && cf % sub == 0; ++o)
        std::printf("  shuffled, prefetching %zu chunk(s) ahead  %6.2f GB/s  (%.3f of address "
                    "order)\n",
                    kAhead[o - 2], median(gbs[o]), median(gbs[o]) / seq);
    for (float *b : buf) alloc.deallocate(b, per_thread / 4);
}
