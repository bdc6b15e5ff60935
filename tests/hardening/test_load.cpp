// Load test: 8 threads x 1000 random calls on SHARED descriptors. Every result is
// checked against the float64 reference AND bit-for-bit against the single-threaded result
// computed before the threads started (results must not depend on the thread count, which a
// ninth thread keeps changing with attn_set_num_threads). Between calls each thread provokes
// failures whose messages carry numbers unique to the thread and the iteration, and checks that
// attn_last_error() returns exactly its own message, also after later successful calls.
// Also: configuring a shared, already-used descriptor is refused while others compute.
//
//   attn_load [threads] [calls per thread]      (defaults 8 and 1000; ATTN_LOAD_CALLS overrides)
#include <atomic>
#include <chrono>
#include <thread>

#include "hardening.hpp"

using hard::Problem;

namespace {

struct Shared {
    Problem p;
    attn_desc *desc = nullptr;
    bool key_valid = false, allowed = false;
    struct Set {
        std::vector<float> q, k, v;
        std::vector<uint8_t> kv, al;
        ref::VResult r64;
        std::vector<float> out, lse, w; // golden library results (1 thread)
    } sets[2];
};

std::vector<Shared> g_shared;
std::atomic<bool> g_stop{false};
std::atomic<long> g_failures{0}, g_calls{0}, g_errors_checked{0}, g_thread_changes{0};

void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void report(const char *fmt, ...) {
    if (g_failures.fetch_add(1) >= 20) return;
    va_list ap;
    va_start(ap, fmt);
    char buf[1024];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "FAIL: %s\n", buf);
}

Problem make_problem(int which) {
    Problem p;
    switch (which) {
    case 0: // GQA, top-left causal, padding
        p.batch = 2, p.heads_q = 4, p.heads_kv = 2, p.seq_q = 33, p.seq_k = 47, p.head_dim = 19;
        p.causal = ATTN_CAUSAL_TOP_LEFT;
        break;
    case 1: // bottom-right, allowed mask, custom scale
        p.batch = 1, p.heads_q = 2, p.heads_kv = 1, p.seq_q = 17, p.seq_k = 65, p.head_dim = 64;
        p.causal = ATTN_CAUSAL_BOTTOM_RIGHT;
        p.has_scale = true;
        p.scale = 0.3f;
        break;
    case 2: // BSHD strides for everything
        p.batch = 2, p.heads_q = 3, p.heads_kv = 3, p.seq_q = 24, p.seq_k = 24, p.head_dim = 8;
        for (int w = 0; w < 4; ++w) {
            const size_t H = p.heads(w), S = p.seq(w), D = p.head_dim;
            p.set_strides(w, S * H * D, D, H * D);
        }
        break;
    case 3: // decode: one row block, 4500 keys -> key split + merge (thread-local partials)
        p.batch = 1, p.heads_q = 4, p.heads_kv = 1, p.seq_q = 1, p.seq_k = 4500, p.head_dim = 32;
        p.causal = ATTN_CAUSAL_BOTTOM_RIGHT;
        break;
    case 4: // OUT with gaps, tile boundaries
        p.batch = 1, p.heads_q = 1, p.heads_kv = 1, p.seq_q = 5, p.seq_k = 130, p.head_dim = 67;
        p.set_strides(3, 5 * 70, 5 * 70, 70);
        break;
    default: // tiny
        p.batch = 3, p.heads_q = 1, p.heads_kv = 1, p.seq_q = 1, p.seq_k = 1, p.head_dim = 3;
        break;
    }
    p.set_default_strides();
    return p;
}

