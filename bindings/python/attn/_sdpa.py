"""attn.scaled_dot_product_attention: PyTorch's signature and shapes over libattn (internal
module: import it from ``attn``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional, Tuple, Union

from . import _common, _lib
from ._binding import (SETTER, thread_args, _ALIBI_SLOPES, _ALLOWED, _BIAS, _K, _OUT, _Q,
                       _SINKS, _V)
from ._common import (Alibi, ArgumentTypeError, Causal, InvalidArgumentError, Op, as_ndarray,
                      check_dtype, element_strides, library_error, real, _np)
from ._layout import _aligned_writable, fmt_shape as _shape
from ._params import build_params, new_handle

if TYPE_CHECKING:
    from ._common import ArrayLike, F32Array


def _batch_stride(name, shape, strides, batch):
    """One element stride that walks the flattened batch dims `batch` of an array whose leading
    dims are `shape` (each equal to the batch dim or 1 = broadcast) with element `strides`."""
    dims = [(n, 0 if n_arr == 1 else s) for n_arr, s, n in zip(shape, strides, batch) if n != 1]
    if not dims:
        return 0
    for (n0, s0), (n1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * n1:
            raise InvalidArgumentError(
                "%s: its batch dimensions %s (element strides %s) cannot be walked with one "
                "batch stride; make them contiguous (numpy.ascontiguousarray) or use a single "
                "batch dimension" % (name, _shape(shape), tuple(strides)))
    return dims[-1][1]


def _tensor(name, x):
    a = as_ndarray(name, x, "float32")
    check_dtype(name, a, (_common.F32,))
    if a.ndim < 2:
        raise InvalidArgumentError("%s has %d dimension%s, expected at least 2: (..., %s)"
                                   % (name, a.ndim, "" if a.ndim == 1 else "s",
                                      "L, E" if name == "query" else "S, E"))
    if not a.flags.aligned:
        raise InvalidArgumentError("%s is not aligned for float32" % name)
    return a


def _split(a):
    """(batch dims, heads, seq, dim) of a (..., H, S, E) / (S, E) array."""
    if a.ndim == 2:
        return (), 1, a.shape[0], a.shape[1]
    return a.shape[:-3], a.shape[-3], a.shape[-2], a.shape[-1]


def _strides4(name, a, batch):
    """(batch, head, row) element strides of a float32 (..., H, S, E) array, E contiguous."""
    es = element_strides(name, a)
    if a.shape[-1] > 1 and es[-1] != 1:
        raise InvalidArgumentError(
            "%s: its last dimension has stride %d elements; the library reads it contiguously "
            "(stride 1): pass a view with contiguous rows" % (name, es[-1]))
    if a.ndim == 2:
        return (0, 0, es[0])
    nb = a.ndim - 3
    return (_batch_stride(name, a.shape[:nb], es[:nb], batch), es[-3], es[-2])


def scaled_dot_product_attention(
        query: ArrayLike, key: ArrayLike, value: ArrayLike,
        attn_mask: Optional[ArrayLike] = None, dropout_p: float = 0.0, is_causal: bool = False,
        scale: Optional[float] = None, enable_gqa: bool = False, *,
        window: Optional[Tuple[Optional[int], Optional[int]]] = None,
        softcap: Optional[float] = None, sinks: Optional[ArrayLike] = None,
        softmax_plus_one: bool = False, alibi: Union[str, Alibi, ArrayLike, None] = None,
        out: Optional[ArrayLike] = None) -> F32Array:
    """torch.nn.functional.scaled_dot_product_attention on libattn (float32, CPU, exact).

    query (..., Hq, L, E), key (..., H, S, E), value (..., H, S, Ev): numpy arrays or anything
    with __dlpack__ / __array__, any leading batch dims (key / value's equal or 1), any strides
    with the last dimension contiguous, read in place. attn_mask: bool (True = attend) or
    float32 added to the scores, broadcast by PyTorch's rules. dropout_p must be 0. is_causal:
    Causal.TOP_LEFT. enable_gqa: Hq a multiple of H. Extensions: window, softcap, sinks,
    softmax_plus_one, alibi ("standard" or (Hq,) slopes), out. Returns (..., Hq, L, Ev) float32;
    a row with no visible key gives 0.
    """
    q = _tensor("query", query)
    k = _tensor("key", key)
    v = _tensor("value", value)
    p = real("dropout_p", dropout_p)
    if p != 0.0:
        raise InvalidArgumentError("dropout_p (%r) must be 0: libattn has no dropout"
                                   % (dropout_p,))
    if not isinstance(is_causal, (bool, _np.bool_)):
        raise ArgumentTypeError("is_causal must be a bool, got %s" % type(is_causal).__name__)
    if not isinstance(enable_gqa, (bool, _np.bool_)):
        raise ArgumentTypeError("enable_gqa must be a bool, got %s" % type(enable_gqa).__name__)
    if is_causal and attn_mask is not None:
        raise InvalidArgumentError("attn_mask and is_causal=True cannot both be given "
                                   "(PyTorch refuses the combination too)")
    if not (q.ndim == k.ndim == v.ndim):
        raise InvalidArgumentError("query, key and value must have the same number of "
                                   "dimensions, got %d, %d and %d" % (q.ndim, k.ndim, v.ndim))
    batch, HQ, L, E = _split(q)
    kb, HK, S, EK = _split(k)
    vb, HV, SV, EV = _split(v)
    if EK != E:
        raise InvalidArgumentError("key has E = %d (shape %s), query has E = %d (shape %s)"
                                   % (EK, _shape(k.shape), E, _shape(q.shape)))
    if SV != S or HV != HK:
        raise InvalidArgumentError("value has shape %s, key has %s: value must be (..., %d, %d, "
                                   "Ev)" % (_shape(v.shape), _shape(k.shape), HK, S))
    for name, b in (("key", kb), ("value", vb)):
        if any(n != m and n != 1 for n, m in zip(b, batch)):
            raise InvalidArgumentError("%s batch dims %s do not match query's %s (each must be "
                                       "equal or 1)" % (name, _shape(b), _shape(batch)))
    if HQ != HK and not enable_gqa:  # a multiple of HK: the library's check
        raise InvalidArgumentError("query has %d heads, key/value %d: pass enable_gqa=True "
                                   "for grouped-query attention" % (HQ, HK))
    if 0 in q.shape + k.shape + v.shape:  # an empty array's strides mean nothing
        raise InvalidArgumentError("empty dimension: query %s, key %s, value %s"
                                   % (_shape(q.shape), _shape(k.shape), _shape(v.shape)))

    alibi_slopes = None
    alibi_mode = None
    if alibi is not None:
        if isinstance(alibi, (str, Alibi)):
            alibi_mode = alibi
        else:
            alibi_mode, alibi_slopes = Alibi.OPERAND, alibi
    params = build_params(dict(causal=Causal.TOP_LEFT if is_causal else None, scale=scale,
                               window=window, softcap=softcap, alibi=alibi_mode,
                               softmax_plus_one=softmax_plus_one,
                               head_dim_v=EV if EV != E else None))

    out_shape = batch + (HQ, L, EV) if q.ndim > 2 else (L, EV)
    if out is None:
        res = _np.empty(out_shape, _common.F32)
    else:
        res = as_ndarray("out", out, "float32", writable=True)
        check_dtype("out", res, (_common.F32,))
        if res.shape != out_shape:
            raise InvalidArgumentError("out has shape %s, expected %s"
                                       % (_shape(res.shape), _shape(out_shape)))
        _aligned_writable("out", res, True)

    strides = [(_Q, _strides4("query", q, batch)),
               (_K, _strides4("key", k, batch)),
               (_V, _strides4("value", v, batch)),
               (_OUT, _strides4("out", res, batch))]
    binds = [(_Q, q), (_K, k), (_V, v), (_OUT, res)]

    if attn_mask is not None:
        m = as_ndarray("attn_mask", attn_mask, "bool or float32")
        check_dtype("attn_mask", m, (_common.BOOL, _common.F32))
        target = out_shape[:-1] + (S,)  # (..., Hq, L, S)
        full = (1,) * (len(target) - m.ndim) + m.shape
        if m.ndim > len(target) or any(n != t and n != 1 for n, t in zip(full, target)):
            raise InvalidArgumentError("attn_mask has shape %s, which does not broadcast to the "
                                       "attention shape %s (..., heads, L, S)"
                                       % (_shape(m.shape), _shape(target)))
        m = m.reshape(full)  # a view: only leading 1s were added
        if m.dtype == _common.BOOL and all(n == 1 for n in full[:-2]):
            allowed = _np.ascontiguousarray(_np.broadcast_to(m.reshape(full[-2:]), (L, S)))
            binds.append((_ALLOWED, allowed))
        else:
            if m.dtype == _common.BOOL:  # 0 where True, -inf where False, the mask's own shape
                m = _np.where(m, _np.float32(0.0), _np.float32(-_np.inf))
            if m.shape[-1] != S or (S > 1 and m.strides[-1] != 4):
                m = _np.ascontiguousarray(_np.broadcast_to(m, m.shape[:-1] + (S,)))
            if not m.flags.aligned:
                m = m.copy()
            es = element_strides("attn_mask", m)
            nb = m.ndim - 3
            if m.ndim == 2:
                bs, hs, rs = 0, 0, es[0]
            else:
                try:
                    bs = _batch_stride("attn_mask", m.shape[:nb], es[:nb], batch)
                except InvalidArgumentError:  # e.g. (2, 1, ...) against batch (2, 3): expand
                    m = _np.ascontiguousarray(_np.broadcast_to(m, batch + m.shape[nb:]))
                    es = element_strides("attn_mask", m)
                    bs = _batch_stride("attn_mask", m.shape[:nb], es[:nb], batch)
                hs, rs = es[-3], es[-2]
            strides.append((_BIAS, (bs, hs, rs)))
            binds.append((_BIAS, m))
    for name, op, a, has in (("sinks", _SINKS, sinks, "sinks has"),
                             ("alibi", _ALIBI_SLOPES, alibi_slopes, "alibi slopes have")):
        if a is not None:
            a = as_ndarray(name, a, "float32")
            check_dtype(name, a, (_common.F32,))
            if a.shape != (HQ,):
                raise InvalidArgumentError("%s shape %s, expected (Hq,) = (%d,)"
                                           % (has, _shape(a.shape), HQ))
            binds.append((op, _np.ascontiguousarray(a)))

    handle = new_handle((math.prod(batch), HQ, HK, L, S, E), params, strides)
    try:
        args = thread_args([(w, SETTER[w], _common.data_ptr(a), _lib.attn_desc_required_len(
            handle, w)) for w, a in binds])
        status = _lib.attn_run(handle, int(Op.FORWARD), args)
        if status:
            raise library_error(status)
    finally:
        _lib.attn_desc_destroy(handle)
    return res
