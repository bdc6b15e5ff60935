// The thread pool (see thread_pool.hpp): sleeping workers, the caller taking items as they come,
// fork() handling, and threads that cannot start never failing a call.
#include "thread_pool.hpp"

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace attn {
namespace core {
namespace {

// ATTN_NUM_THREADS: a whole number 1..256. Anything else is ignored with a one-time warning on
// stderr (the same rule as ATTN_ISA), and the hardware thread count is used.
size_t env_threads() {
    static const size_t n = [] {
        const char *env = std::getenv("ATTN_NUM_THREADS");
        if (!env || !*env) return size_t(0);
        char *end = nullptr;
        errno = 0;
        const unsigned long v = std::strtoul(env, &end, 10);
        if (errno == 0 && end != env && *end == '\0' && env[0] != '-' && v >= 1 && v <= 256)
            return static_cast<size_t>(v);
        std::fprintf(stderr,
                     "libattn: ignoring ATTN_NUM_THREADS=\"%.64s\": not a whole number 1..256\n",
                     env);
        return size_t(0);
    }();
    return n;
}

size_t default_threads() {
    if (const size_t n = env_threads()) return n;
    const unsigned hw = std::thread::hardware_concurrency();
    return hw ? hw : 1;
}

static inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
}

// How long a worker polls for the next job after finishing one before it sleeps, and the caller
// for the workers still finishing their last item before it waits to be woken.
constexpr std::chrono::microseconds kSpin(200);

// Polls busy() until it is false or kSpin has passed.
template <class Busy> static void spin_while(Busy busy) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (busy() && std::chrono::steady_clock::now() < until) cpu_relax();
}

struct Pool {
    std::mutex run_mutex; // one pool job at a time; others run inline
    std::mutex m;
    std::condition_variable cv_work, cv_done;
    std::vector<pthread_t> workers;
    // Current job (valid while busy_workers > 0 or the caller is inside pool_run).
    const std::function<void(size_t)> *body = nullptr;
    size_t items = 0;
    std::atomic<size_t> next{0};
    std::exception_ptr error;
    std::atomic<bool> failed{false};
    // Changed under m (a job, a stop); read without it by the workers spinning between jobs.
    std::atomic<size_t> generation{0};
    size_t sleeping = 0; // workers blocked on cv_work
    size_t wanted = 0;   // workers asked to help with the current job
    // Workers that joined it and are still inside it: changed under m, read without it by the
    // caller spinning for them.
    std::atomic<size_t> active{0};
    bool open = false; // a worker waking now may still join the current job
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
            // Spin a little for the next job before sleeping: back-to-back calls (a model's
            // layers) then start without a wake-up, which costs tens of microseconds on a
            // virtual machine.
            spin_while([&] { return generation.load(std::memory_order_acquire) == seen; });
            {
                std::unique_lock<std::mutex> lk(m);
                ++sleeping;
                cv_work.wait(lk, [&] { return stop || (generation != seen && index < wanted); });
                --sleeping;
                if (stop) return;
                seen = generation;
                // Woken after the caller has claimed every item: nothing to join (the caller
                // does not wait for a worker that was slow to wake).
                if (!open) continue;
                ++active;
            }
            drain();
            std::lock_guard<std::mutex> g(m);
            if (--active == 0) cv_done.notify_one();
        }
    }

    // A worker count that could not be started (threads or address space exhausted), and when:
    // calls run on the caller alone until the count changes or a second has passed.
    size_t failed_target = 0;
    std::chrono::steady_clock::time_point failed_at;

    void join_all() {
        {
            std::lock_guard<std::mutex> g(m);
            stop = true;
            ++generation; // spinning workers stop spinning and see it
        }
        cv_work.notify_all();
        for (pthread_t t : workers) pthread_join(t, nullptr);
        workers.clear();
        stop = false;
    }

    struct Start {
        Pool *pool;
        size_t index, generation;
    };
    static void *trampoline(void *arg) {
        const Start st = *static_cast<Start *>(arg);
        delete static_cast<Start *>(arg);
        st.pool->worker_main(st.index, st.generation);
        return nullptr;
    }
    // Workers run only kernels (their buffers are on the heap): 1 MiB stacks instead of the
    // default 8 MiB keep a pool's address space small.
    void start_worker(size_t index, size_t gen) {
        start_allowed(index);
        pthread_attr_t attr;
        if (pthread_attr_init(&attr) != 0) throw std::bad_alloc();
        pthread_attr_setstacksize(&attr, size_t(1) << 20);
        Start *st = new Start{this, index, gen};
        pthread_t t;
        const int rc = pthread_create(&t, &attr, &trampoline, st);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            delete st;
            throw std::system_error(rc, std::generic_category(), "pthread_create");
        }
        workers.push_back(t);
