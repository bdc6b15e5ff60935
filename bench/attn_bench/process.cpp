// See process.hpp.
#include "process.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

extern char **environ;

namespace attn_bench {

// See main.cpp's file comment for why the benchmark decides its own environment.
void clean_environment(char **argv) {
    if (std::getenv("ATTN_BENCH_CLEAN_ENV")) return;
    bool dirty = false;
    for (const char *v : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS",
                          "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "ATTN_ISA", "ATTN_NUM_THREADS"})
        if (std::getenv(v)) {
            std::printf("attn_bench: ignoring %s=%s (the benchmark sets what it measures)\n", v,
                        std::getenv(v));
            unsetenv(v);
            dirty = true;
        }
    setenv("ATTN_BENCH_CLEAN_ENV", "1", 1);
    if (!dirty) return;
    std::fflush(stdout);
    execv("/proc/self/exe", argv);
    std::fprintf(stderr, "attn_bench: re-exec failed; continuing with the cleaned environment "
                         "for libattn only\n");
}

std::vector<Record> run_child(std::vector<std::string> args,
                              const std::vector<std::pair<std::string, std::string>> &env_set) {
    static int counter = 0;
    const std::string out = "/tmp/attn_bench_child_" + std::to_string(getpid()) + "_" +
                            std::to_string(counter++) + ".txt";
    args.insert(args.begin(), "attn_bench");
    args.push_back("--child-out=" + out);
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e) {
        const std::string s = *e;
        bool replaced = false;
        for (auto &kv : env_set)
            if (s.rfind(kv.first + "=", 0) == 0) replaced = true;
        if (!replaced) env.push_back(s);
    }
    for (auto &kv : env_set) env.push_back(kv.first + "=" + kv.second);
    std::vector<char *> argv, envp;
    for (auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    for (auto &e : env) envp.push_back(const_cast<char *>(e.c_str()));
    envp.push_back(nullptr);
    std::fflush(stdout);
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data()) != 0) {
        std::fprintf(stderr, "attn_bench: cannot start a child process\n");
        return {};
    }
    int status = 0;
    waitpid(pid, &status, 0);
    std::vector<Record> recs;
    std::ifstream f(out);
    std::string line;
    while (std::getline(f, line))
        if (!line.empty()) recs.push_back(Record::parse_line(line));
    std::remove(out.c_str());
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        std::fprintf(stderr, "attn_bench: child %s failed (status %d)\n", args[1].c_str(), status);
    return recs;
}

void write_child_records(const Options &o, const std::vector<Record> &recs) {
    std::ofstream f(o.child_out);
    for (auto &r : recs) f << r.line() << "\n";
}

} // namespace attn_bench
