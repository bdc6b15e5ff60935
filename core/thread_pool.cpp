#include "thread_pool.hpp"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace attn {
namespace core {
namespace {

size_t default_threads() {
    if (const char *env = std::getenv("ATTN_NUM_THREADS")) {
        char *end = nullptr;
        const unsigned long v = std::strtoul(env, &end, 10);
        if (end != env && *end == '\0' && v >= 1 && v <= 256) return v;
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw ? hw : 1;
}

struct Pool {
    std::mutex run_mutex; // one pool job at a time; others run inline
    std::mutex m;
    std::condition_variable cv_work, cv_done;
    std::vector<std::thread> workers;
    // Current job (valid while busy_workers > 0 or the caller is inside pool_run).
    const std::function<void(size_t)> *body = nullptr;
    size_t items = 0;
    std::atomic<size_t> next{0};
    std::exception_ptr error;
    std::atomic<bool> failed{false};
    size_t generation = 0;
    size_t wanted = 0; // workers taking part in the current job
    size_t active = 0; // workers still inside the current job
    bool stop = false;

    void drain() {
        for (;;) {
            const size_t it = next.fetch_add(1, std::memory_order_relaxed);
            if (it >= items) return;
            if (failed.load(std::memory_order_relaxed)) continue;
            try {
                (*body)(it);
            } catch (...) {
                std::lock_guard<std::mutex> g(m);
                if (!error) error = std::current_exception();
                failed = true;
            }
        }
    }

    void worker_main(size_t index, size_t seen) {
        for (;;) {
            {
                std::unique_lock<std::mutex> lk(m);
                cv_work.wait(lk, [&] { return stop || (generation != seen && index < wanted); });
                if (stop) return;
                seen = generation;
            }
            drain();
            std::lock_guard<std::mutex> g(m);
            if (--active == 0) cv_done.notify_one();
        }
    }

    void resize(size_t n_workers) { // called with run_mutex held and no job running
        if (n_workers == workers.size()) return;
        {
            std::lock_guard<std::mutex> g(m);
            stop = true;
        }
        cv_work.notify_all();
        for (auto &t : workers) t.join();
        workers.clear();
        stop = false;
        workers.reserve(n_workers);
        const size_t gen = generation;
        for (size_t x = 0; x < n_workers; ++x)
            workers.emplace_back([this, x, gen] { worker_main(x, gen); });
    }

    ~Pool() {
        {
            std::lock_guard<std::mutex> g(m);
            stop = true;
        }
        cv_work.notify_all();
        for (auto &t : workers)
            if (t.joinable()) t.join();
    }
};

std::atomic<size_t> g_wanted{0}; // 0 = default
Pool *g_pool = nullptr;
std::mutex g_pool_mutex;
std::once_flag g_atfork_once;

// After fork() only the forking thread exists in the child: abandon the parent's pool (its
// mutexes may be held by threads that no longer exist) and build a new one on first use.
void atfork_child() {
    g_pool = nullptr;
    new (&g_pool_mutex) std::mutex();
}

Pool &pool() {
    std::call_once(g_atfork_once, [] { pthread_atfork(nullptr, nullptr, &atfork_child); });
    std::lock_guard<std::mutex> g(g_pool_mutex);
    if (!g_pool) g_pool = new Pool(); // never destroyed: safe at exit with detached callers
    return *g_pool;
}

} // namespace

void pool_set_threads(size_t n) {
    g_wanted.store(n);
}

size_t pool_threads() {
    const size_t n = g_wanted.load();
    return n ? n : default_threads();
}

void pool_run(size_t items, const std::function<void(size_t)> &body) {
    const size_t threads = pool_threads();
    if (items == 0) return;
    if (items == 1 || threads <= 1) {
        for (size_t it = 0; it < items; ++it) body(it);
        return;
    }
    Pool &p = pool();
    std::unique_lock<std::mutex> run(p.run_mutex, std::try_to_lock);
    if (!run.owns_lock()) { // the pool serves another call: compute on this thread
        for (size_t it = 0; it < items; ++it) body(it);
        return;
    }
    const size_t n_workers = threads - 1;
    p.resize(n_workers);
    const size_t helpers = std::min(n_workers, items - 1);
    {
        std::lock_guard<std::mutex> g(p.m);
        p.body = &body;
        p.items = items;
        p.next.store(0);
        p.error = nullptr;
        p.failed = false;
        p.wanted = helpers;
        p.active = helpers;
        ++p.generation;
    }
    p.cv_work.notify_all();
    p.drain();
    std::exception_ptr err;
    {
        std::unique_lock<std::mutex> lk(p.m);
        p.cv_done.wait(lk, [&] { return p.active == 0; });
        p.body = nullptr;
        err = p.error;
        p.error = nullptr;
    }
    if (err) std::rethrow_exception(err);
}

} // namespace core
} // namespace attn