#if defined(__linux__)
        // Named here by the creator, not by the worker when it first runs: once resize() returns,
        // every worker of the pool carries its name (seen in top, gdb, /proc/*/task), also the
        // ones the scheduler has not run yet.
        pthread_setname_np(t, "attn-worker");
#endif
    }

    // Makes the pool hold n_workers workers (called with run_mutex held, no job running).
    // Returns false when they could not all be started: then no worker is kept (a partial pool
    // would hold the address space of its stacks while the process is short of it) and the
    // caller computes alone; the result is the same, since it never depends on the thread count.
    bool resize(size_t n_workers) {
        if (n_workers == workers.size()) return true;
        const auto now = std::chrono::steady_clock::now();
        if (n_workers == failed_target && now - failed_at < std::chrono::seconds(1)) return false;
        join_all();
        try {
            workers.reserve(n_workers);
            const size_t gen = generation;
            for (size_t x = 0; x < n_workers; ++x) start_worker(x, gen);
        } catch (const std::exception &) { // std::system_error (EAGAIN), std::bad_alloc
            join_all();
            failed_target = n_workers;
            failed_at = now;
            return false;
        }
        failed_target = 0;
        return true;
    }

    // Fault injection for the sanitizer and fuzz builds (whose allocators ignore RLIMIT_AS):
    // ATTN_FAULT_THREAD_LIMIT=n makes the start of worker n and later ones fail like EAGAIN.
    static void start_allowed(size_t index) {
#ifdef ATTN_FAULT_INJECTION
        if (const char *env = std::getenv("ATTN_FAULT_THREAD_LIMIT"))
            if (index >= std::strtoul(env, nullptr, 10))
                throw std::system_error(EAGAIN, std::generic_category(), "injected");
#else
        (void)index;
#endif
    }

    ~Pool() {
        {
            std::lock_guard<std::mutex> g(m);
            stop = true;
            ++generation; // spinning workers stop spinning and see it
        }
        cv_work.notify_all();
        for (pthread_t t : workers) pthread_join(t, nullptr);
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
    if (!p.resize(n_workers)) { // no threads to be had now: compute on this thread
        for (size_t it = 0; it < items; ++it) body(it);
        return;
    }
    const size_t helpers = std::min(n_workers, items - 1);
    bool wake = false;
    {
        std::lock_guard<std::mutex> g(p.m);
        p.body = &body;
        p.items = items;
        p.next.store(0);
        p.error = nullptr;
        p.failed = false;
        p.wanted = helpers;
        p.active = 0;
        p.open = true;
        ++p.generation;
        wake = p.sleeping > 0;
    }
    if (wake) p.cv_work.notify_all();
    p.drain();
    std::exception_ptr err;
    {
        std::lock_guard<std::mutex> g(p.m);
        p.open = false; // every item is claimed: workers not yet awake stay out
    }
    // The ones inside finish their last item, typically within microseconds: spin for them
    // rather than sleep, since being woken by their notify costs tens of microseconds on a
    // virtual machine (2 threads were 1.15-1.19x slower than 1 on a 50 us call, measured).
    spin_while([&] { return p.active.load(std::memory_order_acquire) != 0; });
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
