// Thread-start failure: when the pool cannot start its workers (threads or
// address space exhausted), a call still succeeds on the caller's thread with the same result,
// no partial worker is kept (their stacks would hold address space the process lacks; glibc keeps
// joined stacks in its cache for the next thread), and
// the pool recovers once threads can be had again.
//
// Plain build: a forked child lowers RLIMIT_AS so that only a few 8 MiB thread stacks fit.
// Sanitizer builds ignore RLIMIT_AS (their allocators reserve terabytes): there the library is
// built with ATTN_FAULT_INJECTION and ATTN_FAULT_THREAD_LIMIT makes thread starts fail instead.
#include <sys/resource.h>
#include <sys/wait.h>
#include <dirent.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "hardening.hpp"

namespace {

size_t vm_size_bytes() {
    FILE *f = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || std::fscanf(f, "%lu", &pages) != 1) std::exit(3);
    std::fclose(f);
    return pages * hard::GuardBuf::page_size();
}

// libattn's pool threads (it names them "attn-worker"); sanitizer runtimes add threads of their
// own, so the process's task count would not do.
size_t task_count() {
    size_t n = 0;
    if (DIR *d = opendir("/proc/self/task")) {
        while (dirent *e = readdir(d)) {
            if (e->d_name[0] == '.') continue;
            char path[300], name[32] = "";
            std::snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
            if (FILE *f = std::fopen(path, "r")) {
                if (std::fgets(name, sizeof name, f) && std::strncmp(name, "attn-worker", 11) == 0)
                    ++n;
                std::fclose(f);
            }
        }
        closedir(d);
    }
    return n;
}

// task_count() once it equals `want`, or after 10 s: a thread pthread_join has returned for can
// still be listed for a moment (the kernel clears its tid before it leaves the thread group). The
// pool names its workers before the call that starts them returns, so a new worker is counted at
// once; the bound only ends the wait for a count that is wrong.
size_t settled_count(size_t want) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    size_t n = task_count();
    while (n != want && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        n = task_count();
    }
    return n;
}

struct Inputs {
    hard::Problem p;
    std::vector<float> q, k, v;
};

Inputs make_inputs() {
    Inputs in;
    in.p.batch = 2, in.p.heads_q = 8, in.p.heads_kv = 4, in.p.seq_q = 300, in.p.seq_k = 280;
    in.p.head_dim = 32, in.p.causal = ATTN_CAUSAL_TOP_LEFT;
    in.p.set_default_strides();
    hard::Rng rng(9);
    for (auto *x : {&in.q, &in.k, &in.v}) x->resize(in.p.len(x == &in.q ? 0 : x == &in.k ? 1 : 2));
    for (float &x : in.q) x = rng.value(-1, 1);
    for (float &x : in.k) x = rng.value(-1, 1);
    for (float &x : in.v) x = rng.value(-1, 1);
    return in;
}

std::vector<float> forward(const Inputs &in, const char *what) {
    std::vector<float> out(in.p.len(3), -1.0f);
    attn_desc *d = in.p.make();
    const attn_status s = attn_forward(d, in.q.data(), in.k.data(), in.v.data(), nullptr, nullptr,
                                       out.data(), nullptr);
    HARD_CHECK(s == ATTN_OK, "%s: %s (%s)", what, attn_status_string(s), attn_last_error());
    attn_desc_destroy(d);
    return out;
}

// Runs with threads that cannot start, then checks result, threads and recovery.
int child(bool inject) {
    const Inputs in = make_inputs();
    attn_set_num_threads(1);
    const std::vector<float> want = forward(in, "1 thread");
    const size_t base = task_count(); // 0: one thread has started no worker
    if (inject) {
        setenv("ATTN_FAULT_THREAD_LIMIT", "3", 1); // workers 3.. fail to start
    } else {
        struct rlimit lim; // the soft limit only, so that it can be raised again
        if (getrlimit(RLIMIT_AS, &lim) != 0) return 3;
        lim.rlim_cur = vm_size_bytes() + (size_t(6) << 20); // a few 1 MiB stacks
        if (setrlimit(RLIMIT_AS, &lim) != 0) return 3;
    }
    HARD_CHECK(attn_set_num_threads(16) == ATTN_OK, "attn_set_num_threads(16)");
    for (int call = 0; call < 3; ++call) {
        const std::vector<float> got = forward(in, "16 threads that cannot start");
        HARD_CHECK(got == want, "call %d: result differs from the 1-thread result", call);
        const size_t alive = settled_count(base);
        HARD_CHECK(alive == base, "call %d: %zu workers alive, expected %zu", call, alive, base);
    }
    std::printf("  16 threads requested, none could start: calls ok on the caller, %zu worker(s) "
                "(%zu before)\n",
                task_count(), base);
    // Recovery: threads can be had again.
    if (inject) {
        unsetenv("ATTN_FAULT_THREAD_LIMIT");
    } else {
        struct rlimit lim;
        if (getrlimit(RLIMIT_AS, &lim) != 0) return 3;
        lim.rlim_cur = lim.rlim_max;
        if (setrlimit(RLIMIT_AS, &lim) != 0) return 3;
    }
    HARD_CHECK(attn_set_num_threads(4) == ATTN_OK, "attn_set_num_threads(4)");
    const std::vector<float> got = forward(in, "4 threads after recovery");
    HARD_CHECK(got == want, "after recovery: result differs");
    const size_t after = settled_count(base + 3);
    HARD_CHECK(after == base + 3, "after recovery: %zu workers, expected %zu", after, base + 3);
    std::printf("  after recovery: 3 workers + the caller, result identical\n");
    std::fflush(stdout);
    return hard::failures() ? 1 : 0;
}

} // namespace

int main() {
    const bool inject = ATTN_HARD_SANITIZED != 0;
    std::printf("hardening_threads (%s):\n", inject ? "fault injection" : "RLIMIT_AS");
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) _exit(child(inject));
    int status = 0;
    waitpid(pid, &status, 0);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (WIFSIGNALED(status))
        std::fprintf(stderr, "FAIL: the child died of signal %d\n", WTERMSIG(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        std::fprintf(stderr, "FAIL: the child exited with %d\n", WEXITSTATUS(status));
    std::printf("threads: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
