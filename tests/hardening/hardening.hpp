// Shared pieces of the hardening tests and the fuzzer: a deterministic RNG, a problem
// description mirroring attn_desc, comparisons with the float64 reference of tests/reference,
// guard-page buffers and the ISA loop. Header-only; C++17; talks to libattn only through attn.h.
#pragma once

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attn.h"
#include "reference.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ATTN_HARD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define ATTN_HARD_SANITIZED 1
#endif
#endif
#ifndef ATTN_HARD_SANITIZED
#define ATTN_HARD_SANITIZED 0
#endif

namespace hard {

// ----------------------------------------------------------------------------------------------
// Failure accounting: every check prints its context and counts; main returns failures() != 0.
inline std::atomic<int> &failure_count() {
    static std::atomic<int> n{0};
    return n;
}
inline int failures() {
    return failure_count().load();
}
inline void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline void fail(const char *fmt, ...) {
    if (failure_count().fetch_add(1) >= 50) return; // keep the log readable; still counted
    va_list ap;
    va_start(ap, fmt);
    std::fputs("FAIL: ", stderr);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
}

#define HARD_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);          \
            hard::fail(__VA_ARGS__);                                                               \
        }                                                                                          \
    } while (0)

// ----------------------------------------------------------------------------------------------
// splitmix64: deterministic, seedable, identical everywhere.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }
    size_t range(size_t lo, size_t hi) { return lo + below(hi - lo + 1); } // [lo, hi]
    bool chance(double p) { return uniform() < p; }
    double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
    float value(float lo, float hi) { return lo + static_cast<float>(uniform()) * (hi - lo); }
};

// ----------------------------------------------------------------------------------------------
// The problem as the descriptor sees it: the reference's 0.1 problem (tests/reference), plus
// what the hardening tests need to make and describe a descriptor. Operand index w: 0 Q, 1 K, 2 V,
// 3 OUT (attn_operand). The float64 reference is ref::compute (ref::compute_v of this problem).
struct Problem : ref::Problem {
    void set_strides(int w, size_t b, size_t h, size_t r) {
        strides[w][0] = b;
        strides[w][1] = h;
        strides[w][2] = r;
        custom_strides[w] = true;
    }
    size_t lse_len() const { return batch * heads_q * seq_q; }
    size_t weights_len() const { return batch * heads_q * seq_q * seq_k; }
    std::string describe() const {
        char buf[320];
        const size_t(&st)[4][3] = strides;
        std::snprintf(buf, sizeof buf,
                      "B=%zu HQ=%zu HKV=%zu SQ=%zu SK=%zu D=%zu causal=%d scale=%s%g "
                      "strides Q(%zu,%zu,%zu) K(%zu,%zu,%zu) V(%zu,%zu,%zu) OUT(%zu,%zu,%zu)",
                      batch, heads_q, heads_kv, seq_q, seq_k, head_dim, causal,
                      has_scale ? "" : "default=", eff_scale(), st[0][0], st[0][1], st[0][2],
                      st[1][0], st[1][1], st[1][2], st[2][0], st[2][1], st[2][2], st[3][0],
                      st[3][1], st[3][2]);
        return buf;
    }
    // A configured descriptor, or nullptr (with a failure recorded).
    attn_desc *make() const {
        attn_desc *d = nullptr;
        attn_status s = attn_desc_create(&d, batch, heads_q, heads_kv, seq_q, seq_k, head_dim);
        if (s == ATTN_OK) s = attn_desc_set_causal(d, static_cast<attn_causal>(causal));
        if (s == ATTN_OK && has_scale) s = attn_desc_set_scale(d, scale);
        for (int w = 0; w < 4 && s == ATTN_OK; ++w)
            if (custom_strides[w])
                s = attn_desc_set_strides(d, static_cast<attn_operand>(w), strides[w][0],
                                          strides[w][1], strides[w][2]);
        if (s != ATTN_OK) {
            fail("descriptor for %s: %s (%s)", describe().c_str(), attn_status_string(s),
                 attn_last_error());
            attn_desc_destroy(d);
            return nullptr;
        }
        return d;
    }
};

