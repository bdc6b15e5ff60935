"""libattn for Python: exact masked scaled-dot-product attention (fp32, CPU), through ctypes.

No compiler is needed: the package loads the shared library (see attn._lib for where it looks:
$ATTN_LIBRARY, then beside this package, then the system paths).

Two faces:

* ``attention(Q, K, V, causal=True, pad_mask=None)``: the original one-sequence, one-head call.
  Lists of vectors in (any sequences of numbers), a list of output vectors (lists of floats) out.
  Needs no numpy.

* ``Desc``: the full descriptor API of capi/attn.h (batch, heads, GQA/MQA, causal modes, scale,
  strides, key padding and allowed masks, log-sum-exp, weights) on numpy arrays, with zero
  copies: float32 / bool_ arrays must be C-contiguous and hold at least attn_desc_required_len
  elements; their memory is handed to the library as is.

Errors: malformed Python arguments (None, wrong type/dtype, non-contiguous, too short, negative
sizes) raise ``ValueError`` naming the argument before anything reaches C; failures the library
reports raise ``AttentionError`` carrying the ``Status`` and the library's own message.
"""

import ctypes
import enum
import math
import operator
import threading

from . import _lib

try:
    import numpy as _np
except ImportError:  # the list API works without numpy
    _np = None

__all__ = [
    "Status", "Causal", "Operand", "AttentionError", "attention", "Desc",
    "version", "version_number", "isa", "set_isa", "num_threads", "set_num_threads",
    "status_string", "library_path",
]

#: The path or name the shared library was loaded from.
library_path = _lib.path


class Status(enum.IntEnum):
    """attn_status (values pinned by the C API)."""
    OK = 0
    NULL_POINTER = 1
    INVALID_ARGUMENT = 2
    OUT_OF_MEMORY = 3
    UNSUPPORTED = 4
    INTERNAL = 5


class Causal(enum.IntEnum):
    """attn_causal: which keys j query i may see before padding and the allowed mask."""
    NONE = 0          # every key
    TOP_LEFT = 1      # j <= i
    BOTTOM_RIGHT = 2  # j <= i + (seq_k - seq_q)


class Operand(enum.IntEnum):
    """attn_operand, for Desc.required_len."""
    Q = 0
    K = 1
    V = 2
    OUT = 3
    LSE = 4
    WEIGHTS = 5
    KEY_VALID = 6
    ALLOWED = 7


class AttentionError(Exception):
    """A libattn call failed. ``status`` is a Status (or the raw int for an unknown code),
    ``message`` the library's message for that call (attn_last_error, read on the calling
    thread right after the call)."""

    def __init__(self, status, message):
        try:
            status = Status(status)
        except ValueError:
            pass
        self.status = status
        self.message = message
        super().__init__("%s: %s" % (status_string(status), message))


def _check_status(status):
    """Raise AttentionError for a failed call; call right after the C call, on its thread."""
    if status != 0:
        message = _lib.attn_last_error()
        raise AttentionError(status, message.decode("utf-8", "replace") if message else "")


# ------------------------------------------------------------------------------------------
# Library-wide functions
# ------------------------------------------------------------------------------------------

def version():
    """The library's version string, e.g. "0.1.0"."""
    return _lib.attn_version_string().decode("ascii")


def version_number():
    """The library's version as MAJOR*10000 + MINOR*100 + PATCH."""
    return int(_lib.attn_version_number())


def status_string(status):
    """The library's short description of a status code."""
    return _lib.attn_status_string(int(status)).decode("ascii")


def isa():
    """Name of the kernel in use: "scalar", "sse2", "avx2" or "avx512"."""
    return _lib.attn_isa().decode("ascii")


def set_isa(name):
    """Cap the kernel at `name`, or restore the default with None or ""."""
    if name is not None and not isinstance(name, str):
        raise ValueError("name must be a str or None, got %s" % type(name).__name__)
    _check_status(_lib.attn_set_isa(None if name is None else name.encode("ascii")))


def num_threads():
    """The number of threads attention calls use now."""
    return int(_lib.attn_get_num_threads())


def set_num_threads(n):
    """Set the thread count (0 = default: $ATTN_NUM_THREADS or the hardware count)."""
    _check_status(_lib.attn_set_num_threads(_size_arg("n", n)))


