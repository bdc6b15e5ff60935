#!/usr/bin/env python3
"""libattn against its peers (PyTorch, ONNX Runtime, OpenVINO) on the same shapes, in one run.

Not part of ctest or CI: a measurement, meaningful only on an otherwise idle machine.

Install the peers into a venv (torch from PyPI is the CUDA build and pulls ~3 GB of nvidia-*
wheels; that takes a few minutes and is fine, the CPU kernels are what runs):

    python3 -m venv /tmp/peers-venv
    /tmp/peers-venv/bin/pip install torch==2.15.0 onnxruntime onnx openvino numpy matplotlib

Build libattn and attn_bench (attn_bench --peak-only gives the FMA peak and read bandwidth):

    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build attn attn_bench

Run (from anywhere; the attn package is taken from bindings/python of this checkout):

    /tmp/peers-venv/bin/python bench/peers/peers.py --lib build/libattn.so
    /tmp/peers-venv/bin/python bench/peers/peers.py --lib build/libattn.so --quick   # ~1-2 min smoke run
    /tmp/peers-venv/bin/python bench/peers/peers.py --lib build/libattn.so --sweep \
        --json peers_results_sweep.json    # GFLOP/s against n, for bench/plot.py --peers

Every library is timed on the same arrays, 1 thread each (the thread line also at the default
count). A run is R interleaved rounds; in a round every library runs each shape `reps` times back
to back and keeps its fastest call; a figure is the median over rounds (ratios: the median of the
per-round ratios). The library order rotates from round to round. The decode shape is "cold":
1 GiB of other memory is read before every timed call of every library (not timed). Each peer's
output is compared with libattn's (max |difference|) so the ratios compare the same computation.
A peer that is not importable is left out (its column says so). See bench/peers/README.md.
"""

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

# What each library measures is set here, not by the caller's environment (read at import).
_CLEARED_ENV = {}
for _v in ("ATTN_NUM_THREADS", "ATTN_ISA", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
           "OPENBLAS_NUM_THREADS"):
    if _v in os.environ:
        _CLEARED_ENV[_v] = os.environ.pop(_v)

import numpy as np  # noqa: E402

F32 = np.float32


# ------------------------------------------------------------------------------------------
# Shapes
# ------------------------------------------------------------------------------------------

class Case:
    """One attention call: q (B, Hq, Sq, D), k/v (B, Hkv, Sk, D); causal 'none' | 'top_left' |
    'bottom_right'; key_lens: per-sequence key counts (padding beyond) or None; query_pad: the
    queries past a sequence's length are padding too, and libattn is told so (QUERY_VALID: it
    skips their rows and writes zeros there; the peers have no such operand and compute them),
    so outputs are compared on the real queries only."""

    def __init__(self, name, B, Hq, Hkv, Sq, Sk, D, causal, key_lens=None, cold=False, seed=1,
                 query_pad=False):
        self.name, self.B, self.Hq, self.Hkv = name, B, Hq, Hkv
        self.Sq, self.Sk, self.D, self.causal = Sq, Sk, D, causal
        self.key_lens, self.cold, self.seed = key_lens, cold, seed
        self.query_pad = query_pad
        if causal == "bottom_right":
            assert Sq == 1, "bottom-right causal is used only for decode (seq_q = 1)"

    def gflop(self):
        """Useful FLOPs (4 per visible (query, key) pair and head_dim element), real tokens
        only: a padded sequence of length n counts n(n+1)/2 causal pairs."""
        pairs = 0.0
        for b in range(self.B):
            n = self.key_lens[b] if self.key_lens else self.Sk
            if self.causal == "top_left":
                pairs += n * (n + 1) / 2.0 if self.Sq == self.Sk else float(self.Sq * n)
            else:
                pairs += float(self.Sq) * n
        return 4.0 * self.Hq * self.D * pairs * 1e-9

    def real_queries(self):
        """bool (B, Sq): the queries whose outputs are compared (all but query padding)."""
        if not self.query_pad:
            return np.ones((self.B, self.Sq), bool)
        return np.arange(self.Sq)[None, :] < np.array(self.key_lens)[:, None]

    def kv_bytes(self):
        return 2.0 * self.B * self.Hkv * self.Sk * self.D * 4

    def mask(self):
        """bool (B, 1, Sq, Sk), True = attend, or None when the call needs no mask (causal
        alone is passed as a flag)."""
        if not self.key_lens:
            return None
        j = np.arange(self.Sk)
        m = j[None, None, None, :] < np.array(self.key_lens)[:, None, None, None]
        if self.causal == "top_left":
            i = np.arange(self.Sq)
            m = m & (j[None, :] <= i[:, None])[None, None]
        return np.array(np.broadcast_to(m, (self.B, 1, self.Sq, self.Sk)))  # writable copy

    def arrays(self):
        rng = np.random.default_rng(self.seed)
        q = rng.uniform(-1, 1, (self.B, self.Hq, self.Sq, self.D)).astype(F32)
        k = rng.uniform(-1, 1, (self.B, self.Hkv, self.Sk, self.D)).astype(F32)
        v = rng.uniform(-1, 1, (self.B, self.Hkv, self.Sk, self.D)).astype(F32)
        return q, k, v


