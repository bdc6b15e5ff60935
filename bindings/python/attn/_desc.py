"""The descriptor API on numpy arrays (Desc) and the raw binding object (Args). Internal module:
import these from ``attn``.

Every call goes through one path: the arrays are checked against the descriptor (dtype, ndim,
every dim, strides), bound to a C ``attn_args`` with their element counts, and ``attn_run``
executes. The attn_args of these calls is one per thread, cleared in a ``finally`` block after
every call (no pointer stays bound) and destroyed when its thread ends.

Strides. A strided operand (q, k, v, out, bias; k_scale and v_scale, K's layout without
head_dim) is either

* an N-D array of exactly the operand's shape (q: (batch, heads_q, seq_q, head_dim), ...); its
  element strides are read from the array (any non-negative strides with head_dim contiguous:
  ``.transpose(1, 2)`` of a BSHD array, slices with gaps, ``numpy.broadcast_to`` views). When
  they differ from the strides the Desc was created with, the Desc configures a matching C
  descriptor internally (same parameters, the array's strides; cached, at most 32 stride sets)
  so the array is read where it is, as it is; or
* a flat 1-D buffer of exactly ``desc.required_len(operand)`` elements, addressed with the strides
  the Desc was created with (q_strides=... etc.; default contiguous BHSD).

The other operands (lse, weights, masks, slopes, sinks, seq_lens_k, key_mass) are contiguous by
definition: C-contiguous arrays of exactly their shape, or flat buffers of exactly their length.

Storage types (_storage.py): q, k and v may be float16, attn.BF16 (bfloat16 bits) or, k and v,
int8 with their k_scale / v_scale; they go through the same shape and stride checks with their
own element type, and are bound with attn_args_set_f16 / _bf16 / _i8 (the `typed` map of a
call). Gradients (Desc.backward): dq, dk, dv, dbias are written in the layouts of q, k, v, bias
(one C descriptor has one layout for both), so they are allocated in that layout or must have
it; dout must have out's.

Serving layouts (varlen=, page_size=; capi/attn.h "Serving layouts"). Some shapes are known per
call: varlen q / out are (total_q, heads_q, d) token rows and lse (heads_q, total_q) with total_q
= cu_seqlens_q[-1]; unpaged varlen k / v are (total_k, heads_kv, d) with total_k =
cu_seqlens_k[-1]; paged k / v are pools (num_pages, page_size, heads_kv, d) (token-major) or
(num_pages, heads_kv, page_size, d) (page_layout="head_major"), any num_pages >= 1. They are
checked against those totals, not against attn_desc_required_len (an upper bound with varlen:
every sequence at its maximum; one page for a pool), and bound with their own extent, so the
library checks the call's real lengths as well. Strided views of these shapes are read where
they are, as above. Desc.kv_append (attn_kv_append) writes new rows into the caller's caches in
place; Desc.merge (attn_merge) updates an (out, lse) pair in place.
"""

from __future__ import annotations

import ctypes
import threading
from typing import (TYPE_CHECKING, Any, Dict, NamedTuple, Optional, Sequence, Tuple, Union,
                    overload)

from . import _lib
from ._common import (Alibi, AlibiForm, ArgumentTypeError, Causal, Compute, Diagonal,
                      InvalidArgumentError,
                      NullPointerError, Op, Operand, Param, WeightsMode, as_ndarray, check_dtype,
                      check_status, element_strides, enum_arg, library_error, need_numpy,
                      param_value, size_arg, _np)
from . import _common
from ._storage import BF16, library_function, storage_setter

if TYPE_CHECKING:
    from typing import Literal

    from ._common import ArrayLike, F32Array

    _Causal = Union[Causal, int, str]
    _Strides = Optional[Sequence[int]]
    #: an optional output: None / False = not wanted, True = allocated, or an array to fill
    _Wanted = Union[Literal[True], ArrayLike]
    _NotWanted = Optional[Literal[False]]

# Operand ids as plain ints (enum attribute access costs ~0.4 us: too much for the hot path).
(_Q, _K, _V, _OUT, _LSE, _WEIGHTS, _KEY_VALID, _ALLOWED, _BIAS, _ALIBI_SLOPES, _SINKS,
 _QUERY_VALID, _SEQ_LENS_K, _KEY_MASS, _CU_Q, _CU_K, _BLOCK_TABLE, _NEW_K, _NEW_V,
 _DOUT, _DQ, _DK, _DV, _DBIAS, _DSINKS, _K_SCALE, _V_SCALE, _NEW_K_SCALE, _NEW_V_SCALE) = range(29)
_STRIDED = (_Q, _K, _V, _OUT, _BIAS, _K_SCALE, _V_SCALE)
_SLOT = {_Q: 0, _K: 1, _V: 2, _OUT: 3, _BIAS: 4, _K_SCALE: 5, _V_SCALE: 6}  # in a stride key
_SCALES = (_K_SCALE, _V_SCALE)  # K's layout with head_dim 1: no contiguous last dimension
_MAX_VARIANTS = 32
_FORWARD, _WEIGHTS_OP, _BACKWARD = int(Op.FORWARD), int(Op.WEIGHTS), int(Op.BACKWARD)

# ndarray.flags.num bits (numpy/ndarraytypes.h): NPY_ARRAY_C_CONTIGUOUS, _ALIGNED, _WRITEABLE.
_C_CONTIGUOUS, _ALIGNED, _WRITEABLE = 0x0001, 0x0100, 0x0400
_IN_FLAGS = _C_CONTIGUOUS | _ALIGNED
_OUT_FLAGS = _IN_FLAGS | _WRITEABLE

_NAMES = ("q", "k", "v", "out", "lse", "weights", "key_valid", "allowed", "bias", "alibi_slopes",
          "sinks", "query_valid", "seq_lens_k", "key_mass", "cu_seqlens_q", "cu_seqlens_k",
          "block_table", "new_k", "new_v", "dout", "dq", "dk", "dv", "dbias", "dsinks", "k_scale",
          "v_scale", "new_k_scale", "new_v_scale")

# Element kind of each operand: its attn_args setter and accepted dtypes (filled lazily: numpy is
# optional for the list API).
_F32_IN, _F32_OUT, _U8, _I32 = range(4)
_KIND = (_F32_IN, _F32_IN, _F32_IN, _F32_OUT, _F32_OUT, _F32_OUT, _U8, _U8, _F32_IN, _F32_IN,
         _F32_IN, _U8, _I32, _F32_OUT, _I32, _I32, _I32, _F32_IN, _F32_IN,
         _F32_IN, _F32_OUT, _F32_OUT, _F32_OUT, _F32_OUT, _F32_OUT, _F32_IN, _F32_IN, _F32_IN,
         _F32_IN)  # by operand
_SETTER_OF_KIND = {_F32_IN: _lib.attn_args_set_f32, _F32_OUT: _lib.attn_args_set_out_f32,
                   _U8: _lib.attn_args_set_u8, _I32: _lib.attn_args_set_i32}
_SETTER = tuple(_SETTER_OF_KIND[k] for k in _KIND)  # the attn_args setter of each operand


def _dtypes(kind):
    if kind == _U8:
        return (_common.BOOL, _common.U8)
    if kind == _I32:
        return (_common.I32,)
    return (_common.F32,)


def _fmt_shape(shape):
    return "(%s)" % ", ".join(str(n) for n in shape) if len(shape) != 1 else "(%d,)" % shape[0]


# ------------------------------------------------------------------------------------------
# C descriptors and calls
# ------------------------------------------------------------------------------------------

def _new_handle(dims, params, strides):
    """A configured C descriptor: attn_desc_create(dims), then each (Param, value) of `params`
    (ints with attn_desc_set_int, floats with attn_desc_set_float), then each (Operand, triple) of
    `strides`. Returns (handle, required lengths per operand)."""
    handle = ctypes.c_void_p()
    check_status(_lib.attn_desc_create(ctypes.byref(handle), *dims))
    h = handle.value
    try:
        for param, value in params:
            if isinstance(value, float):
                check_status(_lib.attn_desc_set_float(h, param, value))
            else:
                check_status(_lib.attn_desc_set_int(h, param, value))
        for op, s in strides:
            check_status(_lib.attn_desc_set_strides(h, op, *s))
        lens = [int(_lib.attn_desc_required_len(h, op)) for op in Operand]
    except BaseException:
        _lib.attn_desc_destroy(h)
        raise
    return h, lens


class _CallArgs:
    """The attn_args of one thread's calls: created on first use, cleared after every call,
    destroyed with the thread (threading.local drops it) or at interpreter exit."""
    __slots__ = ("handle",)

    def __init__(self):
        self.handle = None
        handle = ctypes.c_void_p()
        check_status(_lib.attn_args_create(ctypes.byref(handle)))
        self.handle = handle.value

    def __del__(self):
        handle, self.handle = self.handle, None
        if handle is not None:
            try:
                _lib.attn_args_destroy(handle)
            except Exception:  # interpreter shutdown
                pass


_tls = threading.local()


def _execute(handle, op, binds, lens, typed=None):
    """One attn_run: bind every (operand, address) of `binds` with its element count from
    `lens` to this thread's attn_args, run `op`, then unbind everything whatever happens.
    `typed` maps the operands stored as f16 / bf16 / int8 to their setter (None: none is)."""
    call_args = getattr(_tls, "args", None)
    if call_args is None:
        call_args = _tls.args = _CallArgs()
    args = call_args.handle
    try:
        for w, ptr in binds:
            setter = _SETTER[w] if typed is None else typed.get(w, _SETTER[w])
            status = setter(args, w, ptr, lens[w])
            if status:
                raise library_error(status)
        status = _lib.attn_run(handle, op, args)
        if status:
            raise library_error(status)  # reads attn_last_error on this thread, right away
    finally:
        _lib.attn_args_clear(args)


def _thread_args(attr):
    """This thread's attn_args named `attr` ("args" for every call, "part" for merge's part)."""
    call_args = getattr(_tls, attr, None)
    if call_args is None:
        call_args = _CallArgs()
        setattr(_tls, attr, call_args)
    return call_args.handle


def _bind_all(args, binds, lens, typed=None):
    """Bind (operand, address, elements) triples; elements None = the required length. `typed`
    as for _execute."""
    for w, ptr, n in binds:
        setter = _SETTER[w] if typed is None else typed.get(w, _SETTER[w])
        status = setter(args, w, ptr, lens[w] if n is None else n)
        if status:
            raise library_error(status)


def _run_bound(binds, lens, invoke, part_binds=None, typed=None):
    """The serving calls: bind `binds` (and `part_binds` to a second attn_args), then
    invoke(args) or invoke(args, part) returns the C status; everything is unbound after it,
    whatever happens. `typed` as for _execute (for `binds`)."""
    args = _thread_args("args")
    part = None if part_binds is None else _thread_args("part")
    try:
        _bind_all(args, binds, lens, typed)
        if part is None:
            status = invoke(args)
        else:
            _bind_all(part, part_binds, lens)
            status = invoke(args, part)
        if status:
            raise library_error(status)  # reads attn_last_error on this thread, right away
    finally:
        _lib.attn_args_clear(args)
        if part is not None:
            _lib.attn_args_clear(part)


def _serving_function(name):
    """attn_kv_append / attn_merge, or an error naming the library that lacks it."""
    fn = getattr(_lib, name)
    if fn is None:
        from ._common import AttentionError, Status
        raise AttentionError(Status.UNSUPPORTED, "%s: the libattn at %s has no %s (built before "
                             "the serving layouts)" % (name, _lib.path, name))
    return fn


def _read_int(handle, param):
    v = ctypes.c_int64()
    check_status(_lib.attn_desc_get_int(handle, param, ctypes.byref(v)))
    return v.value


def _read_float(handle, param):
    v = ctypes.c_double()
    check_status(_lib.attn_desc_get_float(handle, param, ctypes.byref(v)))
    return v.value


def _strides_arg(name, strides):
    if strides is None:
        return None
    if isinstance(strides, (str, bytes)):
        raise ArgumentTypeError("%s must be (batch_stride, head_stride, row_stride)" % name)
    try:
        values = tuple(strides)
    except TypeError:
        raise ArgumentTypeError("%s must be (batch_stride, head_stride, row_stride)"
                                % name) from None
    if len(values) != 3:
        raise InvalidArgumentError("%s must have 3 elements (batch_stride, head_stride, "
                                   "row_stride), got %d" % (name, len(values)))
    return tuple(size_arg("%s[%d]" % (name, i), s) for i, s in enumerate(values))


def _enum_param(params, param, name, value, enum, default, what):
    """Appends (param, value) to params when value is given and is not the default."""
    if value is not None:
        v = enum_arg(name, value, enum, what)
        if v != default:
            params.append((param, int(v)))


def _window_arg(window, window_left, window_right):
    """(left, right) from window=(left, right) or window_left= / window_right=; None = -1."""
    if window is not None:
        if window_left is not None or window_right is not None:
            raise InvalidArgumentError("give window=(left, right) or window_left= / "
                                       "window_right=, not both")
        if isinstance(window, (str, bytes)):
            raise ArgumentTypeError("window must be a (left, right) pair, got %s"
                                    % type(window).__name__)
        try:
            pair = tuple(window)
        except TypeError:
            raise ArgumentTypeError("window must be a (left, right) pair, got %s"
                                    % type(window).__name__) from None
        if len(pair) != 2:
            raise InvalidArgumentError("window must be a (left, right) pair, got %d elements"
                                       % len(pair))
        window_left, window_right = pair
    left = -1 if window_left is None else param_value("window_left", Param.WINDOW_LEFT,
                                                      window_left)
    right = -1 if window_right is None else param_value("window_right", Param.WINDOW_RIGHT,
                                                        window_right)
    return left, right


