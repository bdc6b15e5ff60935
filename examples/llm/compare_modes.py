#!/usr/bin/env python3
"""SmolLM2-135M-Instruct in each libattn compute mode: greedy tokens and perplexity vs EXACT.

    export ATTN_LIBRARY=build/libattn.so PYTHONPATH=bindings/python
    ATTN_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python examples/llm/compare_modes.py

Loads the model once, then for each mode (default exact, int8, bf16) runs every attention call
with Desc(compute=mode): greedy generation of the three prompts of smollm2.py (a right-padded
batch, as smollm2.py) and the perplexity of lighthouses.txt by teacher forcing (one causal
prefill call per layer over the whole text). Batch invariance is off in every mode (INT8 and
BF16 would run as EXACT under it), so the modes differ only in ATTN_PARAM_COMPUTE. Prints, per
mode, whether each prompt's tokens equal EXACT's, the perplexity and its relative difference
from EXACT against the target (+0.5 % INT8, +0.2 % BF16), and for each prompt's first token
(the prefill's logits: every mode computes them from the same tokens) EXACT's margin between its
top two logits beside each mode's largest logit change. Exits 1 if a mode's tokens differ from
EXACT's or its perplexity misses the target.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import attn  # noqa: E402
import model as M  # noqa: E402
import smollm2  # noqa: E402

# the largest perplexity increase over EXACT each fast mode may show, in percent
TARGETS = {"int8": 0.5, "bf16": 0.2}


def cpu_name() -> str:
    """The first processor of /proc/cpuinfo as "model name (family F model M)": a virtual
    machine's model name often omits the generation."""
    info = {}
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            first = f.read().split("\n\n", 1)[0]
        info = dict(map(str.strip, line.split(":", 1)) for line in first.splitlines()
                    if ":" in line)
    if "model name" not in info:
        return platform.processor() or platform.machine()
    return "%s (family %s model %s)" % (info["model name"], info.get("cpu family", "?"),
                                        info.get("model", "?"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    smollm2.add_model_options(ap)
    ap.add_argument("--modes", default="exact,int8,bf16",
                    help="comma-separated compute modes, the first is the reference "
                         "(default exact,int8,bf16)")
    args = ap.parse_args(argv)
    modes = args.modes.split(",")
    for m in modes:
        if m not in M.compute_modes():
            ap.error("--modes: %r is not one of %s" % (m, ", ".join(M.compute_modes())))
    if args.threads is not None:
        attn.set_num_threads(args.threads)
    args.compute, args.no_batch_invariant, args.paged, args.page_size = modes[0], True, False, 0
    llm, tok, texts, what, t_load = smollm2.load(args)
    prompts = args.prompt or smollm2.DEFAULT_PROMPTS
    ids = [tok.encode(t) for t in texts]
    text = smollm2.text_ids(tok, args.text, args.max_tokens)

    print("%s UTC; %s, %d logical CPUs" % (
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), cpu_name(),
        os.cpu_count() or 0))
    print("libattn %s (%s kernel, %d thread%s), numpy %s" % (
        attn.version(), attn.isa(), attn.num_threads(), "" if attn.num_threads() == 1 else "s",
        np.__version__))
    print("model: %s, %d layers; %s; loaded in %.1f s" % (llm.cfg.name, llm.cfg.n_layers, what,
                                                          t_load))
    print("prompts: %d (%s tokens), greedy, %d new tokens at most; text: %s, %d tokens in one "
          "window (one causal prefill call per layer); batch invariance off in every mode"
          % (len(ids), "/".join(str(len(p)) for p in ids), args.max_new_tokens,
             os.path.basename(args.text), len(text)))

    rows, failed = [], []
    for mode in modes:
        llm.compute = mode
        out, logits, _ = smollm2.generate(llm, ids, args.max_new_tokens, tok.eos_id,
                                          tok.eos_id)
        r = smollm2.perplexity(llm, text)
        rows.append((mode, out, r, [lg[0].astype(np.float64) for lg in logits]))
        print("\n%s (%s): perplexity %.4f (mean NLL %.6f, %d predicted tokens, %.1f s)"
              % (mode, M.compute_unit(mode), r["ppl"], r["mean_nll"], r["predicted"],
                 r["seconds"]))
        for b, p in enumerate(prompts):
            print("  [%d] %s" % (b, tok.decode([t for t in out[b] if t != tok.eos_id])
                                  .strip().replace("\n", " / ")))

    ref_mode, ref_out, ref, ref_first = rows[0]
    print("\nfirst token of each prompt (the prefill's logits):")
    for b, z in enumerate(ref_first):
        top = np.argsort(-z)[:2]
        name = lambda t: "%d %r" % (t, tok.decode([int(t)]))  # noqa: E731
        line = "  [%d] %s: %s, margin to %s %.3f" % (b, ref_mode, name(top[0]), name(top[1]),
                                                     z[top[0]] - z[top[1]])
        for mode, _, _, first in rows[1:]:
            line += "; %s: %s, max |logit change| %.3f" % (
                mode, name(np.argmax(first[b])), np.abs(first[b] - z).max())
        print(line)
    print("\nvs %s:" % ref_mode)
    print("  %-6s %-32s %-22s %12s %10s %8s" % ("mode", "unit", "greedy tokens", "perplexity",
                                               "rel diff", "target"))
    for mode, out, r, _ in rows:
        same = [a == b for a, b in zip(out, ref_out)]
        rel = 100.0 * (r["ppl"] / ref["ppl"] - 1.0)
        target = TARGETS.get(mode)
        tokens = "reference" if mode == ref_mode else (
            "SAME (%d/%d prompts)" % (sum(same), len(same)) if all(same) else
            "DIFFERENT: prompt %s" % ",".join(str(b) for b, s in enumerate(same) if not s))
        print("  %-6s %-32s %-22s %12.4f %+9.3f%% %8s" % (
            mode, M.compute_unit(mode), tokens, r["ppl"], rel,
            "" if target is None or mode == ref_mode else "+%.1f%%" % target))
        if mode != ref_mode and not all(same):
            failed.append("%s: greedy tokens differ from %s" % (mode, ref_mode))
        if mode != ref_mode and target is not None and rel > target:
            failed.append("%s: perplexity %+.3f%% over %s (target +%.1f%%)"
                          % (mode, rel, ref_mode, target))
    if failed:
        print("\nFAILED: " + "; ".join(failed))
        return 1
    print("\nall modes within target: same greedy tokens, perplexity within the targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
