"""Enums, errors, scalar checks and the zero-copy array view shared by the faces (internal).

Errors (docs/errors.md): AttentionError carries the Status and the library's message;
InvalidArgumentError (also a ValueError), ArgumentTypeError (also a TypeError) and NullPointerError
(a ValueError) are its INVALID_ARGUMENT and NULL_POINTER forms. A closed Desc or Args raises a
plain ValueError.
"""
from __future__ import annotations

import ctypes
import enum
import math
import numbers
import operator
from typing import TYPE_CHECKING, Any, Dict, Tuple, Type, TypeVar, Union

from . import _lib

if TYPE_CHECKING:  # annotations only: numpy stays optional at run time
    import numpy
    import numpy.typing

    #: an input array: a numpy array, or anything exposing __dlpack__ (torch tensors),
    #: __array_interface__ or __array__ (viewed without copying)
    ArrayLike = numpy.typing.ArrayLike
    #: what the calls return: float32 numpy arrays
    F32Array = numpy.typing.NDArray[numpy.float32]

try:
    import numpy as _np
except ImportError:  # the list API works without numpy
    _np = None  # type: ignore[assignment]


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
    TOP_LEFT = 1      # j <= i                     (PyTorch is_causal)
    BOTTOM_RIGHT = 2  # j <= i + (seq_k - seq_q)   (KV cache / decode)


class Operand(enum.IntEnum):
    """attn_operand, for Desc.required_len and Args."""
    Q = 0
    K = 1
    V = 2
    OUT = 3
    LSE = 4
    WEIGHTS = 5
    KEY_VALID = 6
    ALLOWED = 7
    BIAS = 8            # since 0.2
    ALIBI_SLOPES = 9
    SINKS = 10
    QUERY_VALID = 11
    SEQ_LENS_K = 12
    KEY_MASS = 13
    CU_SEQLENS_Q = 14   # since 0.2, the serving layouts (docs/serving.md)
    CU_SEQLENS_K = 15
    BLOCK_TABLE = 16
    NEW_K = 17
    NEW_V = 18
    DOUT = 19           # since 0.2, Op.BACKWARD (docs/api.md, "Backward"): the gradient of OUT, input
    DQ = 20             # the gradients written by Op.BACKWARD, each in its forward operand's
    DK = 21             # layout (dbias: broadcast dims summed)
    DV = 22
    DBIAS = 23
    DSINKS = 24
    K_SCALE = 25        # since 0.2, int8 K / V (docs/storage.md): float32 scale per
    V_SCALE = 26        # (batch, heads_kv, seq_k) row, strided like K with head_dim 1
    NEW_K_SCALE = 27    # since 0.2, int8 new rows of Desc.run_kv_append_args: float32 scale per
    NEW_V_SCALE = 28    # (token, heads_kv) row of NEW_K / NEW_V


class Param(enum.IntEnum):
    """attn_param: the static parameters of a descriptor (since 0.2)."""
    CAUSAL = 0
    SCALE = 1
    WINDOW_LEFT = 2
    WINDOW_RIGHT = 3
    SOFTCAP = 4
    ALIBI = 5
    SOFTMAX_PLUS_ONE = 6
    HEAD_DIM_V = 7
    WEIGHTS_MODE = 8
    BIAS_FIRST = 9
    VARLEN = 10           # the serving layouts (docs/serving.md)
    PAGE_SIZE = 11
    MAX_PAGES = 12
    BATCH_INVARIANT = 13
    COMPUTE = 14          # the forward's arithmetic (Compute)
    DIAGONAL = 15         # the diagonal of the window and ALiBi (Diagonal)
    ALIBI_FORM = 16       # linear or symmetric ALiBi (AlibiForm)


# (input types, output types) of each operand as attn_dtype bit sets.
_F, _H, _B, _I8, _U8, _I32 = 1, 2, 4, 8, 16, 32
OPERAND_TYPES = ((_F | _H | _B, 0), (_F | _H | _B | _I8,) * 2, (_F | _H | _B | _I8,) * 2,
                 (0, _F), (0, _F), (0, _F), (_U8, 0), (_U8, 0), (_F, 0), (_F, 0), (_F, 0),
                 (_U8, 0), (_I32, 0), (0, _F), (_I32, 0), (_I32, 0), (_I32, 0),
                 (_F | _H | _B | _I8, 0), (_F | _H | _B | _I8, 0), (_F | _H | _B, 0),
                 (0, _F), (0, _F), (0, _F), (0, _F), (0, _F), (_F, _F), (_F, _F), (_F, 0), (_F, 0))


