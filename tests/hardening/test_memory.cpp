// Resource limits: repeated create / configure / forward / weights / simple / destroy,
// error paths included, must not grow memory.
//   phase 1 (1 thread, deterministic): bytes in use by malloc (mallinfo2, all arenas) after a
//     second run of the same sequence equal those after the first (the per-thread scratch is warm):
//     a leak of even a few bytes per iteration shows;
//   phase 2 (thread counts changing 1..4): resident memory stays within a small bound and the
//     number of OS threads equals what the pool needs (no leaked workers).
// Under ASan the LeakSanitizer check runs in-process (__lsan_do_recoverable_leak_check) and at
// exit; valgrind runs this binary from scripts/hardening.sh.
//
//   attn_memory [iterations]   (default 1000)
#include <malloc.h>

#include <chrono>
#include <thread>

#include "hardening.hpp"

extern "C" int __lsan_do_recoverable_leak_check() __attribute__((weak));

namespace {

size_t malloc_in_use() {
    const struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

size_t rss_bytes() {
    FILE *f = std::fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    if (f) {
        if (std::fscanf(f, "%lu %lu", &size, &res) != 2) res = 0;
        std::fclose(f);
    }
    return res * hard::GuardBuf::page_size();
}

int os_threads() {
    FILE *f = std::fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "Threads: %d", &n) == 1) break;
    if (f) std::fclose(f);
    return n;
}

// One iteration: a shape from a fixed set, every API path, some failures.
void iteration(hard::Rng &rng) {
    hard::Problem p;
    static const size_t dims[][6] = {{1, 1, 1, 1, 1, 1},     {2, 4, 2, 17, 33, 19},
                                     {1, 2, 1, 64, 130, 64}, {1, 4, 1, 1, 4500, 32},
                                     {3, 1, 1, 9, 9, 67},    {1, 3, 3, 40, 20, 8}};
    const size_t *d = dims[rng.below(6)];
    p.batch = d[0], p.heads_q = d[1], p.heads_kv = d[2], p.seq_q = d[3], p.seq_k = d[4],
    p.head_dim = d[5];
    p.causal = static_cast<int>(rng.below(3));
    if (rng.chance(0.3))
        p.set_strides(3, p.heads_q * p.seq_q * (p.head_dim + 2), p.seq_q * (p.head_dim + 2),
                      p.head_dim + 2);
    p.set_default_strides();
    std::vector<float> q(p.len(0), 0.5f), k(p.len(1), -0.25f), v(p.len(2), 1.0f), out(p.len(3)),
        lse(p.lse_len()), w(p.weights_len());
    std::vector<uint8_t> kv(p.batch * p.seq_k, 1);
    kv[0] = 0;
    attn_desc *desc = p.make();
    if (!desc) return;
    HARD_CHECK(attn_forward(desc, q.data(), k.data(), v.data(),
                            reinterpret_cast<const bool *>(kv.data()), nullptr, out.data(),
                            lse.data()) == ATTN_OK,
               "forward: %s", attn_last_error());
    HARD_CHECK(attn_weights(desc, q.data(), k.data(), nullptr, nullptr, w.data()) == ATTN_OK,
               "weights: %s", attn_last_error());
    // Failures on the way: a used descriptor refuses configuration, NULL inputs, bad sizes.
    HARD_CHECK(attn_desc_set_scale(desc, 2.0f) == ATTN_ERR_INVALID_ARGUMENT, "set_scale on used");
    HARD_CHECK(attn_forward(desc, nullptr, k.data(), v.data(), nullptr, nullptr, out.data(),
                            nullptr) == ATTN_ERR_NULL_POINTER,
               "forward(q NULL)");
    attn_desc_destroy(desc);
    attn_desc *bad = nullptr;
    HARD_CHECK(attn_desc_create(&bad, 1, 6, 4, 1, 1, 1) == ATTN_ERR_INVALID_ARGUMENT && !bad,
               "create(6, 4)");
    attn_desc_destroy(nullptr);
    const size_t n = p.seq_k < 64 ? p.seq_k : 64, dd = p.head_dim;
    std::vector<float> sq(n * dd, 0.1f), so(n * dd);
    HARD_CHECK(attn_simple(sq.data(), sq.data(), sq.data(), n, dd, rng.chance(0.5), nullptr,
                           so.data()) == ATTN_OK,
               "simple: %s", attn_last_error());
}

// A call with 8 work items: it runs on the pool (resizing it) when the thread count is > 1.
// A call with enough work to use the pool (calls below ~1M multiply-adds run on the caller).
void pooled_call() {
    hard::Problem p;
    p.heads_q = p.heads_kv = 8;
    p.seq_q = p.seq_k = 64;
    p.head_dim = 64;
    p.set_default_strides();
    std::vector<float> a(p.len(0), 1.0f), o(p.len(3));
    attn_desc *d = p.make();
    HARD_CHECK(attn_forward(d, a.data(), a.data(), a.data(), nullptr, nullptr, o.data(), nullptr) ==
                   ATTN_OK,
               "pooled call: %s", attn_last_error());
    attn_desc_destroy(d);
}