// |got - want| <= tol * max(1, |want|); NaN must meet NaN, an infinity the same infinity.
inline bool close(float got, double want, double tol) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want)) return static_cast<double>(got) == want;
    if (!std::isfinite(got)) return false;
    return std::fabs(static_cast<double>(got) - want) <= tol * std::fmax(1.0, std::fabs(want));
}

// Compares a call's outputs with the reference. `out` is the strided OUT buffer; lse and
// weights are optional. Hidden keys must have weight exactly 0; rows without a visible key must
// give out 0 and lse -inf. Returns the number of mismatches (the first few are printed).
inline size_t compare(const Problem &p, const ref::VResult &r, const float *out, const float *lse,
                      const float *weights, double tol, const char *what) {
    size_t bad = 0;
    auto report = [&](const char *field, size_t idx, float got, double want) {
        if (bad++ < 4)
            fail("%s: %s[%zu] = %.9g, expected %.9g (%s)", what, field, idx,
                 static_cast<double>(got), want, p.describe().c_str());
    };
    const size_t D = p.head_dim;
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i) {
                const size_t row = (b * p.heads_q + h) * p.seq_q + i;
                if (out) {
                    const float *o = out + p.at(3, b, h, i);
                    for (size_t d = 0; d < D; ++d) {
                        const double want = r.out[row * D + d];
                        const bool ok = r.any[row] ? close(o[d], want, tol) : o[d] == 0.0f;
                        if (!ok) report("out", row * D + d, o[d], want);
                    }
                }
                if (lse && !close(lse[row], r.lse[row], tol))
                    report("lse", row, lse[row], r.lse[row]);
                if (weights)
                    for (size_t j = 0; j < p.seq_k; ++j) {
                        const size_t x = row * p.seq_k + j;
                        const double want = r.w[x];
                        const bool ok = want == 0.0 && !std::isnan(want)
                                            ? weights[x] == 0.0f
                                            : close(weights[x], want, tol);
                        if (!ok) report("weights", x, weights[x], want);
                    }
            }
    return bad;
}

// ----------------------------------------------------------------------------------------------
// Guard pages. A buffer of `bytes` either ends exactly where a PROT_NONE page begins
// (EndAtGuard) or starts exactly where one ends (StartAfterGuard). The rest of its pages is
// filled with canary bytes; inputs can be made read-only so a stray write faults as well.
enum class Place { EndAtGuard, StartAfterGuard };
constexpr unsigned char kCanary = 0xA5;

struct GuardRecord {
    const char *name;
    uintptr_t guard_lo, guard_hi;
};
// Read by the SIGSEGV handler (async-signal-safe: fixed array, plain loads).
inline GuardRecord *guard_table() {
    static GuardRecord table[64];
    return table;
}

class GuardBuf {
  public:
    GuardBuf() = default;
    GuardBuf(size_t bytes, Place place, const char *name) { init(bytes, place, name); }
    GuardBuf(const GuardBuf &) = delete;
    GuardBuf &operator=(const GuardBuf &) = delete;
    ~GuardBuf() { release(); }

    void init(size_t bytes, Place place, const char *name) {
        release();
        const size_t page = page_size();
        bytes_ = bytes;
        data_pages_ = (bytes + page - 1) / page * page;
        if (data_pages_ == 0) data_pages_ = page;
        map_len_ = data_pages_ + page;
        void *m =
            mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            std::perror("mmap");
            std::abort();
        }
        map_ = static_cast<unsigned char *>(m);
        unsigned char *guard;
        if (place == Place::EndAtGuard) {
            rw_ = map_;
            guard = map_ + data_pages_;
            data_ = guard - bytes;
        } else {
            guard = map_;
            rw_ = map_ + page;
            data_ = rw_;
        }
        if (mprotect(guard, page, PROT_NONE) != 0) {
            std::perror("mprotect");
            std::abort();
        }
        std::memset(rw_, kCanary, data_pages_);
        slot_ = -1;
        for (int x = 0; x < 64; ++x)
            if (guard_table()[x].name == nullptr) {
                guard_table()[x] = GuardRecord{name, reinterpret_cast<uintptr_t>(guard),
                                               reinterpret_cast<uintptr_t>(guard) + page};
                slot_ = x;
                break;
            }
    }
    void release() {
        if (!map_) return;
        if (slot_ >= 0) guard_table()[slot_] = GuardRecord{nullptr, 0, 0};
        munmap(map_, map_len_);
        map_ = nullptr;
    }
    template <class T> T *as() const { return reinterpret_cast<T *>(data_); }
    size_t bytes() const { return bytes_; }
    void read_only() {
        if (mprotect(rw_, data_pages_, PROT_READ) != 0) {
            std::perror("mprotect");
            std::abort();
        }
    }
    // Index of the first canary byte outside [data, data + bytes) that changed, or -1.
    long canary_damage() const {
        for (unsigned char *x = rw_; x < rw_ + data_pages_; ++x) {
            if (x >= data_ && x < data_ + bytes_) continue;
            if (*x != kCanary) return static_cast<long>(x - data_);
        }
        return -1;
    }
    static size_t page_size() {
        static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        return p;
    }

  private:
    unsigned char *map_ = nullptr, *rw_ = nullptr, *data_ = nullptr;
    size_t map_len_ = 0, data_pages_ = 0, bytes_ = 0;
    int slot_ = -1;
};