def _page_layout_arg(page_layout, page_size):
    """True for head-major pages. None / "token_major" (the default: FlashAttention's k_cache)
    or "head_major" (vLLM CPU, OpenVINO); only with a page_size."""
    if page_layout is None:
        return False
    if not isinstance(page_layout, str):
        raise ArgumentTypeError("page_layout must be 'token_major' or 'head_major', got %s"
                                % type(page_layout).__name__)
    if page_layout not in ("token_major", "head_major"):
        raise InvalidArgumentError("page_layout (%r) is not one of 'token_major', 'head_major'"
                                   % (page_layout,))
    if not page_size:
        raise InvalidArgumentError("page_layout=%r needs a paged cache (page_size >= 1)"
                                   % (page_layout,))
    return page_layout == "head_major"


def _flag_arg(name, param, value):
    """A 0/1 parameter from a bool (or 0/1)."""
    if value is None:
        return 0
    if isinstance(value, bool) or (_np is not None and isinstance(value, _np.bool_)):
        return int(bool(value))
    return param_value(name, param, value)


def build_params(causal, scale, window, window_left, window_right, softcap, alibi,
                 softmax_plus_one, head_dim_v, weights_mode, bias_first, varlen=None,
                 page_size=None, max_pages=None, batch_invariant=None, compute=None,
                 diagonal=None, alibi_form=None):
    """The (Param, value) list for the non-default parameters, every value checked against
    attn_param_bounds before any C call (the message shows the value as given)."""
    params = []
    # the serving layouts first: they choose the default strides (custom strides survive them)
    if _flag_arg("varlen", Param.VARLEN, varlen):
        params.append((Param.VARLEN, 1))
    if page_size is not None:
        n = param_value("page_size", Param.PAGE_SIZE, page_size)
        if n:
            params.append((Param.PAGE_SIZE, n))
    if max_pages is not None:
        n = param_value("max_pages", Param.MAX_PAGES, max_pages)
        if n:
            params.append((Param.MAX_PAGES, n))
    if _flag_arg("batch_invariant", Param.BATCH_INVARIANT, batch_invariant):
        params.append((Param.BATCH_INVARIANT, 1))
    _enum_param(
        params, Param.COMPUTE, "compute", compute,
        Compute, Compute.EXACT, "attn_compute value")
    _enum_param(params, Param.CAUSAL, "causal", causal, Causal, Causal.NONE, "attn_causal value")
    left, right = _window_arg(window, window_left, window_right)
    if left != -1:
        params.append((Param.WINDOW_LEFT, left))
    if right != -1:
        params.append((Param.WINDOW_RIGHT, right))
    if softcap is not None:
        cap = param_value("softcap", Param.SOFTCAP, softcap)
        if cap != 0.0:
            params.append((Param.SOFTCAP, cap))
    _enum_param(params, Param.ALIBI, "alibi", alibi, Alibi, Alibi.NONE, "attn_alibi value")
    _enum_param(
        params, Param.DIAGONAL, "diagonal", diagonal,
        Diagonal, Diagonal.CAUSAL, "attn_diagonal value")
    _enum_param(
        params, Param.ALIBI_FORM, "alibi_form", alibi_form,
        AlibiForm, AlibiForm.LINEAR, "attn_alibi_form value")
    if _flag_arg("softmax_plus_one", Param.SOFTMAX_PLUS_ONE, softmax_plus_one):
        params.append((Param.SOFTMAX_PLUS_ONE, 1))
    if head_dim_v is not None:
        params.append((Param.HEAD_DIM_V, param_value("head_dim_v", Param.HEAD_DIM_V,
                                                     head_dim_v)))
    if weights_mode is not None:
        m = enum_arg("weights_mode", weights_mode, WeightsMode, "attn_weights_mode value")
        if m != WeightsMode.SOFTMAX:
            params.append((Param.WEIGHTS_MODE, int(m)))
    if _flag_arg("bias_first", Param.BIAS_FIRST, bias_first):
        params.append((Param.BIAS_FIRST, 1))
    if scale is not None:
        params.append((Param.SCALE, param_value("scale", Param.SCALE, scale)))
    return params


class Gradients(NamedTuple):
    """What Desc.backward returns: each gradient requested, in the layout of its forward
    operand (dbias: broadcast dimensions summed, size 1); None for one not requested."""
    dq: Any
    dk: Any
    dv: Any
    dbias: Any
    dsinks: Any


# ------------------------------------------------------------------------------------------
# Desc
# ------------------------------------------------------------------------------------------