# ------------------------------------------------------------------------------------------
# Argument helpers
# ------------------------------------------------------------------------------------------

_SIZE_MAX = 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1
_INT_MIN, _INT_MAX = -2 ** 31, 2 ** 31 - 1


def _size_arg(name, value):
    """A non-negative integer that fits size_t (range limits beyond that are the library's)."""
    if isinstance(value, bool):
        raise ValueError("%s must be an integer, got bool" % name)
    try:
        value = operator.index(value)
    except TypeError:
        raise ValueError("%s must be an integer, got %s" % (name, type(value).__name__)) from None
    if value < 0:
        raise ValueError("%s (%d) is negative" % (name, value))
    if value > _SIZE_MAX:
        raise ValueError("%s (%d) does not fit size_t" % (name, value))
    return value


def _enum_arg(name, value):
    """An integer that fits a C int; whether it is a valid enum value is the library's call."""
    if isinstance(value, bool):
        raise ValueError("%s must be an integer, got bool" % name)
    try:
        value = operator.index(value)
    except TypeError:
        raise ValueError("%s must be an integer, got %s" % (name, type(value).__name__)) from None
    if not _INT_MIN <= value <= _INT_MAX:
        raise ValueError("%s (%d) is not a valid value" % (name, value))
    return value


# ------------------------------------------------------------------------------------------
# The original API: lists of vectors
# ------------------------------------------------------------------------------------------

def _rows(name, rows):
    """Validate a list of equal-length vectors of numbers; returns (n, d, flat list)."""
    if rows is None:
        raise ValueError("%s is None" % name)
    if isinstance(rows, (str, bytes)):
        raise ValueError("%s must be a list of vectors, got %s" % (name, type(rows).__name__))
    try:
        rows = list(rows)
    except TypeError:
        raise ValueError("%s must be a list of vectors, got %s"
                         % (name, type(rows).__name__)) from None
    if not rows:
        raise ValueError("%s is empty (n must be > 0)" % name)
    flat = []
    d = None
    for i, row in enumerate(rows):
        if row is None or isinstance(row, (str, bytes)):
            raise ValueError("%s[%d] must be a vector of numbers" % (name, i))
        try:
            row = list(row)
        except TypeError:
            raise ValueError("%s[%d] must be a vector of numbers, got %s"
                             % (name, i, type(row).__name__)) from None
        if d is None:
            d = len(row)
            if d == 0:
                raise ValueError("%s[0] is empty (d must be > 0)" % name)
        elif len(row) != d:
            raise ValueError("%s[%d] has %d elements, %s[0] has %d" % (name, i, len(row), name, d))
        for j, x in enumerate(row):
            try:
                flat.append(float(x))
            except (TypeError, ValueError):
                raise ValueError("%s[%d][%d] is not a number: %r" % (name, i, j, x)) from None
    return len(rows), d, flat


def attention(Q, K, V, causal=True, pad_mask=None):
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
            raise ValueError("%s has %d vectors, Q has %d" % (name, nk, n))
        if dk != d:
            raise ValueError("%s vectors have %d elements, Q vectors have %d" % (name, dk, d))
        flats.append(flat)
    k, v = flats
    if causal is not True and causal is not False:
        if _np is not None and isinstance(causal, _np.bool_):
            causal = bool(causal)
        else:
            raise ValueError("causal must be True or False, got %r" % (causal,))
    mask = None
    if pad_mask is not None:
        if isinstance(pad_mask, (str, bytes)):
            raise ValueError("pad_mask must be a list of booleans")
        try:
            flags = [bool(x) for x in pad_mask]
        except TypeError:
            raise ValueError("pad_mask must be a list of booleans, got %s"
                             % type(pad_mask).__name__) from None
        if len(flags) != n:
            raise ValueError("pad_mask has %d elements, Q has %d vectors" % (len(flags), n))
        mask = (ctypes.c_bool * n)(*flags)

    nd = n * d
    cq = (ctypes.c_float * nd)(*q)
    ck = (ctypes.c_float * nd)(*k)
    cv = (ctypes.c_float * nd)(*v)
    out = (ctypes.c_float * nd)()
    status = _lib.attn_simple(ctypes.addressof(cq), ctypes.addressof(ck), ctypes.addressof(cv),
                              n, d, causal, None if mask is None else ctypes.addressof(mask),
                              ctypes.addressof(out))
    _check_status(status)
    return [out[i * d:(i + 1) * d] for i in range(n)]


