"""libattn for Python: exact masked scaled-dot-product attention (fp32, CPU), through ctypes.

The package loads the shared library with ctypes (see attn._lib for where it looks:
$ATTN_LIBRARY, then beside this package, then the system paths). It needs libattn >= 0.2.
``pip install .`` in the libattn repository builds a wheel with libattn.so inside the package
(pyproject.toml); the package alone (PYTHONPATH=bindings/python) uses a libattn built apart.

Four faces:

* ``attention(Q, K, V, causal=True, pad_mask=None)``: the original one-sequence, one-head call.
  Lists of vectors in (any sequences of numbers), a list of output vectors (lists of floats) out.
  Needs no numpy.

* ``Desc``: the descriptor API of capi/attn.h on numpy arrays, zero copies: every attn_param
  (causal, scale, window, softcap, alibi, softmax_plus_one, head_dim_v, weights_mode,
  bias_first, diagonal, alibi_form, ...) as a keyword, every operand of attn_run (masks, bias, ALiBi slopes, sinks, query
  padding, per-batch key lengths, log-sum-exp, key mass) as an argument of ``forward`` /
  ``weights``. Arrays must have exactly the operand's shape (any strides for q, k, v, out and
  bias, head_dim contiguous) or be flat buffers of exactly ``required_len`` elements.

* ``scaled_dot_product_attention``: PyTorch's call and shapes (numpy arrays, torch tensors via
  DLPack, anything with __array__).

* ``Args`` + ``Desc.run``: the raw attn_args / attn_run pair.

Storage types (docs/storage.md): q, k and v may be numpy float16 arrays, bfloat16 bit
patterns wrapped as ``BF16(uint16_array)``, and k and v int8 arrays with their float32 scales
(``k_scale=`` / ``v_scale=``); all are passed to the library without copies and widened to
float32 on load. ``f32_to_f16``, ``f32_to_bf16``, ``f16_to_f32``, ``bf16_to_f32`` and
``quantize_i8`` are the library's conversions (new arrays, or ``out=``).

Gradients (docs/api.md, "Backward"): ``Desc.backward(q, k, v, out, lse, dout)`` returns
``Gradients(dq, dk, dv, dbias, dsinks)`` (ATTN_OP_BACKWARD); raw: ``Operand.DOUT``, ``DQ``,
``DK``, ``DV``, ``DBIAS``, ``DSINKS`` with ``Op.BACKWARD``.

Serving layouts (``Desc(..., varlen=True, page_size=16, batch_invariant=True)``): packed
variable-length batches (``cu_seqlens_q`` / ``cu_seqlens_k``), paged K/V caches (``block_table``
+ ``seq_lens_k``), ``Desc.kv_append`` (new key/value rows into the caches, in place),
``Desc.merge`` (exact merge of partial results) and batch invariance (a query's output bits
depend only on its own sequence). The raw face: ``Args.set_cu_seqlens_q`` ... ``set_new_v``,
``Desc.run_kv_append``, ``Desc.run_merge``.

Compute mode (docs/storage.md): ``Desc(..., compute="fp16")`` (``Compute.FP16``,
ATTN_PARAM_COMPUTE) runs prefill-like forward calls on the AVX512-FP16 fast path, outputs within
about 1e-2 max|v| of ``Compute.EXACT`` (the default); other calls and CPUs run exactly as EXACT.

Errors: arguments the binding refuses and failures the library reports raise ``AttentionError``
subclasses carrying the ``Status`` and the message: ``InvalidArgumentError`` (a ValueError),
``ArgumentTypeError`` (a TypeError and a ValueError), ``NullPointerError`` (a ValueError);
other library failures raise ``AttentionError`` itself. A closed Desc raises ValueError.
"""

from __future__ import annotations

import ctypes
from typing import Iterable, List, Optional, Sequence, SupportsFloat, Tuple, Union

from . import _lib
from ._common import (Alibi, AlibiForm, ArgumentTypeError, AttentionError, Causal, Compute,
                      Diagonal, InvalidArgumentError, NullPointerError, Op, Operand, Param, Status,
                      WeightsMode, check_status, size_arg, status_string, _np)
from ._args import Args
from ._desc import Desc, Gradients
from ._storage import BF16, bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, quantize_i8
from ._sdpa import scaled_dot_product_attention

__all__ = [
    "Status", "Causal", "Operand", "Param", "Alibi", "WeightsMode", "Compute", "Op",
    "Diagonal", "AlibiForm",
    "AttentionError", "InvalidArgumentError", "ArgumentTypeError", "NullPointerError",
    "attention", "Desc", "Args", "scaled_dot_product_attention", "param_bounds",
    "version", "version_number", "isa", "set_isa", "num_threads", "set_num_threads",
    "status_string", "library_path",
    "BF16", "f32_to_f16", "f32_to_bf16", "f16_to_f32", "bf16_to_f32", "quantize_i8",
    "Gradients",
]

#: The path or name the shared library was loaded from (inside the package for an installed
#: wheel: .../site-packages/attn/libattn.so).
library_path: str = _lib.path

_check_status = check_status


# ------------------------------------------------------------------------------------------
# Library-wide functions
# ------------------------------------------------------------------------------------------

def version() -> str:
    """The library's version string, e.g. "0.2.0"."""
    return _lib.attn_version_string().decode("ascii")


def version_number() -> int:
    """The library's version as MAJOR*10000 + MINOR*100 + PATCH."""
    return int(_lib.attn_version_number())


def isa() -> str:
    """Name of the kernel in use: "scalar", "sse2", "avx2", "avx512" or "avx512fp16"."""
    return _lib.attn_isa().decode("ascii")


