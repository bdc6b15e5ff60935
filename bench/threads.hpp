// Starting threads together, for the loops that are timed on 1 and 2 threads at once (the read
// loops of stream.cpp, attn_bench's FMA peaks). Baseline flags only: it names no vector type.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace attn_bench {

// Runs body(t) for t = 0 .. threads-1, each on its own thread. The threads start, wait for a
// common start signal, then run; returns the seconds from the signal to the last join (thread
// creation is not timed).
template <class F> double run_together(int threads, F &&body) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            ready.fetch_add(1);
            while (!go.load(std::memory_order_acquire)) {
            }
            body(t);
        });
    while (ready.load() < threads) {
    }
    const auto t0 = std::chrono::steady_clock::now();
    go.store(true, std::memory_order_release);
    for (auto &th : pool) th.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace attn_bench