class Alibi(enum.IntEnum):
    """attn_alibi: where the ALiBi slopes come from."""
    NONE = 0
    OPERAND = 1   # the alibi_slopes array of each call
    STANDARD = 2  # the geometric slopes of Press et al. 2022 (BLOOM's rule for any head count)


class Diagonal(enum.IntEnum):
    """attn_diagonal: diag(i), the diagonal the sliding window and ALiBi measure from (the
    causal rule keeps its own)."""
    CAUSAL = 0        # the causal rule's: i + len_k(b) - len_q(b) under BOTTOM_RIGHT, else i
    TOP_LEFT = 1      # i
    BOTTOM_RIGHT = 2  # i + len_k(b) - len_q(b): FlashAttention's, causal or not


class AlibiForm(enum.IntEnum):
    """attn_alibi_form: the ALiBi term of key j for query i."""
    LINEAR = 0     # -slope * (diag(i) - j) (default)
    SYMMETRIC = 1  # -slope * |diag(i) - j| (FlashAttention's non-causal ALiBi)


class WeightsMode(enum.IntEnum):
    """attn_weights_mode: what Desc.weights writes."""
    SOFTMAX = 0  # probabilities (default)
    SCORES = 1   # scale * q.k
    MASKED = 2   # the score after bias, ALiBi and masks (-inf where hidden)
    CAPPED = 3   # after softcap, bias, ALiBi and masks
    SOFTCAPPED = 4  # softcap(scale * q.k), no bias, no mask


class Compute(enum.IntEnum):
    """attn_compute: the arithmetic of the forward pass (capi/attn.h gives FP16's error bound
    and the calls it applies to)."""
    EXACT = 0  # everything in fp32 (default); about 1e-6 relative to a float64 reference
    FP16 = 1   # the AVX512-FP16 fast path: outputs within about 1e-2 max|v| of EXACT on the
    #            prefill-like calls it applies to; other calls and CPUs run exactly as EXACT


class Op(enum.IntEnum):
    """attn_op, for Desc.run."""
    FORWARD = 0
    WEIGHTS = 1
    BACKWARD = 2  # gradients (Desc.backward; raw: Operand.DOUT, DQ, DK, DV, DBIAS, DSINKS)


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------

def status_string(status: int) -> str:
    """The library's short description of a status code."""
    return _lib.attn_status_string(int(status)).decode("ascii")


class AttentionError(Exception):
    """A libattn call failed, or the binding refused an argument before calling it.
    ``status`` is a Status (or the raw int for an unknown code), ``message`` the library's
    message for that call (attn_last_error, read on the calling thread right after the call) or
    the binding's own."""

    status: Union[Status, int]
    message: str

    def __init__(self, status: int, message: str) -> None:
        try:
            status = Status(status)
        except ValueError:
            pass
        self.status = status
        self.message = message
        super().__init__("%s: %s" % (status_string(status), message))

    def __reduce__(self):
        return (type(self), (self.status, self.message))


class InvalidArgumentError(AttentionError, ValueError):
    """Status.INVALID_ARGUMENT: a size, stride, shape, enum value or number is out of range."""

    def __init__(self, message: str, status: int = Status.INVALID_ARGUMENT) -> None:
        AttentionError.__init__(self, status, message)

    def __reduce__(self):
        return (type(self), (self.message, self.status))


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """Status.INVALID_ARGUMENT for an argument of the wrong type or dtype (a TypeError)."""


class NullPointerError(InvalidArgumentError):
    """Status.NULL_POINTER: a required array is None (or the library found it NULL)."""

    def __init__(self, message: str, status: int = Status.NULL_POINTER) -> None:
        InvalidArgumentError.__init__(self, message, status)