def set_isa(name: Optional[str]) -> None:
    """Cap the kernel at `name` ("scalar", "sse2", "avx2", "avx512", "avx512fp16"), or restore the default
    with None or "". A name with an embedded NUL (C would read "avx2\\x00junk" as "avx2") reaches
    C with its control characters shown as \\xNN, which names no kernel either: the refusal and
    its list of names are the library's own."""
    if name is not None and not isinstance(name, str):
        raise ArgumentTypeError("name must be a str or None, got %s" % type(name).__name__)
    if name is not None and "\0" in name:
        name = "".join("\\x%02x" % ord(c) if ord(c) < 32 else c for c in name)
    check_status(_lib.attn_set_isa(
        None if name is None else name.encode("utf-8", "backslashreplace")))


def num_threads() -> int:
    """The number of threads attention calls use now."""
    return int(_lib.attn_get_num_threads())


def set_num_threads(n: int) -> None:
    """Set the thread count (0 = default: $ATTN_NUM_THREADS or the hardware count)."""
    check_status(_lib.attn_set_num_threads(size_arg("n", n)))


def param_bounds(param: Union[Param, int, str]) -> Tuple[bool, float, float]:
    """(is_float, min, max) of an attn_param, from the library (attn_param_bounds)."""
    from ._common import enum_arg, param_bounds as bounds
    return bounds(enum_arg("param", param, Param, "attn_param"))


# ------------------------------------------------------------------------------------------
# The original API: lists of vectors
# ------------------------------------------------------------------------------------------

def _rows(name, rows):
    """Validate a list of equal-length vectors of numbers; returns (n, d, flat list)."""
    if rows is None:
        raise NullPointerError("%s is None" % name)
    if isinstance(rows, (str, bytes)):
        raise InvalidArgumentError("%s must be a list of vectors, got %s"
                                   % (name, type(rows).__name__))
    try:
        rows = list(rows)
    except TypeError:
        raise InvalidArgumentError("%s must be a list of vectors, got %s"
                                   % (name, type(rows).__name__)) from None
    if not rows:
        raise InvalidArgumentError("%s is empty (n must be > 0)" % name)
    flat = []
    d = None
    for i, row in enumerate(rows):
        if row is None or isinstance(row, (str, bytes)):
            raise InvalidArgumentError("%s[%d] must be a vector of numbers" % (name, i))
        try:
            row = list(row)
        except TypeError:
            raise InvalidArgumentError("%s[%d] must be a vector of numbers, got %s"
                                       % (name, i, type(row).__name__)) from None
        if d is None:
            d = len(row)
            if d == 0:
                raise InvalidArgumentError("%s[0] is empty (d must be > 0)" % name)
        elif len(row) != d:
            raise InvalidArgumentError("%s[%d] has %d elements, %s[0] has %d"
                                       % (name, i, len(row), name, d))
        for j, x in enumerate(row):
            try:
                flat.append(float(x))
            except (TypeError, ValueError):
                raise InvalidArgumentError("%s[%d][%d] is not a number: %r"
                                           % (name, i, j, x)) from None
    return len(rows), d, flat


_Vectors = Iterable[Sequence[SupportsFloat]]


def attention(Q: _Vectors, K: _Vectors, V: _Vectors, causal: bool = True,
              pad_mask: Optional[Iterable[object]] = None) -> List[List[float]]:
    """Scaled dot-product attention of one sequence, one head (scale 1/sqrt(d)).

    Q, K, V:  n vectors of d numbers each (lists, tuples, numpy rows...), n > 0, d > 0
    causal:   True = query i sees keys j <= i; False = every key
    pad_mask: None, or n truth values: True = real token, False = padding (never attended)
    Returns the n output vectors as lists of floats (computed in float32).
    A query with no visible key (all its keys padding) gets a zero vector.
    """
    n, d, q = _rows("Q", Q)
    flats = []
    for name, rows in (("K", K), ("V", V)):
        nk, dk, flat = _rows(name, rows)
        if nk != n:
            raise InvalidArgumentError("%s has %d vectors, Q has %d" % (name, nk, n))
        if dk != d:
            raise InvalidArgumentError("%s vectors have %d elements, Q vectors have %d"
                                       % (name, dk, d))
        flats.append(flat)
    k, v = flats
    if causal is not True and causal is not False:
        if _np is not None and isinstance(causal, _np.bool_):
            causal = bool(causal)
        else:
            raise InvalidArgumentError("causal must be True or False, got %r" % (causal,))
    mask = None
    if pad_mask is not None:
        if isinstance(pad_mask, (str, bytes)):
            raise InvalidArgumentError("pad_mask must be a list of booleans")
        try:
            flags = [bool(x) for x in pad_mask]
        except TypeError:
            raise InvalidArgumentError("pad_mask must be a list of booleans, got %s"
                                       % type(pad_mask).__name__) from None
        if len(flags) != n:
            raise InvalidArgumentError("pad_mask has %d elements, Q has %d vectors"
                                       % (len(flags), n))
        mask = (ctypes.c_bool * n)(*flags)

    nd = n * d
    cq = (ctypes.c_float * nd)(*q)
    ck = (ctypes.c_float * nd)(*k)
    cv = (ctypes.c_float * nd)(*v)
    out = (ctypes.c_float * nd)()
    status = _lib.attn_simple(ctypes.addressof(cq), ctypes.addressof(ck), ctypes.addressof(cv),
                              n, d, causal, None if mask is None else ctypes.addressof(mask),
                              ctypes.addressof(out))
    check_status(status)
    return [out[i * d:(i + 1) * d] for i in range(n)]


