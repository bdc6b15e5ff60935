"""libattn for Python: exact masked scaled-dot-product attention on the CPU, through ctypes.

Faces: ``attention`` (lists of vectors, no numpy needed), ``Desc`` (the descriptor API of
capi/attn.h on numpy arrays, zero copies: forward, weights, backward, kv_append, merge),
``scaled_dot_product_attention`` (PyTorch's call), ``Args`` + ``Desc.run`` (the raw attn_args /
attn_run pair), and the storage conversions. capi/attn.h is the manual of every call, operand
and parameter; bindings/python/README.md shows the Python side. Errors are ``AttentionError``
subclasses carrying the ``Status`` and the library's message (docs/errors.md).
"""

from __future__ import annotations

import ctypes
from typing import Iterable, List, Optional, Sequence, SupportsFloat, Tuple, Union

from . import _lib
from ._common import (Alibi, AlibiForm, ArgumentTypeError, AttentionError, Causal, Compute,
                      Diagonal, DType, InvalidArgumentError, NullPointerError, Op, Operand,
                      OperandInfo, Param, ParamInfo, Status, WeightsMode, check_status, enum_arg,
                      query, query_index, size_arg, status_string, _np)
from ._args import Args
from ._desc import Desc, Gradients
from ._storage import (BF16, bf16_to_f32, dequantize_fp8, f16_to_f32, f32_to_bf16, f32_to_f16,
                       quantize_fp8, quantize_i8)
from ._sdpa import scaled_dot_product_attention

__all__ = [
    "Status", "Causal", "Operand", "Param", "Alibi", "WeightsMode", "Compute", "Op",
    "Diagonal", "AlibiForm", "DType", "ParamInfo", "OperandInfo",
    "AttentionError", "InvalidArgumentError", "ArgumentTypeError", "NullPointerError",
    "attention", "Desc", "Args", "scaled_dot_product_attention", "param_bounds",
    "version", "version_number", "isa", "set_isa", "compute_unit", "num_threads", "set_num_threads",
    "status_string", "library_path", "isa_info", "param_info", "operand_info",
    "BF16", "f32_to_f16", "f32_to_bf16", "f16_to_f32", "bf16_to_f32", "quantize_i8",
    "quantize_fp8", "dequantize_fp8",
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
    """Name of the kernel in use (attn_isa)."""
    return _lib.attn_isa().decode("ascii")


def compute_unit(mode: Union[Compute, int, str]) -> str:
    """attn_compute_unit: the unit compute mode `mode` (a Compute, its value or its name) runs its
    products on with the kernel in use, e.g. "int16 vpmaddwd (avx2)"; a mode that runs as EXACT
    on this CPU names EXACT's unit. A value that is not an attn_compute raises
    InvalidArgumentError."""
    value = query_index("mode", mode, Compute)
    unit = _lib.attn_compute_unit(value)
    if unit is None:  # the library's NULL: not an attn_compute
        enum_arg("mode", value, Compute, "attn_compute")  # raises, naming the modes
        raise InvalidArgumentError("mode (%d) is not an attn_compute" % value)
    return unit.decode("ascii")


def isa_info() -> List[Tuple[str, bool]]:
    """(name, this CPU runs it) of every kernel ISA the library knows, weakest first
    (attn_isa_info): the names set_isa takes."""
    return [(name, bool(supported)) for name, supported in _lib.ISAS]


def set_isa(name: Optional[str]) -> None:
    """attn_set_isa: cap the kernel at `name`, or restore the default with None or "" (a NUL
    inside the name reaches C as \\x00: no kernel has that name)."""
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


def param_info(param: Union[Param, int, str]) -> ParamInfo:
    """attn_param_info: ParamInfo(name, is_float, min, max, default) of a parameter (a Param, its
    value or its name). An integer the library does not know raises InvalidArgumentError with
    the library's message."""
    name, is_float, lo, hi, default = query(
        _lib.attn_param_info, query_index("param", param, Param), ctypes.c_char_p,
        ctypes.c_int, ctypes.c_double, ctypes.c_double, ctypes.c_double)
    return ParamInfo(name, bool(is_float), lo, hi, default)


def operand_info(operand: Union[Operand, int, str]) -> OperandInfo:
    """attn_operand_info: OperandInfo(name, inputs, outputs, rank, strided, dims) of an operand
    (an Operand, its value or its name); inputs / outputs are DType flags, dims the words of
    attn_operand_dims. An integer the library does not know raises InvalidArgumentError with
    the library's message."""
    index = query_index("operand", operand, Operand)
    name, inputs, outputs, rank, strided = query(
        _lib.attn_operand_info, index, ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_int, ctypes.c_int)
    return OperandInfo(name, DType(inputs), DType(outputs), rank, bool(strided),
                       tuple(_lib.DIMS[index].split()))


# ------------------------------------------------------------------------------------------
# The original API: lists of vectors
# ------------------------------------------------------------------------------------------

def _rows(name, rows):
    """(n, d, flat list of floats) of a list of equal-length vectors of numbers."""
    if rows is None:
        raise NullPointerError("%s is None" % name)
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise InvalidArgumentError("%s must be a list of vectors, got %s"
                                   % (name, type(rows).__name__))
    rows = list(rows)
    if not rows:
        raise InvalidArgumentError("%s is empty (n must be > 0)" % name)
    flat: list = []
    for i, row in enumerate(rows):
        if row is None or isinstance(row, (str, bytes)) or not hasattr(row, "__iter__"):
            raise InvalidArgumentError("%s[%d] must be a vector of numbers, got %s"
                                       % (name, i, type(row).__name__))
        row = list(row)
        d = len(flat) // i if i else len(row)
        if d == 0:
            raise InvalidArgumentError("%s[0] is empty (d must be > 0)" % name)
        if len(row) != d:
            raise InvalidArgumentError("%s[%d] has %d elements, %s[0] has %d"
                                       % (name, i, len(row), name, d))
        for j, x in enumerate(row):
            try:
                flat.append(float(x))
            except (TypeError, ValueError):
                raise InvalidArgumentError("%s[%d][%d] is not a number: %r"
                                           % (name, i, j, x)) from None
    return len(rows), len(flat) // len(rows), flat


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


