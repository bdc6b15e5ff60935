// Resource limits: a request too large for the memory the process may use returns
// ATTN_ERR_OUT_OF_MEMORY with a message, never aborts, and leaves the library usable. Runs in a
// forked child with a lowered RLIMIT_AS so the limit cannot hit anything else.
//
// The request is valid: head_dim 2^23 with seq 1 needs 32 MiB per operand row (the buffers are
// untouched anonymous mappings inside the limit), but the per-thread scratch of every kernel is
// several times head_dim x lanes floats, far above the 64 MiB of headroom the child gets.
//
// Sanitizer runtimes reserve terabytes of address space and abort on a failed `operator new`
// by design, so under ASan/TSan this test reports itself SKIPPED (exit code 77), not passed.
#include <sys/resource.h>
#include <sys/wait.h>

#include "hardening.hpp"

namespace {

size_t vm_size_bytes() {
    FILE *f = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || std::fscanf(f, "%lu", &pages) != 1) {
        std::perror("/proc/self/statm");
        std::exit(3);
    }
    std::fclose(f);
    return pages * hard::GuardBuf::page_size();
}

float *map_floats(size_t n) {
    void *p = mmap(nullptr, n * sizeof(float), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        std::perror("mmap");
        std::exit(3);
    }
    return static_cast<float *>(p);
}

void expect_oom(attn_status s, const char *call) {
    const char *msg = attn_last_error();
    HARD_CHECK(s == ATTN_ERR_OUT_OF_MEMORY, "%s under RLIMIT_AS returned %s (%s), expected %s",
               call, attn_status_string(s), msg, attn_status_string(ATTN_ERR_OUT_OF_MEMORY));
    HARD_CHECK(std::strstr(msg, "out of memory") != nullptr, "%s: message \"%s\"", call, msg);
    std::printf("  %-48s -> %s: \"%s\"\n", call, attn_status_string(s), msg);
}