# ------------------------------------------------------------------------------------------
# The descriptor API on numpy arrays
# ------------------------------------------------------------------------------------------

def _make_data_ptr():
    """The fastest correct way to read an ndarray's data address.

    ``a.ctypes.data`` costs 1-3 us per array (it builds a ctypes helper object each time).
    NumPy's C struct PyArrayObject starts with PyObject_HEAD followed by ``char *data``
    (ndarraytypes.h, PyArrayObject_fields; unchanged in NumPy 1.x and 2.x), so the address can be
    read from the object directly, about 5x faster. This is verified here against
    ``a.ctypes.data`` on several arrays and views; if anything disagrees (another layout, a debug
    interpreter with a larger object header), the portable ``a.ctypes.data`` is used instead."""
    portable = lambda a: a.ctypes.data
    try:
        header = object.__basicsize__  # sizeof(PyObject)
        read = ctypes.c_void_p.from_address
        fast = lambda a: read(id(a) + header).value
        base = _np.arange(64, dtype=_np.float32)
        probes = [base, base[3:], base.reshape(8, 8)[2:], _np.zeros(5, _np.bool_),
                  _np.empty(0, _np.float32), _np.ones((3, 4), _np.float32)[1:]]
        if all(fast(a) == portable(a) for a in probes if a.size):
            return fast
    except Exception:  # pragma: no cover - any surprise: stay portable
        pass
    return portable  # pragma: no cover


if _np is not None:
    _F32 = _np.dtype(_np.float32)
    _BOOL = _np.dtype(_np.bool_)
    _ndarray = _np.ndarray
    _data_ptr = _make_data_ptr()


def _need_numpy():
    if _np is None:
        raise ImportError("the attn.Desc array API needs numpy (pip install numpy)")


# ndarray.flags.num bits (numpy/ndarraytypes.h): NPY_ARRAY_C_CONTIGUOUS, _ALIGNED, _WRITEABLE.
_IN_FLAGS = 0x0001 | 0x0100
_OUT_FLAGS = _IN_FLAGS | 0x0400


def _array_ptr(name, a, need, dtype, writable):
    """Address of a numpy array's data after checking it may be handed to C as is."""
    # Fast path (the usual well-formed array): one test, about 0.5 us in all.
    if (type(a) is _ndarray and a.dtype is dtype and a.size >= need
            and a.flags.num & (_OUT_FLAGS if writable else _IN_FLAGS)
            == (_OUT_FLAGS if writable else _IN_FLAGS)):
        return _data_ptr(a)
    return _array_ptr_checked(name, a, need, dtype, writable)


def _array_ptr_checked(name, a, need, dtype, writable):
    """_array_ptr for anything else: accepts ndarray subclasses and equal dtypes, or raises
    ValueError naming the argument and the problem."""
    if a is None:
        raise ValueError("%s is None" % name)
    if not isinstance(a, _ndarray):
        raise ValueError("%s must be a numpy.ndarray of %s, got %s"
                         % (name, dtype.name, type(a).__name__))
    if a.dtype is not dtype and a.dtype != dtype:
        raise ValueError("%s has dtype %s, expected %s (no conversion is made: arrays are passed "
                         "without copies)" % (name, a.dtype, dtype.name))
    flags = a.flags
    if not flags.c_contiguous:
        raise ValueError("%s is not C-contiguous (use numpy.ascontiguousarray; arrays are passed "
                         "without copies)" % name)
    if not flags.aligned:
        raise ValueError("%s is not aligned for %s" % (name, dtype.name))
    if writable and not flags.writeable:
        raise ValueError("%s is read-only" % name)
    if a.size < need:
        raise ValueError("%s has %d elements, needs at least %d (attn_desc_required_len)"
                         % (name, a.size, need))
    return _data_ptr(a)