def table_cases(args):
    n = args.n
    cases = [
        Case("d128 non-causal", 1, 8, 8, n, n, 128, "none", seed=1),
        Case("d128 causal", 1, 8, 8, n, n, 128, "top_left", seed=2),
        Case("d64 non-causal", 1, 8, 8, n, n, 64, "none", seed=3),
        Case("d64 causal", 1, 8, 8, n, n, 64, "top_left", seed=4),
        Case("padded batch 4 causal", 4, 8, 8, n, n, 128, "top_left",
             key_lens=[n, n * 3 // 4, n // 2, n // 4], seed=5),
        Case("padded batch 4 causal, query padding", 4, 8, 8, n, n, 128, "top_left",
             key_lens=[n, n * 3 // 4, n // 2, n // 4], seed=5, query_pad=True),
        Case("decode 32k GQA 32/8 cold", 1, 32, 8, 1, 32768, 128, "bottom_right", cold=True,
             seed=6),
    ]
    if args.shapes:
        want = [s.strip() for s in args.shapes.split(",")]
        cases = [c for c in cases if any(w in c.name for w in want)]
    return cases


# attn_bench's sweep (bench/attn_bench/options.cpp, sweep_sizes): n = 128 ... 4096, and with
# --quick n <= 1024. The shape family is its too: B 1, H 8, head_dim 128, non-causal, BHSD.
SWEEP_N = (128, 256, 512, 1024, 2048, 4096)
SWEEP_N_QUICK = (128, 256, 512, 1024)


def sweep_cases(ns):
    return [Case("sweep n=%d" % n, 1, 8, 8, n, n, 128, "none", seed=300 + i)
            for i, n in enumerate(ns)]


def parse_sweep(text, quick):
    """--sweep's value: '' (attn_bench's n list) or comma-separated lengths."""
    if not text:
        return SWEEP_N_QUICK if quick else SWEEP_N
    try:
        ns = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise SystemExit("--sweep: expected comma-separated sequence lengths, got %r" % text)
    if not ns or min(ns) < 1:
        raise SystemExit("--sweep: expected positive sequence lengths, got %r" % text)
    return ns


def thread_cases():
    cases = []
    for s in (5, 16, 32, 70):  # SmolLM2-135M decode: batch 4, heads 9/3, head_dim 64
        cases.append(Case("smollm2 decode B4 9/3 d64 keys %d" % s, 4, 9, 3, 1, s, 64,
                          "bottom_right", seed=100 + s))
    for n in (1, 2, 4, 8, 16, 32, 64, 128):
        cases.append(Case("n=%d causal H8 d64" % n, 1, 8, 8, n, n, 64, "top_left", seed=200 + n))
    return cases


# ------------------------------------------------------------------------------------------
# Libraries: each prepare(case, q, k, v, mask) returns (run, output) — run() is one call,
# output() the last result as a (B, Hq, Sq, D) numpy array.
# ------------------------------------------------------------------------------------------

class LibAttn:
    name = "libattn"

    def __init__(self, lib_path):
        os.environ["ATTN_LIBRARY"] = os.path.abspath(lib_path)
        sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
        import attn
        self.attn = attn
        self.version = attn.version()
        self.isa = attn.isa()
        self.default_threads = attn.num_threads()
        self.path = attn.library_path

    def set_threads(self, t):
        self.attn.set_num_threads(t)  # 0 = the library's default

    def prepare(self, c, q, k, v, mask):
        attn = self.attn
        desc = attn.Desc(c.B, c.Hq, c.Hkv, c.Sq, c.Sk, c.D, causal=c.causal)
        out = np.zeros((c.B, c.Hq, c.Sq, c.D), F32)
        args = attn.Args()
        args.set(attn.Operand.Q, q).set(attn.Operand.K, k).set(attn.Operand.V, v)
        args.set(attn.Operand.OUT, out)
        if c.key_lens:  # libattn's padding operand: keys j >= seq_lens_k[b] are never read
            lens = np.array(c.key_lens, np.int32)
            args.set(attn.Operand.SEQ_LENS_K, lens)
        qvalid = None
        if c.query_pad:  # and the queries past each length: their rows are skipped (zeros)
            qvalid = np.ascontiguousarray(c.real_queries())
            args.set(attn.Operand.QUERY_VALID, qvalid)
        run, op = desc.run, attn.Op.FORWARD
        keep = (desc, args, qvalid)

        def call():
            run(op, args)
        call.keep = keep
        return call, lambda: out


class Torch:
    name = "torch"
    install = "torch==2.15.0"

    def __init__(self):
        import torch
        import torch.nn.functional as F
        self.torch, self.F = torch, F
        self.version = torch.__version__
        self.default_threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def set_threads(self, t):
        self.torch.set_num_threads(t or self.default_threads)

    def prepare(self, c, q, k, v, mask):
        torch, F = self.torch, self.F
        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
        tm = torch.from_numpy(mask) if mask is not None else None
        # with a mask, the mask carries the causal part (PyTorch refuses is_causal + attn_mask)
        causal = c.causal == "top_left" and tm is None
        gqa = c.Hq != c.Hkv
        res = [None]
        sdpa = F.scaled_dot_product_attention

        def call():
            with torch.inference_mode():
                res[0] = sdpa(tq, tk, tv, attn_mask=tm, is_causal=causal, enable_gqa=gqa)
        return call, lambda: res[0].numpy()


class OnnxRuntime:
    name = "onnxruntime"
    install = "onnxruntime onnx"

    def __init__(self):
        import onnx
        import onnxruntime as ort
        self.onnx, self.ort = onnx, ort
        self.version = ort.__version__
        self.threads = 1

    def set_threads(self, t):
        self.threads = t or 0  # 0 = ORT's default

    def prepare(self, c, q, k, v, mask):
        from onnx import TensorProto, helper
        causal = c.causal == "top_left"
        if mask is not None and causal:
            # ORT takes is_causal together with attn_mask, so it may use the causal flag: the
            # mask then carries the key padding only, at full (B, 1, Sq, Sk) shape (ORT does
            # not broadcast its query axis)
            mask = np.array(np.broadcast_to(
                np.arange(c.Sk)[None, None, None, :] < np.array(c.key_lens)[:, None, None, None],
                mask.shape))
        ins = [helper.make_tensor_value_info("Q", TensorProto.FLOAT, list(q.shape)),
               helper.make_tensor_value_info("K", TensorProto.FLOAT, list(k.shape)),
               helper.make_tensor_value_info("V", TensorProto.FLOAT, list(v.shape))]
        names = ["Q", "K", "V"]
        if mask is not None:
            ins.append(helper.make_tensor_value_info("attn_mask", TensorProto.BOOL,
                                                     list(mask.shape)))
            names.append("attn_mask")
        oshape = [c.B, c.Hq, c.Sq, c.D]
        outs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, oshape)]
        node = helper.make_node("Attention", names, ["Y"],
                                is_causal=int(causal))
        graph = helper.make_graph([node], "attention", ins, outs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)],
                                  ir_version=10)
        so = self.ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.execution_mode = self.ort.ExecutionMode.ORT_SEQUENTIAL
        sess = self.ort.InferenceSession(model.SerializeToString(), so,
                                         providers=["CPUExecutionProvider"])
        # inputs and the output bound once as OrtValues over the numpy arrays (no copies)
        out = np.zeros(oshape, F32)
        io = sess.io_binding()
        values = [self.ort.OrtValue.ortvalue_from_numpy(a) for a in (q, k, v, mask)[:len(names)]]
        for name, val in zip(names, values):
            io.bind_ortvalue_input(name, val)
        y = self.ort.OrtValue.ortvalue_from_numpy(out)
        io.bind_ortvalue_output("Y", y)
        run = sess.run_with_iobinding

        def call():
            run(io)
        call.keep = (sess, io, values, y, q, k, v, mask)
        return call, lambda: out