int child(size_t threads) {
    const size_t D = size_t(1) << 23, H = 2;
    attn_set_num_threads(threads);
    // Buffers first (inside the limit), then the limit: current size + 64 MiB.
    float *q = map_floats(H * D), *k = map_floats(H * D), *v = map_floats(H * D),
          *out = map_floats(H * D);
    const size_t kManyHeads = size_t(1) << 25; // Q and OUT of [1][2^25][1][1]
    float *many_q = map_floats(kManyHeads), *many_out = map_floats(kManyHeads);
    float lse[2], w[2];
    attn_desc *desc = nullptr;
    if (attn_desc_create(&desc, 1, H, H, 1, 1, D) != ATTN_OK) {
        std::fprintf(stderr, "attn_desc_create: %s\n", attn_last_error());
        return 3;
    }
    struct rlimit lim;
    lim.rlim_cur = lim.rlim_max = vm_size_bytes() + (size_t(64) << 20);
    if (setrlimit(RLIMIT_AS, &lim) != 0) {
        std::perror("setrlimit");
        return 3;
    }
    std::printf(" child with %zu thread(s), RLIMIT_AS = %zu MiB, head_dim %zu, heads %zu:\n",
                threads, static_cast<size_t>(lim.rlim_cur >> 20), D, H);
    expect_oom(attn_forward(desc, q, k, v, nullptr, nullptr, out, lse), "attn_forward");
    expect_oom(attn_weights(desc, q, k, nullptr, nullptr, w), "attn_weights");
    expect_oom(attn_simple(q, k, v, 1, D, true, nullptr, out), "attn_simple");
    attn_desc_destroy(desc);

    // Still usable afterwards, inside the same limit: a small call is correct.
    hard::Problem p;
    p.seq_q = 3;
    p.seq_k = 4;
    p.head_dim = 5;
    p.causal = ATTN_CAUSAL_TOP_LEFT;
    p.set_default_strides();
    std::vector<float> sq(p.len(0)), sk(p.len(1)), sv(p.len(2)), so(p.len(3)), sl(3);
    hard::Rng rng(5);
    for (float &x : sq) x = rng.value(-1, 1);
    for (float &x : sk) x = rng.value(-1, 1);
    for (float &x : sv) x = rng.value(-1, 1);
    attn_desc *small = p.make();
    const attn_status s = attn_forward(small, sq.data(), sk.data(), sv.data(), nullptr, nullptr,
                                       so.data(), sl.data());
    HARD_CHECK(s == ATTN_OK, "small call after OOM: %s (%s)", attn_status_string(s),
               attn_last_error());
    const ref::VResult r64 = ref::compute(p, sq.data(), sk.data(), sv.data(), nullptr, nullptr);
    HARD_CHECK(hard::compare(p, r64, so.data(), sl.data(), nullptr, 1e-5, "after OOM") == 0,
               "small call after OOM gives wrong values");
    attn_desc_destroy(small);
    std::printf("  small call after the failures: %s\n", hard::failures() ? "FAILED" : "ok");

    // The standard ALiBi slopes belong to the call, not to the descriptor: the setter only
    // records the mode (nothing to allocate, so nothing to fail), and a call whose slopes cannot
    // be allocated (2^25 query heads: 128 MiB, above the child's headroom) returns
    // ATTN_ERR_OUT_OF_MEMORY and leaves the descriptor and later calls' slopes intact.
    attn_desc *many = nullptr;
    HARD_CHECK(attn_desc_create(&many, 1, kManyHeads, 1, 1, 1, 1) == ATTN_OK,
               "attn_desc_create with 2^25 heads: %s", attn_last_error());
    HARD_CHECK(attn_desc_set_int(many, ATTN_PARAM_ALIBI, ATTN_ALIBI_STANDARD) == ATTN_OK,
               "ALIBI = STANDARD with 2^25 heads: %s", attn_last_error());
    expect_oom(attn_forward(many, many_q, k, v, nullptr, nullptr, many_out, nullptr),
               "attn_forward, ALIBI = STANDARD, 2^25 heads");
    int64_t alibi = -1;
    HARD_CHECK(attn_desc_get_int(many, ATTN_PARAM_ALIBI, &alibi) == ATTN_OK, "get ALIBI: %s",
               attn_last_error());
    HARD_CHECK(alibi == ATTN_ALIBI_STANDARD, "ALIBI reads %lld after the failed call, set %d",
               static_cast<long long>(alibi), ATTN_ALIBI_STANDARD);
    attn_desc_destroy(many);

    // The same thread's next call with the standard slopes (3 heads: BLOOM's rule) is correct.
    hard::Problem a = p;
    a.heads_q = 3;
    a.set_default_strides();
    std::vector<float> aq(a.len(0)), ak(a.len(1)), av(a.len(2)), ao(a.len(3)), al(a.lse_len());
    for (float &x : aq) x = rng.value(-1, 1);
    for (float &x : ak) x = rng.value(-1, 1);
    for (float &x : av) x = rng.value(-1, 1);
    attn_desc *ad = a.make();
    HARD_CHECK(attn_desc_set_int(ad, ATTN_PARAM_ALIBI, ATTN_ALIBI_STANDARD) == ATTN_OK,
               "ALIBI = STANDARD: %s", attn_last_error());
    const attn_status as =
        attn_forward(ad, aq.data(), ak.data(), av.data(), nullptr, nullptr, ao.data(), al.data());
    HARD_CHECK(as == ATTN_OK, "ALiBi call after OOM: %s (%s)", attn_status_string(as),
               attn_last_error());
    ref::VProblem ag = a.general();
    ag.alibi = ATTN_ALIBI_STANDARD;
    const ref::VResult ar =
        ref::compute_v(ag, ref::inputs(aq.data(), ak.data(), av.data(), nullptr, nullptr));
    const size_t bad = hard::compare(a, ar, ao.data(), al.data(), nullptr, 1e-5, "ALiBi after OOM");
    HARD_CHECK(bad == 0, "standard ALiBi call after OOM gives wrong values");
    attn_desc_destroy(ad);
    std::printf("  standard ALiBi call after the failure: %s\n", bad ? "FAILED" : "ok");
    std::fflush(stdout);
    return hard::failures() ? 1 : 0;
}

} // namespace

int main() {
    if (ATTN_HARD_SANITIZED) {
        std::printf("hardening_oom: SKIPPED under a sanitizer (its allocator aborts on a failed "
                    "operator new and it reserves the address space RLIMIT_AS would limit)\n");
        return 77;
    }
    int rc = 0;
    for (size_t threads : {1u, 2u}) {
        std::fflush(stdout);
        const pid_t pid = fork();
        if (pid < 0) {
            std::perror("fork");
            return 1;
        }
        if (pid == 0) _exit(child(threads));
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status)) {
            std::fprintf(stderr,
                         "FAIL: the child (%zu threads) died of signal %d: the library "
                         "aborted instead of returning ATTN_ERR_OUT_OF_MEMORY\n",
                         threads, WTERMSIG(status));
            rc = 1;
        } else if (WEXITSTATUS(status) != 0) {
            std::fprintf(stderr, "FAIL: the child (%zu threads) exited with %d\n", threads,
                         WEXITSTATUS(status));
            rc = 1;
        }
    }
    std::printf("oom: %s\n", rc ? "FAILED" : "ok");
    return rc;
}
