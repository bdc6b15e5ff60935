#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/fuzz_attn.cpp into fuzz/corpus/ (one small file per seed).

The byte layout mirrors decode() in fuzz_attn.cpp, front to back:
  op isa threads flags B HKV group SQ SK D [decode: HQ SK D] [invalid: kind (+2)] causal
  scale-mode [scale bytes] stride-mode x4 key_valid-mode allowed-mode nulls values-byte
  [stride bytes per operand] then a tail the fuzzer reads for masks and values (an exhausted
  input continues as a deterministic stream, so tails stay short).
Run it again after changing the layout: python3 fuzz/make_corpus.py
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")

# op: 0..3 forward, 4..5 weights, 6 attn_simple, 7 misc API
FWD, WEIGHTS, SIMPLE, MISC = 0, 4, 6, 7
# flags
INVALID, LONG_K, DECODE, WIDE_D, LONG_Q = 0x01, 0x02, 0x04, 0x08, 0x10
# stride modes
DEF, BSHD, PADDED, BCAST, RANDOM, OVERFLOW = 0, 3, 4, 5, 6, 7
# mask modes
M_NONE, M_TRUE, M_FALSE, M_RANDOM, M_ONE = range(5)
# value modes
V_MOD, V_STREAM, V_HOSTILE, V_SPARSE = range(4)
# special values (index into kSpecials)
NAN, INF, NINF, BIG, NBIG, DENORM, NDENORM, NZERO, ZERO, FLTMAX = range(10)


