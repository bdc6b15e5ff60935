// attn_bench: libattn's speed against this machine's limits and against two baselines, measured
// in one run. See bench/README.md for what each figure means.
//
//   attn_bench [--quick] [--sweep-only] [--no-sweep] [--peak-only] [--only LIST] [--json PATH]
//              [--n N] [--scalar-max-n N] [--openblas-coretype NAME|auto|none] [--patience S]
//
// Sections, in the order they run:
//   peak      register-only FMA (mul+add for SSE2) loops per ISA the CPU has, one thread, GFLOP/s
//   stream    streaming read of a 1 GiB buffer, 1 and 2 threads, GB/s: one loop per ISA the CPU
//             has (stream_*.cpp, each compiled with its own flags); the fastest is "stream"
//   prefill   libattn, B=1, H=8, n=2048, head_dim 128/64, causal/non-causal, BHSD/BSHD,
//             no mask / 10% padded keys + block-structured `allowed`, 1 and 2 threads, every ISA
//   decode    libattn, seq_q=1, seq_k=32768, heads 32/8 (GQA), head_dim 128, BOTTOM_RIGHT;
//             cold (1 GiB of other memory read before each timed call, evict.cpp) and hot
//   small     libattn vs the plain scalar loop, n = 16..128, ns per call
//   memory    peak RSS growth of attn_forward at n=16384 beyond its operands (child process)
//   openblas  unfused attention on cblas_sgemm + plain softmax, as OpenBLAS picks its kernels,
//             then (child process) with OPENBLAS_CORETYPE forced to the CPU's best kernels
//   scalar    the plain scalar reference (naive loops), only at n <= --scalar-max-n
//   sweep     GFLOP/s against n = 128..4096 for libattn and the baselines (for plot.py)
//
// FLOPs = 4 * B * H * seq_q * seq_k * head_dim; causal counts the visible half:
// 4 * B * H * head_dim * n(n+1)/2. Masked runs count the same FLOPs as unmasked ones, so their
// GFLOP/s compare directly with the unmasked figure (the time ratio is the mask slowdown).
//
// --peak-only runs the first two sections only (the machine's limits, for bench/peers/peers.py);
// --only prefill,decode,... runs peak, stream and the sections named.
//
// Environment: OpenBLAS reads OPENBLAS_CORETYPE when it is loaded, and libattn reads ATTN_ISA /
// ATTN_NUM_THREADS. The benchmark decides what it measures: if any of those (or OpenBLAS'
// thread/L2 variables) is set, it re-executes itself once without them; the forced-OpenBLAS
// baseline and the memory figure run in child processes of /proc/self/exe.
//
// The parts (this folder): options (command line), records (results, JSON), machine (CPU, load,
// pressure), measure (timing under contention, budgets), operands (arrays, prefill problems),
// process (clean environment, child processes), limits (peak, stream), sections_libattn,
// sections_baselines, summary; this file runs them in order.
#include <attn.h>

#include <sys/utsname.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../baselines.hpp"
#include "../evict.hpp"
#include "../timing.hpp"
#include "limits.hpp"
#include "machine.hpp"
#include "measure.hpp"
#include "options.hpp"
#include "process.hpp"
#include "records.hpp"
#include "sections_baselines.hpp"
#include "sections_libattn.hpp"
#include "summary.hpp"

using namespace attn_bench;

int main(int argc, char **argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0); // progress shows line by line in a log file
    const Options o = parse_options(argc, argv);
    g_patience_s = o.patience;
    if (o.child == "mem") return child_mem(o);
    if (o.child == "openblas") return child_openblas(o);
    if (!o.child.empty()) usage(("unknown child mode " + o.child).c_str());
    clean_environment(argv);
    openblas_threads(1);

    const double t_start = now();
    Results res;
    const std::vector<std::string> isas = supported_isas();
    const std::string default_isa = attn_isa();
    struct utsname un;
    uname(&un);
    res.machine.str("cpu", cpu_model())
        .integer("hardware_threads", std::thread::hardware_concurrency())
        .str("kernel", std::string(un.sysname) + " " + un.release)
        .str("date_utc", utc_now())
        .str("libattn_version", attn_version_string())
        .str("libattn_default_isa", default_isa)
        .integer("libattn_default_threads", attn_get_num_threads())
        .str("openblas_corename_default", openblas_corename())
        .str("compiler", __VERSION__)
        .str("mode", o.peak_only    ? "peak-only"
                     : o.sweep_only ? "sweep-only"
                     : o.quick      ? "quick"
                                    : "full");
    {
        std::string list;
        for (auto &i : isas) list += (list.empty() ? "" : ",") + i;
        res.machine.str("libattn_isas", list);
    }
    std::printf("attn_bench: libattn %s, default ISA %s (all: %s), %zu threads by default; CPU %s; "
                "OpenBLAS corename %s; mode %s\n",
                attn_version_string(), default_isa.c_str(),
                res.machine.get_str("libattn_isas").c_str(), attn_get_num_threads(),
                res.machine.get_str("cpu").c_str(), openblas_corename(),
                res.machine.get_str("mode").c_str());

    note_load(res.machine, "start");
    const Peaks pk = run_peaks(res, o);
    Stream st;
    if (o.peak_only) {
        Evictor ev; // its 1 GiB buffer is the stream buffer
        st = run_stream(res, o, ev);
    } else {
        if (!o.sweep_only) {
            Evictor ev; // stream buffer, then the eviction read of the cold decode
            st = run_stream(res, o, ev);
            if (wanted(o, "prefill")) run_prefill(res, o, pk, isas);
            if (wanted(o, "decode")) run_decode(res, o, st, isas, ev);
            if (wanted(o, "small")) run_small(res, o, default_isa);
            if (wanted(o, "memory")) run_memory(res, default_isa);
        }
        if (!o.no_sweep && wanted(o, "sweep")) run_sweep_libattn(res, o, isas);
        // Baselines last: OpenBLAS' own threads never overlap a libattn measurement.
        if (wanted(o, "openblas")) run_openblas(res, o);
        if (!o.no_sweep && wanted(o, "scalar")) run_scalar(res, o);
        if (!o.sweep_only) summarize(res, pk, st, default_isa, o);
    }

    note_load(res.machine, "end");
    res.machine.num("run_seconds", now() - t_start);
    if (!res.write_json(o.json)) {
        std::fprintf(stderr, "attn_bench: cannot write %s\n", o.json.c_str());
        return 1;
    }
    std::printf("\nattn_bench: %.0f s; figures written to %s\n", now() - t_start, o.json.c_str());
    return 0;
}
