#!/usr/bin/env python3
"""Write index.txt (read by tests/conformance) from cases.json; optionally copy the data files.

Usage:
  python3 make_index.py                       # rewrite index.txt from cases.json (this folder)
  python3 make_index.py --check               # exit 1 if index.txt is stale, a file is missing
                                              # or a file's size does not match its shape
  python3 make_index.py --copy-from DIR       # copy cases.json and the files of every case from
                                              # DIR (the converted ONNX vectors), then rewrite
                                              # index.txt

Every case the 0.2 C API can express is a `run` line. A case is `skip` only when cases.json uses
a value this script does not know (a new layout, dtype, mask kind, causal kind, qk mode or
later_feature); the C++ test fails when any `skip` line exists, so a new kind of case can never
pass silently.

index.txt: '#' comments, then one line per case, whitespace-separated key=value tokens
('-' = absent; lists are comma-separated):
  run  name=N opset=23|24 layout=BHSD|BSHD dtype=float32|float16
       batch=B heads_q=HQ heads_kv=HKV seq_q=SQ seq_k=SK head_dim=D head_dim_v=DV past_seq=P
       causal=none|top_left|bottom_right|offset causal_offset=-|o|o0,o1,..   (offset per batch)
       scale=default|<float32 value> softcap=-|<float>
       mask=-|bool|additive mask_shape=-|d0,d1,..   (file shape, right-aligned to [B,Hq,Sq,Sk];
                                                      its key axis may be shorter than SK)
       nonpad_kv_seqlen=-|n0,n1,..  softmax_precision=-|<ONNX dtype code>  qk_mode=-|0|1|2|3
       fully_masked_rows=R features=-|f1,f2,..   (cases.json later_features, for the printout)
  skip name=N features=f1,f2 reason=<free text to the end of the line>
Files of a case: N.q.f32 N.k.f32 N.v.f32 N.out.f32, + N.mask.u8 (mask=bool, one byte per
element, 1 = attend) or N.mask.f32 (mask=additive), + N.qk.f32 (qk_mode given, always
[B, Hq, SQ, SK]); float32 little-endian, Q/K/V/out in the case's layout (float16 data widened
exactly). For past cases the k/v files hold ONNX's present_key/present_value (past + new).
"""
import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KNOWN_FEATURES = {"fp16", "float_mask", "mask_per_batch_head", "softcap", "past_kv", "head_dim_v",
                  "qk_matmul_output", "softmax_precision", "nonpad_kv_seqlen", "causal_offset"}


def unknown(c):
    """'' if the harness knows every value the case uses, else what it does not know."""
    why = []
    if c["layout"] not in ("BHSD", "BSHD"):
        why.append("layout " + c["layout"])
    if c["dtype"] not in ("float32", "float16"):
        why.append("dtype " + c["dtype"])
    extra = set(c["later_features"]) - KNOWN_FEATURES
    if extra:
        why.append("unknown features " + ",".join(sorted(extra)))
    if c["causal"] not in ("none", "top_left", "bottom_right", "offset"):
        why.append("causal " + c["causal"])
    m = c["mask"]
    if m is not None:
        if (m["kind"], m["dtype"]) not in (("bool", "u8"), ("additive", "f32")):
            why.append("mask %s/%s" % (m["kind"], m["dtype"]))
        if not 1 <= len(m["shape"]) <= 4:
            why.append("mask rank %d" % len(m["shape"]))
    qk = c["qk_matmul_output"]
    if qk is not None and qk["mode"] not in (0, 1, 2, 3):
        why.append("qk_matmul_output mode %r" % qk["mode"])
    return "; ".join(why)


def files_of(c):
    """(file name, expected byte count) of every file the case needs."""
    B, Hq, Hk = c["batch"], c["heads_q"], c["heads_kv"]
    Sq, Sk, D, Dv = c["seq_q"], c["seq_k"], c["head_dim"], c["head_dim_v"]
    f = c["files"]
    out = [(f["q"], 4 * B * Hq * Sq * D), (f["k"], 4 * B * Hk * Sk * D),
           (f["v"], 4 * B * Hk * Sk * Dv), (f["out"], 4 * B * Hq * Sq * Dv)]
    m = c["mask"]
    if m is not None:
        n = 1
        for d in m["shape"]:
            n *= d
        out.append((m["file"], n * (1 if m["dtype"] == "u8" else 4)))
    qk = c["qk_matmul_output"]
    if qk is not None:
        out.append((qk["file"], 4 * B * Hq * Sq * Sk))
    return out


