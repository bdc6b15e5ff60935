"""Desc: the descriptor API of capi/attn.h on numpy arrays (internal module: import from attn).

Every call goes one way: the arrays are checked against the descriptor (_layout), bound with
their element counts to this thread's attn_args (_binding) and the C call runs. The library
checks lengths, values and combinations and names what is wrong.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional, Sequence, Tuple, Union

from . import _common, _lib
from ._binding import (NAMES, SETTER, thread_args, _ALIBI_SLOPES, _ALLOWED, _BIAS, _DBIAS,
                       _DK, _DOUT, _DQ, _DSINKS, _DV, _K, _KEY_MASS, _KEY_VALID, _LSE, _NEW_K,
                       _NEW_V, _OUT, _Q, _Q_SCALE, _QUERY_VALID, _SEQ_LENS_K, _SINKS, _V,
                       _WEIGHTS)
from ._common import (ArgumentTypeError, AttentionError, Closeable, InvalidArgumentError, Op,
                      Operand, Param, Status, as_ndarray, check_dtype, enum_arg, library_error,
                      need_numpy, size_arg, _np)
from ._layout import IN_FLAGS, OUT_FLAGS, SLOT, STRIDED, SCALES, Layout, flags_ok
from ._params import build_params, new_handle, param_type, read_back, read_param, strides_arg

if TYPE_CHECKING:
    from typing import Literal

    from ._args import Args
    from ._common import ArrayLike, F32Array

    _Strides = Optional[Sequence[int]]
    #: an optional output: None / False = not wanted, True = allocated, or an array to fill
    _Wanted = Union[Literal[True], ArrayLike, None]

_MAX_VARIANTS = 32
_F32_SETTER, _OUT_SETTER = SETTER[_Q], SETTER[_OUT]
_ndarray = _np.ndarray if _np is not None else None
_F32 = getattr(_common, "F32", None)
_FORWARD, _WEIGHTS_OP, _BACKWARD = int(Op.FORWARD), int(Op.WEIGHTS), int(Op.BACKWARD)
_STRIDE_KEYWORDS = ("q", "k", "v", "out", "bias", "k_scale", "v_scale", "alibi_slopes")


def _same_layout(name, strides, other, other_strides, why):
    if strides != other_strides:
        raise InvalidArgumentError(
            "%s has element strides %s, %s %s (batch, head, row): %s; pass arrays of the same "
            "layout (e.g. numpy.ascontiguousarray of both)"
            % (name, strides, other, other_strides, why))


class Gradients(NamedTuple):
    """What Desc.backward returns: each gradient requested (in its forward operand's layout),
    None for one not requested."""
    dq: Any
    dk: Any
    dv: Any
    dbias: Any
    dsinks: Any


class Desc(Layout, Closeable):
    """An attention problem (attn_desc): sizes, parameters and strides, fixed at construction.

        with attn.Desc(batch, heads_q, heads_kv, seq_q, seq_k, head_dim,
                       causal="top_left", window=(128, 0), softcap=50.0) as desc:
            out, lse = desc.forward(q, k, v, key_valid=mask, lse=True)

    Shapes are numpy's, outermost first (``shape(operand)``; docs/serving.md). Each keyword
    is the attn_param of its name (capi/attn.h; enums also by name), read back into the
    attribute of that name (the sizes too); window=(left, right) sets both sides;
    page_layout="head_major" takes (num_pages, heads_kv, page_size, d) pools; <operand>_strides:
    attn_desc_set_strides. Shareable by threads; close() frees it once running calls return.
    """

    def __init__(self, batch: int, heads_q: int, heads_kv: int, seq_q: int, seq_k: int,
                 head_dim: int, *,
                 window: Optional[Tuple[Optional[int], Optional[int]]] = None,
                 page_layout: Optional[str] = None,
                 q_strides: _Strides = None, k_strides: _Strides = None,
                 v_strides: _Strides = None, out_strides: _Strides = None,
                 bias_strides: _Strides = None, k_scale_strides: _Strides = None,
                 v_scale_strides: _Strides = None,
                 alibi_slopes_strides: _Strides = None, **params: Any) -> None:
        self._lock = threading.Lock()
        self._active: set = set()  # a token per call in flight (set.add / discard: atomic)
        self._closed = True
        self._handle = None
        self._variants: Dict[Any, Any] = {}
        kw = locals()
        dims = tuple(size_arg(n, kw[n]) for n in ("batch", "heads_q", "heads_kv", "seq_q",
                                                  "seq_k", "head_dim"))
        unknown = sorted(set(params) - {p.name.lower() for p in Param})
        if unknown:
            raise TypeError("Desc() got an unexpected keyword argument %r" % unknown[0])
        values = build_params(dict(params, window=window))
        if page_layout not in (None, "token_major", "head_major"):
            if not isinstance(page_layout, str):
                raise ArgumentTypeError("page_layout must be 'token_major' or 'head_major', "
                                        "got %s" % type(page_layout).__name__)
            raise InvalidArgumentError("page_layout (%r) is not one of 'token_major', "
                                       "'head_major'" % (page_layout,))
        given = {}
        for op, name in zip(STRIDED + (_ALIBI_SLOPES,), _STRIDE_KEYWORDS):
            s = strides_arg(name + "_strides", kw[name + "_strides"])
            if s is not None:
                given[op] = s
        head_major, pv = page_layout == "head_major", dict(values)
        pages = pv.get(Param.PAGE_SIZE, 0)
        if head_major and not pages:
            raise InvalidArgumentError("page_layout=%r needs a paged cache (page_size >= 1)"
                                       % (page_layout,))
        if head_major:  # (num_pages, heads_kv, page_size, d) pages: the library's strides
            HKV, D, DV = dims[2], dims[5], pv.get(Param.HEAD_DIM_V, dims[5])
            pool = {_K: (HKV * pages * D, pages * D, D), _V: (HKV * pages * DV, pages * DV, DV)}
            given = {**pool, **{op: (HKV * pages, pages, 1) for op in SCALES}, **given}
        handle = new_handle(dims, values, sorted(given.items()))
        self._handle, self._closed = handle, False
        self._len = [int(_lib.attn_desc_required_len(handle, op)) for op in Operand]
        self._dims, self._params = dims, values
        (self.batch, self.heads_q, self.heads_kv, self.seq_q, self.seq_k, self.head_dim) = dims
        try:
            read_back(self, handle)
        except BaseException:
            self.close()
            raise
        self.page_layout = "head_major" if head_major else "token_major"
        self._geometry(given, head_major)
        self._fast = None if self._serving or not all(self._contig_ok[op] for op in (
            _Q, _K, _V, _OUT)) else (self._shape[_Q], self._shape[_K], self._shape[_V])

    # --- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Free the descriptor (idempotent). Later calls raise ValueError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if not self._active:
                self._destroy_locked()

    def _destroy_locked(self):
        handle, self._handle = self._handle, None
        variants, self._variants = self._variants, {}
        if handle is not None:
            _lib.attn_desc_destroy(handle)
        for h in variants.values():
            _lib.attn_desc_destroy(h)

    @property
    def closed(self) -> bool:
        return self._closed

    def _open(self):
        need_numpy()
        if self._closed:
            raise ValueError("Desc is closed")

    def _enter_call(self):
        """Counts a call in flight (close() defers the free until the last one returns);
        returns its token for _leave. Lock-free: closed is read after the token is in."""
        token = object()
        self._active.add(token)
        if self._closed:
            self._leave(token)
            raise ValueError("Desc is closed")
        return token

    def _leave(self, token):
        self._active.discard(token)
        if self._closed and not self._active:
            with self._lock:  # idempotent: the handles are None once freed
                self._destroy_locked()

    def __repr__(self) -> str:
        if not hasattr(self, "_shape"):
            return "Desc(<not created>)"
        extra = []  # the parameters that differ from their defaults (attn_param_info)
        for (name, _, _, _, default), p in zip(_lib.PARAMS, Param):
            value = getattr(self, name)
            if name == "head_dim_v":
                default = self.head_dim
            if (value == default or p in (Param.CAUSAL, Param.SCALE) or default != default
                    or (p == Param.MAX_PAGES and not self.page_size)):
                continue
            extra.append("%s=%r" % (name, value.name.lower() if hasattr(value, "name")
                                    else value))
        if self.page_layout != "token_major":
            extra.append("page_layout=%r" % self.page_layout)
        return ("Desc(batch=%d, heads_q=%d, heads_kv=%d, seq_q=%d, seq_k=%d, head_dim=%d, "
                "causal=%s, scale=%r%s%s)" % (
                    self.batch, self.heads_q, self.heads_kv, self.seq_q, self.seq_k,
                    self.head_dim, self.causal.name, self.scale,
                    "".join(", " + e for e in extra), ", closed" if self._closed else ""))

    # --- queries ----------------------------------------------------------------------------

    def required_len(self, operand: Union[Operand, int, str]) -> int:
        """attn_desc_required_len: the elements a flat buffer for `operand` must hold."""
        operand = enum_arg("operand", operand, Operand, "attn_operand")
        if self._closed:
            raise ValueError("Desc is closed")
        return self._len[operand]

    def shape(self, operand: Union[Operand, int, str], *, total_q: Optional[int] = None,
              total_k: Optional[int] = None, num_pages: Optional[int] = None
              ) -> Tuple[int, ...]:
        """The numpy shape of `operand`; a serving layout's free dimension is given as
        total_q= (cu_seqlens_q[-1]), total_k= (cu_seqlens_k[-1]) or num_pages=."""
        operand = enum_arg("operand", operand, Operand, "attn_operand")
        shape = self._shape[operand]
        free = self._free.get(operand)
        if free is None:
            return shape
        value = {"total_q": total_q, "total_k": total_k, "num_pages": num_pages}[free]
        if value is None:
            raise InvalidArgumentError(
                "the shape of %s (%s) depends on the call: pass %s=" % (
                    NAMES[operand], ", ".join(self._dim_names[operand]), free))
        value = size_arg(free, value)
        return tuple(value if n is None else n for n in shape)

    def param(self, param: Union[Param, int, str]) -> Union[int, float]:
        """A parameter's current value read from the library (attn_desc_get_int / _float)."""
        param = enum_arg("param", param, Param, "attn_param")
        token = self._enter_call()
        try:
            return read_param(self._handle, param)
        finally:
            self._leave(token)

    # --- the call path ----------------------------------------------------------------------

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
            made = new_handle(self._dims, self._params, list(zip(STRIDED, key)))
            if len(self._variants) < _MAX_VARIANTS:
                self._variants[key] = made
                return made, False
            return made, True  # temporary: destroyed after the call

    def _run(self, op, binds, strides, typed=None, call=None, part=None):
        """Binds (operand, address, elements) `binds` (`typed`: operand -> setter of a stored
        q / k / v / dout) and runs attn_run(op), or call(desc, args[, part args]), on the C
        descriptor matching `strides` (7 normalised triples in STRIDED order, None = any)."""
        token = self._enter_call()
        try:
            norm = self._norm
            if strides == norm or (None in strides and all(
                    x is None or x == y for x, y in zip(strides, norm))):
                handle, temporary = self._handle, False
            else:
                handle, temporary = self._variant(strides)
            try:
                args = thread_args([(w, typed.get(w) or SETTER[w], p, n) for w, p, n in binds]
                                   if typed else
                                   [(w, SETTER[w], p, n) for w, p, n in binds])
                if call is None:
                    status = _lib.attn_run(handle, op, args)
                elif part is None:
                    status = call(handle, args)
                else:
                    status = call(handle, args, thread_args(
                        [(w, SETTER[w], p, n) for w, p, n in part], "part"))
                if status:
                    raise library_error(status)  # attn_last_error, on this thread, right away
            finally:
                if temporary:
                    _lib.attn_desc_destroy(handle)
        finally:
            self._leave(token)

    def _run_plain(self, op, binds):
        """attn_run(op) of (operand, setter, address, elements) `binds` on the configured
        descriptor."""
        token = self._enter_call()
        try:
            status = _lib.attn_run(self._handle, op, thread_args(binds))
            if status:
                raise library_error(status)
        finally:
            self._leave(token)

    def _qkv(self, binds, typed, q, k, v, tq, tk, with_v=True):
        """Binds q, k and v (any storage type); returns their normalised strides."""
        q, qt = self._stored("q", _Q, q, typed)
        qp, sq, qn = self._rows_or_dense("q", _Q, q, tq, False, qt)
        k, kt = self._stored("k", _K, k, typed)
        kp, sk, kn = self._kv_operand("k", _K, k, tk, False, kt)
        binds += [(_Q, qp, qn), (_K, kp, kn)]
        if not with_v:
            return [sq, sk, None, None, None, None, None]
        v, vt = self._stored("v", _V, v, typed)
        vp, sv, vn = self._kv_operand("v", _V, v, tk, False, vt)
        binds.append((_V, vp, vn))
        norm = self._norm
        return [sq, sk, sv, None, norm[4], norm[5], norm[6]]

    def _inputs(self, binds, strides, tk, key_valid, allowed, bias, alibi_slopes, sinks,
                query_valid, seq_lens_k, k_scale, v_scale, q_scale):
        """Binds the optional inputs given (None = not given)."""
        for name, op, a in (("key_valid", _KEY_VALID, key_valid), ("allowed", _ALLOWED, allowed),
                            ("alibi_slopes", _ALIBI_SLOPES, alibi_slopes),
                            ("sinks", _SINKS, sinks), ("query_valid", _QUERY_VALID, query_valid),
                            ("seq_lens_k", _SEQ_LENS_K, seq_lens_k),
                            ("q_scale", _Q_SCALE, q_scale)):
            if a is not None:
                binds.append((op,) + self._contiguous(name, op, a, False)[1:])
        if bias is not None:
            p, strides[4], n = self._strided("bias", _BIAS, bias, False)
            binds.append((_BIAS, p, n))
        for name, a, slot in (("k_scale", k_scale, 5), ("v_scale", v_scale, 6)):
            if a is not None:
                op = STRIDED[slot]
                p, strides[slot], n = self._kv_operand(name, op, a, tk, False)
                binds.append((op, p, n))

    def _lse(self, name, a, tq, writable, alloc=_np.empty if _np is not None else None):
        shape = (self.heads_q, tq) if self.varlen else self._shape[_LSE]
        if a is True:
            a = alloc(shape, _common.F32)
        a, p, n = self._contiguous(name, _LSE, a, writable, shape)
        return a, (_LSE, p, n)

    # --- calls ------------------------------------------------------------------------------

    def forward(self, q: ArrayLike, k: ArrayLike, v: ArrayLike,
                key_valid: Optional[ArrayLike] = None, allowed: Optional[ArrayLike] = None,
                out: Optional[ArrayLike] = None, lse: _Wanted = None, *,
                bias: Optional[ArrayLike] = None, alibi_slopes: Optional[ArrayLike] = None,
                sinks: Optional[ArrayLike] = None, query_valid: Optional[ArrayLike] = None,
                seq_lens_k: Optional[ArrayLike] = None, key_mass: _Wanted = None,
                cu_seqlens_q: Optional[ArrayLike] = None,
                cu_seqlens_k: Optional[ArrayLike] = None,
                block_table: Optional[ArrayLike] = None, k_scale: Optional[ArrayLike] = None,
                v_scale: Optional[ArrayLike] = None,
                q_scale: Optional[ArrayLike] = None) -> Any:
        """The forward pass (ATTN_OP_FORWARD): each argument is the attn_run operand of its
        name (capi/attn.h). out None is allocated (zero-filled, out_strides); lse / key_mass
        True are allocated. Returns out, (out, lse), or (out, lse, key_mass) with key_mass."""
        fast = self._fast  # the usual call: float32 C-contiguous q, k, v, out, nothing else
        if (fast is not None and type(q) is _ndarray and type(k) is _ndarray
                and type(v) is _ndarray and q.dtype is _F32 and k.dtype is _F32
                and v.dtype is _F32 and (q.shape, k.shape, v.shape) == fast
                and q.flags.num & k.flags.num & v.flags.num & IN_FLAGS == IN_FLAGS
                and lse is None and key_mass is None and key_valid is None and allowed is None
                and bias is None and alibi_slopes is None and sinks is None
                and query_valid is None and seq_lens_k is None and cu_seqlens_q is None
                and cu_seqlens_k is None and block_table is None and k_scale is None
                and v_scale is None and q_scale is None):
            if out is None:
                out = _np.zeros(self._shape[_OUT], _F32)
            if (type(out) is _ndarray and out.dtype is _F32 and out.shape == self._shape[_OUT]
                    and out.flags.num & OUT_FLAGS == OUT_FLAGS):
                ptr, s32 = _common.data_ptr, _F32_SETTER
                self._run_plain(_FORWARD, [(_Q, s32, ptr(q), q.size), (_K, s32, ptr(k), k.size),
                                           (_V, s32, ptr(v), v.size),
                                           (_OUT, _OUT_SETTER, ptr(out), out.size)])
                return out
        self._open()
        binds: list = []
        typed: Dict[int, Any] = {}
        tq = tk = None
        if (self._serving or cu_seqlens_q is not None or cu_seqlens_k is not None
                or block_table is not None):
            tq, tk = self._serving_inputs(binds, cu_seqlens_q, cu_seqlens_k, block_table)
        strides = self._qkv(binds, typed, q, k, v, tq, tk)
        if out is None:
            out = self._alloc(_OUT, total=tq)[0]
        p, strides[3], n = self._rows_or_dense("out", _OUT, out, tq, True)
        binds.append((_OUT, p, n))
        self._inputs(binds, strides, tk, key_valid, allowed, bias, alibi_slopes, sinks,
                     query_valid, seq_lens_k, k_scale, v_scale, q_scale)
        lse_a = mass_a = None
        if lse is not None and lse is not False:
            lse_a, b = self._lse("lse", lse, tq, True)
            binds.append(b)
        if key_mass is not None and key_mass is not False:
            mass_a, b = self._output("key_mass", _KEY_MASS, key_mass, _np.zeros)
            binds.append(b)
        self._run(_FORWARD, binds, tuple(strides), typed)
        if mass_a is not None:
            return out, lse_a, mass_a
        return out if lse_a is None else (out, lse_a)

    def weights(self, q: ArrayLike, k: ArrayLike, key_valid: Optional[ArrayLike] = None,
                allowed: Optional[ArrayLike] = None, out: Optional[ArrayLike] = None, *,
                bias: Optional[ArrayLike] = None, alibi_slopes: Optional[ArrayLike] = None,
                sinks: Optional[ArrayLike] = None, query_valid: Optional[ArrayLike] = None,
                seq_lens_k: Optional[ArrayLike] = None,
                block_table: Optional[ArrayLike] = None,
                k_scale: Optional[ArrayLike] = None,
                q_scale: Optional[ArrayLike] = None) -> F32Array:
        """The attention weights (ATTN_OP_WEIGHTS), (batch, heads_q, seq_q, seq_k) float32;
        the arguments as forward. Returns out (allocated when None)."""
        self._open()
        if self.varlen:
            raise AttentionError(Status.UNSUPPORTED, "weights: ATTN_OP_WEIGHTS is not "
                                 "supported with varlen=True (ATTN_PARAM_VARLEN)")
        binds: list = []
        typed: Dict[int, Any] = {}
        if self._serving or block_table is not None:
            self._serving_inputs(binds, None, None, block_table)
        strides = self._qkv(binds, typed, q, k, None, None, None, False)
        if out is None:
            out = _np.empty(self._shape[_WEIGHTS], _common.F32)
        binds.append((_WEIGHTS,) + self._contiguous("weights", _WEIGHTS, out, True)[1:])
        self._inputs(binds, strides, None, key_valid, allowed, bias, alibi_slopes, sinks,
                     query_valid, seq_lens_k, k_scale, None, q_scale)
        self._run(_WEIGHTS_OP, binds, tuple(strides), typed)
        return out  # type: ignore[return-value]  # the array given, or the one allocated

    def backward(self, q: ArrayLike, k: ArrayLike, v: ArrayLike, out: ArrayLike,
                 lse: ArrayLike, dout: ArrayLike, *, key_valid: Optional[ArrayLike] = None,
                 allowed: Optional[ArrayLike] = None, bias: Optional[ArrayLike] = None,
                 alibi_slopes: Optional[ArrayLike] = None, sinks: Optional[ArrayLike] = None,
                 query_valid: Optional[ArrayLike] = None,
                 seq_lens_k: Optional[ArrayLike] = None,
                 cu_seqlens_q: Optional[ArrayLike] = None,
                 cu_seqlens_k: Optional[ArrayLike] = None,
                 dq: _Wanted = True, dk: _Wanted = True, dv: _Wanted = True,
                 dbias: _Wanted = None, dsinks: _Wanted = None,
                 k_scale: Optional[ArrayLike] = None,
                 v_scale: Optional[ArrayLike] = None,
                 q_scale: Optional[ArrayLike] = None) -> Gradients:
        """The gradients (ATTN_OP_BACKWARD) from the forward's inputs, out, lse and dout (in
        out's layout). dq / dk / dv / dbias / dsinks: True = allocated in the layout of their
        forward operand, None / False = not computed, or an array in that layout. Returns
        Gradients(dq, dk, dv, dbias, dsinks)."""
        self._open()
        if self.page_size:
            raise AttentionError(Status.UNSUPPORTED, "backward: ATTN_OP_BACKWARD with a paged "
                                 "K/V cache is not supported")
        binds: list = []
        typed: Dict[int, Any] = {}
        tq, tk = self._serving_inputs(binds, cu_seqlens_q, cu_seqlens_k, None)
        strides = self._qkv(binds, typed, q, k, v, tq, tk)
        p, strides[3], n = self._rows_or_dense("out", _OUT, out, tq, False)
        binds.append((_OUT, p, n))
        dout, dt = self._stored("dout", _DOUT, dout, typed)
        dp, sd, dn = self._rows_or_dense("dout", _OUT, dout, tq, False, dt)
        _same_layout("dout", sd, "out", strides[3], "the library reads dout in out's layout")
        binds += [self._lse("lse", lse, tq, False)[1], (_DOUT, dp, dn)]
        self._inputs(binds, strides, tk, key_valid, allowed, bias, alibi_slopes, sinks,
                     query_valid, seq_lens_k, k_scale, v_scale, q_scale)
        got: Dict[str, Any] = {}
        for name, g, op, want, total in (("dq", _DQ, _Q, dq, tq), ("dk", _DK, _K, dk, tk),
                                         ("dv", _DV, _V, dv, tk), ("dbias", _DBIAS, _BIAS, dbias,
                                                                    None)):
            if want is None or want is False:
                continue
            if g == _DBIAS and bias is None:
                raise InvalidArgumentError("dbias is requested but bias is None (the gradient "
                                           "of a bias needs the bias, in its layout)")
            got[name], p, n = self._gradient(name, op, want, total, strides[SLOT[op]])
            binds.append((g, p, n))
        if dsinks is not None and dsinks is not False:
            got["dsinks"], b = self._output("dsinks", _DSINKS, dsinks, _np.zeros)
            binds.append((_DSINKS,) + b[1:])
        self._run(_BACKWARD, binds, tuple(strides), typed)
        return Gradients(*(got.get(n) for n in Gradients._fields))

    def _gradient(self, name, op, want, total, fstrides):
        """(array, address, elements) of gradient `name` of forward operand `op` (q, k, v,
        bias): the library writes it in that operand's layout, `fstrides`."""
        fname = NAMES[op]
        if op != _BIAS and not self._nests(op, fstrides, total):
            raise InvalidArgumentError(
                "%s: %s has element strides %s (batch, head, row) under which its rows overlap "
                "(a broadcast view?), so its gradient cannot be written in that layout; pass "
                "%s with memory of its own (numpy.ascontiguousarray(%s))"
                % (name, fname, fstrides, fname, fname))
        if want is True:
            a, buf = self._alloc(op, fstrides, total)
            return a, _common.data_ptr(buf), buf.size
        if op == _Q:
            p, s, n = self._rows_or_dense(name, op, want, total, True)
        else:
            p, s, n = self._kv_operand(name, op, want, total, True)
        _same_layout(name, s, fname, fstrides, "the library writes %s in %s's layout (%s=True "
                     "allocates one)" % (name, fname, name))
        return want, p, n

    def _nests(self, op, strides, total):
        """True when no two rows of `op` laid out with `strides` overlap (each stride, from
        the smallest, at least the extent inside it)."""
        counts = self._counts[op]
        if op in self._free:  # varlen token rows: the call's real count
            counts = (1, counts[1], total or 0)
        extent = self.head_dim_v if op in (_V, _OUT) else self.head_dim
        for s, n in sorted((s, n) for s, n in zip(strides, counts) if n > 1):
            if s < extent:
                return False
            extent = s * (n - 1) + extent
        return True

    def kv_append(self, k_cache: ArrayLike, v_cache: ArrayLike, new_k: ArrayLike,
                  new_v: ArrayLike, *, seq_lens_k: ArrayLike,
                  block_table: Optional[ArrayLike] = None,
                  cu_seqlens_q: Optional[ArrayLike] = None,
                  cu_seqlens_k: Optional[ArrayLike] = None) -> None:
        """attn_kv_append: new key / value rows (tokens, heads_kv, d) written into the float32
        caches (this Desc's K/V layout, any strides) in place."""
        self._open()
        append = _lib.attn_kv_append
        binds: list = []
        tq, tk = self._serving_inputs(binds, cu_seqlens_q, cu_seqlens_k, block_table)
        binds.append((_SEQ_LENS_K,) + self._contiguous("seq_lens_k", _SEQ_LENS_K, seq_lens_k,
                                                       False)[1:])
        kp, sk, kn = self._kv_operand("k_cache", _K, k_cache, tk, True)
        vp, sv, vn = self._kv_operand("v_cache", _V, v_cache, tk, True)
        tokens = tq if self.varlen else self.batch * self.seq_q
        for name, op, a in (("new_k", _NEW_K, new_k), ("new_v", _NEW_V, new_v)):
            binds.append((op,) + self._contiguous(name, op, a, False,
                                                  (tokens,) + self._shape[op][1:])[1:])
        self._run(None, binds, (None, sk, sv, None, None, None, None),
                  call=lambda h, a: append(h, a, kp, kn, vp, vn))

    def merge(self, out: ArrayLike, lse: ArrayLike, part_out: ArrayLike, part_lse: ArrayLike,
              *, cu_seqlens_q: Optional[ArrayLike] = None) -> Tuple[Any, Any]:
        """attn_merge: fold the partial result (part_out, part_lse) into (out, lse), in place
        (capi/attn.h gives the formula). Returns (out, lse), the arrays given."""
        self._open()
        merge = _lib.attn_merge
        acc: list = []
        tq = self._cu_q(acc, cu_seqlens_q)
        op_, so, on = self._rows_or_dense("out", _OUT, out, tq, True)
        pp, sp, pn = self._rows_or_dense("part_out", _OUT, part_out, tq, False)
        _same_layout("part_out", sp, "out", so, "attn_merge reads both with one OUT layout")
        acc += [(_OUT, op_, on), self._lse("lse", lse, tq, True)[1]]
        part = [(_OUT, pp, pn), self._lse("part_lse", part_lse, tq, False)[1]]
        self._run(None, acc, (None, None, None, so, None, None, None), call=merge, part=part)
        return out, lse

    # --- the raw face: Args -----------------------------------------------------------------

    def _raw(self, call, *args_objects, names=("args",)):
        """call(desc handle, *attn_args handles) under the Desc and the Args locks."""
        from ._args import Args
        for name, a in zip(names, args_objects):
            if not isinstance(a, Args):
                if a is None:
                    raise _common.NullPointerError("%s is None" % name)
                raise ArgumentTypeError("%s must be an attn.Args, got %s"
                                        % (name, type(a).__name__))
        locks = sorted(set(args_objects), key=id)  # a fixed lock order: no deadlock
        token = self._enter_call()
        try:
            for a in locks:
                a._lock.acquire()
            try:
                if any(a._handle is None for a in args_objects):
                    raise ValueError("Args is closed")
                status = call(self._handle, *(a._handle for a in args_objects))
                if status:
                    raise library_error(status)
            finally:
                for a in locks:
                    a._lock.release()
        finally:
            self._leave(token)

    def run(self, op: Union[Op, int, str], args: Args) -> None:
        """attn_run(desc, op, args) on an Args object."""
        op = enum_arg("op", op, Op, "attn_op")
        self._raw(lambda h, a: _lib.attn_run(h, op, a), args)

    def run_kv_append(self, args: Args, k_cache: ArrayLike, v_cache: ArrayLike) -> None:
        """attn_kv_append(desc, args, k_cache, k_len, v_cache, v_len): the caches writable
        C-contiguous float32 arrays."""
        append = _lib.attn_kv_append
        k, v = (as_ndarray(name, a, "float32", True) for name, a in (("k_cache", k_cache),
                                                                      ("v_cache", v_cache)))
        for name, a in (("k_cache", k), ("v_cache", v)):
            check_dtype(name, a, (_common.F32,))
            flags_ok(name, a, True)
        self._raw(lambda h, a: append(h, a, _common.data_ptr(k), k.size, _common.data_ptr(v),
                                      v.size), args)

    def run_kv_append_args(self, args: Args) -> None:
        """attn_kv_append_args(desc, args): the caches bound writable in `args`."""
        self._raw(_lib.attn_kv_append_args, args)

    def run_merge(self, acc: Args, part: Args) -> None:
        """attn_merge(desc, acc, part)."""
        merge = _lib.attn_merge
        if acc is part and acc is not None:
            raise InvalidArgumentError("acc and part are the same Args (acc is updated in place "
                                       "from part: part must hold another result)")
        self._raw(merge, acc, part, names=("acc", "part"))


# The attributes' types for type checkers: the sizes, then every parameter's from the library's
# table (attn_param_info), so a parameter added to the library needs no line here.
Desc.__annotations__ = dict(
    {n: int for n in ("batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim")},
    window=Tuple[int, int], page_layout=str, **{p.name.lower(): param_type(p) for p in Param})
