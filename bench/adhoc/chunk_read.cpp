// Ad-hoc measurement quoted in bench/README.md; not a benchmark with targets. What a paged KV
// cache costs the memory system by itself, without libattn: the widest streaming read loop of
// bench/stream.hpp over 256 MiB per thread, once in address order and once in chunks of
// <chunk_bytes> visited in a shuffled order (a head-major page of 16 tokens x 128 fp32 values is
// one 8 KiB chunk; a token-major page of 16 tokens x 8 KV heads one 64 KiB chunk). Every pass
// runs after a 1 GiB eviction read; the two orders alternate; medians over rounds.
//   chunk_read [chunk_bytes (8192)] [threads (2)] [rounds (5)]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "../evict.hpp"
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
    std::vector<std::vector<float>> buf(threads, std::vector<float>(per_thread / 4, 1.0f));
    std::vector<size_t> order[2];
    order[0].resize(n);
    std::iota(order[0].begin(), order[0].end(), 0);
    order[1] = order[0];
    std::shuffle(order[1].begin(), order[1].end(), std::mt19937(7));
    Evictor evict;
    std::vector<double> gbs[2];
    volatile float sink = 0;
    for (int r = 0; r < rounds; ++r)
        for (int o = 0; o < 2; ++o) {
            evict.run();
            const double s = run_together(threads, [&](int t) {
                float sum = 0;
                for (size_t c : order[o]) sum += loop.fn(buf[t].data() + c * cf, cf);
                sink = sum;
            });
            gbs[o].push_back(threads * per_thread / s / 1e9);
        }
    const double seq = median(gbs[0]), shuf = median(gbs[1]);
    std::printf("chunk_read: %s loop (%s), %d thread(s), 256 MiB each, chunks of %zu bytes, "
                "%d rounds, evicted before each pass\n",
                loop.isa, loop.what, threads, chunk, rounds);
    std::printf("  address order  %6.2f GB/s\n  shuffled       %6.2f GB/s  (%.3f of address "
                "order)\n",
                seq, shuf, shuf / seq);
}
