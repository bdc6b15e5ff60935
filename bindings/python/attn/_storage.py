"""Storage types (capi/attn.h "Storage types", docs/storage.md): the bfloat16 wrapper and the
library's conversions (internal module: import from attn). float16 q / k / v are numpy float16
arrays, bfloat16 ones uint16 bits wrapped as BF16 (a bare uint16 array could be either), int8
k / v numpy int8 with their float32 k_scale / v_scale; all are passed without copies.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional, Tuple, Union

from . import _common, _lib
from ._common import (ArgumentTypeError, AttentionError, InvalidArgumentError, Status,
                      as_ndarray, check_dtype, library_error, need_numpy, _np)

if TYPE_CHECKING:
    import numpy
    import numpy.typing

    from ._common import ArrayLike, F32Array

__all__ = ["BF16", "f32_to_f16", "f32_to_bf16", "f16_to_f32", "bf16_to_f32", "quantize_i8"]


def library_function(name: str) -> Any:
    """The ctypes function `name`, or AttentionError(UNSUPPORTED) naming the library lacking it."""
    fn = getattr(_lib, name, None)
    if fn is None:
        raise AttentionError(Status.UNSUPPORTED, "%s: the libattn at %s has no %s (built before "
                             "the storage types)" % (name, _lib.path, name))
    return fn


class BF16:
    """bfloat16 values as their bit patterns: ``.bits`` is a uint16 view (int16 is viewed as
    uint16) of the array given, never a copy; indexing gives a BF16 of the selected bits."""

    __slots__ = ("bits",)

    #: the uint16 array holding the bit patterns (a view of what was given)
    bits: numpy.ndarray

    def __init__(self, bits: ArrayLike) -> None:
        need_numpy()
        if isinstance(bits, BF16):
            a = bits.bits
        else:
            a = as_ndarray("bits", bits, "uint16 (bfloat16 bit patterns)")
            if a.dtype == _common.I16:
                a = a.view(_common.U16)  # the same bits, the same strides
            if a.dtype != _common.U16:
                raise ArgumentTypeError(
                    "BF16 bits have dtype %s, expected uint16 (or int16) bfloat16 bit patterns; "
                    "to convert float32 values use attn.BF16.from_float32(x) or "
                    "attn.f32_to_bf16(x)" % a.dtype)
        self.bits = a

    @classmethod
    def from_float32(cls, x: ArrayLike) -> BF16:
        """The bfloat16 values of float32 `x` (round to nearest even): BF16(f32_to_bf16(x))."""
        return cls(f32_to_bf16(x))

    def to_float32(self, out: Optional[ArrayLike] = None) -> F32Array:
        """The exact float32 values (bf16_to_f32)."""
        return bf16_to_f32(self, out)

    shape = property(lambda self: self.bits.shape)
    ndim = property(lambda self: self.bits.ndim)
    size = property(lambda self: self.bits.size)

    def __len__(self) -> int:
        return len(self.bits)

    def __getitem__(self, index: Any) -> BF16:
        return BF16(self.bits[index])

    def __repr__(self) -> str:
        return "BF16(shape=%s)" % (self.bits.shape,)


def _source(name, x, dtypes, what):
    """(x as an ndarray, a C-contiguous array of x's values: the view itself if it is one)."""
    given = as_ndarray(name, x, what)
    check_dtype(name, given, dtypes)
    a = given
    if not (a.flags.c_contiguous and a.flags.aligned):
        a = _np.ascontiguousarray(a)  # a conversion reads values: a copy changes nothing
    return given, a


def _destination(name, out, shape, dtypes, default):
    """(array to return, C-contiguous array the library writes: `out` itself, a new array of
    `default` dtype, or a temporary copied into a strided `out`)."""
    if out is None:
        a = _np.empty(shape, default)
        return a, a
    a = as_ndarray(name, out, " or ".join(d.name for d in dtypes), True)
    check_dtype(name, a, dtypes)
    if a.shape != tuple(shape):
        raise InvalidArgumentError("%s has shape %s, expected %s (the shape of the input)"
                                   % (name, a.shape, tuple(shape)))
    if not a.flags.writeable:
        raise InvalidArgumentError("%s is read-only" % name)
    if a.flags.c_contiguous and a.flags.aligned:
        return a, a
    return a, _np.empty(shape, a.dtype)


def _refuse_overlap(fn_name, message, a, b):
    """C sees only the contiguous buffers passed (a strided array goes through a copy): an
    overlap of the arrays as given is refused here, with C's message."""
    if a is not None and b is not None and _np.shares_memory(a, b):
        raise InvalidArgumentError("%s: %s" % (fn_name, message))


def _finish(result, target):
    if target is not result:
        result[...] = target
    return result


def _convert(fn_name, x, src_dtypes, what, out, dst_dtypes, default):
    need_numpy()
    fn = library_function(fn_name)
    given, src = _source("x", x, src_dtypes, what)
    result, dst = _destination("out", out, src.shape, dst_dtypes, default)
    _refuse_overlap(fn_name, "src and dst overlap", given, result)
    if src.size:
        status = fn(_common.data_ptr(src), _common.data_ptr(dst), src.size)
        if status:
            raise library_error(status)
    return _finish(result, dst)


def f32_to_f16(x: ArrayLike, out: Optional[ArrayLike] = None) -> numpy.ndarray:
    """attn_convert_f32_to_f16 of a float32 array: a new float16 array, or `out` (float16 or
    uint16 bits, x's shape, any strides) filled and returned."""
    return _convert("attn_convert_f32_to_f16", x, (_common.F32,), "float32", out,
                    (_common.F16, _common.U16), _common.F16)


def f32_to_bf16(x: ArrayLike, out: Optional[ArrayLike] = None) -> numpy.ndarray:
    """attn_convert_f32_to_bf16: new uint16 bits (wrap as attn.BF16), or `out` (uint16 or BF16)
    filled and returned."""
    if isinstance(out, BF16):
        _convert("attn_convert_f32_to_bf16", x, (_common.F32,), "float32", out.bits,
                 (_common.U16,), _common.U16)
        return out  # type: ignore[return-value]
    return _convert("attn_convert_f32_to_bf16", x, (_common.F32,), "float32", out,
                    (_common.U16,), _common.U16)


def f16_to_f32(x: ArrayLike, out: Optional[ArrayLike] = None) -> F32Array:
    """attn_convert_f16_to_f32 of float16 (or uint16 bits): a new float32 array, or `out`."""
    return _convert("attn_convert_f16_to_f32", x, (_common.F16, _common.U16),
                    "float16 (or uint16 bits)", out, (_common.F32,), _common.F32)


def bf16_to_f32(x: Union[BF16, ArrayLike], out: Optional[ArrayLike] = None) -> F32Array:
    """attn_convert_bf16_to_f32 of a BF16 (or uint16 bits): a new float32 array, or `out`."""
    if isinstance(x, BF16):
        x = x.bits
    return _convert("attn_convert_bf16_to_f32", x, (_common.U16,), "uint16 (bfloat16 bits)",
                    out, (_common.F32,), _common.F32)


def quantize_i8(x: ArrayLike, out: Optional[ArrayLike] = None,
                scales: Optional[ArrayLike] = None) -> Tuple[numpy.ndarray, F32Array]:
    """attn_quantize_i8 of the rows of float32 x (..., dim): (int8 values of x's shape, float32
    scales of x.shape[:-1]), new or the `out` / `scales` given; a K cache's scales are its
    k_scale. A failing row is also named by its index in x."""
    need_numpy()
    fn = library_function("attn_quantize_i8")
    given, src = _source("x", x, (_common.F32,), "float32")
    if src.ndim == 0:
        raise InvalidArgumentError("x is a scalar: quantize_i8 needs rows (..., dim)")
    dim = src.shape[-1]
    rows = math.prod(src.shape[:-1])  # rows of dim 0 too: each gets scale 0
    q_res, q_dst = _destination("out", out, src.shape, (_common.I8,), _common.I8)
    s_res, s_dst = _destination("scales", scales, src.shape[:-1], (_common.F32,), _common.F32)
    fn_name = "attn_quantize_i8"
    _refuse_overlap(fn_name, "src and dst overlap", given, q_res)
    _refuse_overlap(fn_name, "scales overlaps src or dst", given, s_res)
    _refuse_overlap(fn_name, "scales overlaps src or dst", q_res, s_res)
    if rows:
        status = fn(_common.data_ptr(src), rows, dim, _common.data_ptr(q_dst),
                    _common.data_ptr(s_dst))
        if status:
            err = library_error(status)
            bad = _first_bad_row(src, rows, dim)
            if bad is not None and isinstance(err, InvalidArgumentError):
                err = InvalidArgumentError("%s (x[%s])" % (err.message, ", ".join(
                    [str(i) for i in _np.unravel_index(bad, src.shape[:-1])] + [":"])))
            raise err
    return _finish(q_res, q_dst), _finish(s_res, s_dst)


def _first_bad_row(src, rows, dim):
    finite = _np.isfinite(src.reshape(rows, dim)).all(axis=1)
    bad = _np.flatnonzero(~finite)
    return int(bad[0]) if bad.size else None


def storage_setter(name: str, op: int, a: Any) -> Tuple[Any, Any, Any]:
    """(ndarray, dtype, attn_args setter or None for float32) of a stored q / k / v / dout."""
    if isinstance(a, BF16):
        return a.bits, _common.U16, library_function("attn_args_set_bf16")
    a = as_ndarray(name, a, "float32, float16, int8 or attn.BF16")
    dt = a.dtype
    if dt == _common.F32:
        return a, _common.F32, None
    if dt == _common.F16:
        return a, _common.F16, library_function("attn_args_set_f16")
    if dt == _common.I8:
        if op == 0:  # Desc's refusal; Args.set(Operand.Q, int8) reaches the library's
            raise ArgumentTypeError("q has dtype int8: int8 storage is for k and v (with their "
                                    "k_scale / v_scale); q may be float32, float16 or attn.BF16")
        return a, _common.I8, library_function("attn_args_set_i8")
    if dt == _common.U16 or dt == _common.I16:
        raise ArgumentTypeError(
            "%s has dtype %s: 16-bit bit patterns are ambiguous; wrap bfloat16 bits as "
            "attn.BF16(%s), pass float16 values as a numpy float16 array (%s.view(numpy.float16))"
            % (name, dt, name, name))
    raise ArgumentTypeError("%s has dtype %s, expected float32, float16, int8 (k, v) or "
                            "attn.BF16 (no conversion is made: arrays are passed without copies; "
                            "see attn.f32_to_f16, attn.quantize_i8)"
                            % (name, dt.str if dt.byteorder == ">" else dt))
