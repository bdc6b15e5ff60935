"""Binding operands to a C attn_args and running a call: the one path of every Desc call.

Each thread has its own attn_args (one more, "part", for attn_merge). A call binds the
(operand, setter, address, elements) it needs; a binding identical to the one left by the
previous call on that thread is not made again, and operands of the previous call that this one
does not pass are unbound, so each C call sees exactly its own operands. The pointers that stay
bound between calls are never read: only a call of this module runs with that attn_args, after
binding its own.
"""

from __future__ import annotations

import ctypes
import threading

from . import _common, _lib
from ._common import Operand, library_error

# Operand ids as plain ints (enum attribute access costs ~0.4 us: too much for the hot path).
for _op in Operand:
    globals()["_" + _op.name] = int(_op)
NAMES = tuple(op.name.lower() for op in Operand)

# The setter and accepted numpy dtypes of each operand, from the library's operand table: an
# operand the library takes as an input is bound with the setter of its first input type, any
# other with the output setter of its first output type.
_IN_SETTERS = ("attn_args_set_f32", "attn_args_set_f16", "attn_args_set_bf16",
               "attn_args_set_i8", "attn_args_set_u8", "attn_args_set_i32")  # by attn_dtype
_OUT_SETTERS = ("attn_args_set_out_f32", "attn_args_set_out_f16", "attn_args_set_out_bf16",
                "attn_args_set_out_i8", None, None)


def _first(bits):
    return (bits & -bits).bit_length() - 1


SETTER = tuple(getattr(_lib, _IN_SETTERS[_first(i)] if i else _OUT_SETTERS[_first(o)])
               for i, o in _common.OPERAND_TYPES)
OUTPUT = tuple(not i for i, o in _common.OPERAND_TYPES)  # bound writable


def dtypes(op):
    """The numpy dtypes operand `op` is bound with by default (its setter's)."""
    setter = SETTER[op]
    if setter is _lib.attn_args_set_u8:
        return (_common.BOOL, _common.U8)
    if setter is _lib.attn_args_set_i32:
        return (_common.I32,)
    return (_common.F32,)


class _ThreadArgs:
    """One thread's attn_args and what is bound in it (operand -> the tuple it was bound
    with); destroyed with the thread (threading.local drops it) or at interpreter exit."""
    __slots__ = ("handle", "bound")

    def __init__(self):
        self.handle = None
        self.bound = {}
        handle = ctypes.c_void_p()
        _common.check_status(_lib.attn_args_create(ctypes.byref(handle)))
        self.handle = handle.value

    def __del__(self):
        handle, self.handle = self.handle, None
        if handle is not None:
            try:
                _lib.attn_args_destroy(handle)
            except Exception:  # interpreter shutdown
                pass


_tls = threading.local()


def thread_args(binds, attr="args"):
    """This thread's attn_args `attr` with exactly `binds` bound: (operand, setter, address,
    elements) tuples. Returns its handle."""
    ta = getattr(_tls, attr, None)
    if ta is None:
        ta = _ThreadArgs()
        setattr(_tls, attr, ta)
    h, bound = ta.handle, ta.bound
    for b in binds:
        if bound.get(b[0]) != b:
            status = b[1](h, b[0], b[2], b[3])
            if status:
                err = library_error(status)  # attn_last_error, read right after the call
                _lib.attn_args_clear(h)
                bound.clear()
                raise err
            bound[b[0]] = b
    if len(bound) != len(binds):
        for w in set(bound) - {b[0] for b in binds}:
            bound.pop(w)[1](h, w, None, 0)
    return h
