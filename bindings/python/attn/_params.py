"""Descriptor parameters: the keywords of Desc turned into attn_param values, C descriptors made
with them, and the values read back. Bounds and combinations are the library's to check
(attn_desc_set_int / _float name the parameter); the face converts Python values only (enum
names, bools, integer width)."""

from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Tuple

from . import _lib
from ._common import (Alibi, AlibiForm, ArgumentTypeError, Causal, Compute, Diagonal,
                      InvalidArgumentError, Param, WeightsMode, check_status, enum_arg,
                      integer, param_bounds, real, size_arg, _np)

#: the parameters whose values a user may give as an enum member or its name
ENUMS = {Param.CAUSAL: Causal, Param.ALIBI: Alibi, Param.WEIGHTS_MODE: WeightsMode,
         Param.COMPUTE: Compute, Param.DIAGONAL: Diagonal, Param.ALIBI_FORM: AlibiForm}
# the serving layouts first: they choose the default strides (custom strides survive them)
_ORDER = [Param.VARLEN, Param.PAGE_SIZE, Param.MAX_PAGES, Param.BATCH_INVARIANT]
_ORDER += [p for p in Param if p not in _ORDER]
_INT64 = 2 ** 63


def _is_flag(param):
    return param_bounds(param)[1:] == (0.0, 1.0) and not param_bounds(param)[0]


def param_type(param: Param) -> type:
    """The Python type of a parameter's value: its enum, bool for a 0/1 flag, float or int."""
    return ENUMS.get(param) or (float if param_bounds(param)[0] else bool if _is_flag(param)
                                else int)


def param_arg(param: Param, value: Any) -> Any:
    """The C value of `param` given as `value` (a float for a float parameter, else an int)."""
    name = param.name.lower()
    if param_bounds(param)[0]:
        return real(name, value)
    if param in ENUMS and isinstance(value, str):
        return int(enum_arg(name, value, ENUMS[param], "attn_" + name))
    if _is_flag(param) and isinstance(value, (bool, _np.bool_ if _np is not None else bool)):
        return int(bool(value))
    value = integer(name, value)
    if not -_INT64 <= value < _INT64:
        raise InvalidArgumentError("%s (%d) does not fit int64_t" % (name, value))
    return value


def build_params(given: Dict[str, Any]) -> List[Tuple[Param, Any]]:
    """(Param, C value) of every parameter given (None = not given), the window pair split."""
    given = dict(given)
    window = given.pop("window", None)
    if window is not None:
        if given.get("window_left") is not None or given.get("window_right") is not None:
            raise InvalidArgumentError("give window=(left, right) or window_left= / "
                                       "window_right=, not both")
        if isinstance(window, (str, bytes)) or not hasattr(window, "__len__"):
            raise ArgumentTypeError("window must be a (left, right) pair, got %s"
                                    % type(window).__name__)
        if len(window) != 2:
            raise InvalidArgumentError("window must be a (left, right) pair, got %d elements"
                                       % len(window))
        given["window_left"], given["window_right"] = window
    return [(p, param_arg(p, given[p.name.lower()])) for p in _ORDER
            if given.get(p.name.lower()) is not None]


def strides_arg(name: str, strides: Any) -> Any:
    """(batch_stride, head_stride, row_stride) of sizes, or None."""
    if strides is None:
        return None
    if isinstance(strides, (str, bytes)) or not hasattr(strides, "__iter__"):
        raise ArgumentTypeError("%s must be (batch_stride, head_stride, row_stride)" % name)
    values = tuple(strides)
    if len(values) != 3:
        raise InvalidArgumentError("%s must have 3 elements (batch_stride, head_stride, "
                                   "row_stride), got %d" % (name, len(values)))
    return tuple(size_arg("%s[%d]" % (name, i), s) for i, s in enumerate(values))


def new_handle(dims, params, strides):
    """A configured C descriptor: attn_desc_create(dims), the (Param, value) `params`, the
    (Operand, triple) `strides`."""
    handle = ctypes.c_void_p()
    check_status(_lib.attn_desc_create(ctypes.byref(handle), *dims))
    try:
        for param, value in params:
            setter = _lib.attn_desc_set_float if isinstance(value, float) else \
                _lib.attn_desc_set_int
            check_status(setter(handle.value, param, value))
        for op, s in strides:
            check_status(_lib.attn_desc_set_strides(handle.value, op, *s))
    except BaseException:
        _lib.attn_desc_destroy(handle.value)
        raise
    return handle.value


def read_param(handle, param):
    """The value of `param` in the C descriptor: a float or an int."""
    if param_bounds(param)[0]:
        v: Any = ctypes.c_double()
        check_status(_lib.attn_desc_get_float(handle, param, ctypes.byref(v)))
    else:
        v = ctypes.c_int64()
        check_status(_lib.attn_desc_get_int(handle, param, ctypes.byref(v)))
    return v.value


def read_back(desc, handle):
    """Sets desc.<parameter name> to each parameter's value as the library holds it (an enum
    member, a bool for a 0/1 flag)."""
    for p in Param:
        setattr(desc, p.name.lower(), param_type(p)(read_param(handle, p)))
    desc.window = (desc.window_left, desc.window_right)
