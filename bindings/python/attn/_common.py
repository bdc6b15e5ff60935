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
from typing import TYPE_CHECKING, Any, NamedTuple, Tuple, Type, TypeVar, Union

from . import _lib

if TYPE_CHECKING:  # annotations only: numpy stays optional at run time
    from typing import Literal

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


def _enum(name: str, members: str, doc: str) -> Any:
    """An IntEnum of the space-separated `members`, valued 0, 1, ... as in capi/attn.h."""
    made = enum.IntEnum(name, [(m, i) for i, m in enumerate(members.split())])  # type: ignore
    made.__module__, made.__doc__ = "attn", doc
    return made


# The enums of capi/attn.h (values pinned by the C API; the header says what each means).
Status = _enum("Status", "OK NULL_POINTER INVALID_ARGUMENT OUT_OF_MEMORY UNSUPPORTED INTERNAL",
               "attn_status")
Causal = _enum("Causal", "NONE TOP_LEFT BOTTOM_RIGHT", "attn_causal")
Alibi = _enum("Alibi", "NONE OPERAND STANDARD", "attn_alibi")
Diagonal = _enum("Diagonal", "CAUSAL TOP_LEFT BOTTOM_RIGHT", "attn_diagonal")
AlibiForm = _enum("AlibiForm", "LINEAR SYMMETRIC", "attn_alibi_form")
WeightsMode = _enum("WeightsMode", "SOFTMAX SCORES MASKED CAPPED SOFTCAPPED",
                    "attn_weights_mode")
Compute = _enum("Compute", "EXACT FP16 INT8 BF16", "attn_compute")
Op = _enum("Op", "FORWARD WEIGHTS BACKWARD", "attn_op")
# The operands and parameters as the library lists them (attn_operand_info, attn_param_info).
Operand = _enum("Operand", " ".join(row[0].upper() for row in _lib.OPERANDS), "attn_operand")
Param = _enum("Param", " ".join(row[0].upper() for row in _lib.PARAMS), "attn_param")
#: (input types, output types) of each operand, as bit sets (1 << attn_dtype)
OPERAND_TYPES = tuple(row[1:3] for row in _lib.OPERANDS)


class DType(enum.IntFlag):
    """attn_dtype as flags (1 << attn_dtype): the element types operand_info lists."""
    F32 = 1 << 0   # float32 arrays
    F16 = 1 << 1   # float16 arrays (IEEE binary16)
    BF16 = 1 << 2  # attn.BF16 (bfloat16 bit patterns)
    I8 = 1 << 3    # int8 arrays with per-row float32 scales
    U8 = 1 << 4    # bool / uint8 masks
    I32 = 1 << 5   # int32 arrays
    FP8_E4M3 = 1 << 6  # OCP fp8 E4M3 codes in uint8 arrays (Args.set_fp8, with optional scales)
    FP8_E5M2 = 1 << 7  # OCP fp8 E5M2 codes in uint8 arrays


DType.__module__ = "attn"


class ParamInfo(NamedTuple):
    """A parameter as the library describes it (attn_param_info)."""
    name: str       #: lowercase, the Desc keyword ("causal", "window_left")
    is_float: bool  #: set with a float (else an int)
    min: float      #: the smallest value the library accepts
    max: float      #: the largest
    default: float  #: its value in a new Desc; NaN where it follows the shape (scale, head_dim_v)


class OperandInfo(NamedTuple):
    """An operand as the library describes it (attn_operand_info)."""
    name: str       #: lowercase, as messages and keywords use it ("q", "k_scale")
    inputs: DType   #: the element types it may be bound with as an input (DType(0): never)
    outputs: DType  #: the element types it may be bound with as an output (DType(0): never)
    rank: int       #: dimensions of its dense shape (q 4, lse 3, key_valid 2, sinks 1)
    strided: bool   #: True if it takes <operand>_strides (attn_desc_set_strides)
    dims: Tuple[str, ...]  #: dense shape in attn.h's names, outermost first (attn_operand_dims)


ParamInfo.__module__ = OperandInfo.__module__ = "attn"


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------

def status_string(status: int) -> str:
    """The library's short description of a status code."""
    return _lib.attn_status_string(int(status)).decode("ascii")


class AttentionError(Exception):
    """A libattn call failed (``message``: attn_last_error) or the binding refused an argument;
    ``status`` is a Status (the raw int for an unknown code)."""

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


_C = TypeVar("_C", bound="Closeable")


class Closeable:
    """The lifetime of an object that owns a C handle (Desc, Args): ``with`` returns it (a
    closed one raises ValueError "<Class> is closed") and closes it on exit; garbage collection
    closes it too. A subclass provides close() (idempotent) and the ``closed`` property, and
    sets ``_lock`` first in __init__ (before that, nothing is owned: __del__ does nothing)."""

    closed: bool

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        if self.closed:
            raise ValueError("%s is closed" % type(self).__name__)
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
    """A real number as a float; str, bool, None, complex raise ArgumentTypeError."""
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
    """An enum member from itself, its int (checked: a C int would truncate) or its name."""
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


_BOUNDS = tuple((bool(row[1]), row[2], row[3]) for row in _lib.PARAMS)
_INT_MIN, _INT_MAX = -2 ** (8 * ctypes.sizeof(ctypes.c_int) - 1), 2 ** (8 * ctypes.sizeof(
    ctypes.c_int) - 1) - 1


def query_index(name: str, value: Any, enum_type: Type[enum.IntEnum]) -> int:
    """The C enum value a query passes on: a member, its name, or any integer that fits a C int
    (the library says whether it names one)."""
    if isinstance(value, str):
        return int(enum_arg(name, value, enum_type, "attn_" + name))
    value = integer(name, value)
    if not _INT_MIN <= value <= _INT_MAX:
        raise InvalidArgumentError("%s (%d) does not fit a C int" % (name, value))
    return value


def query(fn: Any, index: int, *types: Any) -> Tuple[Any, ...]:
    """One row of an introspection query (capi/attn.h "Introspection"); the library's status
    and message raised for an index it does not know. Strings decoded."""
    outs = [t() for t in types]
    check_status(fn(index, *(ctypes.byref(o) for o in outs)))
    return tuple(o.value.decode("ascii") if isinstance(o.value, bytes) else o.value
                 for o in outs)


def param_bounds(param: int) -> Tuple[bool, float, float]:
    """(is_float, min, max) of a parameter, from the library's table (attn_param_info)."""
    return _BOUNDS[param]


# ------------------------------------------------------------------------------------------
# Arrays
# ------------------------------------------------------------------------------------------

def _make_data_ptr():
    """An ndarray's data address. ``a.ctypes.data`` costs 1-3 us (a ctypes helper object per
    call); NumPy's PyArrayObject starts with PyObject_HEAD then ``char *data`` (NumPy 1.x and
    2.x), read directly, about 5x faster, when it agrees with ``a.ctypes.data`` on probes."""
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
    """An ndarray view of `a` without copying (ndarrays as they are; __dlpack__ through
    numpy.from_dlpack; the array interface or __array__ through numpy.asarray). None raises
    NullPointerError, lists and scalars ArgumentTypeError. numpy < 1.25 cannot import bool
    tensors through DLPack and numpy < 2 imports them read-only: the array protocol (a torch
    tensor's writable .numpy() view) is the fallback."""
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
    """The element strides of `a` (0 for a dimension of size 1); negative or partial-element
    strides are refused."""
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