def library_error(status):
    """The exception for a failed C call; call right after the call, on its thread."""
    message = _lib.attn_last_error()
    message = message.decode("utf-8", "replace") if message else ""
    if status == Status.INVALID_ARGUMENT:
        return InvalidArgumentError(message)
    if status == Status.NULL_POINTER:
        return NullPointerError(message)
    return AttentionError(status, message)


def check_status(status):
    """Raise for a failed C call; call right after the C call, on its thread."""
    if status != 0:
        raise library_error(status)


# ------------------------------------------------------------------------------------------
# Scalars
# ------------------------------------------------------------------------------------------

SIZE_MAX = 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1


def _type_name(value):
    return type(value).__name__


def integer(name, value):
    """operator.index(value), refusing bool and non-integers with ArgumentTypeError."""
    if isinstance(value, bool) or (_np is not None and isinstance(value, _np.bool_)):
        raise ArgumentTypeError("%s must be an integer, got bool" % name)
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentTypeError("%s must be an integer, got %s"
                                % (name, _type_name(value))) from None


def size_arg(name, value):
    """A non-negative integer that fits size_t (range limits beyond that are the library's)."""
    value = integer(name, value)
    if value < 0:
        raise InvalidArgumentError("%s (%d) is negative" % (name, value))
    if value > SIZE_MAX:
        raise InvalidArgumentError("%s (%d) does not fit size_t" % (name, value))
    return value


def real(name, value):
    """A real number as a Python float, refusing str, bool, None, complex with
    ArgumentTypeError (no parsing of strings: scale="0.5" is a type error)."""
    if isinstance(value, bool) or (_np is not None and isinstance(value, _np.bool_)):
        raise ArgumentTypeError("%s must be a real number, got bool" % name)
    if not isinstance(value, numbers.Real):
        raise ArgumentTypeError("%s must be a real number, got %s" % (name, _type_name(value)))
    try:
        return float(value)
    except OverflowError:  # an int beyond the double range
        return math.inf if value > 0 else -math.inf


_E = TypeVar("_E", bound=enum.IntEnum)


def enum_arg(name: str, value: Any, enum_type: Type[_E], what: str) -> _E:
    """An enum value, checked against the enum before any C call (no truncation to 32 bits).
    Strings name a member case-insensitively ("top_left")."""
    if isinstance(value, str):
        try:
            return enum_type[value.upper()]
        except KeyError:
            raise InvalidArgumentError(
                "%s (%r) is not one of %s" % (name, value, ", ".join(
                    repr(m.name.lower()) for m in enum_type))) from None
    value = integer(name, value)
    try:
        return enum_type(value)
    except ValueError:
        raise InvalidArgumentError("%s (%d) is not an %s (%s)" % (
            name, value, what, ", ".join("%d %s" % (m.value, m.name.lower().replace("_", "-"))
                                         for m in enum_type))) from None


_BOUNDS: Dict[int, Tuple[bool, float, float]] = {}


def param_bounds(param: int) -> Tuple[bool, float, float]:
    """(is_float, min, max) of a parameter, from the library (attn_param_bounds), cached."""
    got = _BOUNDS.get(param)
    if got is None:
        is_float = ctypes.c_int()
        lo, hi = ctypes.c_double(), ctypes.c_double()
        check_status(_lib.attn_param_bounds(int(param), ctypes.byref(is_float), ctypes.byref(lo),
                                            ctypes.byref(hi)))
        got = _BOUNDS[param] = (bool(is_float.value), lo.value, hi.value)
    return got


# ------------------------------------------------------------------------------------------
# Arrays
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
                  base.reshape(8, 8).T[1:], _np.ones((3, 4), _np.float32)[1:]]
        if all(fast(a) == portable(a) for a in probes if a.size):
            return fast
    except Exception:  # pragma: no cover - any surprise: stay portable
        pass
    return portable  # pragma: no cover


if _np is not None:
    F32 = _np.dtype(_np.float32)
    F16 = _np.dtype(_np.float16)
    U16 = _np.dtype(_np.uint16)
    I16 = _np.dtype(_np.int16)
    I8 = _np.dtype(_np.int8)
    BOOL = _np.dtype(_np.bool_)
    U8 = _np.dtype(_np.uint8)
    I32 = _np.dtype(_np.int32)
    ndarray = _np.ndarray
    data_ptr = _make_data_ptr()


