"""Operand shapes and numpy arrays: what C cannot see (internal; the base class of Desc).

A numpy array has a shape and strides; the library sees an address, an element count and the
descriptor's strides. This module checks that an array has exactly its operand's shape (bias:
size-1 dims broadcast) and dtype, reads its element strides (a strided operand whose strides
differ from the configured ones runs on a matching C descriptor, made once and cached), and
returns its address and the element count its memory covers, which the library checks. A flat
1-D buffer stands for an operand laid out with the configured strides; it must not be longer
than attn_desc_required_len (a view is passed for a longer cache).

Serving layouts (docs/serving.md): varlen rows (total_q / total_k from the call's cu_seqlens)
and page pools (any number of pages) have a free first dimension, known per call.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from . import _common
from ._binding import (NAMES, dtypes, _ALIBI_SLOPES, _BIAS, _BLOCK_TABLE, _CU_SEQLENS_K,
                       _CU_SEQLENS_Q, _DBIAS, _DOUT, _DK, _DQ, _DV, _K, _K_SCALE, _LSE, _NEW_K,
                       _NEW_K_SCALE, _NEW_V, _NEW_V_SCALE, _OUT, _Q, _V, _V_SCALE)
from ._lib import DIMS
from ._common import (InvalidArgumentError, NullPointerError, as_ndarray, check_dtype,
                      element_strides, _np)
from ._storage import storage_setter

STRIDED = (_Q, _K, _V, _OUT, _BIAS, _K_SCALE, _V_SCALE)  # read in place with their strides
SLOT = {op: i for i, op in enumerate(STRIDED)}  # in a stride key
SCALES = (_K_SCALE, _V_SCALE)  # K's layout with head_dim 1: no contiguous last dimension

# ndarray.flags.num bits (numpy/ndarraytypes.h): NPY_ARRAY_C_CONTIGUOUS, _ALIGNED, _WRITEABLE.
IN_FLAGS = 0x0001 | 0x0100
OUT_FLAGS = IN_FLAGS | 0x0400

# The dense shape of each operand, named by its dimensions as the library gives them
# (attn_operand_dims; the numbers follow from the sizes). A bias array may also have size 1 in
# its first three dimensions: numpy's broadcast, passed to the library as stride 0.
_DIMS = dict(zip(NAMES, DIMS))
_DIMS["bias"] = "batch|1 heads_q|1 seq_q|1 seq_k"


def fmt_shape(shape):
    return "(%s)" % ", ".join(str(n) for n in shape) if len(shape) != 1 else "(%d,)" % shape[0]


def flags_ok(name, a, writable):
    flags = a.flags
    if not flags.c_contiguous:
        raise InvalidArgumentError("%s is not C-contiguous (use numpy.ascontiguousarray; "
                                   "arrays are passed without copies)" % name)
    _aligned_writable(name, a, writable)


def _aligned_writable(name, a, writable):
    if not a.flags.aligned:
        raise InvalidArgumentError("%s is not aligned for %s" % (name, a.dtype.name))
    if writable and not a.flags.writeable:
        raise InvalidArgumentError("%s is read-only" % name)


def extent(a, es):
    """Elements from the first to one past the last of `a` with element strides `es`."""
    return 0 if a.size == 0 else 1 + sum((n - 1) * s for n, s in zip(a.shape, es))


class Layout:
    """The geometry of a Desc's operands (shapes, free dims, configured strides)."""

    def _geometry(self, given, head_major):
        B, HQ, HKV, SQ, SK, D = self._dims
        DV, P, VL = self.head_dim_v, self.page_size, self.varlen
        size = {"batch": B, "heads_q": HQ, "heads_kv": HKV, "seq_q": SQ, "seq_k": SK,
                "head_dim": D, "head_dim_v": DV, "batch + 1": B + 1, "batch * seq_q": B * SQ,
                "max_pages": self._len[_BLOCK_TABLE] // B if B else 0}
        names = {op: tuple(d.replace("|", " or ").replace("+", " + ").replace("*", " * ")
                           for d in _DIMS.get(n, "").split())
                 for op, n in enumerate(NAMES)}
        # alibi_slopes: (heads_q,) broadcast over the batch (strides (0, 1, 0), the default),
        # (batch, heads_q) with strides (heads_q, 1, 0), else a flat buffer of required_len
        slope_s = given.get(_ALIBI_SLOPES, (0, 1, 0))
        names[_ALIBI_SLOPES] = (("heads_q",) if slope_s[:2] == (0, 1) else
                                ("batch", "heads_q") if slope_s[:2] == (HQ, 1) else
                                ("attn_desc_required_len(ALIBI_SLOPES)",))
        size["attn_desc_required_len(ALIBI_SLOPES)"] = self._len[_ALIBI_SLOPES]
        self._serving = bool(P or VL)
        # free: the dimension known per call (total_q, total_k, num_pages); axes: the numpy
        # axes of the C batch, head and row dimensions of a strided serving operand
        self._free: Dict[int, str] = {}
        self._axes: Dict[int, Tuple[Optional[int], int, int]] = {}
        if VL:
            for op in (_Q, _OUT):
                names[op] = ("total_q", names[op][1], names[op][-1])
            for op in (_NEW_K, _NEW_V, _NEW_K_SCALE, _NEW_V_SCALE):  # a row per token
                names[op] = ("total_q",) + names[op][1:]
            names[_LSE] = ("heads_q", "total_q")
            for op in (_Q, _OUT, _NEW_K, _NEW_V, _NEW_K_SCALE, _NEW_V_SCALE, _LSE):
                self._free[op] = "total_q"
            self._axes[_Q] = self._axes[_OUT] = (None, 1, 0)
        for op in (_K, _V) + SCALES:
            inner = names[op][3:]  # the scales have no head_dim
            if P and head_major:
                names[op], self._axes[op] = ("num_pages", "heads_kv", "page_size"), (0, 1, 2)
            elif P:
                names[op], self._axes[op] = ("num_pages", "page_size", "heads_kv"), (0, 2, 1)
            elif VL:
                names[op], self._axes[op] = ("total_k", "heads_kv"), (None, 1, 0)
            else:
                continue
            names[op] += inner
            self._free[op] = "num_pages" if P else "total_k"
        size["page_size"] = P
        # the gradients: in the layout (and shape) of their forward operands
        for g, op in ((_DOUT, _OUT), (_DQ, _Q), (_DK, _K), (_DV, _V), (_DBIAS, _BIAS)):
            names[g] = names[op]
            if op in self._free:
                self._free[g] = self._free[op]
        self._dim_names = names
        self._shape = {op: tuple(None if n in ("total_q", "total_k", "num_pages")
                                 else size[n.split(" or ")[0]] for n in ns)
                       for op, ns in names.items()}
        # The counts of the library's view of each strided operand (a dimension of count 1
        # never moves the address: its stride is 0 in every comparison; a pool's page stride
        # always matters, count 2 standing for "any number of pages").
        free = {"total_q": B * SQ, "total_k": B * SK, "num_pages": 2}
        self._counts = {op: tuple(1 if x is None else self._shape[op][x] or free[self._free[op]]
                                  for x in self._axes.get(op, (0, 1, 2))) for op in STRIDED}
        # The strides the library holds: the ones given, else its defaults, which are the
        # C-contiguous layout of the operand's numpy shape (capi/attn.h, attn_desc_set_strides).
        self._strides, self._contig = {}, {}
        for op in STRIDED:
            shape, scale = self._shape[op], op in SCALES
            st = [0, 0, 0]
            axes = self._axes.get(op, (0, 1, 2))
            inner = 1 if scale else shape[-1]
            for axis in range(len(shape) - (1 if scale else 2), -1, -1):
                if axis in axes:
                    st[axes.index(axis)] = inner
                inner *= shape[axis] if shape[axis] is not None else 1
            self._strides[op] = given.get(op, tuple(st))
            self._contig[op] = self._normalise(op, tuple(st))
        self._norm = tuple(self._normalise(op, self._strides[op]) for op in STRIDED)
        self._contig_ok = {op: self._contig[op] == self._norm[SLOT[op]] for op in STRIDED}

    def _normalise(self, op, s):
        return tuple(0 if n == 1 else x for n, x in zip(self._counts[op], s))

    # --- errors -----------------------------------------------------------------------------

    def _note(self, op):
        free = self._free.get(op)
        if free == "total_q":
            return " (total_q = cu_seqlens_q[%d], the pack's query tokens)" % self.batch
        if free == "total_k":
            return " (total_k = cu_seqlens_k[%d], the pack's keys)" % self.batch
        if free == "num_pages":
            other = "head_major" if self.page_layout == "token_major" else "token_major"
            return " (%s pages, any number of them; page_layout=%r takes the other order)" % (
                self.page_layout.replace("_", "-"), other)
        return ""

    def _mismatch(self, name, op, a, want=None, flat=None):
        want = self._shape[op] if want is None else want
        shown = "(%s)" % ", ".join("any >= 1" if n is None else str(n) for n in want)
        if len(want) == 1:
            shown = "(%s,)" % want[0]
        dims = self._dim_names[op]
        wanted = "(%s) = %s" % (", ".join(dims), shown)
        tail = self._note(op) + (" or a flat buffer of %d elements" % flat
                                 if flat is not None and len(want) > 1 else "")
        if a.ndim != len(want):
            return InvalidArgumentError("%s has %d dimension%s (shape %s), expected %d: %s%s"
                                        % (name, a.ndim, "" if a.ndim == 1 else "s",
                                           fmt_shape(a.shape), len(want), wanted, tail))
        return InvalidArgumentError("%s has shape %s, expected %s%s"
                                    % (name, fmt_shape(a.shape), wanted, tail))

    # --- arrays -----------------------------------------------------------------------------

    @staticmethod
    def _too_long(name, a, need, shape):
        """Refuses a flat buffer longer than `need` (a shorter one is the library's to refuse)."""
        if a.size > need:
            raise InvalidArgumentError(
                "%s has %d elements, needs exactly %d: a flat numpy buffer must hold exactly "
                "attn_desc_required_len elements (or pass an array of shape %s)"
                % (name, a.size, need, fmt_shape(shape)))

    def _strided(self, name, op, a, writable, dtype=None, free=False):
        """(address, normalised C strides, elements) of a strided operand: q, k, v, out, bias
        (the last dimension contiguous; bias's size-1 dims broadcast) and k_scale / v_scale. In
        a serving layout (`free` given) its first dimension is the call's: token rows (total_q
        or total_k) or a page pool (free None: any number of pages >= 1). A flat 1-D buffer is
        laid out with the Desc's strides. `dtype`: a stored q / k / v's (default float32)."""
        shape = self._shape[op] if free is False else (free,) + self._shape[op][1:]
        want_dt = _common.F32 if dtype is None else dtype
        flags = OUT_FLAGS if writable else IN_FLAGS
        if (type(a) is _common.ndarray and a.dtype is want_dt and a.flags.num & flags == flags
                and (a.shape == shape or (shape[0] is None and a.ndim == len(shape)
                                          and a.shape[1:] == shape[1:] and a.shape[0] >= 1))):
            return _common.data_ptr(a), self._contig[op], a.size  # C-contiguous: the usual case
        a = as_ndarray(name, a, want_dt.name, writable)
        check_dtype(name, a, (want_dt,))
        if a.ndim == 1:
            if free is not False:
                return self._serving_flat(name, op, a, free, writable)
            self._too_long(name, a, self._len[op], self._shape[op])
            flags_ok(name, a, writable)
            return _common.data_ptr(a), self._norm[SLOT[op]], a.size
        if a.ndim != len(shape) or any(
                got != want and not (want is None and got >= 1)
                and not (op == _BIAS and i < 3 and got == 1)
                for i, (got, want) in enumerate(zip(a.shape, shape))):
            raise self._mismatch(name, op, a, shape, self._len[op] if free is False else None)
        _aligned_writable(name, a, writable)
        es = element_strides(name, a)
        if op not in SCALES and a.shape[-1] > 1 and es[-1] != 1:
            self._last_dim_error(name, op, es[-1])
        if free is False:
            return _common.data_ptr(a), self._normalise(op, es[:3]), extent(a, es)
        # A dimension of size 1 in the array (one token, one page) never moves the address, but
        # the library's view may count more (seq_q * batch rows): it gets the extent of the
        # other dimensions as its stride, so that it nests outside them (OUT must nest).
        axes = self._axes[op]
        inner = (1 if op in SCALES else a.shape[-1]) + sum(
            (a.shape[x] - 1) * es[x] for x in axes if x is not None and a.shape[x] > 1)
        triple = tuple(0 if axis is None else inner if a.shape[axis] == 1 else es[axis]
                       for axis in axes)
        return _common.data_ptr(a), self._normalise(op, triple), extent(a, es)

    def _last_dim_error(self, name, op, stride):
        raise InvalidArgumentError(
            "%s: its last dimension (%s) has stride %d elements; the library reads it "
            "contiguously (stride 1): pass numpy.ascontiguousarray(%s) or a view with "
            "contiguous rows" % (name, self._dim_names[op][-1].split(" or ")[0], stride, name))

    def _contiguous(self, name, op, a, writable, shape=None):
        """(array, address, elements) of a C-contiguous operand of exactly its shape (or
        `shape`), or a flat buffer of that many elements."""
        shape = self._shape[op] if shape is None else shape
        flags = OUT_FLAGS if writable else IN_FLAGS
        if (type(a) is _common.ndarray and a.shape == shape and a.flags.num & flags == flags
                and a.dtype in dtypes(op)):
            return a, _common.data_ptr(a), a.size  # the usual case
        a = as_ndarray(name, a, _common.dtype_name(dtypes(op)), writable)
        check_dtype(name, a, dtypes(op))
        if a.shape != shape:
            size = 1
            for n in shape:
                size *= n
            if a.ndim == 1 and len(shape) > 1:  # a flat buffer (any other shape: refused)
                self._too_long(name, a, size, shape)
            if not (a.ndim == 1 and (a.size < size or len(shape) > 1)):
                raise self._mismatch(name, op, a, shape, size)
        flags_ok(name, a, writable)
        return a, _common.data_ptr(a), a.size

    def _output(self, name, op, a, alloc):
        """An optional output: (None, None) = not wanted (None / False), True = allocated,
        else (array, (operand, address, elements))."""
        if a is None or a is False:
            return None, None
        if a is True:
            a = alloc(self._shape[op], _common.F32)
        a, p, n = self._contiguous(name, op, a, True)
        return a, (op, p, n)

    def _serving_flat(self, name, op, a, free, writable):
        bs, hs, rs = self._strides[op]
        shape = self._shape[op]
        if free is None:  # a pool: one page, then whole page strides
            one, n = self._len[op], a.size
            if not (n >= one and (n == one or (bs and (n - one) % bs == 0))):
                raise InvalidArgumentError(
                    "%s has %d elements: a flat pool holds one page (%d elements) plus whole "
                    "page strides (%d elements each) with the Desc's %s strides (%d, %d, %d); or "
                    "pass an array of shape (%s)%s" % (
                        name, n, one, bs, NAMES[op], bs, hs, rs,
                        ", ".join(self._dim_names[op]), self._note(op)))
        else:
            heads, dim = (shape[-1], 1) if op in SCALES else (shape[-2], shape[-1])
            need = 0 if free == 0 else (free - 1) * rs + (heads - 1) * hs + dim
            if a.size != need:
                raise InvalidArgumentError(
                    "%s has %d elements, needs exactly %d: a flat buffer holds the pack's rows "
                    "with the Desc's %s strides (or pass an array of shape %s)%s"
                    % (name, a.size, need, NAMES[op], fmt_shape((free,) + shape[1:]),
                       self._note(op)))
        flags_ok(name, a, writable)
        return _common.data_ptr(a), self._norm[SLOT[op]], a.size

    def _rows_or_dense(self, name, op, a, total, writable, dtype=None):
        """q / out (and dout): varlen token rows, else the dense shape."""
        return self._strided(name, op, a, writable, dtype, total if self.varlen else False)

    def _kv_operand(self, name, op, a, total_k, writable, dtype=None):
        """k / v (the caches of kv_append, k_scale / v_scale) in this Desc's K/V layout."""
        free = None if self.page_size else total_k if self.varlen else False
        return self._strided(name, op, a, writable, dtype, free)

    @staticmethod
    def _stored(name, op, a, typed):
        """(array, dtype or None) of q / k / v / dout as given: float32 as it is; float16,
        BF16 and int8 with their attn_args setter recorded in `typed` (operand -> setter)."""
        if type(a) is _common.ndarray and a.dtype is _common.F32:
            return a, None
        a, dtype, setter = storage_setter(name, op, a)
        if setter is not None:
            typed[op] = setter
        return a, dtype

    def _alloc(self, op, strides=None, total=None):
        """(array, its buffer): a zero-filled float32 array of `op`'s shape (free dim
        `total`) laid out with the normalised C `strides` (default: the configured ones). A
        dimension of stride 0 (a broadcast bias) has size 1 in the array: the library sums
        into it."""
        strides = self._norm[SLOT[op]] if strides is None else strides
        shape = list(self._shape[op])
        if op in self._free:
            shape[0] = total
        np_strides = [1] * len(shape)
        for slot, axis in enumerate(self._axes.get(op, (0, 1, 2))):
            if axis is not None:
                np_strides[axis] = strides[slot]
        for axis in range(len(shape) - 1):
            if np_strides[axis] == 0:
                shape[axis] = 1
        if strides == self._contig[op] or not all(shape):
            a = _np.zeros(shape, _common.F32)
            return a, a
        buf = _np.zeros(1 + sum((x - 1) * s for x, s in zip(shape, np_strides)), _common.F32)
        return _np.lib.stride_tricks.as_strided(
            buf, tuple(shape), tuple(4 * s for s in np_strides), writeable=True), buf

    def _cu(self, name, op, a):
        """(operand, address, elements) and total of cu_seqlens_q / _k: the total is its last
        element (the library checks the others)."""
        a, ptr, n = self._contiguous(name, op, a, False)
        if a.shape != self._shape[op]:
            raise self._mismatch(name, op, a)
        total = int(a[-1])
        if total < 0:
            raise InvalidArgumentError("%s[%d] (%d) is negative: the last prefix sum is the "
                                       "pack's number of tokens" % (name, self.batch, total))
        return (op, ptr, n), total

    def _cu_q(self, binds, cu_seqlens_q):
        """Binds cu_seqlens_q (required with varlen); returns total_q, None if not given."""
        if cu_seqlens_q is None:
            if self.varlen:
                raise NullPointerError("cu_seqlens_q is None but the Desc has varlen=True: pass "
                                       "the (batch + 1,) int32 prefix sums of the query lengths")
            return None
        b, total = self._cu("cu_seqlens_q", _CU_SEQLENS_Q, cu_seqlens_q)
        binds.append(b)
        return total

    def _serving_inputs(self, binds, cu_seqlens_q, cu_seqlens_k, block_table):
        """Binds cu_seqlens_q / _k and block_table; returns (total_q, total_k), None for one
        not given. Without varlen or pages they are bound as given: the library refuses them."""
        tq, tk = self._cu_q(binds, cu_seqlens_q), None
        if cu_seqlens_k is not None:
            b, tk = self._cu("cu_seqlens_k", _CU_SEQLENS_K, cu_seqlens_k)
            binds.append(b)
        elif self.varlen and not self.page_size:
            raise NullPointerError("cu_seqlens_k is None but the Desc has varlen=True without a "
                                   "page_size: pass the (batch + 1,) int32 prefix sums of the "
                                   "key lengths")
        if block_table is not None:
            shape = self._shape[_BLOCK_TABLE]
            if not self.page_size:  # bound as it is: the library refuses it
                shape = getattr(block_table, "shape", shape)
            _, p, n = self._contiguous("block_table", _BLOCK_TABLE, block_table, False,
                                       tuple(shape))
            binds.append((_BLOCK_TABLE, p, n))
        return tq, tk
