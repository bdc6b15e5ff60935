"""Args: the raw attn_args binding object (internal module: import it from attn)."""

from __future__ import annotations

import ctypes
import threading
from typing import TYPE_CHECKING, Any, Dict, Optional, Union

from . import _common, _lib
from ._binding import (NAMES, OUTPUT, SETTER, dtypes, _BLOCK_TABLE, _CU_SEQLENS_K,
                       _CU_SEQLENS_Q, _NEW_K, _NEW_V, _SEQ_LENS_K)
from ._common import (Closeable, Operand, OPERAND_TYPES, as_ndarray, check_dtype, check_status,
                      enum_arg, library_error, need_numpy)
from ._layout import flags_ok
from ._storage import BF16, fp8_format, storage_setter

if TYPE_CHECKING:
    from ._common import ArrayLike

    _Operand = Union[Operand, int, str]

#: the address bound for an empty array whose data pointer is NULL: never read (length 0)
_EMPTY_ANCHOR = ctypes.c_uint64()
_STORED = 2 | 4 | 8  # f16, bf16, int8 (attn_dtype bits): bound with their own setter by set()


class Args(Closeable):
    """attn_args: operand -> (buffer, element count), for Desc.run and the raw serving calls.
    Buffers are C-contiguous arrays of any shape read with the descriptor's configured strides;
    their element counts go with them and the library checks them. The Args keeps each bound
    array alive until it is unbound, cleared or closed (close() or the with block)."""

    def __init__(self) -> None:
        need_numpy()
        self._lock = threading.Lock()
        self._handle = None
        self._refs: Dict[int, Any] = {}
        handle = ctypes.c_void_p()
        check_status(_lib.attn_args_create(ctypes.byref(handle)))
        self._handle = handle.value

    def _bind(self, setter, types, writable, operand, array):
        which = enum_arg("operand", operand, Operand, "attn_operand")
        if isinstance(setter, str):
            setter = getattr(_lib, setter)
        if isinstance(array, BF16):
            array = array.bits
        a, ptr, n = None, None, 0
        if array is not None:
            name = NAMES[which]
            a = as_ndarray(name, array, _common.dtype_name(types), writable)
            check_dtype(name, a, types)
            flags_ok(name, a, writable)
            # empty is bound as empty, never as NULL ("not given"): the library decides
            ptr, n = _common.data_ptr(a) or ctypes.addressof(_EMPTY_ANCHOR), a.size
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

    def set(self, operand: _Operand, array: Union[ArrayLike, BF16, None]) -> Args:
        """Bind `array` with the setter of its element type (None unbinds). Returns self."""
        which = enum_arg("operand", operand, Operand, "attn_operand")
        if OPERAND_TYPES[which][0] & _STORED and array is not None:
            a, dtype, setter = storage_setter(NAMES[which], -1, array)
            if setter is not None:
                return self._bind(setter.__name__, (dtype,), False, which, a)
            array = a
        return self._bind(SETTER[which].__name__, dtypes(which), OUTPUT[which], which, array)

    def _typed(c_name, types, writable):  # noqa: N805  (makes a method: one per setter)
        def method(self, operand: _Operand, array: Union[ArrayLike, BF16, None]) -> Args:
            return self._bind(c_name, tuple(getattr(_common, t) for t in types), writable,
                              operand, array)
        method.__name__ = method.__qualname__ = c_name[len("attn_args_"):]
        method.__doc__ = "%s (%s arrays; None unbinds). Returns self." % (c_name, "/".join(
            getattr(_common, t).name if hasattr(_common, t) else t for t in types))
        return method

    set_f32 = _typed("attn_args_set_f32", ("F32",), False)
    set_out_f32 = _typed("attn_args_set_out_f32", ("F32",), True)
    set_f16 = _typed("attn_args_set_f16", ("F16", "U16"), False)
    set_out_f16 = _typed("attn_args_set_out_f16", ("F16", "U16"), True)
    set_bf16 = _typed("attn_args_set_bf16", ("U16",), False)  # an attn.BF16 or its bits
    set_out_bf16 = _typed("attn_args_set_out_bf16", ("U16",), True)
    set_i8 = _typed("attn_args_set_i8", ("I8",), False)
    set_out_i8 = _typed("attn_args_set_out_i8", ("I8",), True)
    set_u8 = _typed("attn_args_set_u8", ("BOOL", "U8"), False)
    set_i32 = _typed("attn_args_set_i32", ("I32",), False)

    def set_fp8(self, operand: _Operand, fmt: Any, array: Optional[ArrayLike]) -> Args:
        """attn_args_set_fp8: K / V (or NEW_K / NEW_V) as fp8 codes of format fmt ("e4m3" or
        "e5m2"), a uint8 array bound without a copy; its optional scale is K_SCALE / V_SCALE
        (set_f32). None unbinds. Returns self."""
        f = fp8_format(fmt)
        return self._bind(lambda h, w, p, n: _lib.attn_args_set_fp8(h, w, f, p, n),
                          (_common.U8,), False, operand, array)

    def set_out_fp8(self, operand: _Operand, fmt: Any, array: Optional[ArrayLike]) -> Args:
        """attn_args_set_out_fp8: a writable fp8 K / V cache for Desc.run_kv_append_args (a
        uint8 array of codes). Returns self."""
        f = fp8_format(fmt)
        return self._bind(lambda h, w, p, n: _lib.attn_args_set_out_fp8(h, w, f, p, n),
                          (_common.U8,), True, operand, array)

    def _named(which):  # noqa: N805  (set() of one serving operand, by name)
        def method(self, array: Optional[ArrayLike]) -> Args:
            return self.set(which, array)
        method.__name__ = method.__qualname__ = "set_" + NAMES[which]
        method.__doc__ = "set(Operand.%s, array)." % NAMES[which].upper()
        return method

    set_seq_lens_k = _named(_SEQ_LENS_K)
    set_cu_seqlens_q = _named(_CU_SEQLENS_Q)
    set_cu_seqlens_k = _named(_CU_SEQLENS_K)
    set_block_table = _named(_BLOCK_TABLE)
    set_new_k = _named(_NEW_K)
    set_new_v = _named(_NEW_V)
    del _typed, _named

    def clear(self) -> None:
        """Unbind every operand (attn_args_clear)."""
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