// ----------------------------------------------------------------------------------------------
// The SIGSEGV / SIGBUS handler of the guard-page suites: names the buffer whose guard page was hit
// and the case (guard_case(), set by the test before each call). Async-signal-safe.
constexpr size_t kGuardCaseLen = 512;
inline char *guard_case() {
    static char buf[kGuardCaseLen] = "(none)";
    return buf;
}

inline void guard_put(const char *s) {
    ssize_t r = write(2, s, std::strlen(s));
    (void)r;
}
inline void guard_put_hex(uintptr_t v) {
    char buf[19] = "0x";
    for (int x = 0; x < 16; ++x) buf[2 + x] = "0123456789abcdef"[(v >> (60 - 4 * x)) & 15];
    buf[18] = 0;
    guard_put(buf);
}

inline void on_guard_fault(int sig, siginfo_t *info, void *) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
    guard_put("\n*** guard-page fault at ");
    guard_put_hex(a);
    const GuardRecord *t = guard_table();
    bool named = false;
    for (int x = 0; x < 64; ++x)
        if (t[x].name && a >= t[x].guard_lo && a < t[x].guard_hi) {
            guard_put(" in the guard page of '");
            guard_put(t[x].name);
            guard_put("' (offset ");
            guard_put_hex(a - t[x].guard_lo);
            guard_put(" into the guard page)");
            named = true;
        }
    if (!named) guard_put(" (not in a guard page: a read-only input written, or a wild access)");
    guard_put("\n*** case: ");
    guard_put(guard_case());
    guard_put("\n");
    signal(sig, SIG_DFL); // returning re-executes the access and dies with the default action
}

inline void install_guard_handler() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_guard_fault;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
}

// ----------------------------------------------------------------------------------------------
// ISAs. Runs fn(name) once per kernel this CPU supports, with the process-wide cap set; prints
// which ran and which were skipped. Returns the number of ISAs run.
inline int for_each_isa(const char *test, void (*fn)(const char *, void *), void *ctx) {
    static const char *const names[] = {"scalar", "sse2", "avx2", "avx512"};
    std::string ran, skipped;
    int n = 0;
    for (const char *name : names) {
        const attn_status s = attn_set_isa(name);
        if (s == ATTN_ERR_UNSUPPORTED) {
            skipped += std::string(" ") + name;
            continue;
        }
        if (s != ATTN_OK) {
            fail("attn_set_isa(\"%s\") = %s (%s)", name, attn_status_string(s), attn_last_error());
            continue;
        }
        if (std::strcmp(attn_isa(), name) != 0)
            fail("attn_isa() = %s after attn_set_isa(\"%s\")", attn_isa(), name);
        fn(name, ctx);
        ran += std::string(" ") + name;
        ++n;
    }
    attn_set_isa(nullptr);
    std::printf("%s: ISAs run:%s; not supported here:%s\n", test, ran.c_str(),
                skipped.empty() ? " none" : skipped.c_str());
    if (n == 0) fail("%s: no ISA ran", test);
    return n;
}

} // namespace hard