void setup() {
    attn_set_num_threads(1);
    for (int x = 0; x < 6; ++x) {
        Shared s;
        s.p = make_problem(x);
        s.key_valid = x == 0 || x == 3 || x == 5;
        s.allowed = x == 1 || x == 4;
        s.desc = s.p.make();
        if (!s.desc) std::exit(1);
        hard::Rng rng(1000 + x);
        for (auto &set : s.sets) {
            const Problem &p = s.p;
            set.q.resize(p.len(0));
            set.k.resize(p.len(1));
            set.v.resize(p.len(2));
            for (float &f : set.q) f = rng.value(-2, 2);
            for (float &f : set.k) f = rng.value(-2, 2);
            for (float &f : set.v) f = rng.value(-1, 1);
            if (s.key_valid) {
                set.kv.resize(p.batch * p.seq_k);
                for (auto &b : set.kv) b = rng.chance(0.8);
                if (x == 5) set.kv[1] = 0; // batch 1 fully padded
            }
            if (s.allowed) {
                set.al.resize(p.seq_q * p.seq_k);
                for (auto &b : set.al) b = rng.chance(0.7);
                for (size_t j = 0; j < p.seq_k; ++j) set.al[2 * p.seq_k + j] = 0; // dead row
            }
            const uint8_t *kv = s.key_valid ? set.kv.data() : nullptr;
            const uint8_t *al = s.allowed ? set.al.data() : nullptr;
            set.r64 = ref::compute(p, set.q.data(), set.k.data(), set.v.data(), kv, al);
            set.out.assign(p.len(3), 0.0f);
            set.lse.assign(p.lse_len(), 0.0f);
            set.w.assign(p.weights_len(), 0.0f);
            const attn_status a =
                attn_forward(s.desc, set.q.data(), set.k.data(), set.v.data(),
                             reinterpret_cast<const bool *>(kv), reinterpret_cast<const bool *>(al),
                             set.out.data(), set.lse.data());
            const attn_status b =
                attn_weights(s.desc, set.q.data(), set.k.data(), reinterpret_cast<const bool *>(kv),
                             reinterpret_cast<const bool *>(al), set.w.data());
            if (a != ATTN_OK || b != ATTN_OK) {
                std::fprintf(stderr, "setup: %s\n", attn_last_error());
                std::exit(1);
            }
            if (hard::compare(p, set.r64, set.out.data(), set.lse.data(), set.w.data(), 1e-5,
                              "single-threaded golden result")) {
                std::fprintf(stderr, "setup: golden result does not match the reference\n");
                std::exit(1);
            }
        }
        g_shared.push_back(std::move(s));
    }
}

// A failure whose message is unique to (thread, iteration); returns the expected message.
std::string provoke(int tid, int it, hard::Rng &rng) {
    char want[256];
    switch (rng.below(3)) {
    case 0: {
        const size_t hq = 10007 + static_cast<size_t>(tid) * 100000 + static_cast<size_t>(it);
        attn_desc *d = reinterpret_cast<attn_desc *>(&want); // must be overwritten with NULL
        const attn_status s = attn_desc_create(&d, 1, hq, hq + 1, 1, 1, 1);
        if (s != ATTN_ERR_INVALID_ARGUMENT || d != nullptr)
            report("thread %d: attn_desc_create(heads_q %zu, heads_kv %zu) = %d, desc %p", tid, hq,
                   hq + 1, s, static_cast<void *>(d));
        std::snprintf(want, sizeof want,
                      "attn_desc_create: heads_q (%zu) is not a multiple of heads_kv (%zu)", hq,
                      hq + 1);
        break;
    }
    case 1: {
        const size_t n = 300 + static_cast<size_t>(tid) * 100000 + static_cast<size_t>(it);
        const attn_status s = attn_set_num_threads(n); // refused: > 256, count unchanged
        if (s != ATTN_ERR_INVALID_ARGUMENT)
            report("thread %d: attn_set_num_threads(%zu) = %d", tid, n, s);
        std::snprintf(want, sizeof want, "attn_set_num_threads: n (%zu) exceeds the limit 256", n);
        break;
    }
    default: {
        // Configuring a shared descriptor that is in use elsewhere: refused, nothing changes.
        Shared &sh = g_shared[rng.below(g_shared.size())];
        const attn_status s = attn_desc_set_causal(sh.desc, ATTN_CAUSAL_NONE);
        if (s != ATTN_ERR_INVALID_ARGUMENT)
            report("thread %d: attn_desc_set_causal on a used shared desc = %d", tid, s);
        // Then a thread-unique one on top, so the check below still tells threads apart.
        const size_t sd = 3 + static_cast<size_t>(tid) * 100000 + static_cast<size_t>(it);
        attn_desc *d = nullptr;
        attn_desc_create(&d, 1, 1, 1, 1, 1, 0x80000000u + sd);
        std::snprintf(want, sizeof want, "attn_desc_create: head_dim (%zu) exceeds the limit %zu",
                      static_cast<size_t>(0x80000000u) + sd, static_cast<size_t>(0x7fffffff));
        break;
    }
    }
    if (std::strcmp(attn_last_error(), want) != 0)
        report("thread %d it %d: attn_last_error() = \"%s\", expected its own \"%s\"", tid, it,
               attn_last_error(), want);
    return want;
}

