"""Shared pieces of the vector generator (gen_vectors.py): float32 rounding, little-endian
packing, and strided buffers of random float32 inputs. The gen_*.py modules are imported
through gen_vectors.py, which puts this folder and tests/reference on the path."""

import math
import struct

import attn_ref

NAN = float("nan")
NEG_INF = -math.inf


def f32(x):
    """Round a Python float to the nearest float32."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def pack_f32(values):
    return struct.pack("<%df" % len(values), *values)


def pack_u8(values):
    return bytes(1 if x else 0 for x in values)


def pack_i32(values):
    return struct.pack("<%di" % len(values), *values)


def fmt_float(x):
    """Shortest decimal of a value that is exact both as float32 and as double."""
    x = float(x)
    assert f32(x) == x and math.isfinite(x), x
    s = repr(x)
    assert float(s) == x
    return s


def fill_strided(rng, n, batch, heads, seq, D, strides, lo, hi):
    """A buffer of n NaN with every addressed element drawn from rng (float32 values)."""
    buf = [NAN] * n
    for b in range(batch):
        for h in range(heads):
            for s in range(seq):
                o = attn_ref.offset(strides, b, h, s)
                for d in range(D):
                    buf[o + d] = f32(rng.uniform(lo, hi))
    return buf
