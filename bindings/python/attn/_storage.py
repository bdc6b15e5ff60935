"""Storage types (capi/attn.h "Storage types", docs/storage.md): the bfloat16 wrapper and the
library's conversions (internal module: import from attn). float16 q / k / v are numpy float16
arrays, bfloat16 ones uint16 bits wrapped as BF16 (a bare uint16 array could be either), int8
k / v numpy int8 with their float32 k_scale / v_scale; all are passed without copies.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional, Tuple, Union

from . import _common, _lib
from ._common import (ArgumentTypeError, InvalidArgumentError, as_ndarray, check_dtype,
                      library_error, need_numpy, _np)

if TYPE_CHECKING:
    import numpy
    import numpy.typing

    from ._common import ArrayLike, F32Array

__all__ = ["BF16", "f32_to_f16", "f32_to_bf16", "f16_to_f32", "bf16_to_f32", "quantize_i8",
           "quantize_fp8", "dequantize_fp8"]

#: the fp8 formats by name: their attn_dtype values (ATTN_DTYPE_FP8_E4M3 / _E5M2)
FP8_FORMATS = {"e4m3": 6, "e5m2": 7}


def fp8_format(fmt: Any) -> int:
    """The attn_dtype of an fp8 format given as "e4m3" / "e5m2" (any case) or as an int (the
    library checks the int)."""
    if isinstance(fmt, str):
        if fmt.lower() not in FP8_FORMATS:
            raise InvalidArgumentError("fmt %r is not an fp8 format: \"e4m3\" or \"e5m2\"" % fmt)
        return FP8_FORMATS[fmt.lower()]
    if isinstance(fmt, bool) or not isinstance(fmt, int):
        raise ArgumentTypeError("fmt is %s, expected \"e4m3\", \"e5m2\" or an attn_dtype int"
                                % type(fmt).__name__)
    return int(fmt)


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


def _convert(fn_name, x, src_dtypes, what, outs, call=None):
    """Runs the library's `fn_name` on x's values (a C-contiguous copy of a strided x) into
    `outs`, (name, array or None, src -> its shape, dtypes, default dtype, C's overlap message)
    each: new arrays, or the ones given (through a temporary when strided; an overlap of the
    arrays as given is refused with C's message, as C sees only the buffers passed).
    `call(fn, src, *dsts)` runs it (default: fn(src, dst, elements)). Returns the arrays."""
    need_numpy()
    given = as_ndarray("x", x, what)
    check_dtype("x", given, src_dtypes)
    src = given
    if not (src.flags.c_contiguous and src.flags.aligned):
        src = _np.ascontiguousarray(src)  # a conversion reads values: a copy changes nothing
    seen, results, targets = [given], [], []
    for name, out, shape, dtypes, default, overlap in outs:
        result, target = _destination(name, out, shape(src), dtypes, default)
        if any(_np.shares_memory(result, a) for a in seen):
            raise InvalidArgumentError("%s: %s" % (fn_name, overlap))
        seen.append(result)
        results.append(result)
        targets.append(target)
    ptr, fn = _common.data_ptr, getattr(_lib, fn_name)
    if call is not None:
        call(fn, src, *targets)
    elif src.size:
        status = fn(ptr(src), ptr(targets[0]), src.size)
        if status:
            raise library_error(status)
    for result, target in zip(results, targets):
        if target is not result:
            result[...] = target
    return results


def _to(x, out, what, src_dtypes, fn_name, dst_dtypes, default):
    return _convert(fn_name, x, src_dtypes, what, [
        ("out", out, lambda src: src.shape, dst_dtypes, default, "src and dst overlap")])[0]


def f32_to_f16(x: ArrayLike, out: Optional[ArrayLike] = None) -> numpy.ndarray:
    """attn_convert_f32_to_f16 of a float32 array: a new float16 array, or `out` (float16 or
    uint16 bits, x's shape, any strides) filled and returned."""
    return _to(x, out, "float32", (_common.F32,), "attn_convert_f32_to_f16",
               (_common.F16, _common.U16), _common.F16)


def f32_to_bf16(x: ArrayLike, out: Optional[ArrayLike] = None) -> numpy.ndarray:
    """attn_convert_f32_to_bf16: new uint16 bits (wrap as attn.BF16), or `out` (uint16 or BF16)
    filled and returned."""
    got = _to(x, out.bits if isinstance(out, BF16) else out, "float32", (_common.F32,),
              "attn_convert_f32_to_bf16", (_common.U16,), _common.U16)
    return out if isinstance(out, BF16) else got  # type: ignore[return-value]


def f16_to_f32(x: ArrayLike, out: Optional[ArrayLike] = None) -> F32Array:
    """attn_convert_f16_to_f32 of float16 (or uint16 bits): a new float32 array, or `out`."""
    return _to(x, out, "float16 (or uint16 bits)", (_common.F16, _common.U16),
               "attn_convert_f16_to_f32", (_common.F32,), _common.F32)


def bf16_to_f32(x: Union[BF16, ArrayLike], out: Optional[ArrayLike] = None) -> F32Array:
    """attn_convert_bf16_to_f32 of a BF16 (or uint16 bits): a new float32 array, or `out`."""
    return _to(x.bits if isinstance(x, BF16) else x, out, "uint16 (bfloat16 bits)",
               (_common.U16,), "attn_convert_bf16_to_f32", (_common.F32,), _common.F32)


def quantize_i8(x: ArrayLike, out: Optional[ArrayLike] = None,
                scales: Optional[ArrayLike] = None) -> Tuple[numpy.ndarray, F32Array]:
    """attn_quantize_i8 of the rows of float32 x (..., dim): (int8 values of x's shape, float32
    scales of x.shape[:-1]), new or the `out` / `scales` given; a K cache's scales are its
    k_scale. A failing row is also named by its index in x."""
    need_numpy()
    x = as_ndarray("x", x, "float32")
    check_dtype("x", x, (_common.F32,))
    if x.ndim == 0:
        raise InvalidArgumentError("x is a scalar: quantize_i8 needs rows (..., dim)")

    def call(fn, src, q, s):
        rows, dim = math.prod(src.shape[:-1]), src.shape[-1]  # rows of dim 0: scale 0 each
        status = fn(_common.data_ptr(src), rows, dim, _common.data_ptr(q),
                    _common.data_ptr(s)) if rows else 0
        if status:
            err = library_error(status)
            bad = _np.flatnonzero(~_np.isfinite(src.reshape(rows, dim)).all(axis=1))
            if bad.size and isinstance(err, InvalidArgumentError):
                err = InvalidArgumentError("%s (x[%s])" % (err.message, ", ".join(
                    [str(i) for i in _np.unravel_index(bad[0], src.shape[:-1])] + [":"])))
            raise err

    q, s = _convert("attn_quantize_i8", x, (_common.F32,), "float32", [
        ("out", out, lambda src: src.shape, (_common.I8,), _common.I8, "src and dst overlap"),
        ("scales", scales, lambda src: src.shape[:-1], (_common.F32,), _common.F32,
         "scales overlaps src or dst")], call)
    return q, s


def quantize_fp8(x: ArrayLike, fmt: Any, scale: float = 1.0,
                 out: Optional[ArrayLike] = None) -> numpy.ndarray:
    """attn_quantize_fp8 of the rows of float32 x (..., dim) with one scale: uint8 fp8 codes of
    x's shape (code = x / scale rounded to nearest even, saturating), new or `out`. A failing
    row is also named by its index in x."""
    need_numpy()
    f = fp8_format(fmt)
    x = as_ndarray("x", x, "float32")
    check_dtype("x", x, (_common.F32,))
    if x.ndim == 0:
        raise InvalidArgumentError("x is a scalar: quantize_fp8 needs rows (..., dim)")

    def call(fn, src, q):
        rows, dim = math.prod(src.shape[:-1]), src.shape[-1]
        status = fn(_common.data_ptr(src), rows, dim, f, float(scale), _common.data_ptr(q))
        if status:
            err = library_error(status)
            bad = _np.flatnonzero(~_np.isfinite(src.reshape(rows, dim)).all(axis=1)) if rows \
                else []
            if len(bad) and isinstance(err, InvalidArgumentError) and "src row" in err.message:
                err = InvalidArgumentError("%s (x[%s])" % (err.message, ", ".join(
                    [str(i) for i in _np.unravel_index(bad[0], src.shape[:-1])] + [":"])))
            raise err

    return _convert("attn_quantize_fp8", x, (_common.F32,), "float32", [
        ("out", out, lambda src: src.shape, (_common.U8,), _common.U8, "src and dst overlap")],
        call)[0]


def dequantize_fp8(codes: ArrayLike, fmt: Any, scale: float = 1.0,
                   out: Optional[ArrayLike] = None) -> F32Array:
    """attn_dequantize_fp8: the exact float32 values of uint8 fp8 codes times scale (as the
    kernels read them; NaN codes give NaN), new or `out`."""
    need_numpy()
    f = fp8_format(fmt)

    def call(fn, src, y):
        status = fn(_common.data_ptr(src), 1, src.size, f, float(scale), _common.data_ptr(y))
        if status:
            raise library_error(status)

    return _convert("attn_dequantize_fp8", codes, (_common.U8,), "uint8 (fp8 codes)", [
        ("out", out, lambda src: src.shape, (_common.F32,), _common.F32, "src and dst overlap")],
        call)[0]


def storage_setter(name: str, op: int, a: Any) -> Tuple[Any, Any, Any]:
    """(ndarray, dtype, attn_args setter or None for float32) of a stored q / k / v / dout."""
    if isinstance(a, BF16):
        return a.bits, _common.U16, _lib.attn_args_set_bf16
    a = as_ndarray(name, a, "float32, float16, int8 or attn.BF16")
    dt = a.dtype
    if dt == _common.F32:
        return a, _common.F32, None
    if dt == _common.F16:
        return a, _common.F16, _lib.attn_args_set_f16
    if dt == _common.I8:
        if op == 0:  # Desc's refusal; Args.set(Operand.Q, int8) reaches the library's
            raise ArgumentTypeError("q has dtype int8: int8 storage is for k and v (with their "
                                    "k_scale / v_scale); q may be float32, float16 or attn.BF16")
        return a, _common.I8, _lib.attn_args_set_i8
    if dt == _common.U16 or dt == _common.I16:
        raise ArgumentTypeError(
            "%s has dtype %s: 16-bit bit patterns are ambiguous; wrap bfloat16 bits as "
            "attn.BF16(%s), pass float16 values as a numpy float16 array (%s.view(numpy.float16))"
            % (name, dt, name, name))
    raise ArgumentTypeError("%s has dtype %s, expected float32, float16, int8 (k, v) or "
                            "attn.BF16 (no conversion is made: arrays are passed without copies; "
                            "see attn.f32_to_f16, attn.quantize_i8; fp8 codes: Args.set_fp8)"
                            % (name, dt.str if dt.byteorder == ">" else dt))