def need_numpy():
    if _np is None:
        raise ImportError("the attn array API needs numpy (pip install numpy)")


def _has_array_protocol(a: Any) -> bool:
    return (hasattr(a, "__array_interface__") or hasattr(a, "__array_struct__")
            or hasattr(a, "__array__")) and not isinstance(a, (list, tuple))


def _through_array_protocol(name: str, a: Any) -> numpy.ndarray:
    try:
        got = _np.asarray(a)
    except (TypeError, ValueError, RuntimeError, BufferError) as e:
        raise ArgumentTypeError("%s (%s) could not be viewed as an array: %s"
                                % (name, _type_name(a), e)) from None
    if got.dtype == object:  # not an array after all
        raise ArgumentTypeError("%s (%s) is not an array of numbers" % (name, _type_name(a)))
    return got


def as_ndarray(name: str, a: Any, dtype_text: str, writable: bool = False) -> numpy.ndarray:
    """An ndarray view of `a` without copying: ndarrays as they are, objects with __dlpack__
    (torch tensors, jax/cupy CPU arrays) through numpy.from_dlpack, objects with the array
    interface (__array_interface__ / __array_struct__: a view of their memory, read-only if they
    say so) or __array__ through numpy.asarray. None raises NullPointerError; anything else
    (lists, tuples, scalars, strings) ArgumentTypeError.

    numpy < 1.25 cannot import bool tensors through DLPack, and numpy < 2 imports every DLPack
    tensor read-only; an object that also has the array protocol (a torch tensor's __array__ is
    its .numpy() view: the same memory, writable) is then viewed through that instead. With
    `writable`, a read-only result is refused here, saying why."""
    if isinstance(a, ndarray):
        return a
    if a is None:
        raise NullPointerError("%s is None" % name)
    if hasattr(a, "__dlpack__"):
        try:
            got = _np.from_dlpack(a)
        except (TypeError, ValueError, RuntimeError, BufferError) as e:
            if not _has_array_protocol(a):
                raise ArgumentTypeError("%s (%s) could not be viewed through DLPack: %s"
                                        % (name, _type_name(a), e)) from None
            return _through_array_protocol(name, a)
        if writable and not got.flags.writeable:
            if _has_array_protocol(a):
                alt = _through_array_protocol(name, a)
                if (alt.flags.writeable and alt.shape == got.shape
                        and alt.strides == got.strides
                        and alt.__array_interface__["data"][0]
                        == got.__array_interface__["data"][0]):
                    return alt  # the same memory, writable
            raise InvalidArgumentError(
                "%s (%s) is read-only as numpy %s imports it through DLPack (numpy >= 2 imports "
                "writable tensors): pass a writable numpy view of it (torch: tensor.numpy())"
                % (name, _type_name(a), _np.__version__))
        return got
    if _has_array_protocol(a):
        return _through_array_protocol(name, a)
    raise ArgumentTypeError("%s must be a numpy.ndarray of %s (or expose __dlpack__ / "
                            "__array_interface__ / __array__), got %s"
                            % (name, dtype_text, _type_name(a)))


def dtype_name(dtypes):
    return " or ".join(d.name for d in dtypes)


def check_dtype(name, a, dtypes):
    """ArgumentTypeError unless a.dtype is one of `dtypes` (native byte order)."""
    dt = a.dtype
    for want in dtypes:
        if dt is want or dt == want:
            return
    raise ArgumentTypeError("%s has dtype %s, expected %s (no conversion is made: arrays are "
                            "passed without copies)" % (name, dt.str if dt.byteorder == ">"
                                                        else dt, dtype_name(dtypes)))


def element_strides(name, a):
    """The strides of `a` in elements, refusing negative or non-element-multiple strides.
    Dimensions of size 1 report stride 0 (they never move the address)."""
    item = a.itemsize
    out = []
    for n, s in zip(a.shape, a.strides):
        if n == 1:
            out.append(0)
            continue
        if s < 0 or s % item:
            raise InvalidArgumentError(
                "%s has byte strides %s: every stride must be a non-negative multiple of the "
                "element size (%d bytes) for the library to address it without a copy"
                % (name, tuple(a.strides), item))
        out.append(s // item)
    return out