// The OS thread count once it equals `want`, or after 10 s (-1: once it has not changed for 5 ms,
// 10 s at most): a joined thread can stay visible in /proc for a moment after pthread_join
// returns. The bound only ends the wait for a count that is wrong.
int settled_threads(int want) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int seen = os_threads();
    for (int same = 0;
         (want >= 0 ? seen != want : same < 5) && std::chrono::steady_clock::now() < until;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        const int now = os_threads();
        same = now == seen ? same + 1 : 0;
        seen = now;
    }
    return seen;
}

void run_sequence(uint64_t seed, size_t iterations) {
    hard::Rng rng(seed);
    for (size_t x = 0; x < iterations; ++x) iteration(rng);
}

} // namespace

int main(int argc, char **argv) {
    size_t iterations = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1000;
    // Sanitizers make thread creation and every allocation slow; the leak check there is
    // LeakSanitizer's, which needs only a few hundred iterations of every path.
    if (ATTN_HARD_SANITIZED && iterations > 200) iterations = 200;
    const bool lsan = __lsan_do_recoverable_leak_check != nullptr;
    // OS threads besides the pool's workers: main, plus any sanitizer background thread (which
    // TSan starts with the first pthread_create): measured with a 1-worker pool.
    attn_set_num_threads(2);
    pooled_call();
    const int base_threads = settled_threads(-1) - 1;

    // Phase 1: one thread, the same sequence twice; the second run must not change malloc's
    // bytes in use (first run: the thread's scratch and partial buffers reach their size).
    attn_set_num_threads(1);
    run_sequence(7, iterations);
    const size_t in_use0 = malloc_in_use();
    run_sequence(7, iterations);
    const size_t in_use1 = malloc_in_use();
    if (ATTN_HARD_SANITIZED || in_use0 == 0) {
        std::printf("memory phase 1: malloc statistics not meaningful here (sanitizer or "
                    "valgrind allocator); leak checking is left to %s\n",
                    lsan ? "LeakSanitizer" : "the tool");
    } else {
        std::printf("memory phase 1: %zu iterations twice on 1 thread: malloc bytes in use %zu "
                    "-> %zu\n",
                    iterations, in_use0, in_use1);
        HARD_CHECK(in_use1 <= in_use0, "malloc bytes in use grew by %zu over %zu iterations",
                   in_use1 - in_use0, iterations);
    }

    // Phase 2: thread counts 1..4 changing between iterations.
    hard::Rng rng(11);
    size_t rss0 = 0;
    for (int round = 0; round < 2; ++round) {
        for (size_t x = 0; x < iterations; ++x) {
            const size_t threads = rng.range(1, 4);
            attn_set_num_threads(threads);
            iteration(rng);
            if (x % 97 == 0) {
                // A pooled call leaves the pool with exactly threads - 1 workers; with 1 thread
                // the call runs inline and the pool keeps its last size.
                pooled_call();
                const int want = base_threads + static_cast<int>(threads) - 1;
                const int seen = settled_threads(threads > 1 ? want : -1);
                if (threads > 1)
                    HARD_CHECK(seen == want,
                               "%d OS threads with %zu attention threads (%d at start + %zu pool "
                               "workers expected)",
                               seen, threads, base_threads, threads - 1);
                else
                    HARD_CHECK(seen >= base_threads && seen <= base_threads + 3,
                               "%d OS threads with 1 attention thread", seen);
            }
        }
        if (round == 0) rss0 = rss_bytes();
    }
    const size_t rss1 = rss_bytes();
    std::printf("memory phase 2: 2 x %zu iterations with 1..4 threads: RSS %zu KiB -> %zu KiB, "
                "%d OS threads\n",
                iterations, rss0 >> 10, rss1 >> 10, os_threads());
    if (!ATTN_HARD_SANITIZED)
        HARD_CHECK(rss1 <= rss0 + (size_t(4) << 20), "resident memory grew by %zu KiB",
                   (rss1 - rss0) >> 10);

    attn_set_num_threads(0);
    if (lsan) {
        const int leaks = __lsan_do_recoverable_leak_check();
        std::printf("LeakSanitizer: %s\n", leaks ? "LEAKS FOUND" : "no leaks");
        HARD_CHECK(leaks == 0, "LeakSanitizer found leaks");
    }
    std::printf("memory: %d failures\n", hard::failures());
    return hard::failures() ? 1 : 0;
}