def seed(op=FWD, isa=0, threads=1, check_threads=False, check_padding=False, flags=0,
         b=1, hkv=1, group=1, sq=3, sk=4, d=5, decode=None, invalid=None, causal=0,
         scale=None, strides=(DEF, DEF, DEF, DEF), bad_which=False, kv=M_NONE, al=M_NONE,
         nulls=23, values=V_MOD, lse=True, reconfigure=False, stride_bytes=b"", tail=64,
         rng_seed=0):
    """Encodes one input. Dimension values are the decoded ones (the encoder inverts pick())."""
    out = bytearray()
    out.append(op)
    out.append(isa)
    out.append((threads - 1) | (0x80 if check_threads else 0) | (0x40 if check_padding else 0))
    out.append(flags)
    out += bytes([b - 1, hkv - 1, group - 1])
    out.append(sq - 1)
    out.append(sk - 60 if flags & LONG_K else sk - 1)
    out.append(d - 1)
    if flags & DECODE:
        hq, dsk, dd = decode
        out += bytes([hq - 1, (dsk - 4096) // 2, dd - 1])
    if flags & INVALID:
        out += bytes(invalid)
    if isinstance(causal, int) and 0 <= causal <= 2:
        out.append(causal)
    else:  # invalid: index into bad_causal via a byte >= 232
        out.append(234 + causal[1] if causal[1] < 22 else 240)
    if scale is None:
        out.append(0)
    elif scale[0] == "float":
        out.append(4)
        out += struct.pack(">f", scale[1])
    elif scale[0] == "special":
        out.append(5)
        out.append(scale[1])
    else:  # ("byte", n): (n - 128) / 64
        out.append(6)
        out.append(scale[1])
    for w, m in enumerate(strides):
        out.append(0xF8 | 4 if bad_which and w == 0 else m)
    out += bytes([kv, al, nulls])
    out.append(values | (0 if lse else 0x10) | (0x20 if reconfigure else 0))
    out += stride_bytes
    r = random.Random(rng_seed)
    out += bytes(r.randrange(256) for _ in range(tail))
    return bytes(out)


def main():
    seeds = {}
    # Basics on every kernel, both entry points.
    for isa, name in enumerate(["default", "scalar", "sse2", "avx2", "avx512"]):
        seeds[f"forward-tiny-{name}"] = seed(isa=isa, rng_seed=isa)
        seeds[f"weights-causal-{name}"] = seed(op=WEIGHTS, isa=isa, causal=1, sq=7, sk=5, d=9,
                                               rng_seed=10 + isa)
    seeds["forward-br-causal-gqa"] = seed(b=2, hkv=2, group=3, sq=9, sk=7, d=17, causal=2,
                                          threads=2, check_threads=True)
    seeds["forward-wide-long"] = seed(flags=LONG_K | WIDE_D | LONG_Q, sq=40, sk=150, d=67,
                                      causal=1, isa=4, threads=3, check_threads=True,
                                      values=V_STREAM)
    seeds["weights-long-k-tiles"] = seed(op=WEIGHTS, flags=LONG_K, sq=5, sk=193, d=3, isa=3,
                                         kv=M_RANDOM, values=V_STREAM)
    # weights has no V: nothing may be computed from a NULL v (batch / kv head offsets).
    seeds["weights-narrow-batch2-kv2"] = seed(op=WEIGHTS, b=2, hkv=2, sq=1, sk=40, d=5)
    seeds["decode-split"] = seed(flags=DECODE, decode=(4, 4200, 9), causal=2, threads=2,
                                 check_threads=True, values=V_STREAM)
    seeds["decode-one-key"] = seed(flags=DECODE, decode=(1, 4096, 3), kv=M_ONE,
                                   check_padding=True, values=V_STREAM)
    # Strides.
    seeds["strides-bshd"] = seed(b=2, hkv=3, sq=5, sk=6, d=4, strides=(BSHD,) * 4)
    seeds["strides-padded-out-gaps"] = seed(sq=4, sk=9, d=7, strides=(PADDED, DEF, PADDED, PADDED),
                                            stride_bytes=bytes([2, 1, 4, 0, 8, 3]))
    seeds["strides-broadcast-kv"] = seed(b=3, hkv=2, group=2, strides=(DEF, BCAST, BCAST, DEF),
                                         stride_bytes=bytes([1, 0]), kv=M_RANDOM,
                                         check_padding=True)
    seeds["strides-random-out-overlap"] = seed(sq=4, d=3, strides=(DEF, DEF, DEF, RANDOM),
                                               stride_bytes=bytes([0, 1, 2]))
    seeds["strides-random-inputs"] = seed(sq=4, d=3, strides=(RANDOM, RANDOM, RANDOM, DEF),
                                          stride_bytes=bytes([5, 0, 3, 7, 7, 0, 0, 0, 3]))
    seeds["strides-overflow"] = seed(strides=(OVERFLOW, DEF, DEF, OVERFLOW),
                                     stride_bytes=bytes([1, 2, 3, 4]))
    seeds["strides-bad-operand"] = seed(bad_which=True)
    # Invalid descriptors.
    seeds["dims-zero-seq-q"] = seed(flags=INVALID, invalid=[0 | (3 << 2)])
    seeds["dims-huge-head-dim"] = seed(flags=INVALID, invalid=[1 | (5 << 2), 7])
    seeds["dims-heads-not-multiple"] = seed(flags=INVALID, invalid=[2, 1, 1])
    seeds["dims-size-max"] = seed(flags=INVALID, invalid=[3 | (0 << 2)])
    for x in range(3):
        seeds[f"causal-invalid-{x}"] = seed(causal=("bad", x))
    # Scales.
    for name, idx in [("nan", NAN), ("inf", INF), ("ninf", NINF), ("zero", ZERO),
                      ("1e30", BIG), ("denormal", DENORM), ("fltmax", FLTMAX)]:
        seeds[f"scale-{name}"] = seed(scale=("special", idx), causal=1, sq=4, sk=4)
    seeds["scale-float-neg"] = seed(scale=("float", -0.75), op=WEIGHTS)
    seeds["scale-byte"] = seed(scale=("byte", 200), sq=6, sk=6, d=8)
    # Masks.
    seeds["mask-key-valid-all-false"] = seed(kv=M_FALSE, b=2)
    seeds["mask-allowed-all-false"] = seed(al=M_FALSE, op=WEIGHTS)
    seeds["mask-both-random"] = seed(kv=M_RANDOM, al=M_RANDOM, b=2, hkv=2, group=2, sq=9, sk=9,
                                     d=9, causal=1, check_padding=True, check_threads=True,
                                     threads=2)
    seeds["mask-one-key"] = seed(kv=M_ONE, al=M_ONE, sq=6, sk=8)
    seeds["mask-all-true-bytes"] = seed(kv=M_TRUE, al=M_TRUE, op=WEIGHTS)
    # Hostile values.
    seeds["values-hostile"] = seed(values=V_HOSTILE, kv=M_RANDOM, check_padding=True, sq=6,
                                   sk=8, d=6, causal=1, tail=400)
    seeds["values-hostile-weights"] = seed(op=WEIGHTS, values=V_HOSTILE, al=M_RANDOM, sq=6, sk=8,
                                           d=6, tail=400, rng_seed=5)
    seeds["values-sparse-specials"] = seed(values=V_SPARSE, flags=LONG_K, sk=100, sq=3, d=5,
                                           kv=M_RANDOM, check_padding=True, tail=600)
    # NULLs and aliasing.
    for n in range(9):
        seeds[f"pointers-{n}"] = seed(op=WEIGHTS if n == 8 else FWD, nulls=n, reconfigure=True)
    seeds["reconfigure-after-use"] = seed(reconfigure=True, op=WEIGHTS)
    # attn_simple and the rest of the API.
    seeds["simple-causal-pad"] = seed(op=SIMPLE, causal=1, sk=7, d=3, kv=M_RANDOM)
    seeds["simple-null"] = seed(op=SIMPLE, nulls=2)
    seeds["simple-aliased"] = seed(op=SIMPLE, nulls=5)
    seeds["simple-zero-n"] = seed(op=SIMPLE, flags=INVALID, invalid=[0], tail=1)
    seeds["misc-api"] = seed(op=MISC)

    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(OUT, name), "wb") as fh:
            fh.write(data)
    print(f"{len(seeds)} seeds in {OUT}")


if __name__ == "__main__":
    main()