class Desc:
    """An attention problem: sizes, parameters and strides, fixed at construction.

        with attn.Desc(batch, heads_q, heads_kv, seq_q, seq_k, head_dim,
                       causal=attn.Causal.TOP_LEFT, window=(128, 0), softcap=50.0) as desc:
            out, lse = desc.forward(q, k, v, key_valid=mask, lse=True)

    Shapes (numpy order, outermost first): q (batch, heads_q, seq_q, head_dim), k (batch,
    heads_kv, seq_k, head_dim), v (batch, heads_kv, seq_k, head_dim_v), out (batch, heads_q,
    seq_q, head_dim_v); float32, or q, k, v stored as float16, attn.BF16 or (k, v) int8 with
    k_scale / v_scale (batch, heads_kv, seq_k) (docs/storage.md). Masks are bool_ (or
    uint8) arrays, True = visible / real. backward() gives the gradients (docs/api.md, "Backward").
    Strided operands (q, k, v, out, bias) may be any strided view of exactly their shape (see the
    module doc) or flat buffers laid out with the strides given here.

    Parameters (each checked against attn_param_bounds; read back from the library into the
    attributes of the same name): causal (Causal, its int or "top_left" / "bottom_right" /
    "none"); scale (real; default 1/sqrt(head_dim) as the library computes it); window=(left,
    right) or window_left= / window_right= (-1 or None = unbounded); softcap (0 = off); alibi
    (None, "standard" = the standard slopes, "operand" = the alibi_slopes array of each call);
    alibi_form (AlibiForm or its name: "linear" -slope (diag(i) - j), the default, or
    "symmetric" -slope |diag(i) - j|); diagonal (Diagonal or its name: the diagonal diag(i) the
    window and ALiBi measure from: "causal" = the causal rule's (default), "top_left" = i,
    "bottom_right" = i + len_k(b) - len_q(b), FlashAttention's; the causal rule keeps its own);
    alibi_slopes_strides ((batch_stride, head_stride, 0): alibi_slopes of shape (batch,
    heads_q), FlashAttention's per-batch slopes, with (heads_q, 1, 0); default (0, 1, 0), one
    (heads_q,) row for every batch entry; b is the sequence of a varlen or paged call);
    softmax_plus_one (bool); head_dim_v (default head_dim); weights_mode (WeightsMode or its
    name); bias_first (bool: bias before the softcap, ONNX's order). q_strides, k_strides,
    v_strides, out_strides, bias_strides, k_scale_strides, v_scale_strides: (batch_stride,
    head_stride, row_stride) in elements (the scales: of their (batch, heads_kv, seq_k) rows).

    Serving layouts (docs/serving.md): varlen (bool: a packed variable-length batch,
    FlashAttention's varlen; seq_q / seq_k are then the maximum lengths and q, out are
    (total_q, heads_q, head_dim[_v]) token rows, k, v (total_k, heads_kv, head_dim[_v]), lse
    (heads_q, total_q), the totals read from cu_seqlens_q / cu_seqlens_k of each call);
    page_size (int: a paged K/V cache of pages of that many tokens, the vLLM block table; k and v
    are then page pools (num_pages, page_size, heads_kv, head_dim[_v]), or (num_pages, heads_kv,
    page_size, head_dim[_v]) with page_layout="head_major"); max_pages (columns of the block
    table; default ceil(seq_k / page_size)); batch_invariant (bool: a query's output bits depend
    only on its own sequence, never on the batch, the layout, the prefill chunk or the thread
    count). kv_append writes new key/value rows into a cache in place; merge folds two partial
    results over disjoint keys.

    Arithmetic: compute (Compute, its int or "exact" / "fp16"; default EXACT): FP16 runs
    prefill-like forward calls on the AVX512-FP16 fast path, outputs within about 1e-2 max|v| of
    EXACT; other calls and CPUs run exactly as EXACT.

    A Desc may be shared by any number of threads. close() (or leaving the with block) frees it;
    any later use raises ValueError. A close() racing with running calls waits for them: the C
    descriptors are freed when the last running call returns.
    """

    #: the sizes given at construction
    batch: int
    heads_q: int
    heads_kv: int
    seq_q: int
    seq_k: int
    head_dim: int
    #: every parameter as the library holds it (read back after construction)
    causal: Causal
    scale: float
    window: Tuple[int, int]
    window_left: int
    window_right: int
    softcap: float
    alibi: Alibi
    softmax_plus_one: bool
    head_dim_v: int
    weights_mode: WeightsMode
    bias_first: bool
    diagonal: Diagonal
    alibi_form: AlibiForm
    #: the serving layouts (ATTN_PARAM_VARLEN, _PAGE_SIZE, _MAX_PAGES, _BATCH_INVARIANT)
    varlen: bool
    page_size: int
    max_pages: int  # as set: 0 = the default ceil(seq_k / page_size) (shape(BLOCK_TABLE) has it)
    batch_invariant: bool
    #: the forward's arithmetic (ATTN_PARAM_COMPUTE)
    compute: Compute
    #: how k and v pools are shaped with a page_size: "token_major" or "head_major"
    page_layout: str

    def __init__(self, batch: int, heads_q: int, heads_kv: int, seq_q: int, seq_k: int,
                 head_dim: int, *,
                 causal: Optional[_Causal] = Causal.NONE, scale: Optional[float] = None,
                 window: Optional[Tuple[Optional[int], Optional[int]]] = None,
                 window_left: Optional[int] = None, window_right: Optional[int] = None,
                 softcap: Optional[float] = None, alibi: Union[Alibi, int, str, None] = None,
                 softmax_plus_one: bool = False, head_dim_v: Optional[int] = None,
                 weights_mode: Union[WeightsMode, int, str, None] = None,
                 bias_first: bool = False,
                 varlen: bool = False, page_size: Optional[int] = None,
                 max_pages: Optional[int] = None, batch_invariant: bool = False,
                 compute: Union[Compute, int, str, None] = None,
                 diagonal: Union[Diagonal, int, str, None] = None,
                 alibi_form: Union[AlibiForm, int, str, None] = None,
                 page_layout: Optional[str] = None,
                 q_strides: _Strides = None, k_strides: _Strides = None,
                 v_strides: _Strides = None, out_strides: _Strides = None,
                 bias_strides: _Strides = None, k_scale_strides: _Strides = None,
                 v_scale_strides: _Strides = None,
                 alibi_slopes_strides: _Strides = None) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._closed = True
        self._handle = None
        self._variants: Dict[Any, Any] = {}

        dims = tuple(size_arg(n, x) for n, x in (("batch", batch), ("heads_q", heads_q),
                                                 ("heads_kv", heads_kv), ("seq_q", seq_q),
                                                 ("seq_k", seq_k), ("head_dim", head_dim)))
        params = build_params(causal, scale, window, window_left, window_right, softcap, alibi,
                              softmax_plus_one, head_dim_v, weights_mode, bias_first, varlen,
                              page_size, max_pages, batch_invariant, compute, diagonal,
                              alibi_form)
        pages = dict(params).get(Param.PAGE_SIZE, 0)
        head_major = _page_layout_arg(page_layout, pages)
        given = {}
        for op, name, s in ((_Q, "q_strides", q_strides),
                            (_K, "k_strides", k_strides),
                            (_V, "v_strides", v_strides),
                            (_OUT, "out_strides", out_strides),
                            (_BIAS, "bias_strides", bias_strides),
                            (_K_SCALE, "k_scale_strides", k_scale_strides),
                            (_V_SCALE, "v_scale_strides", v_scale_strides),
                            (_ALIBI_SLOPES, "alibi_slopes_strides", alibi_slopes_strides)):
            s = _strides_arg(name, s)
            if s is not None:
                given[op] = s
        if head_major:  # (num_pages, heads_kv, page_size, d) pages: the library's strides
            HKV, D = dims[2], dims[5]
            DV = dict(params).get(Param.HEAD_DIM_V, D)
            given.setdefault(_K, (HKV * pages * D, pages * D, D))
            given.setdefault(_V, (HKV * pages * DV, pages * DV, DV))
            for op in _SCALES:  # the scale pools follow: (num_pages, heads_kv, page_size)
                given.setdefault(op, (HKV * pages, pages, 1))

        self._handle, self._len = _new_handle(dims, params, sorted(given.items()))
        self._closed = False
        self._dims = dims
        self._params = params
        try:
            self._read_back()
        except BaseException:
            self.close()
            raise
        self.page_layout = "head_major" if head_major else "token_major"

        B, HQ, HKV, SQ, SK, D = dims
        DV = self.head_dim_v
        # alibi_slopes: (heads_q,) broadcast over the batch (strides (0, 1, 0), the default),
        # (batch, heads_q) with strides (heads_q, 1, 0), else a flat buffer of required_len
        slope_s = given.get(_ALIBI_SLOPES, (0, 1, 0))
        if slope_s[0] == 0 and slope_s[1] == 1:
            slopes_shape, slopes_names = (HQ,), ("heads_q",)
        elif slope_s[:2] == (HQ, 1):
            slopes_shape, slopes_names = (B, HQ), ("batch", "heads_q")
        else:
            slopes_shape = (self._len[_ALIBI_SLOPES],)
            slopes_names = ("attn_desc_required_len(ALIBI_SLOPES)",)
        P, VL = self.page_size, self.varlen
        self._serving = bool(P or VL)
        self._shape = {
            _Q: (B, HQ, SQ, D), _K: (B, HKV, SK, D), _V: (B, HKV, SK, DV),
            _OUT: (B, HQ, SQ, DV), _LSE: (B, HQ, SQ),
            _WEIGHTS: (B, HQ, SQ, SK), _KEY_VALID: (B, SK),
            _ALLOWED: (SQ, SK), _BIAS: (B, HQ, SQ, SK),
            _ALIBI_SLOPES: slopes_shape,
            _SINKS: (HQ,), _QUERY_VALID: (B, SQ),
            _SEQ_LENS_K: (B,), _KEY_MASS: (B, HQ, SK),
            _CU_Q: (B + 1,), _CU_K: (B + 1,),
            _BLOCK_TABLE: (B, self._len[_BLOCK_TABLE] // B),
            _NEW_K: (B * SQ, HKV, D), _NEW_V: (B * SQ, HKV, DV),
            _K_SCALE: (B, HKV, SK), _V_SCALE: (B, HKV, SK), _DSINKS: (HQ,)}
        self._dim_names = {
            _Q: ("batch", "heads_q", "seq_q", "head_dim"),
            _K: ("batch", "heads_kv", "seq_k", "head_dim"),
            _V: ("batch", "heads_kv", "seq_k", "head_dim_v"),
            _OUT: ("batch", "heads_q", "seq_q", "head_dim_v"),
            _LSE: ("batch", "heads_q", "seq_q"),
            _WEIGHTS: ("batch", "heads_q", "seq_q", "seq_k"),
            _KEY_VALID: ("batch", "seq_k"), _ALLOWED: ("seq_q", "seq_k"),
            _BIAS: ("batch or 1", "heads_q or 1", "seq_q or 1", "seq_k"),
            _ALIBI_SLOPES: slopes_names,
            _SINKS: ("heads_q",),
            _QUERY_VALID: ("batch", "seq_q"), _SEQ_LENS_K: ("batch",),
            _KEY_MASS: ("batch", "heads_q", "seq_k"),
            _CU_Q: ("batch + 1",), _CU_K: ("batch + 1",),
            _BLOCK_TABLE: ("batch", "max_pages"),
            _NEW_K: ("batch * seq_q", "heads_kv", "head_dim"),
            _NEW_V: ("batch * seq_q", "heads_kv", "head_dim_v"),
            _K_SCALE: ("batch", "heads_kv", "seq_k"), _V_SCALE: ("batch", "heads_kv", "seq_k"),
            _DSINKS: ("heads_q",)}
        # Serving layouts: shapes with a free dimension (None: total_q, total_k or num_pages,
        # known per call), and for the strided ones which numpy axis holds the C batch, head
        # and row dimensions (None: the batch stride is not used).
        self._free: Dict[int, str] = {}
        self._axes: Dict[int, Tuple[Optional[int], int, int]] = {}
        if VL:
            for op, h, d, hn, dn in ((_Q, HQ, D, "heads_q", "head_dim"),
                                     (_OUT, HQ, DV, "heads_q", "head_dim_v"),
                                     (_NEW_K, HKV, D, "heads_kv", "head_dim"),
                                     (_NEW_V, HKV, DV, "heads_kv", "head_dim_v")):
                self._shape[op] = (None, h, d)
                self._dim_names[op] = ("total_q", hn, dn)
                self._free[op] = "total_q"
            self._shape[_LSE] = (HQ, None)
            self._dim_names[_LSE] = ("heads_q", "total_q")
            self._free[_LSE] = "total_q"
            self._axes[_Q] = self._axes[_OUT] = (None, 1, 0)
        for op, d, dn in ((_K, D, "head_dim"), (_V, DV, "head_dim_v"), (_K_SCALE, None, None),
                          (_V_SCALE, None, None)):
            inner = () if d is None else (d,)  # the scales have no head_dim
            inner_name = () if d is None else (dn,)
            if P and head_major:
                self._shape[op] = (None, HKV, P) + inner
                self._dim_names[op] = ("num_pages", "heads_kv", "page_size") + inner_name
                self._axes[op] = (0, 1, 2)
            elif P:
                self._shape[op] = (None, P, HKV) + inner
                self._dim_names[op] = ("num_pages", "page_size", "heads_kv") + inner_name
                self._axes[op] = (0, 2, 1)
            elif VL:
                self._shape[op] = (None, HKV) + inner
                self._dim_names[op] = ("total_k", "heads_kv") + inner_name
                self._axes[op] = (None, 1, 0)
            else:
                continue
            self._free[op] = "num_pages" if P else "total_k"
        # the gradients: in the layout (and shape) of their forward operands
        for g, op in ((_DOUT, _OUT), (_DQ, _Q), (_DK, _K), (_DV, _V), (_DBIAS, _BIAS)):
            self._shape[g] = self._shape[op]
            self._dim_names[g] = self._dim_names[op]
            if op in self._free:
                self._free[g] = self._free[op]
        # The counts of the library's view of each strided operand (attn.cpp view_of): a
        # dimension of count 1 never moves the address, so its stride is 0 in every comparison.
        # A pool's page stride always matters (count 2 stands for "any number of pages").
        counts = {_Q: (B, HQ, SQ), _K: (B, HKV, SK), _V: (B, HKV, SK),
                  _OUT: (B, HQ, SQ), _BIAS: (B, HQ, SQ), _K_SCALE: (B, HKV, SK),
                  _V_SCALE: (B, HKV, SK)}
        if VL:
            counts[_Q] = counts[_OUT] = (1, HQ, B * SQ)
        for op in (_K, _V) + _SCALES:
            if P:
                counts[op] = (2, HKV, P)
            elif VL:
                counts[op] = (1, HKV, B * SK)
        self._counts = counts
        # The strides the library holds: the ones given, else its defaults for the layout
        # (attn.cpp default_layout: BHSD; token rows with varlen; token-major pages).
        configured = {}
        for op in _STRIDED:
            if op in given:
                s = given[op]
            elif op == _BIAS:
                s = (HQ * SQ * SK, SQ * SK, SK)
            elif op in _SCALES:  # K's default layout with head_dim 1
                s = ((P * HKV, 1, HKV) if P else (0, 1, HKV) if VL else (HKV * SK, SK, 1))
            else:
                n_h, n_s, d = ((HQ, SQ, D) if op == _Q else (HKV, SK, D) if op == _K
                               else (HKV, SK, DV) if op == _V else (HQ, SQ, DV))
                if P and op in (_K, _V):
                    s = (P * n_h * d, d, n_h * d)
                elif VL:
                    s = (0, d, n_h * d)
                else:
                    s = (n_h * n_s * d, n_s * d, d)
            configured[op] = s
        self._strides = configured
        self._norm = tuple(self._normalise(op, configured[op]) for op in _STRIDED)
        # contiguous strides of each strided operand's own shape (the fast path's answer)
        self._contig = {}
        for op in _STRIDED:
            shape = self._shape[op]
            scale = op in _SCALES
            if op in self._free:  # a C-contiguous array of the serving shape
                st = [0, 0, 0]
                inner = 1 if scale else shape[-1]
                for axis in range(len(shape) - (1 if scale else 2), -1, -1):
                    if axis in self._axes[op]:
                        st[self._axes[op].index(axis)] = inner
                    inner *= shape[axis] if shape[axis] is not None else 1
                self._contig[op] = self._normalise(op, tuple(st))
                continue
            if scale:
                b, h, s = shape
                self._contig[op] = self._normalise(op, (h * s, s, 1))
                continue
            b, h, s, d = shape
            self._contig[op] = self._normalise(op, (h * s * d, s * d, d))
        self._contig_ok = {op: self._contig[op] == self._norm[_SLOT[op]]
                           for op in _STRIDED}

    def _normalise(self, op, s):
        return tuple(0 if n == 1 else x for n, x in zip(self._counts[op], s))

    def _read_back(self):
        h = self._handle
        (self.batch, self.heads_q, self.heads_kv,
         self.seq_q, self.seq_k, self.head_dim) = self._dims
        #: every parameter as the library holds it (attn_desc_get_int / attn_desc_get_float)
        self.causal = Causal(_read_int(h, Param.CAUSAL))
        self.scale = _read_float(h, Param.SCALE)  # exactly the float the kernels multiply by
        self.window_left = _read_int(h, Param.WINDOW_LEFT)
        self.window_right = _read_int(h, Param.WINDOW_RIGHT)
        self.window = (self.window_left, self.window_right)
        self.softcap = _read_float(h, Param.SOFTCAP)
        self.alibi = Alibi(_read_int(h, Param.ALIBI))
        self.softmax_plus_one = bool(_read_int(h, Param.SOFTMAX_PLUS_ONE))
        self.head_dim_v = _read_int(h, Param.HEAD_DIM_V)
        self.weights_mode = WeightsMode(_read_int(h, Param.WEIGHTS_MODE))
        self.bias_first = bool(_read_int(h, Param.BIAS_FIRST))
        self.varlen = bool(_read_int(h, Param.VARLEN))
        self.page_size = _read_int(h, Param.PAGE_SIZE)
        self.max_pages = _read_int(h, Param.MAX_PAGES)
        self.batch_invariant = bool(_read_int(h, Param.BATCH_INVARIANT))
        self.compute = Compute(_read_int(h, Param.COMPUTE))
        self.diagonal = Diagonal(_read_int(h, Param.DIAGONAL))
        self.alibi_form = AlibiForm(_read_int(h, Param.ALIBI_FORM))

    # --- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Free the descriptor (idempotent). Later calls raise ValueError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._active == 0:
                self._destroy_locked()

    def _destroy_locked(self):
        handle, self._handle = self._handle, None
        variants, self._variants = self._variants, {}
        if handle is not None:
            _lib.attn_desc_destroy(handle)
        for h, _ in variants.values():
            _lib.attn_desc_destroy(h)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Desc:
        if self._closed:
            raise ValueError("Desc is closed")
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_lock", None) is not None:
            try:
                self.close()
            except Exception:  # interpreter shutdown: module globals may already be gone
                pass

    def _enter_call(self):
        with self._lock:  # count the call in flight: close() defers the free until it returns
            if self._closed:
                raise ValueError("Desc is closed")
            self._active += 1

    def _leave(self):
        with self._lock:
            self._active -= 1
            if self._closed and self._active == 0:
                self._destroy_locked()

    def __repr__(self) -> str:
        if not hasattr(self, "_shape"):
            return "Desc(<not created>)"
        extra = []
        if self.window != (-1, -1):
            extra.append("window=%r" % (self.window,))
        if self.softcap:
            extra.append("softcap=%r" % self.softcap)
        if self.alibi:
            extra.append("alibi=%r" % self.alibi.name.lower())
        if self.alibi_form:
            extra.append("alibi_form=%r" % self.alibi_form.name.lower())
        if self.diagonal:
            extra.append("diagonal=%r" % self.diagonal.name.lower())
        if self.softmax_plus_one:
            extra.append("softmax_plus_one=True")
        if self.head_dim_v != self.head_dim:
            extra.append("head_dim_v=%d" % self.head_dim_v)
        if self.weights_mode:
            extra.append("weights_mode=%r" % self.weights_mode.name.lower())
        if self.bias_first:
            extra.append("bias_first=True")
        if self.varlen:
            extra.append("varlen=True")
        if self.page_size:
            extra.append("page_size=%d" % self.page_size)
            if self.max_pages:
                extra.append("max_pages=%d" % self.max_pages)
            if self.page_layout != "token_major":
                extra.append("page_layout=%r" % self.page_layout)
        if self.batch_invariant:
            extra.append("batch_invariant=True")
        if self.compute:
            extra.append("compute=%r" % self.compute.name.lower())
        return ("Desc(batch=%d, heads_q=%d, heads_kv=%d, seq_q=%d, seq_k=%d, head_dim=%d, "
                "causal=%s, scale=%r%s%s)" % (
                    self.batch, self.heads_q, self.heads_kv, self.seq_q, self.seq_k,
                    self.head_dim, self.causal.name, self.scale,
                    "".join(", " + e for e in extra), ", closed" if self._closed else ""))

    # --- queries ----------------------------------------------------------------------------

    def required_len(self, operand: Union[Operand, int, str]) -> int:
        """Elements (floats, bytes for masks, int32 for seq_lens_k) the flat buffer for
        `operand` must hold (attn_desc_required_len). With varlen, q / out / lse / new_k / new_v
        (and k / v without pages) get the length of a full pack, every sequence at its maximum:
        an upper bound (a call checks its own totals); with a page_size, k / v get one page."""
        operand = enum_arg("operand", operand, Operand, "attn_operand")
        if self._closed:
            raise ValueError("Desc is closed")
        return self._len[operand]

    def shape(self, operand: Union[Operand, int, str], *, total_q: Optional[int] = None,
              total_k: Optional[int] = None, num_pages: Optional[int] = None
              ) -> Tuple[int, ...]:
        """The numpy shape of `operand` (bias: the full shape; size-1 dims broadcast).

        Serving layouts: with varlen, q / out / new_k / new_v are (total_q, heads, d) and lse
        (heads_q, total_q), so they need total_q= (cu_seqlens_q[-1]); unpaged varlen k / v need
        total_k= (cu_seqlens_k[-1]); the pools of a paged cache need num_pages=. Without a
        page_size, block_table is (batch, 0)."""
        operand = enum_arg("operand", operand, Operand, "attn_operand")
        shape = self._shape[operand]
        free = self._free.get(operand)
        if free is None:
            return shape
        value = {"total_q": total_q, "total_k": total_k, "num_pages": num_pages}[free]
        if value is None:
            raise InvalidArgumentError(
                "the shape of %s (%s) depends on the call: pass %s=" % (
                    _NAMES[operand], ", ".join(self._dim_names[operand]), free))
        value = size_arg(free, value)
        return tuple(value if n is None else n for n in shape)

    def param(self, param: Union[Param, int, str]) -> Union[int, float]:
        """A parameter's current value read from the library now: an int for an integer
        parameter, a float for a float one (attn_desc_get_int / attn_desc_get_float)."""
        param = enum_arg("param", param, Param, "attn_param")
        is_float = _common.param_bounds(param)[0]
        self._enter_call()
        try:
            return (_read_float if is_float else _read_int)(self._handle, param)
        finally:
            self._leave()

    # --- argument checks --------------------------------------------------------------------

    def _shape_error(self, name, op, a, flat_ok=True):
        shape = self._shape[op]
        want = "(%s) = %s" % (", ".join(self._dim_names[op]), _fmt_shape(shape))
        flat = (" or a flat buffer of %d elements" % self._len[op]
                if flat_ok and len(shape) > 1 else "")
        if a.ndim != len(shape):
            return InvalidArgumentError("%s has %d dimension%s (shape %s), expected %d: %s%s"
                                        % (name, a.ndim, "" if a.ndim == 1 else "s",
                                           _fmt_shape(a.shape), len(shape), want, flat))
        return InvalidArgumentError("%s has shape %s, expected %s%s"
                                    % (name, _fmt_shape(a.shape), want, flat))

    def _flat(self, name, op, a, writable):
        """A 1-D buffer standing for `op`: contiguous, exactly required_len elements."""
        need = self._len[op]
        if a.size < need:
            raise InvalidArgumentError("%s has %d elements, needs at least %d "
                                       "(attn_desc_required_len)" % (name, a.size, need))
        if a.size > need:
            raise InvalidArgumentError(
                "%s has %d elements, needs exactly %d: a flat numpy buffer must hold exactly "
                "attn_desc_required_len elements (or pass an array of shape %s)"
                % (name, a.size, need, _fmt_shape(self._shape[op])))
        self._flags(name, a, writable)
        return _common.data_ptr(a)

    @staticmethod
    def _flags(name, a, writable):
        flags = a.flags
        if not flags.c_contiguous:
            raise InvalidArgumentError("%s is not C-contiguous (use numpy.ascontiguousarray; "
                                       "arrays are passed without copies)" % name)
        if not flags.aligned:
            raise InvalidArgumentError("%s is not aligned for %s" % (name, a.dtype.name))
        if writable and not flags.writeable:
            raise InvalidArgumentError("%s is read-only" % name)

    def _strided(self, name, op, a, writable, dtype=None):
        """(address, normalised element strides) of a strided operand (q, k, v, out, bias:
        4-D with the last dimension contiguous; k_scale, v_scale: 3-D, any strides). `dtype`:
        the element type of a stored q / k / v (default float32)."""
        want_dt = _common.F32 if dtype is None else dtype
        if (type(a) is _common.ndarray and a.dtype is want_dt
                and a.shape == self._shape[op]
                and a.flags.num & (_OUT_FLAGS if writable else _IN_FLAGS)
                == (_OUT_FLAGS if writable else _IN_FLAGS)):
            return _common.data_ptr(a), self._contig[op]  # the usual case: about 0.5 us
        a = as_ndarray(name, a, want_dt.name, writable)
        check_dtype(name, a, (want_dt,))
        shape = self._shape[op]
        if a.ndim == 1:
            return self._flat(name, op, a, writable), self._norm[_SLOT[op]]
        if a.ndim != len(shape):
            raise self._shape_error(name, op, a)
        bias = op == _BIAS
        for i, (got, want) in enumerate(zip(a.shape, shape)):
            if got != want and not (bias and i < 3 and got == 1):
                raise self._shape_error(name, op, a)
        if not a.flags.aligned:
            raise InvalidArgumentError("%s is not aligned for %s" % (name, want_dt.name))
        if writable and not a.flags.writeable:
            raise InvalidArgumentError("%s is read-only" % name)
        es = element_strides(name, a)
        if len(shape) == 3:  # a scale operand: K's layout with head_dim 1
            return _common.data_ptr(a), self._normalise(op, es)
        if a.shape[3] > 1 and es[3] != 1:
            raise InvalidArgumentError(
                "%s: its last dimension (%s) has stride %d elements; the library reads it "
                "contiguously (stride 1): pass numpy.ascontiguousarray(%s) or a view with "
                "contiguous rows" % (name, "seq_k" if bias else self._dim_names[op][3], es[3],
                                     name))
        return _common.data_ptr(a), self._normalise(op, es[:3])

    def _contiguous(self, name, op, a, writable):
        """Address of a contiguous operand of exactly its shape (or a flat buffer)."""
        kind = _KIND[op]
        shape = self._shape[op]
        if (type(a) is _common.ndarray and a.shape == shape
                and (a.dtype is _common.F32 if kind in (_F32_IN, _F32_OUT)
                     else a.dtype in _dtypes(kind))
                and a.flags.num & (_OUT_FLAGS if writable else _IN_FLAGS)
                == (_OUT_FLAGS if writable else _IN_FLAGS)):
            return _common.data_ptr(a)
        dtypes = _dtypes(kind)
        a = as_ndarray(name, a, _common.dtype_name(dtypes), writable)
        check_dtype(name, a, dtypes)
        if a.shape != shape:
            if a.ndim == 1 and len(shape) > 1:
                return self._flat(name, op, a, writable)
            if a.ndim == 1 and a.size < self._len[op]:
                raise InvalidArgumentError("%s has %d elements, needs at least %d"
                                           % (name, a.size, self._len[op]))
            raise self._shape_error(name, op, a)
        self._flags(name, a, writable)
        return _common.data_ptr(a)

    def _output(self, name, op, a, alloc):
        """An optional output: None / False = not wanted, True = allocated, else an array."""
        if a is None or a is False:
            return None, None
        if a is True:
            a = alloc(self._shape[op], _common.F32)
        return a, self._contiguous(name, op, a, True)

    def _variant(self, key):
        """The C descriptor for normalised strides `key` (None = operand not bound: any
        strides do); the caller holds an active call."""
        with self._lock:
            got = self._variants.get(key)
            if got is not None:
                return got, False
            if None in key:
                for k, made in self._variants.items():
                    if all(x is None or x == y for x, y in zip(key, k)):
                        return made, False
                key = tuple(self._norm[i] if x is None else x for i, x in enumerate(key))
                got = self._variants.get(key)
                if got is not None:
                    return got, False
            made = _new_handle(self._dims, self._params, list(zip(_STRIDED, key)))
            if len(self._variants) < _MAX_VARIANTS:
                self._variants[key] = made
                return made, False
            return made, True  # temporary: destroyed after the call

    def _call(self, op, binds, strides, typed=None):
        """Run with a descriptor matching `strides` (7 normalised triples, in _STRIDED order;
        None = the operand is not bound). `typed` as for _execute."""
        self._enter_call()
        try:
            if strides == self._norm or (None in strides and all(
                    x is None or x == y for x, y in zip(strides, self._norm))):
                handle, lens, temporary = self._handle, self._len, False
            else:
                (handle, lens), temporary = self._variant(strides)
            try:
                _execute(handle, op, binds, lens, typed)
            finally:
                if temporary:
                    _lib.attn_desc_destroy(handle)
        finally:
            self._leave()

    def _optional_inputs(self, binds, strides, bias, alibi_slopes, sinks, query_valid,
                         seq_lens_k):
        if bias is not None:
            p, strides[4] = self._strided("bias", _BIAS, bias, False)
            binds.append((_BIAS, p))
        for name, op, a in (("alibi_slopes", _ALIBI_SLOPES, alibi_slopes),
                            ("sinks", _SINKS, sinks),
                            ("query_valid", _QUERY_VALID, query_valid),
                            ("seq_lens_k", _SEQ_LENS_K, seq_lens_k)):
            if a is not None:
                binds.append((op, self._contiguous(name, op, a, False)))

    # --- serving layouts: argument checks ---------------------------------------------------
    # Varlen rows and page pools have a dimension known per call (total_q / total_k from the
    # call's cu_seqlens, or any number of pages), so they are checked here against those
    # totals, not against attn_desc_required_len (an upper bound for a varlen pack: every
    # sequence at its maximum length; one page for a pool). The element count bound with each
    # is the array's own extent, so the library checks the call's real lengths too.

    def _note(self, op):
        free = self._free.get(op)
        if free == "total_q":
            return " (total_q = cu_seqlens_q[%d], the pack's query tokens)" % self.batch
        if free == "total_k":
            return " (total_k = cu_seqlens_k[%d], the pack's keys)" % self.batch
        if free == "num_pages":
            other = ("(num_pages, heads_kv, page_size, d)" if self.page_layout == "token_major"
                     else "(num_pages, page_size, heads_kv, d)")
            return (" (%s pages, any number of them; page_layout=%r takes %s pools)"
                    % (self.page_layout.replace("_", "-"),
                       "head_major" if self.page_layout == "token_major" else "token_major",
                       other))
        return ""

    def _mismatch(self, name, op, a, want, flat=None):
        shown = "(%s)" % ", ".join("any >= 1" if n is None else str(n) for n in want)
        if len(want) == 1:
            shown = "(%s,)" % want[0]
        names = self._dim_names[op]
        wanted = "(%s%s) = %s" % (", ".join(names), "," if len(names) == 1 else "", shown)
        tail = self._note(op) + (" or a flat buffer of %d elements" % flat
                                 if flat is not None and len(want) > 1 else "")
        if a.ndim != len(want):
            return InvalidArgumentError("%s has %d dimension%s (shape %s), expected %d: %s%s"
                                        % (name, a.ndim, "" if a.ndim == 1 else "s",
                                           _fmt_shape(a.shape), len(want), wanted, tail))
        return InvalidArgumentError("%s has shape %s, expected %s%s"
                                    % (name, _fmt_shape(a.shape), wanted, tail))

    def _exact(self, name, op, a, shape, writable):
        """(array, address, elements) of a C-contiguous operand of exactly `shape` (or a flat
        buffer of as many elements). Empty is fine when the shape is (a pack of 0 tokens)."""
        dtypes = _dtypes(_KIND[op])
        flags = _OUT_FLAGS if writable else _IN_FLAGS
        if (type(a) is _common.ndarray and a.shape == shape and a.dtype in dtypes
                and a.flags.num & flags == flags):
            return a, _common.data_ptr(a), a.size  # the usual case
        a = as_ndarray(name, a, _common.dtype_name(dtypes), writable)
        check_dtype(name, a, dtypes)
        if a.shape != shape:
            size = 1
            for n in shape:
                size *= n
            if not (a.ndim == 1 and len(shape) > 1 and a.size == size):
                raise self._mismatch(name, op, a, shape, size)
        self._flags(name, a, writable)
        return a, _common.data_ptr(a), a.size

    def _cu(self, name, op, a):
        """(address, total) of cu_seqlens_q / cu_seqlens_k: int32 (batch + 1,); the total is
        its last element (the library checks the others: cu[0] = 0, non-decreasing, each
        length at most seq_q / seq_k)."""
        a, ptr, _ = self._exact(name, op, a, self._shape[op], False)
        total = int(a[-1])
        if total < 0:
            raise InvalidArgumentError("%s[%d] (%d) is negative: the last prefix sum is the "
                                       "pack's number of tokens" % (name, self.batch, total))
        return ptr, total

    def _serving_strided(self, name, op, a, free, writable, dtype=None):
        """(address, normalised C strides, elements) of q / k / v / out (and k_scale / v_scale,
        which have no head_dim) in a serving layout: token rows (free = total_q or total_k) or a
        page pool (free = None: any number of pages >= 1). Any strided view is read where it
        is: its strides become the C descriptor's (a variant, as for the dense shapes). Flat
        1-D buffers are laid out with the Desc's strides. `dtype` as for _strided."""
        shape = self._shape[op]
        want_dt = _common.F32 if dtype is None else dtype
        flags = _OUT_FLAGS if writable else _IN_FLAGS
        if (type(a) is _common.ndarray and a.dtype is want_dt and a.ndim == len(shape)
                and a.shape[1:] == shape[1:] and a.flags.num & flags == flags
                and (a.shape[0] >= 1 if free is None else a.shape[0] == free)):
            return _common.data_ptr(a), self._contig[op], a.size  # C-contiguous: the usual case
        a = as_ndarray(name, a, want_dt.name, writable)
        check_dtype(name, a, (want_dt,))
        if a.ndim == 1:
            return self._serving_flat(name, op, a, free, writable)
        if (a.ndim != len(shape) or a.shape[1:] != shape[1:]
                or (a.shape[0] < 1 if free is None else a.shape[0] != free)):
            raise self._mismatch(name, op, a, (free,) + shape[1:])
        if not a.flags.aligned:
            raise InvalidArgumentError("%s is not aligned for %s" % (name, want_dt.name))
        if writable and not a.flags.writeable:
            raise InvalidArgumentError("%s is read-only" % name)
        es = element_strides(name, a)
        scale = op in _SCALES
        if not scale and a.shape[-1] > 1 and es[-1] != 1:
            raise InvalidArgumentError(
                "%s: its last dimension (%s) has stride %d elements; the library reads it "
                "contiguously (stride 1): pass numpy.ascontiguousarray(%s) or a view with "
                "contiguous rows" % (name, self._dim_names[op][-1], es[-1], name))
        # A dimension of size 1 in the array (one token, one page) never moves the address, but
        # the library's view may count more (seq_q * batch rows): it gets the extent of the
        # other dimensions as its stride, so that it nests outside them (OUT must nest).
        axes = self._axes[op]
        inner = (1 if scale else a.shape[-1]) + sum((a.shape[x] - 1) * es[x] for x in axes
                                                    if x is not None and a.shape[x] > 1)
        triple = tuple(0 if axis is None else inner if a.shape[axis] == 1 else es[axis]
                       for axis in axes)
        extent = 0 if a.size == 0 else 1 + sum((n - 1) * s for n, s in zip(a.shape, es))
        return _common.data_ptr(a), self._normalise(op, triple), extent

    def _serving_flat(self, name, op, a, free, writable):
        bs, hs, rs = self._strides[op]
        shape = self._shape[op]
        if free is None:  # a pool: one page, then whole page strides
            one = self._len[op]
            n = a.size
            if not (n >= one and (n == one or (bs and (n - one) % bs == 0))):
                raise InvalidArgumentError(
                    "%s has %d elements: a flat pool holds one page (%d elements) plus whole "
                    "page strides (%d elements each) with the Desc's %s strides (%d, %d, %d); or "
                    "pass an array of shape %s%s" % (
                        name, n, one, bs, _NAMES[op], bs, hs, rs,
                        "(%s)" % ", ".join(self._dim_names[op]), self._note(op)))
        else:
            heads, dim = (shape[-1], 1) if op in _SCALES else (shape[-2], shape[-1])
            need = 0 if free == 0 else (free - 1) * rs + (heads - 1) * hs + dim
            if a.size != need:
                raise InvalidArgumentError(
                    "%s has %d elements, needs exactly %d: a flat buffer holds the pack's rows "
                    "with the Desc's %s strides (or pass an array of shape %s)%s"
                    % (name, a.size, need, _NAMES[op], _fmt_shape((free,) + shape[1:]),
                       self._note(op)))
        self._flags(name, a, writable)
        return _common.data_ptr(a), self._norm[_SLOT[op]], a.size

    def _rows_or_dense(self, name, op, a, total, writable, dtype=None):
        """q / out (and new rows' descriptors): varlen token rows, else the dense shape.
        Returns (address, strides, elements or None = the required length)."""
        if self.varlen:
            return self._serving_strided(name, op, a, total, writable, dtype)
        p, s = self._strided(name, op, a, writable, dtype)
        return p, s, None

    def _kv_operand(self, name, op, a, total_k, writable, dtype=None):
        """k / v (or the caches of kv_append, or k_scale / v_scale) in this Desc's K/V
        layout."""
        if self.page_size:
            return self._serving_strided(name, op, a, None, writable, dtype)
        if self.varlen:
            return self._serving_strided(name, op, a, total_k, writable, dtype)
        p, s = self._strided(name, op, a, writable, dtype)
        return p, s, None

    # --- storage types ----------------------------------------------------------------------

    @staticmethod
    def _storage(name, op, a, typed):
        """(array, dtype or None) of q / k / v as given: float32 as it is; float16, BF16 and
        int8 with their attn_args setter recorded in `typed` (operand -> setter)."""
        if type(a) is _common.ndarray and a.dtype is _common.F32:
            return a, None
        a, dtype, setter = storage_setter(name, op, a)
        if setter is None:
            return a, None
        typed[op] = setter
        return a, dtype

    def _dense_in(self, name, op, a, typed):
        """(address, strides) of a dense q / k / v in any storage type (see _storage)."""
        if type(a) is _common.ndarray and a.dtype is _common.F32:
            return self._strided(name, op, a, False)
        a, dtype = self._storage(name, op, a, typed)
        return self._strided(name, op, a, False, dtype)

    def _scales(self, binds, strides, k_scale, v_scale, total_k, with_v=True):
        """Binds k_scale / v_scale (float32, K's layout with head_dim 1: dense (batch,
        heads_kv, seq_k), varlen (total_k, heads_kv), pools (num_pages, page_size, heads_kv) or
        head-major (num_pages, heads_kv, page_size); any strides, or flat buffers with the
        Desc's k_scale_strides / v_scale_strides) as (operand, address, elements) and records
        their strides in `strides` (slots 5 and 6). The library checks that they come with
        int8 k / v and only then."""
        for name, op, a in (("k_scale", _K_SCALE, k_scale), ("v_scale", _V_SCALE, v_scale)):
            if a is None or (op == _V_SCALE and not with_v):
                continue
            p, s, n = self._kv_operand(name, op, a, total_k, False)
            strides[_SLOT[op]] = s
            binds.append((op, p, n))

    def _alloc_rows(self, total):
        """A zeroed varlen out, (total_q, heads_q, head_dim_v), laid out with out_strides."""
        HQ, DV = self.heads_q, self.head_dim_v
        if self._contig_ok[_OUT] or total == 0:
            return _np.zeros((total, HQ, DV), _common.F32)
        _, hs, rs = self._strides[_OUT]
        buf = _np.zeros((total - 1) * rs + (HQ - 1) * hs + DV, _common.F32)
        return _np.lib.stride_tricks.as_strided(buf, (total, HQ, DV), (rs * 4, hs * 4, 4))

    def _serving_inputs(self, binds, cu_seqlens_q, cu_seqlens_k, block_table):
        """Checks and binds cu_seqlens_q / _k and block_table; returns (total_q, total_k)
        (None for a prefix sum not given). Without varlen or pages they are bound as given
        and the library says why it refuses them."""
        tq = tk = None
        if cu_seqlens_q is not None:
            p, tq = self._cu("cu_seqlens_q", _CU_Q, cu_seqlens_q)
            binds.append((_CU_Q, p, None))
        elif self.varlen:
            raise NullPointerError("cu_seqlens_q is None but the Desc has varlen=True: pass "
                                   "the (batch + 1,) int32 prefix sums of the query lengths")
        if cu_seqlens_k is not None:
            p, tk = self._cu("cu_seqlens_k", _CU_K, cu_seqlens_k)
            binds.append((_CU_K, p, None))
        elif self.varlen and not self.page_size:
            raise NullPointerError("cu_seqlens_k is None but the Desc has varlen=True without a "
                                   "page_size: pass the (batch + 1,) int32 prefix sums of the "
                                   "key lengths")
        if block_table is not None:
            if self.page_size:
                _, p, n = self._exact("block_table", _BLOCK_TABLE, block_table,
                                      self._shape[_BLOCK_TABLE], False)
            else:  # no pages: bound as it is; the library refuses it
                a = as_ndarray("block_table", block_table, "int32")
                check_dtype("block_table", a, (_common.I32,))
                self._flags("block_table", a, False)
                p, n = _common.data_ptr(a), a.size
            binds.append((_BLOCK_TABLE, p, n))
        return tq, tk

    def _with_handle(self, strides, fn):
        """fn(handle, lens) with the C descriptor matching `strides` (7 normalised triples;
        None = any), as _call does."""
        self._enter_call()
        try:
            if strides == self._norm or (None in strides and all(
                    x is None or x == y for x, y in zip(strides, self._norm))):
                handle, lens, temporary = self._handle, self._len, False
            else:
                (handle, lens), temporary = self._variant(strides)
            try:
                return fn(handle, lens)
            finally:
                if temporary:
                    _lib.attn_desc_destroy(handle)
        finally:
            self._leave()

    # --- calls ------------------------------------------------------------------------------

    @overload
    def forward(self, q: ArrayLike, k: ArrayLike, v: ArrayLike,
                key_valid: Optional[ArrayLike] = None, allowed: Optional[ArrayLike] = None,
                out: Optional[ArrayLike] = None, lse: _NotWanted = None, *,
                bias: Optional[ArrayLike] = None, alibi_slopes: Optional[ArrayLike] = None,
                sinks: Optional[ArrayLike] = None, query_valid: Optional[ArrayLike] = None,
                seq_lens_k: Optional[ArrayLike] = None,
                key_mass: _NotWanted = None, cu_seqlens_q: Optional[ArrayLike] = None,
                cu_seqlens_k: Optional[ArrayLike] = None,
                block_table: Optional[ArrayLike] = None, k_scale: Optional[ArrayLike] = None,
                v_scale: Optional[ArrayLike] = None) -> F32Array: ...

    @overload
    def forward(self, q: ArrayLike, k: ArrayLike, v: ArrayLike,
                key_valid: Optional[ArrayLike] = None, allowed: Optional[ArrayLike] = None,
                out: Optional[ArrayLike] = None, *, lse: _Wanted,
                bias: Optional[ArrayLike] = None, alibi_slopes: Optional[ArrayLike] = None,
                sinks: Optional[ArrayLike] = None, query_valid: Optional[ArrayLike] = None,
                seq_lens_k: Optional[ArrayLike] = None,
                key_mass: _NotWanted = None, cu_seqlens_q: Optional[ArrayLike] = None,
                cu_seqlens_k: Optional[ArrayLike] = None,
                block_table: Optional[ArrayLike] = None, k_scale: Optional[ArrayLike] = None,
                v_scale: Optional[ArrayLike] = None) -> Tuple[F32Array, F32Array]: ...

    @overload
    def forward(self, q: ArrayLike, k: ArrayLike, v: ArrayLike,
                key_valid: Optional[ArrayLike], allowed: Optional[ArrayLike],
                out: Optional[ArrayLike], lse: _Wanted, *,
                bias: Optional[ArrayLike] = None, alibi_slopes: Optional[ArrayLike] = None,
                sinks: Optional[ArrayLike] = None, query_valid: Optional[ArrayLike] = None,
                seq_lens_k: Optional[ArrayLike] = None,
                key_mass: _NotWanted = None, cu_seqlens_q: Optional[ArrayLike] = None,
                cu_seqlens_k: Optional[ArrayLike] = None,
                block_table: Optional[ArrayLike] = None, k_scale: Optional[ArrayLike] = None,
                v_scale: Optional[ArrayLike] = None) -> Tuple[F32Array, F32Array]: ...

    @overload
    def forward(self, q: ArrayLike, k: ArrayLike, v: ArrayLike,
                key_valid: Optional[ArrayLike] = None, allowed: Optional[ArrayLike] = None,
                out: Optional[ArrayLike] = None,
                lse: Union[_Wanted, _NotWanted] = None, *,
                bias: Optional[ArrayLike] = None, alibi_slopes: Optional[ArrayLike] = None,
                sinks: Optional[ArrayLike] = None, query_valid: Optional[ArrayLike] = None,
                seq_lens_k: Optional[ArrayLike] = None,
                key_mass: _Wanted, cu_seqlens_q: Optional[ArrayLike] = None,
                cu_seqlens_k: Optional[ArrayLike] = None,
                block_table: Optional[ArrayLike] = None, k_scale: Optional[ArrayLike] = None,
                v_scale: Optional[ArrayLike] = None
                ) -> Tuple[F32Array, Optional[F32Array], F32Array]: ...

    def forward(self, q: ArrayLike, k: ArrayLike, v: ArrayLike,
                key_valid: Optional[ArrayLike] = None, allowed: Optional[ArrayLike] = None,
                out: Optional[ArrayLike] = None, lse: Union[_Wanted, _NotWanted] = None, *,
                bias: Optional[ArrayLike] = None, alibi_slopes: Optional[ArrayLike] = None,
                sinks: Optional[ArrayLike] = None, query_valid: Optional[ArrayLike] = None,
                seq_lens_k: Optional[ArrayLike] = None,
                key_mass: Union[_Wanted, _NotWanted] = None,
                cu_seqlens_q: Optional[ArrayLike] = None,
                cu_seqlens_k: Optional[ArrayLike] = None,
                block_table: Optional[ArrayLike] = None, k_scale: Optional[ArrayLike] = None,
                v_scale: Optional[ArrayLike] = None) -> Any:
        """Attention forward pass (ATTN_OP_FORWARD).

        q, k, v:     (batch, heads_q, seq_q, head_dim), (batch, heads_kv, seq_k, head_dim),
                     (batch, heads_kv, seq_k, head_dim_v); any strides with the last dimension
                     contiguous, or flat buffers (see the class doc); read in place. float32,
                     or a storage type (docs/storage.md): float16, attn.BF16 (bfloat16
                     bits), int8 for k and v (with k_scale / v_scale); widened to float32 on
                     load
        key_valid:   None or bool_/uint8 (batch, seq_k), True = real key
        allowed:     None or bool_/uint8 (seq_q, seq_k), True = query i may see key j
        out:         None (allocated, zero-filled: shape (batch, heads_q, seq_q, head_dim_v),
                     laid out with out_strides) or a float32 array written in place
        lse:         None / False (not computed), True (allocated (batch, heads_q, seq_q)) or a
                     float32 array; -inf for a row with no visible key
        bias:        None or float32 (batch|1, heads_q|1, seq_q|1, seq_k), added to the scores
                     (after the softcap unless bias_first); size-1 dims broadcast (stride 0)
        alibi_slopes: float32 (heads_q,), required iff the Desc has alibi="operand"
        sinks:       float32 (heads_q,) sink logits joining every row's denominator
        query_valid: bool_/uint8 (batch, seq_q): False = padded query (out 0, lse -inf)
        seq_lens_k:  int32 (batch,) in [0, seq_k]: keys j >= seq_lens_k[b] are padding; with
                     a page_size: the keys in each sequence's cache (required)
        key_mass:    None / False, True (allocated (batch, heads_q, seq_k)) or a float32 array:
                     mass[b][h][j] = sum over queries of the weight of key j
        Serving layouts (see the class doc):
        cu_seqlens_q: int32 (batch + 1,) prefix sums of the query lengths (varlen: required);
                     q and out are then (total_q, heads_q, head_dim[_v]) and lse (heads_q,
                     total_q), total_q = cu_seqlens_q[-1]
        cu_seqlens_k: int32 (batch + 1,) prefix sums of the key lengths (varlen without pages:
                     required); k and v are then (total_k, heads_kv, head_dim[_v])
        block_table: int32 (batch, max_pages) page ids, -1 = unused slot (page_size: required);
                     k and v are the page pools (num_pages, page_size, heads_kv, d) or, with
                     page_layout="head_major", (num_pages, heads_kv, page_size, d)
        k_scale, v_scale: float32 scales of an int8 k / v, one per (batch, KV head, key): K's
                     layout with head_dim 1, (batch, heads_kv, seq_k) (varlen: (total_k,
                     heads_kv); pools: (num_pages, page_size, heads_kv), head-major (num_pages,
                     heads_kv, page_size)); any strides, or flat buffers laid out with
                     k_scale_strides / v_scale_strides. Required with an int8 k / v, refused
                     otherwise (by the library). attn.quantize_i8 makes both.
        Returns out; (out, lse) when lse is requested; (out, lse, key_mass) when key_mass is
        requested (lse is then None unless requested too). An array given for out, lse or
        key_mass is returned as given (a torch tensor stays a torch tensor), an allocated one is
        a numpy array. None means "not given"; an empty array is a length error (except the
        exact shape of an empty pack).
        """
        if _np is None:
            need_numpy()
        if self._closed:
            raise ValueError("Desc is closed")
        if (self._serving or cu_seqlens_q is not None or cu_seqlens_k is not None
                or block_table is not None):
            return self._forward_serving(q, k, v, key_valid, allowed, out, lse, bias,
                                         alibi_slopes, sinks, query_valid, seq_lens_k,
                                         key_mass, cu_seqlens_q, cu_seqlens_k, block_table,
                                         k_scale, v_scale)
        typed: Dict[int, Any] = {}
        qp, sq = self._dense_in("q", _Q, q, typed)
        kp, sk = self._dense_in("k", _K, k, typed)
        vp, sv = self._dense_in("v", _V, v, typed)
        if out is None:
            out = self._alloc_out()
        op_, so = self._strided("out", _OUT, out, True)
        norm = self._norm  # operands not bound (bias, the scales): the configured strides
        strides = [sq, sk, sv, so, norm[4], norm[5], norm[6]]
        binds = [(_Q, qp), (_K, kp), (_V, vp), (_OUT, op_)]
        if k_scale is not None or v_scale is not None:
            scales: list = []
            self._scales(scales, strides, k_scale, v_scale, None)
            binds += [(w, p) for w, p, _ in scales]
        if key_valid is not None:
            binds.append((_KEY_VALID,
                          self._contiguous("key_valid", _KEY_VALID, key_valid, False)))
        if allowed is not None:
            binds.append((_ALLOWED,
                          self._contiguous("allowed", _ALLOWED, allowed, False)))
        if (bias is not None or alibi_slopes is not None or sinks is not None
                or query_valid is not None or seq_lens_k is not None):
            self._optional_inputs(binds, strides, bias, alibi_slopes, sinks, query_valid,
                                  seq_lens_k)
        lse_a = mass_a = None
        if lse is not None and lse is not False:
            lse_a, lp = self._output("lse", _LSE, lse, _np.empty)
            binds.append((_LSE, lp))
        if key_mass is not None and key_mass is not False:
            mass_a, mp = self._output("key_mass", _KEY_MASS, key_mass, _np.zeros)
            binds.append((_KEY_MASS, mp))
        self._call(_FORWARD, binds, tuple(strides), typed or None)
        if mass_a is not None:
            return out, lse_a, mass_a
        return out if lse_a is None else (out, lse_a)

    def _forward_serving(self, q, k, v, key_valid, allowed, out, lse, bias, alibi_slopes, sinks,
                         query_valid, seq_lens_k, key_mass, cu_seqlens_q, cu_seqlens_k,
                         block_table, k_scale, v_scale):
        binds = []
        typed: Dict[int, Any] = {}
        tq, tk = self._serving_inputs(binds, cu_seqlens_q, cu_seqlens_k, block_table)
        q, qt = self._storage("q", _Q, q, typed)
        k, kt = self._storage("k", _K, k, typed)
        v, vt = self._storage("v", _V, v, typed)
        qp, sq, qn = self._rows_or_dense("q", _Q, q, tq, False, qt)
        kp, sk, kn = self._kv_operand("k", _K, k, tk, False, kt)
        vp, sv, vn = self._kv_operand("v", _V, v, tk, False, vt)
        if out is None:
            out = self._alloc_rows(tq) if self.varlen else self._alloc_out()
        op_, so, on = self._rows_or_dense("out", _OUT, out, tq, True)
        binds += [(_Q, qp, qn), (_K, kp, kn), (_V, vp, vn), (_OUT, op_, on)]
        strides = [sq, sk, sv, so, self._norm[4], self._norm[5], self._norm[6]]
        self._scales(binds, strides, k_scale, v_scale, tk)
        self._serving_masks(binds, strides, key_valid, allowed, bias, alibi_slopes, sinks,
                            query_valid, seq_lens_k)
        lse_a = mass_a = None
        if lse is not None and lse is not False:
            if self.varlen:
                shape = (self.heads_q, tq)
                lse_a = _np.empty(shape, _common.F32) if lse is True else lse
                _, lp, ln = self._exact("lse", _LSE, lse_a, shape, True)
                binds.append((_LSE, lp, ln))
            else:
                lse_a, lp = self._output("lse", _LSE, lse, _np.empty)
                binds.append((_LSE, lp, None))
        if key_mass is not None and key_mass is not False:  # the library refuses it in varlen
            mass_a, mp = self._output("key_mass", _KEY_MASS, key_mass, _np.zeros)
            binds.append((_KEY_MASS, mp, None))
        self._with_handle(tuple(strides), lambda h, lens: _run_bound(
            binds, lens, lambda a: _lib.attn_run(h, _FORWARD, a), typed=typed or None))
        if mass_a is not None:
            return out, lse_a, mass_a
        return out if lse_a is None else (out, lse_a)

    def _serving_masks(self, binds, strides, key_valid, allowed, bias, alibi_slopes, sinks,
                       query_valid, seq_lens_k):
        """The dense-shaped optional inputs of a serving call, as (operand, address, None)."""
        dense = []
        if key_valid is not None:
            dense.append((_KEY_VALID, self._contiguous("key_valid", _KEY_VALID, key_valid,
                                                       False)))
        if allowed is not None:
            dense.append((_ALLOWED, self._contiguous("allowed", _ALLOWED, allowed, False)))
        self._optional_inputs(dense, strides, bias, alibi_slopes, sinks, query_valid,
                              seq_lens_k)
        binds += [(w, p, None) for w, p in dense]

    def _alloc_out(self):
        shape = self._shape[_OUT]
        if self._contig_ok[_OUT]:
            return _np.zeros(shape, _common.F32)
        # custom out_strides: a view of that layout over a zeroed buffer
        buf = _np.zeros(self._len[_OUT], _common.F32)
        s = self._strides[_OUT]
        return _np.lib.stride_tricks.as_strided(buf, shape, (s[0] * 4, s[1] * 4, s[2] * 4, 4))

    def weights(self, q: ArrayLike, k: ArrayLike, key_valid: Optional[ArrayLike] = None,
                allowed: Optional[ArrayLike] = None, out: Optional[ArrayLike] = None, *,
                bias: Optional[ArrayLike] = None, alibi_slopes: Optional[ArrayLike] = None,
                sinks: Optional[ArrayLike] = None, query_valid: Optional[ArrayLike] = None,
                seq_lens_k: Optional[ArrayLike] = None,
                block_table: Optional[ArrayLike] = None,
                k_scale: Optional[ArrayLike] = None) -> F32Array:
        """The attention weights (ATTN_OP_WEIGHTS) as float32 (batch, heads_q, seq_q, seq_k):
        probabilities with hidden keys exactly 0 (or the scores of weights_mode).

        q, k (any storage type; an int8 k with its k_scale) and the optional inputs as forward
        (with a page_size: k is the pool, block_table and seq_lens_k are required; varlen has
        no weights: Status.UNSUPPORTED). out: None
        (allocated) or a float32 array of that shape (C-contiguous) or a flat buffer, written in
        place. Returns the weights."""
        need_numpy()
        if self._closed:
            raise ValueError("Desc is closed")
        if self.varlen:
            from ._common import AttentionError, Status
            raise AttentionError(Status.UNSUPPORTED, "weights: ATTN_OP_WEIGHTS is not supported "
                                 "with varlen=True (ATTN_PARAM_VARLEN) in libattn %s"
                                 % _lib.attn_version_string().decode("ascii"))
        serving = self._serving or block_table is not None
        typed: Dict[int, Any] = {}
        qp, sq = self._dense_in("q", _Q, q, typed)
        if serving:
            binds3: list = []
            self._serving_inputs(binds3, None, None, block_table)
            k, kt = self._storage("k", _K, k, typed)
            kp, sk, kn = self._kv_operand("k", _K, k, None, False, kt)
        else:
            kp, sk = self._dense_in("k", _K, k, typed)
        if out is None:
            out = _np.empty(self._shape[_WEIGHTS], _common.F32)
        wp = self._contiguous("out (weights)", _WEIGHTS, out, True)
        strides = [sq, sk, None, None, None, None, None]
        binds = [(_Q, qp), (_K, kp), (_WEIGHTS, wp)]
        if k_scale is not None:
            scales: list = []
            self._scales(scales, strides, k_scale, None, None)
            if serving:
                binds3 += scales
            else:
                binds += [(w, p) for w, p, _ in scales]
        if key_valid is not None:
            binds.append((_KEY_VALID,
                          self._contiguous("key_valid", _KEY_VALID, key_valid, False)))
        if allowed is not None:
            binds.append((_ALLOWED,
                          self._contiguous("allowed", _ALLOWED, allowed, False)))
        self._optional_inputs(binds, strides, bias, alibi_slopes, sinks, query_valid,
                              seq_lens_k)
        if serving:
            binds3 += [(w, p, kn if w == _K else None) for w, p in binds]
            self._with_handle(tuple(strides), lambda h, lens: _run_bound(
                binds3, lens, lambda a: _lib.attn_run(h, _WEIGHTS_OP, a), typed=typed or None))
        else:
            self._call(_WEIGHTS_OP, binds, tuple(strides), typed or None)
        return out  # type: ignore[return-value]  # the array given, or the one allocated

    def backward(self, q: ArrayLike, k: ArrayLike, v: ArrayLike, out: ArrayLike,
                 lse: ArrayLike, dout: ArrayLike, *, key_valid: Optional[ArrayLike] = None,
                 allowed: Optional[ArrayLike] = None, bias: Optional[ArrayLike] = None,
                 alibi_slopes: Optional[ArrayLike] = None, sinks: Optional[ArrayLike] = None,
                 query_valid: Optional[ArrayLike] = None,
                 seq_lens_k: Optional[ArrayLike] = None,
                 cu_seqlens_q: Optional[ArrayLike] = None,
                 cu_seqlens_k: Optional[ArrayLike] = None,
                 dq: Union[_Wanted, _NotWanted] = True, dk: Union[_Wanted, _NotWanted] = True,
                 dv: Union[_Wanted, _NotWanted] = True,
                 dbias: Union[_Wanted, _NotWanted] = None,
                 dsinks: Union[_Wanted, _NotWanted] = None,
                 k_scale: Optional[ArrayLike] = None,
                 v_scale: Optional[ArrayLike] = None) -> Gradients:
        """The gradients of the attention (ATTN_OP_BACKWARD, FlashAttention-2's algorithm: the
        probabilities are recomputed from q, k and lse, no seq_q x seq_k buffer).

        q, k, v:     the forward's inputs, shapes and strides as forward: float32, float16 or
                     attn.BF16 (passed without a copy; the library widens 16-bit values exactly
                     to fp32 and the gradients are the fp32 gradients of the widened values,
                     written as float32); int8 k / v: Status.UNSUPPORTED
        out, lse:    the forward's outputs (forward(..., lse=True)); only read
        dout:        gradient of the loss with respect to out, in out's layout (the same
                     strides as out: one C descriptor reads both): float32, float16 or attn.BF16
        key_valid, allowed, bias, alibi_slopes, sinks, query_valid, seq_lens_k, cu_seqlens_q,
        cu_seqlens_k: the forward's other inputs, as forward (varlen packs too; not with a
                     page_size: Status.UNSUPPORTED)
        dq, dk, dv:  True (default: allocated, zero-filled, in the layout of q / k / v), None /
                     False (not computed) or a writable float32 array laid out like q / k / v
                     (the library writes each gradient in its forward operand's layout). With
                     GQA dk and dv sum over the query heads of each KV head; hidden and padded
                     keys get 0, padded queries and rows without a visible key dq = 0.
        dbias:       None (default) / False, True or an array: the gradient of bias in bias's
                     layout with its broadcast dimensions summed (a bias of shape (1, heads_q,
                     seq_q, seq_k) gets a dbias of that shape)
        dsinks:      None (default) / False, True or a float32 (heads_q,) array: the gradient of
                     sinks
        Returns Gradients(dq, dk, dv, dbias, dsinks): the arrays computed (given ones as
        given), None for the others. At least one must be requested."""
        need_numpy()
        if self._closed:
            raise ValueError("Desc is closed")
        if self.page_size:
            from ._common import AttentionError, Status
            raise AttentionError(Status.UNSUPPORTED, "backward: ATTN_OP_BACKWARD with a paged "
                                 "K/V cache is not supported in libattn %s"
                                 % _lib.attn_version_string().decode("ascii"))
        binds: list = []
        typed: Dict[int, Any] = {}
        tq, tk = self._serving_inputs(binds, cu_seqlens_q, cu_seqlens_k, None)
        q, qt = self._storage("q", _Q, q, typed)
        k, kt = self._storage("k", _K, k, typed)
        v, vt = self._storage("v", _V, v, typed)
        qp, sq, qn = self._rows_or_dense("q", _Q, q, tq, False, qt)
        kp, sk, kn = self._kv_operand("k", _K, k, tk, False, kt)
        vp, sv, vn = self._kv_operand("v", _V, v, tk, False, vt)
        op_, so, on = self._rows_or_dense("out", _OUT, out, tq, False)
        dout, dt = self._storage("dout", _DOUT, dout, typed)
        dp, sd, dn = self._rows_or_dense("dout", _OUT, dout, tq, False, dt)
        if sd != so:
            raise InvalidArgumentError(
                "dout has element strides %s, out %s (batch, head, row): the library reads dout "
                "in out's layout; pass arrays of the same layout (e.g. numpy.ascontiguousarray "
                "of both)" % (sd, so))
        if self.varlen:
            _, lp, ln = self._exact("lse", _LSE, lse, (self.heads_q, tq), False)
        else:
            lp, ln = self._contiguous("lse", _LSE, lse, False), None
        binds += [(_Q, qp, qn), (_K, kp, kn), (_V, vp, vn), (_OUT, op_, on), (_LSE, lp, ln),
                  (_DOUT, dp, dn)]
        strides = [sq, sk, sv, so, self._norm[4], self._norm[5], self._norm[6]]
        self._serving_masks(binds, strides, key_valid, allowed, bias, alibi_slopes, sinks,
                            query_valid, seq_lens_k)
        self._scales(binds, strides, k_scale, v_scale, tk)
        got: Dict[str, Any] = {}
        for name, g, op, want, total, fs in (("dq", _DQ, _Q, dq, tq, sq),
                                             ("dk", _DK, _K, dk, tk, sk),
                                             ("dv", _DV, _V, dv, tk, sv),
                                             ("dbias", _DBIAS, _BIAS, dbias, None, strides[4])):
            if want is None or want is False:
                continue
            if g == _DBIAS and bias is None:
                raise InvalidArgumentError("dbias is requested but bias is None (the gradient "
                                           "of a bias needs the bias, in its layout)")
            got[name], p, n = self._gradient(name, op, want, total, fs)
            binds.append((g, p, n))
        if dsinks is not None and dsinks is not False:
            got["dsinks"], p = self._output("dsinks", _DSINKS, dsinks, _np.zeros)
            binds.append((_DSINKS, p, None))
        self._with_handle(tuple(strides), lambda h, lens: _run_bound(
            binds, lens, lambda a: _lib.attn_run(h, _BACKWARD, a), typed=typed or None))
        return Gradients(got.get("dq"), got.get("dk"), got.get("dv"), got.get("dbias"),
                         got.get("dsinks"))

    def _gradient(self, name, op, want, total, fstrides):
        """(array, address, elements or None) of the gradient `name` of forward operand `op`
        (q, k, v, bias), whose normalised strides are `fstrides`: the library writes it in that
        layout. want: True (allocated there) or the caller's array, which must have it."""
        fname = _NAMES[op]
        if op != _BIAS and not self._nests(op, fstrides, total):
            raise InvalidArgumentError(
                "%s: %s has element strides %s (batch, head, row) under which its rows overlap "
                "(a broadcast view?), so its gradient cannot be written in that layout; pass "
                "%s with memory of its own (numpy.ascontiguousarray(%s))"
                % (name, fname, fstrides, fname, fname))
        if want is True:
            a, buf = self._alloc_layout(op, fstrides, total)
            return a, _common.data_ptr(buf), buf.size
        if op == _BIAS:
            p, s = self._strided(name, op, want, True)
            n = None
        elif op == _Q:
            p, s, n = self._rows_or_dense(name, op, want, total, True)
        else:
            p, s, n = self._kv_operand(name, op, want, total, True)
        if s != fstrides:
            raise InvalidArgumentError(
                "%s has element strides %s, %s %s (batch, head, row): the library writes %s in "
                "%s's layout; pass an array laid out like %s (%s=True allocates one)"
                % (name, s, fname, fstrides, name, fname, fname, name))
        return want, p, n

    def _nests(self, op, strides, total):
        """True when no two rows of `op` laid out with `strides` overlap (attn.cpp
        rows_disjoint: taken from the smallest stride, each at least the extent inside it)."""
        counts = self._counts[op]
        if op in self._free:  # varlen token rows: the call's real count
            counts = (1, counts[1], total or 0)
        dim = self.head_dim_v if op in (_V, _OUT) else self.head_dim
        dims = sorted((s, n) for s, n in zip(strides, counts) if n > 1)
        extent = dim
        for s, n in dims:
            if s < extent:
                return False
            extent = s * (n - 1) + extent
        return True

    def _alloc_layout(self, op, strides, total):
        """(array, its buffer): a zero-filled float32 array of `op`'s shape laid out with the
        normalised C `strides` (the gradient of an operand with these strides). A dimension of
        stride 0 (a broadcast bias) has size 1 in the array: the library sums into it."""
        shape = list(self._shape[op])
        if op in self._free:
            shape[0] = total
        axes = self._axes.get(op, (0, 1, 2))
        np_strides = [1] * len(shape)
        for slot, axis in enumerate(axes):
            if axis is not None:
                np_strides[axis] = strides[slot]
        for axis in range(len(shape) - 1):
            if np_strides[axis] == 0:
                shape[axis] = 1
        if strides == self._contig[op]:  # the usual case: C-contiguous
            a = _np.zeros(shape, _common.F32)
            return a, a
        n = 1 + sum((x - 1) * s for x, s in zip(shape, np_strides)) if all(shape) else 0
        buf = _np.zeros(n, _common.F32)
        return _np.lib.stride_tricks.as_strided(
            buf, tuple(shape), tuple(4 * s for s in np_strides), writeable=True), buf

    def kv_append(self, k_cache: ArrayLike, v_cache: ArrayLike, new_k: ArrayLike,
                  new_v: ArrayLike, *, seq_lens_k: ArrayLike,
                  block_table: Optional[ArrayLike] = None,
                  cu_seqlens_q: Optional[ArrayLike] = None,
                  cu_seqlens_k: Optional[ArrayLike] = None) -> None:
        """Write new key and value rows into their cache positions, in place (attn_kv_append,
        vLLM's reshape_and_cache): token t of the n_b new tokens of sequence b goes to key
        position seq_lens_k[b] - n_b + t. seq_lens_k already counts the new tokens, so the same
        arrays then serve forward over the cache.

        k_cache, v_cache: float32, writable, in this Desc's K/V layout: the page pools with a
                     page_size (block_table required), varlen rows (total_k, heads_kv, d) with
                     varlen (cu_seqlens_k required), else dense (batch, heads_kv, seq_k, d); any
                     strides, read and written where they are (never copied); only the
                     destination rows are written
        new_k, new_v: float32 C-contiguous (tokens, heads_kv, head_dim[_v]): tokens =
                     cu_seqlens_q[-1] with varlen (n_b from cu_seqlens_q), else batch * seq_q
                     (n_b = seq_q, the rows ordered [batch][seq_q])
        seq_lens_k:  int32 (batch,): the keys of each sequence after the append
        The library checks the values and names what is wrong: "seq_lens_k[0] (1) is less
        than the 2 new tokens of sequence 0", "block_table[2][0] (1000) is not a page of the
        K/V buffers, which hold 9 pages", caches that overlap each other or the new rows."""
        need_numpy()
        if self._closed:
            raise ValueError("Desc is closed")
        append = _serving_function("attn_kv_append")
        binds = []
        tq, tk = self._serving_inputs(binds, cu_seqlens_q, cu_seqlens_k, block_table)
        binds.append((_SEQ_LENS_K, self._contiguous("seq_lens_k", _SEQ_LENS_K, seq_lens_k,
                                                    False), None))
        kp, sk, kn = self._kv_operand("k_cache", _K, k_cache, tk, True)
        vp, sv, vn = self._kv_operand("v_cache", _V, v_cache, tk, True)
        tokens = tq if self.varlen else self.batch * self.seq_q
        for name, op, a in (("new_k", _NEW_K, new_k), ("new_v", _NEW_V, new_v)):
            _, p, n = self._exact(name, op, a, (tokens,) + self._shape[op][1:], False)
            binds.append((op, p, n))

        def invoke(h, lens):
            return _run_bound(binds, lens, lambda a: append(
                h, a, kp, lens[_K] if kn is None else kn, vp, lens[_V] if vn is None else vn))
        self._with_handle((None, sk, sv, None, None, None, None), invoke)

    def merge(self, out: ArrayLike, lse: ArrayLike, part_out: ArrayLike, part_lse: ArrayLike,
              *, cu_seqlens_q: Optional[ArrayLike] = None) -> Tuple[Any, Any]:
        """Fold a partial result into another, in place (attn_merge): the exact merge of two
        results computed over disjoint key sets (split-KV decode, ring attention, a cached
        prefix), row by row:

            lse = log(exp(lse_acc) + exp(lse_part))
            out = exp(lse_acc - lse) out_acc + exp(lse_part - lse) out_part

        out, lse:    the accumulator (writable float32), updated in place: out in this Desc's
                     OUT layout ((batch, heads_q, seq_q, head_dim_v), or (total_q, heads_q,
                     head_dim_v) with varlen; any strides), lse (batch, heads_q, seq_q) or
                     (heads_q, total_q), C-contiguous
        part_out, part_lse: the other result, of the same shapes (part_out with out's strides:
                     one C descriptor reads both), only read
        cu_seqlens_q: int32 (batch + 1,), required with varlen
        A part with lse -inf contributes nothing (its out is not read); both -inf gives out 0,
        lse -inf. Folding parts one after another in a fixed order is bit-identical from run to
        run. The parts may come from calls of other descriptors (a key range has its own seq_k):
        this Desc gives the layout. Returns (out, lse), the arrays given."""
        need_numpy()
        if self._closed:
            raise ValueError("Desc is closed")
        merge = _serving_function("attn_merge")
        acc = []
        tq = None
        if cu_seqlens_q is not None:
            p, tq = self._cu("cu_seqlens_q", _CU_Q, cu_seqlens_q)
            acc.append((_CU_Q, p, None))
        elif self.varlen:
            raise NullPointerError("cu_seqlens_q is None but the Desc has varlen=True: pass "
                                   "the (batch + 1,) int32 prefix sums of the query lengths")
        op_, so, on = self._rows_or_dense("out", _OUT, out, tq, True)
        pp, sp, pn = self._rows_or_dense("part_out", _OUT, part_out, tq, False)
        if sp != so:
            raise InvalidArgumentError(
                "part_out has element strides %s, out %s (batch, head, row): attn_merge reads "
                "both with one OUT layout; pass arrays of the same layout (e.g. "
                "numpy.ascontiguousarray of both)" % (sp, so))
        lse_shape = (self.heads_q, tq) if self.varlen else self._shape[_LSE]
        lse_a, lp, ln = self._exact("lse", _LSE, lse, lse_shape, True)
        _, plp, pln = self._exact("part_lse", _LSE, part_lse, lse_shape, False)
        acc += [(_OUT, op_, on), (_LSE, lp, ln)]
        part = [(_OUT, pp, pn), (_LSE, plp, pln)]
        self._with_handle((None, None, None, so, None, None, None), lambda h, lens: _run_bound(
            acc, lens, lambda a, b: merge(h, a, b), part))
        return out, lse

    def run(self, op: Union[Op, int, str], args: Args) -> None:
        """attn_run(desc, op, args) on an Args object (the raw face: buffers laid out with this
        Desc's configured strides, lengths checked by the library)."""
        op = enum_arg("op", op, Op, "attn_op")
        self._check_args("args", args)
        self._enter_call()
        try:
            with args._lock:
                if args._handle is None:
                    raise ValueError("Args is closed")
                status = _lib.attn_run(self._handle, op, args._handle)
                if status:
                    raise library_error(status)
        finally:
            self._leave()

    @staticmethod
    def _check_args(name, args):
        if not isinstance(args, Args):
            if args is None:
                raise NullPointerError("%s is None" % name)
            raise ArgumentTypeError("%s must be an attn.Args, got %s"
                                    % (name, type(args).__name__))

    def run_kv_append(self, args: Args, k_cache: ArrayLike, v_cache: ArrayLike) -> None:
        """attn_kv_append(desc, args, k_cache, k_len, v_cache, v_len), the raw face: new_k,
        new_v, seq_lens_k (and cu_seqlens_q, block_table, cu_seqlens_k as the layout needs)
        bound in `args`; the caches are writable C-contiguous float32 buffers of any shape in
        this Desc's configured K/V layout, written in place, lengths checked by the library."""
        append = _serving_function("attn_kv_append")
        self._check_args("args", args)
        caches = []
        for name, a in (("k_cache", k_cache), ("v_cache", v_cache)):
            a = as_ndarray(name, a, "float32", True)
            check_dtype(name, a, (_common.F32,))
            if a.size == 0:
                raise InvalidArgumentError("%s has 0 elements" % name)
            self._flags(name, a, True)
            caches.append(a)
        k, v = caches
        self._enter_call()
        try:
            with args._lock:
                if args._handle is None:
                    raise ValueError("Args is closed")
                status = append(self._handle, args._handle, _common.data_ptr(k), k.size,
                                _common.data_ptr(v), v.size)
                if status:
                    raise library_error(status)
        finally:
            self._leave()

    def run_kv_append_args(self, args: Args) -> None:
        """attn_kv_append_args(desc, args), the raw face: the caches are k and v of `args`,
        bound writable (set_out_f32 / set_out_f16 / set_out_bf16 / set_out_i8, an int8 cache's
        k_scale / v_scale with set_out_f32), in any storage type; new_k / new_v float32 or the
        cache's type (int8 rows with new_k_scale / new_v_scale), seq_lens_k and the layout's
        operands as run_kv_append. Float32 rows are converted (round to nearest even) or
        quantized (the int8 row and its scale, as attn.quantize_i8) into the cache; the same
        args then serve Desc.run."""
        append = library_function("attn_kv_append_args")
        self._check_args("args", args)
        self._enter_call()
        try:
            with args._lock:
                if args._handle is None:
                    raise ValueError("Args is closed")
                status = append(self._handle, args._handle)
                if status:
                    raise library_error(status)
        finally:
            self._leave()

    def run_merge(self, acc: Args, part: Args) -> None:
        """attn_merge(desc, acc, part), the raw face: out and lse bound (set_out_f32) in both,
        cu_seqlens_q in acc with varlen; acc's buffers are updated in place."""
        merge = _serving_function("attn_merge")
        self._check_args("acc", acc)
        self._check_args("part", part)
        if acc is part:
            raise InvalidArgumentError("acc and part are the same Args (acc is updated in place "
                                       "from part: part must hold another result)")
        first, second = sorted((acc, part), key=id)  # a fixed lock order: no deadlock
        self._enter_call()
        try:
            with first._lock, second._lock:
                if acc._handle is None or part._handle is None:
                    raise ValueError("Args is closed")
                status = merge(self._handle, acc._handle, part._handle)
                if status:
                    raise library_error(status)
        finally:
            self._leave()


# ------------------------------------------------------------------------------------------
# Args: the raw binding object
# ------------------------------------------------------------------------------------------

#: the address bound for an empty array whose data pointer is NULL: never read (length 0)
_EMPTY_ANCHOR = ctypes.c_uint64()


class Args:
    """attn_args: operand -> (buffer, element count), for Desc.run. The raw face of the C call:
    buffers are C-contiguous numpy arrays (any shape) read with the descriptor's configured
    strides; their element count is passed along and checked by the library (a longer buffer is
    fine, as in C). The Args keeps a reference to each bound array until it is unbound, cleared
    or closed. close() (or the with block) frees it; __del__ frees a forgotten one.

        with attn.Args() as args:
            args.set(attn._Q, q); args.set(attn._K, k); ...
            desc.run(attn.Op.FORWARD, args)
    """

    def __init__(self) -> None:
        need_numpy()
        self._lock = threading.Lock()
        self._handle = None
        self._refs: Dict[int, Any] = {}
        handle = ctypes.c_void_p()
        check_status(_lib.attn_args_create(ctypes.byref(handle)))
        self._handle = handle.value

    def _bind(self, setter, dtypes, writable, operand, array):
        which = enum_arg("operand", operand, Operand, "attn_operand")
        name = _NAMES[which]
        if array is not None:
            a = as_ndarray(name, array, _common.dtype_name(dtypes), writable)
            check_dtype(name, a, dtypes)
            Desc._flags(name, a, writable)
            # An empty array is bound as empty, never as NULL ("not given"): the library
            # decides (a length error where the call needs elements; a varlen pack of 0 tokens
            # needs none).
            ptr, n = _common.data_ptr(a) or ctypes.addressof(_EMPTY_ANCHOR), a.size
        else:
            a, ptr, n = None, None, 0
        with self._lock:
            if self._handle is None:
                raise ValueError("Args is closed")
            status = setter(self._handle, which, ptr, n)
            if status:
                raise library_error(status)
            if a is None:
                self._refs.pop(which, None)
            else:
                self._refs[which] = a
        return self

    def set(self, operand: Union[Operand, int, str], array: Union[ArrayLike, BF16, None]
            ) -> Args:
        """Bind `array` as `operand` with the setter of its element type (float32 inputs and
        outputs, bool_/uint8 masks, int32 seq_lens_k / cu_seqlens / block_table; q, k, v also
        float16 -> set_f16, attn.BF16 -> set_bf16, int8 -> set_i8); None unbinds. Returns
        self."""
        which = enum_arg("operand", operand, Operand, "attn_operand")
        if which in (_Q, _K, _V, _NEW_K, _NEW_V, _DOUT) and array is not None:
            if isinstance(array, BF16):
                return self.set_bf16(which, array)
            a = as_ndarray(_NAMES[which], array, "float32, float16, int8 or attn.BF16")
            if a.dtype == _common.F16:
                return self.set_f16(which, a)
            if a.dtype == _common.I8:
                return self.set_i8(which, a)
            if a.dtype != _common.F32:
                storage_setter(_NAMES[which], which, a)  # raises, naming what it could be
            array = a
        kind = _KIND[which]
        return self._bind(_SETTER[which], _dtypes(kind), kind == _F32_OUT, which, array)

    def set_f32(self, operand: Union[Operand, int, str], array: Optional[ArrayLike]) -> Args:
        """attn_args_set_f32: a float32 input (q, k, v, bias, alibi_slopes, sinks, new_k,
        new_v, dout, k_scale, v_scale)."""
        return self._bind(_lib.attn_args_set_f32, (_common.F32,), False, operand, array)

    def set_out_f32(self, operand: Union[Operand, int, str], array: Optional[ArrayLike]) -> Args:
        """attn_args_set_out_f32: a float32 output (out, lse, weights, key_mass, and dq, dk,
        dv, dbias, dsinks of Op.BACKWARD; out and lse are read there), or a float32 k / v cache
        or the k_scale / v_scale of an int8 one that Desc.run_kv_append_args writes."""
        return self._bind(_lib.attn_args_set_out_f32, (_common.F32,), True, operand, array)

    def set_out_f16(self, operand: Union[Operand, int, str], array: Optional[ArrayLike]) -> Args:
        """attn_args_set_out_f16: a k or v cache stored as IEEE binary16 that
        Desc.run_kv_append_args writes (a writable float16 array, or uint16 binary16 bits),
        passed without a copy; Desc.run reads it as set_f16's."""
        return self._bind(library_function("attn_args_set_out_f16"), (_common.F16, _common.U16),
                          True, operand, array)

    def set_out_bf16(self, operand: Union[Operand, int, str], array: Union[ArrayLike, BF16, None]
                     ) -> Args:
        """attn_args_set_out_bf16: a k or v cache stored as bfloat16 (a writable attn.BF16 or
        uint16 array of bit patterns) that Desc.run_kv_append_args writes."""
        if isinstance(array, BF16):
            array = array.bits
        return self._bind(library_function("attn_args_set_out_bf16"), (_common.U16,), True,
                          operand, array)

    def set_out_i8(self, operand: Union[Operand, int, str], array: Optional[ArrayLike]) -> Args:
        """attn_args_set_out_i8: a k or v cache stored as symmetric int8 (a writable int8 array)
        that Desc.run_kv_append_args writes; bind its scales (k_scale / v_scale) with
        set_out_f32."""
        return self._bind(library_function("attn_args_set_out_i8"), (_common.I8,), True, operand,
                          array)

    def set_f16(self, operand: Union[Operand, int, str], array: Optional[ArrayLike]) -> Args:
        """attn_args_set_f16: q, k, v or dout (new_k / new_v for run_kv_append_args) stored as
        IEEE binary16, a float16 array (or uint16 holding binary16 bits), passed without a
        copy."""
        return self._bind(library_function("attn_args_set_f16"), (_common.F16, _common.U16),
                          False, operand, array)

    def set_bf16(self, operand: Union[Operand, int, str], array: Union[ArrayLike, BF16, None]
                 ) -> Args:
        """attn_args_set_bf16: q, k, v or dout (new_k / new_v for run_kv_append_args) stored as
        bfloat16, an attn.BF16 or a uint16 array of bit patterns, passed without a copy."""
        if isinstance(array, BF16):
            array = array.bits
        return self._bind(library_function("attn_args_set_bf16"), (_common.U16,), False,
                          operand, array)

    def set_i8(self, operand: Union[Operand, int, str], array: Optional[ArrayLike]) -> Args:
        """attn_args_set_i8: k or v stored as symmetric int8 (an int8 array); bind its scales as
        Operand.K_SCALE / V_SCALE with set_f32 (attn.quantize_i8 makes both)."""
        return self._bind(library_function("attn_args_set_i8"), (_common.I8,), False, operand,
                          array)

    def set_u8(self, operand: Union[Operand, int, str], array: Optional[ArrayLike]) -> Args:
        """attn_args_set_u8: a byte mask (key_valid, allowed, query_valid), bool_ or uint8."""
        return self._bind(_lib.attn_args_set_u8, (_common.BOOL, _common.U8), False, operand,
                          array)

    def set_i32(self, operand: Union[Operand, int, str], array: Optional[ArrayLike]) -> Args:
        """attn_args_set_i32: an int32 operand (seq_lens_k, cu_seqlens_q, cu_seqlens_k,
        block_table)."""
        return self._bind(_lib.attn_args_set_i32, (_common.I32,), False, operand, array)

    # The serving operands by name (the same as set() with the Operand). Their values are
    # checked by the library in Desc.run / run_kv_append / run_merge, the message naming the
    # sequence and the slot.

    def set_seq_lens_k(self, array: Optional[ArrayLike]) -> Args:
        """seq_lens_k: int32 (batch,), the keys of each sequence (with a paged cache: the keys
        in its cache, the new ones of a kv_append included)."""
        return self.set(_SEQ_LENS_K, array)

    def set_cu_seqlens_q(self, array: Optional[ArrayLike]) -> Args:
        """cu_seqlens_q: int32 (batch + 1,) prefix sums of the query lengths (varlen)."""
        return self.set(_CU_Q, array)

    def set_cu_seqlens_k(self, array: Optional[ArrayLike]) -> Args:
        """cu_seqlens_k: int32 (batch + 1,) prefix sums of the key lengths (varlen without
        pages)."""
        return self.set(_CU_K, array)

    def set_block_table(self, array: Optional[ArrayLike]) -> Args:
        """block_table: int32 (batch, max_pages) page ids, -1 = unused slot (page_size)."""
        return self.set(_BLOCK_TABLE, array)

    def set_new_k(self, array: Optional[ArrayLike]) -> Args:
        """new_k: float32 (tokens, heads_kv, head_dim) rows for Desc.run_kv_append."""
        return self.set(_NEW_K, array)

    def set_new_v(self, array: Optional[ArrayLike]) -> Args:
        """new_v: float32 (tokens, heads_kv, head_dim_v) rows for Desc.run_kv_append."""
        return self.set(_NEW_V, array)

    def clear(self) -> None:
        """Unbind every operand."""
        with self._lock:
            if self._handle is None:
                raise ValueError("Args is closed")
            check_status(_lib.attn_args_clear(self._handle))
            self._refs.clear()

    def close(self) -> None:
        """Free the binding object (idempotent); the arrays are released."""
        with self._lock:
            handle, self._handle = self._handle, None
            self._refs = {}
        if handle is not None:
            _lib.attn_args_destroy(handle)

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __enter__(self) -> Args:
        if self._handle is None:
            raise ValueError("Args is closed")
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_lock", None) is not None:
            try:
                self.close()
            except Exception:  # interpreter shutdown
                pass