class OpenVino:
    name = "openvino"
    install = "openvino"

    def __init__(self, gqa="broadcast"):
        import openvino as ov
        from openvino import opset13
        self.ov, self.ops = ov, opset13
        self.version = ov.get_version()
        self.core = ov.Core()
        self.threads = 1
        self.gqa = gqa

    def set_threads(self, t):
        self.threads = t or 0  # 0 = OpenVINO's default

    def prepare(self, c, q, k, v, mask):
        ov, ops = self.ov, self.ops
        if c.Hq != c.Hkv:  # opset13 SDPA has no GQA parameter
            rep = c.Hq // c.Hkv
            if self.gqa == "broadcast":
                # 5-D operands: q (B, Hkv, rep, Sq, D) against k, v (B, Hkv, 1, Sk, D); SDPA
                # broadcasts the batch dims, nothing is copied. The output (B, Hkv, rep, Sq, D)
                # is (B, Hq, Sq, D) with query head h reading KV head h // rep, as GQA does.
                q = q.reshape(c.B, c.Hkv, rep, c.Sq, c.D)
                k = k.reshape(c.B, c.Hkv, 1, c.Sk, c.D)
                v = v.reshape(c.B, c.Hkv, 1, c.Sk, c.D)
                if mask is not None:
                    mask = mask.reshape(c.B, 1, 1, c.Sq, c.Sk)
            else:  # K/V repeated per query head beforehand (not timed), 4x the bytes read
                k = np.ascontiguousarray(np.repeat(k, rep, axis=1))
                v = np.ascontiguousarray(np.repeat(v, rep, axis=1))
        arrays = [q, k, v] + ([mask] if mask is not None else [])
        params = [ops.parameter(list(a.shape), ov.Type.boolean if a.dtype == np.bool_ else
                                ov.Type.f32, name=n) for a, n in zip(arrays, "qkvm")]
        # with a mask, the mask carries the causal part (opset13 ignores the mask if causal)
        sdpa = ops.scaled_dot_product_attention(
            params[0], params[1], params[2],
            attention_mask=params[3] if mask is not None else None,
            causal=c.causal == "top_left" and mask is None)
        model = ov.Model([sdpa], params, "attention")
        cfg = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"}
        if self.threads:
            cfg["INFERENCE_NUM_THREADS"] = self.threads
        compiled = self.core.compile_model(model, "CPU", cfg)
        req = compiled.create_infer_request()
        for i, a in enumerate(arrays):
            req.set_input_tensor(i, ov.Tensor(a, shared_memory=True))
        infer = req.infer

        def call():
            infer()
        call.keep = (compiled, req, arrays)
        return call, lambda: req.get_output_tensor(0).data.reshape(c.B, c.Hq, c.Sq, c.D)