def check_names(c):
    """The C++ test derives file names from the case name: make sure cases.json agrees."""
    n = c["name"]
    want = {p: "%s.%s.f32" % (n, p) for p in ("q", "k", "v", "out")}
    if c["files"] != want:
        raise SystemExit("%s: unexpected file names %r" % (n, c["files"]))
    m = c["mask"]
    if m is not None and m["file"] != "%s.mask.%s" % (n, m["dtype"]):
        raise SystemExit("%s: unexpected mask file %s" % (n, m["file"]))
    qk = c["qk_matmul_output"]
    if qk is not None:
        if qk["file"] != n + ".qk.f32":
            raise SystemExit("%s: unexpected qk file %s" % (n, qk["file"]))
        if qk["shape"] != [c["batch"], c["heads_q"], c["seq_q"], c["seq_k"]]:
            raise SystemExit("%s: qk shape %r is not [B, Hq, Sq, Sk]" % (n, qk["shape"]))


def ints(v):
    if v is None:
        return "-"
    if isinstance(v, list):
        return ",".join("%d" % x for x in v)
    return "%d" % v


def index_lines(doc):
    src = doc["source"]
    out = [
        "# ONNX Attention conformance cases, generated by make_index.py from cases.json: do not edit.",
        "# Source: %s @ %s (%s), %s" % (src["repository"], src["commit"], src["path"], src["license"]),
    ]
    for c in doc["cases"]:
        check_names(c)
        why = unknown(c)
        feats = ",".join(c["later_features"]) or "-"
        if why:
            out.append("skip name=%s features=%s reason=%s" % (c["name"], feats, why))
            continue
        scale = "default" if c["scale"] is None else repr(float(c["scale"]))  # float32 value
        softcap = "-" if c["softcap"] is None else repr(float(c["softcap"]))
        m = c["mask"]
        qk = c["qk_matmul_output"]
        out.append(
            "run name=%s opset=%d layout=%s dtype=%s batch=%d heads_q=%d heads_kv=%d seq_q=%d "
            "seq_k=%d head_dim=%d head_dim_v=%d past_seq=%d causal=%s causal_offset=%s scale=%s "
            "softcap=%s mask=%s mask_shape=%s nonpad_kv_seqlen=%s softmax_precision=%s qk_mode=%s "
            "fully_masked_rows=%d features=%s"
            % (c["name"], c["opset"], c["layout"], c["dtype"], c["batch"], c["heads_q"],
               c["heads_kv"], c["seq_q"], c["seq_k"], c["head_dim"], c["head_dim_v"],
               c["past_seq"], c["causal"], ints(c["causal_offset"]), scale, softcap,
               "-" if m is None else m["kind"], "-" if m is None else ints(m["shape"]),
               ints(c["nonpad_kv_seqlen"]), ints(c["softmax_precision"]),
               "-" if qk is None else "%d" % qk["mode"], c["fully_masked_rows"], feats))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--copy-from", metavar="DIR")
    args = ap.parse_args()

    if args.copy_from:
        shutil.copyfile(os.path.join(args.copy_from, "cases.json"), os.path.join(HERE, "cases.json"))
    with open(os.path.join(HERE, "cases.json")) as f:
        doc = json.load(f)
    needed = [nb for c in doc["cases"] for nb in files_of(c)]
    if args.copy_from:
        for n, _ in needed:
            shutil.copyfile(os.path.join(args.copy_from, n), os.path.join(HERE, n))
    text = "\n".join(index_lines(doc)) + "\n"
    path = os.path.join(HERE, "index.txt")
    nrun = sum(line.startswith("run ") for line in text.splitlines())
    if args.check:
        bad = []
        for n, size in needed:
            p = os.path.join(HERE, n)
            if not os.path.exists(p):
                bad.append("missing: " + n)
            elif os.path.getsize(p) != size:
                bad.append("%s: %d bytes, expected %d" % (n, os.path.getsize(p), size))
        with open(path) as f:
            stale = f.read() != text
        for b in bad:
            print(b)
        if stale:
            print("index.txt is stale: rerun make_index.py")
        print("%d cases, %d run, %d files, %s" % (
            len(doc["cases"]), nrun, len(needed), "FAILED" if bad or stale else "ok"))
        return 1 if bad or stale else 0
    with open(path, "w") as f:
        f.write(text)
    print("wrote index.txt: %d cases, %d run, %d skip, %d files" % (
        len(doc["cases"]), nrun, len(doc["cases"]) - nrun, len(needed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
