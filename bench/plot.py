#!/usr/bin/env python3
"""Plot libattn's GFLOP/s against sequence length, next to the baselines and the peers.

Reads the JSON that attn_bench writes (section "sweep": B=1, H=8, head_dim 128, non-causal,
one thread) and draws one curve per implementation, with the FMA peaks measured in the same run
as horizontal lines. With --peers, also the curves of PyTorch, ONNX Runtime and OpenVINO from
`bench/peers/peers.py --sweep --json F` (the same shapes, 1 thread, the same arrays for every
library), and libattn's own curve of that run (through the Python binding): compare a peer with
that one, measured in the same rounds, rather than across runs.

  python3 bench/plot.py --json bench_results.json            # plot an existing run
  python3 bench/plot.py --run build/bench/attn_bench          # run the sweep, then plot
  python3 bench/plot.py --run build/bench/attn_bench --quick  # shorter sweep (n <= 1024)
  python3 bench/plot.py --json bench_results.json --peers peers_sweep.json   # with the peers
  python3 bench/plot.py --json bench_results.json --markdown  # also print the README tables

Writes bench/attn_gflops.png unless --out says otherwise. Needs matplotlib.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fmt(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def busy(r):
    """A mark for figures measured while something else competed for the CPUs (cpu_pressure)."""
    p = r.get("cpu_pressure") if r else None
    return f" ⚠{100 * p:.0f}%" if p is not None and p > 0.05 else ""


def print_markdown(data):
    """The figures of one run as Markdown tables (the README keeps the last full run's)."""
    m = data.get("machine", {})
    print(f'Machine: {m.get("cpu")}, {m.get("hardware_threads")} hardware threads, {m.get("kernel")}; '
          f'libattn {m.get("libattn_version")} (default ISA {m.get("libattn_default_isa")}); '
          f'OpenBLAS default corename {m.get("openblas_corename_default")}; g++ {m.get("compiler")}; '
          f'{m.get("date_utc")}; mode {m.get("mode")}; load average at start {m.get("load_average_start")}.\n')
    peaks = {(p["isa"], p.get("threads", 1)): p["gflops"] for p in data.get("peak", [])}
    stream = {s["threads"]: s["gbs"] for s in data.get("stream", [])}
    stream_isa = {s["threads"]: s.get("isa") for s in data.get("stream", [])}
    loops = {(s["isa"], s["threads"]): s["gbs"] for s in data.get("stream_loops", [])}
    print("⚠NN%: measured while other work took NN % of the time (CPU pressure); treat it with care.\n")
    print("| threads | FMA peak avx512 | FMA peak avx2 | mul+add peak sse2 | stream read (fastest loop) |"
          + ("".join(f" read {i} |" for i in ("avx512", "avx2", "sse2")) if loops else ""))
    print("|---|---|---|---|---|" + ("---|" * 3 if loops else ""))
    for t in (1, 2):
        which = f" ({stream_isa[t]})" if stream_isa.get(t) else ""
        print(f'| {t} | {fmt(peaks.get(("avx512", t)), 1)} GFLOP/s | {fmt(peaks.get(("avx2", t)), 1)} GFLOP/s | '
              f'{fmt(peaks.get(("sse2", t)), 1)} GFLOP/s | {fmt(stream.get(t))} GB/s{which} |'
              + ("".join(f' {fmt(loops.get((i, t)))} |' for i in ("avx512", "avx2", "sse2")) if loops else ""))
    print()
    rows = [r for r in data.get("prefill", []) if r["layout"] == "bhsd"]
    if rows:
        print(f'Prefill, B=1, H={rows[0]["heads"]}, n={rows[0]["n"]}, BHSD (GFLOP/s; "of peak": ratio to the same '
              'ISA\'s FMA peak at the same thread count):\n')
        print("| ISA | head_dim | causal | mask | 1 thread | of peak | 2 threads | of peak | speedup |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            if r["threads"] != 1:
                continue
            two = next((t for t in rows if t["threads"] == 2 and all(
                t[k] == r[k] for k in ("isa", "head_dim", "causal", "mask"))), None)
            print(f'| {r["isa"]} | {r["head_dim"]} | {"yes" if r["causal"] else "no"} | {r["mask"]} | '
                  f'{fmt(r["gflops"], 1)}{busy(r)} | {fmt(r.get("peak_ratio"))} | '
                  f'{fmt(two["gflops"], 1) + busy(two) if two else "–"} | {fmt(two.get("peak_ratio")) if two else "–"} | '
                  f'{fmt(r["best_s"] / two["best_s"]) if two else "–"} |')
        print()
    dec = data.get("decode", [])
    if dec:
        print("Decode, seq_q=1, seq_k=32768, heads 32/8, head_dim 128 (K+V GB/s; ratio to the 2-thread stream):\n")
        print("| ISA | threads | cold GB/s | of 2-thread stream | hot GB/s |")
        print("|---|---|---|---|---|")
        for r in dec:
            if r["mode"] != "cold":
                continue
            hot = next((h for h in dec if h["mode"] == "hot" and h["isa"] == r["isa"] and h["threads"] == r["threads"]), None)
            print(f'| {r["isa"]} | {r["threads"]} | {fmt(r["gbs"])}{busy(r)} | {fmt(r["ratio_to_stream_2_threads"])} | '
                  f'{fmt(hot["gbs"]) if hot else "–"} |')
        print()
    ob = data.get("openblas", [])
    if ob:
        print("Unfused OpenBLAS baseline (GFLOP/s end to end, and of its two GEMMs alone):\n")
        print("| corename | head_dim | causal | threads | end to end | GEMMs alone | softmax share |")
        print("|---|---|---|---|---|---|---|")
        for r in ob:
            print(f'| {r["corename"]}{" (forced)" if r["forced"] else ""} | {r["head_dim"]} | '
                  f'{"yes" if r["causal"] else "no"} | {r["threads"]} | {fmt(r["gflops"], 1)} | '
                  f'{fmt(r["gemm_only_gflops"], 1)} | {fmt(100 * (1 - r["gemm_share"]), 0)} % |')
        print()
    small = data.get("small", [])
    if small:
        print("Small shapes, H=1, head_dim 64 (ns per call):\n")
        print("| n | scalar loop | libattn 1 thread | libattn 2 threads |")
        print("|---|---|---|---|")
        for n in sorted({r["n"] for r in small}):
            ref = next((r["ns_per_call"] for r in small if r["n"] == n and r["impl"] == "scalar_ref"), None)
            lib = {r["threads"]: r["ns_per_call"] for r in small if r["n"] == n and r["impl"] == "libattn"}
            print(f"| {n} | {fmt(ref, 0)} | {fmt(lib.get(1), 0)} | {fmt(lib.get(2), 0)} |")
        print()
    mem = data.get("memory", [])
    if mem:
        print("Memory, attn_forward at n=16384, d=64: peak RSS growth beyond the operands: " + ", ".join(
            f'{fmt(r["growth_mib"])} MiB ({r["threads"]} thread{"s" if r["threads"] > 1 else ""})' for r in mem)
            + f' (operands {fmt(mem[0]["operands_mib"], 0)} MiB; a seq x seq buffer would be '
            f'{fmt(mem[0]["seq_x_seq_buffer_mib"], 0)} MiB).\n')
    tg = data.get("targets", [])
    if tg:
        print("Targets:\n")
        print("| target | ISA | measured | goal | |")
        print("|---|---|---|---|---|")
        for t in tg:
            print(f'| {t["target"]} | {t["isa"]} | {fmt(t["value"], 3)} | {t["comparison"]} {fmt(t["goal"])} | '
                  f'{"pass" if t["pass"] else "**miss**"}{busy(t)} |')
        print()


# peers.py's names of the libraries, as the plot's legend writes them, and what each one calls.
PEER_NAMES = {
    "torch": ("PyTorch", "SDPA"),
    "onnxruntime": ("ONNX Runtime", "opset-23 Attention"),
    "openvino": ("OpenVINO", "opset13 SDPA"),
}
SWEEP_SHAPE = {"batch": 1, "heads": 8, "head_dim": 128, "causal": False, "threads": 1}


def load_peers(path):
    """The sweep of `peers.py --sweep --json path`; exits if it is not attn_bench's shape family."""
    with open(path) as f:
        peers = json.load(f)
    if not peers.get("sweep"):
        sys.exit(f"{path} has no 'sweep' section: write it with bench/peers/peers.py --sweep --json {path}")
    shape = peers.get("sweep_shape", {})
    wrong = {k: shape.get(k) for k, v in SWEEP_SHAPE.items() if shape.get(k) != v}
    if wrong:
        sys.exit(f"{path}: the sweep is not attn_bench's shapes {SWEEP_SHAPE}: {wrong}")
    return peers


def peer_label(impl, version, peers):
    if impl == "libattn":
        return f'libattn {peers.get("isa", "")}, peers.py run (Python)'.replace("  ", " ")
    name, call = PEER_NAMES.get(impl, (impl, ""))
    short = version.split("-")[0].split("+")[0]  # 2.15.0+cu132 -> 2.15.0
    return f"{name} {short} ({call})" if call else f"{name} {short}"


def print_peers_markdown(peers):
    """The peers' sweep as a Markdown table: libattn's GFLOP/s and peer time / libattn time."""
    recs = peers["sweep"]
    impls = [i for i in ("torch", "onnxruntime", "openvino") if any(r["impl"] == i for r in recs)]
    print(f'Sweep against the peers (peers.py --sweep, {peers.get("date")}, {peers.get("cpu")}, '
          f'libattn {peers.get("libattn")} ISA {peers.get("isa")}; B 1, H 8, head_dim 128, '
          'non-causal, 1 thread; peer time / libattn time, > 1: libattn is faster):\n')
    print("| n | libattn GFLOP/s |" + "".join(f" {PEER_NAMES[i][0]} |" for i in impls))
    print("|---|---|" + "---|" * len(impls))
    for n in sorted({r["n"] for r in recs}):
        at = {r["impl"]: r for r in recs if r["n"] == n}
        lib = at.get("libattn", {}).get("gflops")
        print(f"| {n} | {fmt(lib, 1)} |" + "".join(
            f' {fmt(at[i].get("ratio_to_libattn")) if i in at else "–"} |' for i in impls))
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="bench_results.json", help="attn_bench output (read, or written by --run)")
    ap.add_argument("--run", metavar="ATTN_BENCH", help="run this attn_bench in --sweep-only mode first")
    ap.add_argument("--quick", action="store_true", help="with --run: a short sweep")
    ap.add_argument("--out", default=os.path.join(HERE, "attn_gflops.png"), help="PNG to write")
    ap.add_argument("--peers", metavar="PEERS_JSON",
                    help="also draw the peers: the JSON of bench/peers/peers.py --sweep --json")
    ap.add_argument("--markdown", action="store_true",
                    help="print the figures of a full run as Markdown tables (for bench/README.md)")
    args = ap.parse_args()

    if args.run:
        cmd = [args.run, "--sweep-only", "--json", args.json] + (["--quick"] if args.quick else [])
        print("running:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)

    with open(args.json) as f:
        data = json.load(f)
    peers = load_peers(args.peers) if args.peers else None
    if args.markdown:
        print_markdown(data)
        if peers:
            print_peers_markdown(peers)
    sweep = data.get("sweep", [])
    if not sweep:
        sys.exit(f"{args.json} has no 'sweep' section: run attn_bench without --no-sweep")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = {}
    for r in sweep:
        curves.setdefault(r["label"], []).append((r["n"], r["gflops"]))
    peer_style = {}
    if peers:
        marks = {"torch": ("D", "tab:red"), "onnxruntime": ("v", "tab:purple"),
                 "openvino": ("P", "tab:orange"), "libattn": ("o", "tab:blue")}
        for r in peers["sweep"]:
            label = peer_label(r["impl"], r.get("version", ""), peers)
            curves.setdefault(label, []).append((r["n"], r["gflops"]))
            marker, color = marks.get(r["impl"], ("x", "tab:gray"))
            if r["impl"] == "libattn":  # the reference of the peers' ratios: thin, same colour
                peer_style[label] = dict(marker=marker, markersize=4, linewidth=1.2,
                                         linestyle=(0, (1, 1)), color=color, alpha=0.8)
            else:
                peer_style[label] = dict(marker=marker, linewidth=1.8, color=color)

    def style(label):
        if label in peer_style:
            return peer_style[label]
        if label.startswith("libattn"):
            color = "tab:blue" if "avx512" in label else "tab:cyan"
            return dict(marker="o", linewidth=2.4, color=color)
        if label.startswith("OpenBLAS"):
            forced = any(r.get("forced") for r in sweep if r["label"] == label)
            return dict(marker="s", linewidth=1.6, linestyle="--",
                        color="tab:green" if forced else "tab:olive")
        return dict(marker="^", linewidth=1.6, linestyle=":", color="tab:brown")

    fig, ax = plt.subplots(figsize=(9, 6.2), dpi=120)
    order = sorted(curves, key=lambda l: (l in peer_style and "peers.py" not in l,
                                          not l.startswith("libattn"), not l.startswith("OpenBLAS"),
                                          "avx2" in l or "default pick" in l, l))
    for label in order:
        pts = sorted(curves[label])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **style(label))

    ns = sorted({r["n"] for r in sweep} | ({r["n"] for r in peers["sweep"]} if peers else set()))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns)
    ax.set_xticklabels([str(n) for n in ns])
    ax.set_xlim(ns[0] / 1.25, ns[-1] * 1.25)

    # The FMA peaks of the same run: the ceiling each ISA's kernel aims at.
    colors = {"avx512": "black", "avx2": "dimgray"}
    for p in data.get("peak", []):
        if p["isa"] in colors and p.get("gflops") and p.get("threads", 1) == 1:
            ax.axhline(p["gflops"], color=colors[p["isa"]], linewidth=1, linestyle="-.", alpha=0.7)
            ax.text(ns[0] / 1.2, p["gflops"], f' {p["isa"]} FMA peak, 1 core: {p["gflops"]:.0f} GFLOP/s',
                    va="bottom", ha="left", fontsize=8, color=colors[p["isa"]])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("sequence length n (seq_q = seq_k)")
    ax.set_ylabel("GFLOP/s  (4·H·n²·d / time)")
    m = data.get("machine", {})
    title = ("Attention forward, fp32, B=1, H=8, head_dim 128, non-causal, 1 thread\n"
             f'{m.get("cpu", "?")}, {m.get("hardware_threads", "?")} threads, '
             f'libattn {m.get("libattn_version", "?")}, {m.get("date_utc", "")[:10]}')
    if peers:
        title += f'; peers: peers.py run of {peers.get("date", "?")[:10]}'
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    load = m.get("load_average_start", "")
    notes = []
    if load and float(load.split()[0]) > 1.0:
        notes.append(f"the machine was busy during the attn_bench run (load average {load})")
    if peers and (peers.get("cpu_pressure") or 0) > 0.05:
        notes.append(f'the peers run waited for a CPU {100 * peers["cpu_pressure"]:.0f} % of its time')
    if notes:
        ax.text(0.99, 0.02, "note: " + ";\n".join(notes) + ":\nfigures are low and noisy",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=8, color="tab:red")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2 if peers else 3, fontsize=9,
              frameon=False)
    fig.tight_layout()
    fig.savefig(args.out, bbox_inches="tight")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