def _strides_arg(name, strides):
    if strides is None:
        return None
    try:
        values = tuple(strides)
    except TypeError:
        raise ValueError("%s must be (batch_stride, head_stride, row_stride)" % name) from None
    if len(values) != 3:
        raise ValueError("%s must have 3 elements (batch_stride, head_stride, row_stride), got %d"
                         % (name, len(values)))
    return tuple(_size_arg("%s[%d]" % (name, i), s) for i, s in enumerate(values))


class Desc:
    """An attention problem: sizes, causal rule, scale and strides, fixed at construction.

        with attn.Desc(batch, heads_q, heads_kv, seq_q, seq_k, head_dim,
                       causal=attn.Causal.TOP_LEFT) as desc:
            out, lse = desc.forward(q, k, v, key_valid=mask, lse=True)

    q: [batch][heads_q][seq_q][head_dim], k and v: [batch][heads_kv][seq_k][head_dim] float32
    arrays addressed with their strides (default contiguous BHSD: shape (B, H, S, D)); strides are
    (batch_stride, head_stride, row_stride) in elements, head_dim contiguous. key_valid:
    [batch][seq_k], allowed: [seq_q][seq_k] numpy bool_ arrays (True = visible).

    A Desc may be shared by any number of threads. close() (or leaving the with block) frees it;
    any later use raises ValueError. A close() racing with running calls waits for them: the C
    descriptor is freed when the last running call returns.
    """

    def __init__(self, batch, heads_q, heads_kv, seq_q, seq_k, head_dim, *,
                 causal=Causal.NONE, scale=None,
                 q_strides=None, k_strides=None, v_strides=None, out_strides=None):
        dims = [_size_arg(n, x) for n, x in (("batch", batch), ("heads_q", heads_q),
                                              ("heads_kv", heads_kv), ("seq_q", seq_q),
                                              ("seq_k", seq_k), ("head_dim", head_dim))]
        causal = _enum_arg("causal", causal)
        if scale is not None:
            if isinstance(scale, bool):
                raise ValueError("scale must be a float, got bool")
            try:
                scale = float(scale)
            except (TypeError, ValueError):
                raise ValueError("scale must be a float, got %r" % (scale,)) from None
        strides = [(op, _strides_arg(name, s)) for op, name, s in (
            (Operand.Q, "q_strides", q_strides), (Operand.K, "k_strides", k_strides),
            (Operand.V, "v_strides", v_strides), (Operand.OUT, "out_strides", out_strides))]

        self._lock = threading.Lock()
        self._active = 0
        self._closed = True
        self._handle = None

        handle = ctypes.c_void_p()
        _check_status(_lib.attn_desc_create(ctypes.byref(handle), *dims))
        self._handle = handle.value
        self._closed = False
        try:
            _check_status(_lib.attn_desc_set_causal(self._handle, causal))
            if scale is not None:
                _check_status(_lib.attn_desc_set_scale(self._handle, scale))
            for op, s in strides:
                if s is not None:
                    _check_status(_lib.attn_desc_set_strides(self._handle, op, *s))
            self._len = [int(_lib.attn_desc_required_len(self._handle, op)) for op in Operand]
        except BaseException:
            self.close()
            raise

        (self.batch, self.heads_q, self.heads_kv,
         self.seq_q, self.seq_k, self.head_dim) = dims
        self.causal = Causal(causal)
        # the float32 value the library uses
        self.scale = ctypes.c_float(1.0 / math.sqrt(self.head_dim) if scale is None
                                    else scale).value
        b, hq, sq, d = self.batch, self.heads_q, self.seq_q, self.head_dim
        if out_strides is None or tuple(strides[3][1]) == (hq * sq * d, sq * d, d):
            self._out_shape = (b, hq, sq, d)
        else:
            self._out_shape = (self._len[Operand.OUT],)
        self._lse_shape = (b, hq, sq)
        self._weights_shape = (b, hq, sq, self.seq_k)

    # --- lifetime ---------------------------------------------------------------------------

    def close(self):
        """Free the descriptor (idempotent). Later calls raise ValueError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._active == 0:
                self._destroy_locked()

    def _destroy_locked(self):
        handle, self._handle = self._handle, None
        if handle is not None:
            _lib.attn_desc_destroy(handle)

    @property
    def closed(self):
        return self._closed

    def __enter__(self):
        if self._closed:
            raise ValueError("Desc is closed")
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_lock", None) is not None:
            try:
                self.close()
            except Exception:  # interpreter shutdown: module globals may already be gone
                pass

    def _leave(self):
        with self._lock:
            self._active -= 1
            if self._closed and self._active == 0:
                self._destroy_locked()

    def __repr__(self):
        return ("Desc(batch=%d, heads_q=%d, heads_kv=%d, seq_q=%d, seq_k=%d, head_dim=%d, "
                "causal=%s%s)" % (self.batch, self.heads_q, self.heads_kv, self.seq_q,
                                  self.seq_k, self.head_dim, self.causal.name,
                                  ", closed" if self._closed else "")) \
            if hasattr(self, "batch") else "Desc(<not created>)"

    # --- queries ----------------------------------------------------------------------------

    def required_len(self, operand):
        """Elements (floats, or bytes for masks) the buffer for `operand` must hold."""
        operand = Operand(_enum_arg("operand", operand))
        if self._closed:
            raise ValueError("Desc is closed")
        return self._len[operand]

    # --- calls ------------------------------------------------------------------------------

    def _masks(self, key_valid, allowed):
        kv = None if key_valid is None else _array_ptr(
            "key_valid", key_valid, self._len[Operand.KEY_VALID], _BOOL, False)
        al = None if allowed is None else _array_ptr(
            "allowed", allowed, self._len[Operand.ALLOWED], _BOOL, False)
        return kv, al

    def forward(self, q, k, v, key_valid=None, allowed=None, out=None, lse=None):
        """Attention forward pass.

        q, k, v:   float32 arrays (see the class doc), read in place
        key_valid: None or bool_ [batch][seq_k]; allowed: None or bool_ [seq_q][seq_k]
        out:       None (a zero-filled array is allocated: shape (B, heads_q, seq_q, head_dim)
                   with default OUT strides, else flat) or a float32 array written in place
                   (only the elements the OUT strides address are written)
        lse:       None or False (not computed), True (allocated, shape (B, heads_q, seq_q)) or
                   a float32 array written in place; -inf for a query with no visible key
        Returns out, or (out, lse) when lse is not None.
        """
        if _np is None:
            _need_numpy()
        if self._closed:
            raise ValueError("Desc is closed")
        L = self._len
        qp = _array_ptr("q", q, L[0], _F32, False)
        kp = _array_ptr("k", k, L[1], _F32, False)
        vp = _array_ptr("v", v, L[2], _F32, False)
        if key_valid is None and allowed is None:
            kv = al = None
        else:
            kv, al = self._masks(key_valid, allowed)
        if out is None:
            out = _np.zeros(self._out_shape, _F32)
        op = _array_ptr("out", out, L[3], _F32, True)
        if lse is None or lse is False:
            lse = lp = None
        else:
            if lse is True:
                lse = _np.empty(self._lse_shape, _F32)
            lp = _array_ptr("lse", lse, L[4], _F32, True)

        with self._lock:  # count the call in flight: close() defers the free until it returns
            if self._closed:
                raise ValueError("Desc is closed")
            self._active += 1
        try:
            status = _lib.attn_forward(self._handle, qp, kp, vp, kv, al, op, lp)
            if status != 0:
                _check_status(status)  # reads attn_last_error on this thread, right away
        finally:
            self._leave()
        return out if lse is None else (out, lse)

    def weights(self, q, k, key_valid=None, allowed=None, out=None):
        """The attention weights [batch][heads_q][seq_q][seq_k] (hidden keys exactly 0).

        out: None (allocated with that shape) or a float32 array written in place.
        Returns the weights array."""
        _need_numpy()
        if self._closed:
            raise ValueError("Desc is closed")
        L = self._len
        qp = _array_ptr("q", q, L[Operand.Q], _F32, False)
        kp = _array_ptr("k", k, L[Operand.K], _F32, False)
        kv, al = self._masks(key_valid, allowed)
        if out is None:
            out = _np.empty(self._weights_shape, _F32)
        wp = _array_ptr("out", out, L[Operand.WEIGHTS], _F32, True)

        with self._lock:
            if self._closed:
                raise ValueError("Desc is closed")
            self._active += 1
        try:
            status = _lib.attn_weights(self._handle, qp, kp, kv, al, wp)
            if status != 0:
                _check_status(status)
        finally:
            self._leave()
        return out