PEERS = [Torch, OnnxRuntime, OpenVino]


# ------------------------------------------------------------------------------------------
# Measurement
# ------------------------------------------------------------------------------------------

class Evictor:
    """1 GiB of other memory; reading it evicts every cache level (L3 here: 300 MiB)."""

    def __init__(self):
        self.buf = np.ones((1 << 30) // 4, F32)

    def __call__(self):
        self.buf.sum()


def psi_total_us():
    try:
        with open("/proc/pressure/cpu") as f:
            for word in f.readline().split():
                if word.startswith("total="):
                    return float(word[6:])
    except OSError:
        pass
    return float("nan")


def best_of(call, reps, inner=1, before=None):
    best = float("inf")
    for _ in range(reps):
        if before:
            before()
        t0 = time.perf_counter()
        for _ in range(inner):
            call()
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


def calibrate(call, min_s):
    """Calls per sample so that a sample lasts min_s (1 for calls longer than that)."""
    t0 = time.perf_counter()
    call()
    once = max(time.perf_counter() - t0, 1e-7)
    return max(1, int(math.ceil(min_s / once)))


def max_abs_diff(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("nan")
    d = np.abs(a - b)
    return float(np.nanmax(np.where(np.isnan(d), np.inf, d)))


def run_interleaved(cases, configs, rounds, reps, evict, min_sample_s, log):
    """configs: list of (key, lib, threads). Returns ({(case, key): [per-round best s]},
    {(case, key): max |out - libattn out|})."""
    times, errs, prepared = {}, {}, {}
    for ci, c in enumerate(cases):
        q, k, v = c.arrays()
        mask = c.mask()
        ref = None
        for key, lib, threads in configs:
            lib.set_threads(threads)
            try:
                call, output = lib.prepare(c, q, k, v, mask)
                call()  # warm-up (and the output checked below)
            except Exception as e:  # a peer that cannot run this call: say so, go on
                log("  %s on '%s': %s: %s" % (key, c.name, type(e).__name__, e))
                continue
            out = np.array(output())
            if c.query_pad:  # padded queries: libattn writes zeros, the peers compute them
                out = np.where(c.real_queries()[:, None, :, None], out, 0.0)
            if ref is None and lib.name == "libattn":
                ref = out
            errs[(ci, key)] = max_abs_diff(out, ref) if ref is not None else float("nan")
            inner = 1 if c.cold else calibrate(call, min_sample_s)
            prepared[(ci, key)] = (call, inner, lib, threads)
            times[(ci, key)] = []
    for r in range(rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        for ci, c in enumerate(cases):
            for key, _, _ in order:
                if (ci, key) not in prepared:
                    continue
                call, inner, lib, threads = prepared[(ci, key)]
                lib.set_threads(threads)
                times[(ci, key)].append(best_of(call, reps, inner, evict if c.cold else None))
        log("  round %d/%d done" % (r + 1, rounds))
    return times, errs


def median_ratio(times, a, b):
    ta, tb = times.get(a), times.get(b)
    if not ta or not tb:
        return float("nan")
    return statistics.median(x / y for x, y in zip(ta, tb))


# ------------------------------------------------------------------------------------------
# Context: date, commit, machine limits
# ------------------------------------------------------------------------------------------

def run_sweep(ns, lib, peers, rounds, reps, peak1, record, log):
    """GFLOP/s of every library at each n of attn_bench's sweep shapes, interleaved as the table
    is; record["sweep"] gets one entry per (n, library), the shape in record["sweep_shape"]."""
    cases = sweep_cases(ns)
    configs = [("libattn", lib, 1)] + [(p.name, p, 1) for p in peers]
    log("peers.py: sweep, n = %s x %d libraries, 1 thread each ..."
        % (",".join(str(n) for n in ns), len(configs)))
    times, errs = run_interleaved(cases, configs, rounds, reps, None, 0.005, log)
    record["sweep_shape"] = {"batch": 1, "heads": 8, "head_dim": 128, "causal": False,
                             "layout": "bhsd", "threads": 1}
    # time_s: the median over rounds of each round's fastest call; gflops from it
    record["sweep"] = []
    del record["table"], record["threads"]
    print("\nSweep: GFLOP/s against n, B 1, H 8, head_dim 128, non-causal, 1 thread everywhere "
          "(the shapes of attn_bench's sweep). peer / libattn = peer time / libattn time "
          "(> 1: libattn is faster); max diff: max |peer output - libattn output|.\n")
    head = "| n | libattn GFLOP/s | of peak |"
    head += "".join(" %s GFLOP/s | %s / libattn | max diff |" % (p.name, p.name) for p in peers)
    print(head)
    print("|---" * (3 + 3 * len(peers)) + "|")
    for ci, c in enumerate(cases):
        row = "| %d |" % c.Sq
        for key, who, _ in configs:
            t = times.get((ci, key))
            if not t:  # this library could not run the call (said above)
                row += " – | – |" if key == "libattn" else " – | – | – |"
                continue
            tm = statistics.median(t)
            g = c.gflop() / tm
            rec = {"n": c.Sq, "impl": key, "version": who.version, "time_s": tm, "gflops": g}
            if key == "libattn":
                rec["isa"] = who.isa
                row += " %s | %s |" % (fmt(g, 1), fmt(g / peak1) if peak1 else "–")
            else:
                ratio = median_ratio(times, (ci, key), (ci, "libattn"))
                rec["ratio_to_libattn"] = ratio
                rec["max_abs_diff"] = errs.get((ci, key))
                row += " %s | %s | %s |" % (fmt(g, 1), fmt(ratio), "%.1e" % errs[(ci, key)])
            record["sweep"].append(rec)
        print(row)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def commit_of(repo):
    try:
        return subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def machine_limits(attn_bench, quick, log):
    """FMA peaks and stream read bandwidth from `attn_bench --peak-only` (~15-30 s; with
    --quick, its short version)."""
    if not attn_bench or not os.path.exists(attn_bench):
        log("  (no attn_bench at %s: FMA peak and read bandwidth not measured; build it or "
            "pass --attn-bench)" % attn_bench)
        return None
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "limits.json")
        cmd = [attn_bench, "--peak-only", "--patience", "30", "--json", path]
        r = subprocess.run(cmd + (["--quick"] if quick else []), capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(path):
            log("  attn_bench --peak-only failed:\n" + r.stdout + r.stderr)
            return None
        with open(path) as f:
            data = json.load(f)
    peak = {(p["isa"], p["threads"]): p["gflops"] for p in data.get("peak", [])}
    stream = {s["threads"]: (s["gbs"], s.get("isa", "?")) for s in data.get("stream", [])}
    return {"peak": peak, "stream": stream}


def fmt(x, digits=2):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return "%.*f" % (digits, x)


# ------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libattn.so"),
                    help="the libattn.so to measure (default: build/libattn.so of this checkout)")
    ap.add_argument("--repo", default=ROOT, help="checkout whose commit is printed")
    ap.add_argument("--attn-bench", default=None,
                    help="attn_bench for the FMA peak and read bandwidth (default: bench/attn_bench "
                         "beside --lib)")
    ap.add_argument("--no-limits", action="store_true", help="skip the peak / bandwidth run")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5)")
    ap.add_argument("--reps", type=int, default=None, help="calls per round, the best kept (3)")
    ap.add_argument("--n", type=int, default=2048, help="prefill length (default 2048)")
    ap.add_argument("--shapes", default="", help="comma-separated substrings of shape names")
    ap.add_argument("--peers", default="torch,onnxruntime,openvino",
                    help="comma-separated subset of torch,onnxruntime,openvino")
    ap.add_argument("--openvino-gqa", choices=("broadcast", "repeat"), default="broadcast",
                    help="OpenVINO's GQA: 5-D broadcast of K/V (default, no copy) or K/V "
                         "repeated per query head before the timed calls")
    ap.add_argument("--no-table", action="store_true", help="only the thread lines")
    ap.add_argument("--no-threads", action="store_true", help="skip the thread lines")
    ap.add_argument("--sweep", nargs="?", const="", default=None, metavar="N,N,...",
                    help="instead of the table and the thread lines: GFLOP/s against sequence "
                         "length on attn_bench's sweep shapes (B 1, H 8, head_dim 128, "
                         "non-causal, 1 thread) for every library, for bench/plot.py --peers; "
                         "without a list, attn_bench's n = 128 ... 4096 (--quick: ... 1024)")
    ap.add_argument("--quick", action="store_true", help="2 rounds x 2 reps (a smoke run)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()
    sweep_ns = parse_sweep(args.sweep, args.quick) if args.sweep is not None else None
    rounds = args.rounds or (2 if args.quick else 5)
    reps = args.reps or (2 if args.quick else 3)
    attn_bench = args.attn_bench or os.path.join(os.path.dirname(os.path.abspath(args.lib)),
                                                 "bench", "attn_bench")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    t_start = time.time()
    psi0 = psi_total_us()
    lib = LibAttn(args.lib)
    lib.set_threads(1)
    peers, missing = [], []
    for cls in PEERS:
        if cls.name not in args.peers.split(","):
            continue
        try:
            peers.append(cls(args.openvino_gqa) if cls is OpenVino else cls())
        except Exception as e:  # ImportError, or a broken install
            missing.append("%s (%s: pip install %s)" % (cls.name, type(e).__name__, cls.install))

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = commit_of(args.repo)
    log("peers.py: measuring the machine's limits (attn_bench --peak-only) ...")
    limits = None if args.no_limits else machine_limits(attn_bench, args.quick, log)
    record = {"date": date, "commit": commit, "libattn": lib.version, "isa": lib.isa,
              "cpu": cpu_model(), "cpus": os.cpu_count(), "openvino_gqa": args.openvino_gqa,
              "rounds": rounds, "reps": reps, "cleared_env": _CLEARED_ENV,
              "peers": {p.name: p.version for p in peers}, "table": [], "threads": []}

    print("peers.py  %s  libattn %s at commit %s (%s, isa %s, default threads %d)"
          % (date, lib.version, commit, lib.path, lib.isa, lib.default_threads))
    print("machine: %s, %d CPUs, Python %s" % (record["cpu"], os.cpu_count(),
                                               platform.python_version()))
    peak1 = stream1 = None
    if limits:
        pk = limits["peak"]
        # the avx512fp16 level runs the avx512 kernels (fp32, what these shapes use)
        peak_isa = "avx512" if lib.isa == "avx512fp16" else lib.isa
        peak1 = pk.get((peak_isa, 1))
        s1, s2 = limits["stream"].get(1, (None, "?")), limits["stream"].get(2, (None, "?"))
        stream1 = s1[0]
        print("FMA peak (%s, register-only loop): %s GFLOP/s on 1 thread, %s on 2; read "
              "bandwidth (1 GiB, fastest loop): %s GB/s on 1 thread (%s), %s on 2 (%s)"
              % (peak_isa, fmt(peak1, 1), fmt(pk.get((peak_isa, 2)), 1), fmt(s1[0]), s1[1],
                 fmt(s2[0]), s2[1]))
        record["limits"] = {"peak_gflops_1t": peak1, "peak_gflops_2t": pk.get((peak_isa, 2)),
                            "stream_gbs_1t": s1[0], "stream_gbs_2t": s2[0]}
    print("peers: " + ", ".join("%s %s" % (p.name, p.version) for p in peers)
          + ("; OpenVINO GQA by %s" % ("5-D broadcast of K/V" if args.openvino_gqa ==
                                      "broadcast" else "repeated K/V")
             if any(p.name == "openvino" for p in peers) else "")
          + ("; not importable: " + ", ".join(missing) if missing else ""))
    if _CLEARED_ENV:
        print("ignored from the environment: " + ", ".join("%s=%s" % kv
                                                         for kv in _CLEARED_ENV.items()))
    print("timing: %d interleaved rounds; in each, every library runs each shape %d times and "
          "keeps its fastest call; figures are medians over rounds" % (rounds, reps))
    evict = Evictor()

    if sweep_ns:
        run_sweep(sweep_ns, lib, peers, rounds, reps, peak1, record, log)

    if not args.no_table and not sweep_ns:
        cases = table_cases(args)
        configs = [("libattn", lib, 1)] + [(p.name, p, 1) for p in peers]
        log("peers.py: table, %d shapes x %d libraries, 1 thread each ..." % (len(cases),
                                                                              len(configs)))
        times, errs = run_interleaved(cases, configs, rounds, reps, evict, 0.0, log)
        print("\n1 thread everywhere (torch.set_num_threads(1), ORT intra_op_num_threads=1, "
              "OpenVINO INFERENCE_NUM_THREADS=1). peer / libattn = peer time / libattn time "
              "(> 1: libattn is faster).\n")
        head = "| shape | libattn ms | libattn GFLOP/s | of peak (decode: of stream) |"
        head += "".join(" %s / libattn |" % p.name for p in peers)
        print(head)
        print("|---" * (4 + len(peers)) + "|")
        for ci, c in enumerate(cases):
            t = times.get((ci, "libattn"))
            if not t:
                continue
            tm = statistics.median(t)
            g = c.gflop() / tm
            if c.cold:
                gbs = c.kv_bytes() / tm * 1e-9
                frac = gbs / stream1 if stream1 else float("nan")
                lim = "%s (%s GB/s K+V)" % (fmt(frac), fmt(gbs))
            else:
                frac = g / peak1 if peak1 else float("nan")
                lim = fmt(frac)
            row = "| %s | %s | %s | %s |" % (c.name, fmt(tm * 1e3, 2), fmt(g, 1), lim)
            rec = {"shape": c.name, "libattn_s": tm, "libattn_gflops": g, "of_limit": frac}
            for p in peers:
                ratio = median_ratio(times, (ci, p.name), (ci, "libattn"))
                row += " %s |" % fmt(ratio)
                rec[p.name + "_ratio"] = ratio
                rec[p.name + "_max_abs_diff"] = errs.get((ci, p.name))
            print(row)
            record["table"].append(rec)
        print("\nmax |peer output - libattn output| (same inputs; padded batch: libattn "
              "seq_lens_k, peers a bool mask of causal and key padding; with query padding "
              "libattn also gets QUERY_VALID and the outputs are compared on the real queries):\n")
        print("| shape |" + "".join(" %s |" % p.name for p in peers))
        print("|---" * (1 + len(peers)) + "|")
        for ci, c in enumerate(cases):
            print("| %s |" % c.name + "".join(
                " %s |" % ("%.1e" % errs[(ci, p.name)] if (ci, p.name) in errs else "–")
                for p in peers))

    torch_peer = next((p for p in peers if p.name == "torch"), None)
    if not args.no_threads and not sweep_ns:
        cases = thread_cases()
        d = lib.default_threads
        configs = [("libattn 1t", lib, 1), ("libattn default", lib, 0)]
        if torch_peer:
            configs += [("torch 1t", torch_peer, 1), ("torch default", torch_peer, 0)]
        log("peers.py: thread lines, %d calls ..." % len(cases))
        times, errs = run_interleaved(cases, configs, rounds, reps, None, 0.002, log)
        td = torch_peer.default_threads if torch_peer else 0
        print("\nPer-call time (µs) of small calls: libattn on 1 thread and on its default (%d), "
              "PyTorch on 1 and on its default (%d). Target: default <= 1 thread, and "
              "<= PyTorch.\n" % (d, td))
        print("| call | libattn 1t | libattn default | default / 1t | torch 1t | torch default "
              "| libattn default / torch default | max diff |")
        print("|---" * 8 + "|")
        for ci, c in enumerate(cases):
            med = {key: statistics.median(times[(ci, key)]) * 1e6
                   for key, _, _ in configs if times.get((ci, key))}
            r1 = median_ratio(times, (ci, "libattn default"), (ci, "libattn 1t"))
            r2 = median_ratio(times, (ci, "libattn default"), (ci, "torch default"))
            print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                c.name, fmt(med.get("libattn 1t"), 1), fmt(med.get("libattn default"), 1),
                fmt(r1), fmt(med.get("torch 1t"), 1), fmt(med.get("torch default"), 1), fmt(r2),
                "%.1e" % errs[(ci, "torch 1t")] if (ci, "torch 1t") in errs else "–"))
            record["threads"].append({"call": c.name, "us": med, "default_over_1t": r1,
                                      "libattn_default_over_torch_default": r2})
        if torch_peer:
            torch_peer.set_threads(1)

    psi1 = psi_total_us()
    wall = time.time() - t_start
    share = (psi1 - psi0) / (wall * 1e6)
    print("\nrun: %.0f s; CPU pressure during the run %s%% (share of the time some task waited "
          "for a CPU; above ~5%% the figures are noisy)" % (wall, fmt(100 * share, 0)))
    record["run_seconds"], record["cpu_pressure"] = wall, share
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1, default=float)


if __name__ == "__main__":
    main()