void worker(int tid, int calls) {
    hard::Rng rng(0xC0FFEEu + static_cast<uint64_t>(tid));
    std::vector<float> out, lse, w;
    std::string expected_error;
    for (int it = 0; it < calls; ++it) {
        if (rng.chance(0.25)) expected_error = provoke(tid, it, rng);
        Shared &sh = g_shared[rng.below(g_shared.size())];
        const Shared::Set &set = sh.sets[rng.below(2)];
        const Problem &p = sh.p;
        const bool *kv = sh.key_valid ? reinterpret_cast<const bool *>(set.kv.data()) : nullptr;
        const bool *al = sh.allowed ? reinterpret_cast<const bool *>(set.al.data()) : nullptr;
        const int op = static_cast<int>(rng.below(3));
        attn_status s;
        if (op < 2) {
            out.assign(p.len(3), 0.0f);
            lse.assign(p.lse_len(), 0.0f);
            s = attn_forward(sh.desc, set.q.data(), set.k.data(), set.v.data(), kv, al, out.data(),
                             op == 0 ? lse.data() : nullptr);
        } else {
            w.assign(p.weights_len(), 0.0f);
            s = attn_weights(sh.desc, set.q.data(), set.k.data(), kv, al, w.data());
        }
        g_calls.fetch_add(1, std::memory_order_relaxed);
        if (s != ATTN_OK) {
            report("thread %d it %d: call failed: %s (%s)", tid, it, attn_status_string(s),
                   attn_last_error());
            continue;
        }
        bool same;
        size_t bad;
        if (op < 2) {
            same = std::memcmp(out.data(), set.out.data(), 4 * out.size()) == 0 &&
                   (op == 1 || std::memcmp(lse.data(), set.lse.data(), 4 * lse.size()) == 0);
            bad = hard::compare(p, set.r64, out.data(), op == 0 ? lse.data() : nullptr, nullptr,
                                1e-5, "load: forward");
        } else {
            same = std::memcmp(w.data(), set.w.data(), 4 * w.size()) == 0;
            bad = hard::compare(p, set.r64, nullptr, nullptr, w.data(), 1e-5, "load: weights");
        }
        if (bad)
            report("thread %d it %d: %zu elements differ from the float64 reference (%s)", tid, it,
                   bad, p.describe().c_str());
        if (!same)
            report(
                "thread %d it %d: result is not bit-identical to the 1-thread result (%s, op %d)",
                tid, it, p.describe().c_str(), op);
        // Successful calls leave this thread's message alone, whatever the others do.
        if (std::strcmp(attn_last_error(), expected_error.c_str()) != 0)
            report("thread %d it %d: attn_last_error() = \"%s\" after a successful call, "
                   "expected this thread's last message \"%s\"",
                   tid, it, attn_last_error(), expected_error.c_str());
        else
            g_errors_checked.fetch_add(1, std::memory_order_relaxed);
    }
}

void thread_changer() {
    hard::Rng rng(42);
    while (!g_stop.load()) {
        if (attn_set_num_threads(rng.range(0, 4)) != ATTN_OK) report("attn_set_num_threads failed");
        g_thread_changes.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

} // namespace

int main(int argc, char **argv) {
    int threads = argc > 1 ? std::atoi(argv[1]) : 8;
    int calls = argc > 2 ? std::atoi(argv[2]) : 1000;
    if (const char *env = std::getenv("ATTN_LOAD_CALLS")) calls = std::atoi(env);
    if (threads < 1 || calls < 1) return 2;
    setup();
    const auto t0 = std::chrono::steady_clock::now();
    std::thread changer(thread_changer);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t, calls);
    for (auto &t : pool) t.join();
    g_stop = true;
    changer.join();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    attn_set_num_threads(0);
    for (Shared &s : g_shared) attn_desc_destroy(s.desc);
    std::printf("load: %d threads x %d calls = %ld calls on %zu shared descriptors in %.2f s; "
                "%ld thread-count changes; %ld error-message checks; %ld failures\n",
                threads, calls, g_calls.load(), g_shared.size(), secs, g_thread_changes.load(),
                g_errors_checked.load(), g_failures.load());
    if (g_calls.load() != static_cast<long>(threads) * calls) return 1;
    return g_failures.load() || hard::failures() ? 1 : 0;
}
