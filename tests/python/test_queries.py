"""The library's tables as the Python face offers them (capi/attn.h "Introspection"):
attn.isa_info(), attn.param_info(p) and attn.operand_info(o), each checked against what the C
queries say when called directly through ctypes, and an unknown index refused with the
library's own message."""

import ctypes
import math
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import attn  # noqa: E402
from attn import _lib  # noqa: E402


def c_rows(query, *types):
    """Every row of a C introspection query: index 0, 1, ... until it stops returning ATTN_OK
    (0); then that status must be ATTN_ERR_INVALID_ARGUMENT (2)."""
    rows = []
    while True:
        outs = [t() for t in types]
        status = query(len(rows), *(ctypes.byref(o) for o in outs))
        if status != 0:
            assert status == 2, status
            return rows
        rows.append(tuple(o.value for o in outs))


def test_isa_info_is_the_c_list_in_its_order():
    c = c_rows(_lib.lib.attn_isa_info, ctypes.c_char_p, ctypes.c_int)
    info = attn.isa_info()
    assert len(info) == len(c) >= 4
    assert info == [(name.decode("ascii"), bool(supported)) for name, supported in c]
    assert info[0] == ("scalar", True)
    assert all(isinstance(n, str) and isinstance(s, bool) for n, s in info)


# Per query: the enum it lists, the face's call, its record, and the C row's types.
QUERIES = {
    "param": (attn.Param, attn.param_info, attn.ParamInfo,
              (ctypes.c_char_p, ctypes.c_int, ctypes.c_double, ctypes.c_double, ctypes.c_double)),
    "operand": (attn.Operand, attn.operand_info, attn.OperandInfo,
                (ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_int, ctypes.c_int)),
}


def c_dims(index):
    """The words of attn_operand_dims for operand index, called directly through ctypes."""
    dims = ctypes.c_char_p()
    assert _lib.lib.attn_operand_dims(index, ctypes.byref(dims)) == 0, index
    return tuple(dims.value.decode("ascii").split())


def expected(kind, index, row):
    """The record the face must give for a row of the C query, written from attn.h's words."""
    name = row[0].decode("ascii")
    if kind == "param":
        return (name, bool(row[1]), row[2], row[3], row[4])
    return (name, attn.DType(row[1]), attn.DType(row[2]), row[3], bool(row[4]), c_dims(index))


def same(got, want):
    return len(got) == len(want) and all(
        type(g) is type(w) and (g == w or (g != g and w != w)) for g, w in zip(got, want))


@pytest.mark.parametrize("kind", list(QUERIES))
def test_info_is_what_c_says_for_every_entry(kind):
    """Every row, by the enum member, its value and its name; the enum has the C list's length
    and order."""
    enum_type, call, record, types = QUERIES[kind]
    rows = c_rows(getattr(_lib.lib, "attn_%s_info" % kind), *types)
    assert len(rows) == len(enum_type) >= 17
    for member, row in zip(enum_type, rows):
        want = expected(kind, int(member), row)
        assert want[0] == member.name.lower()
        for key in (member, int(member), want[0]):
            got = call(key)
            assert isinstance(got, record) and same(got, want), (key, got, want)


def test_param_info_of_some_parameters():
    assert attn.param_info("causal") == ("causal", False, 0.0, 2.0, 0.0)
    assert attn.param_info(attn.Param.SOFTCAP).is_float is True
    for p in attn.Param:
        info = attn.param_info(p)
        assert (info.is_float, info.min, info.max) == attn.param_bounds(p)
    # the defaults that follow the shape: NaN (scale = 1/sqrt(head_dim), head_dim_v = head_dim)
    assert math.isnan(attn.param_info("scale").default)
    assert math.isnan(attn.param_info("head_dim_v").default)


def test_operand_info_of_some_operands():
    D = attn.DType
    q = attn.operand_info("q")
    assert q == ("q", D.F32 | D.F16 | D.BF16, D(0), 4, True,
                 ("batch", "heads_q", "seq_q", "head_dim"))
    assert D.I8 not in q.inputs  # a query is never int8
    k = attn.operand_info(attn.Operand.K)
    assert D.I8 in k.inputs and D.I8 in k.outputs and k.rank == 4 and k.strided
    assert attn.operand_info("out").inputs == D(0) and D.F32 in attn.operand_info("out").outputs
    assert attn.operand_info("key_valid").inputs == D.U8
    assert attn.operand_info("cu_seqlens_q") == ("cu_seqlens_q", D.I32, D(0), 1, False,
                                                 ("batch+1",))
    assert attn.operand_info("sinks").rank == 1 and attn.operand_info("lse").rank == 3


def test_operand_dims_are_rank_words_of_the_c_query():
    """dims: one word per dimension of every operand (len == rank), each the C query's word;
    the C list has no operand the face lacks. Written out: attn.h's shapes of a few."""
    for op in attn.Operand:
        info = attn.operand_info(op)
        assert isinstance(info.dims, tuple) and all(isinstance(w, str) for w in info.dims)
        assert len(info.dims) == info.rank >= 1, (op, info)
        assert info.dims == c_dims(int(op)), op
    assert len(c_rows(_lib.lib.attn_operand_dims, ctypes.c_char_p)) == len(attn.Operand)
    # capi/attn.h: q [batch, heads_q, seq_q, head_dim]; key_valid [batch, seq_k]; one
    # new_k_scale per new row and KV head
    assert attn.operand_info("q").dims == ("batch", "heads_q", "seq_q", "head_dim")
    assert attn.operand_info("key_valid").dims == ("batch", "seq_k")
    assert attn.operand_info("new_k_scale").dims == ("batch*seq_q", "heads_kv")


@pytest.mark.parametrize("call,index,words", [
    (attn.param_info, len(attn.Param), "attn_param_info: param (%d) is not an attn_param"),
    (attn.param_info, -1, "attn_param_info: param (-1) is not an attn_param"),
    (attn.operand_info, len(attn.Operand),
     "attn_operand_info: which (%d) is not an attn_operand"),
    (attn.operand_info, -3, "attn_operand_info: which (-3) is not an attn_operand"),
], ids=["param past the last", "param -1", "operand past the last", "operand -3"])
def test_an_unknown_index_raises_the_librarys_message(call, index, words):
    with pytest.raises(attn.InvalidArgumentError) as e:
        call(index)
    assert e.value.status is attn.Status.INVALID_ARGUMENT
    assert e.value.message == (words % index if "%d" in words else words)


def test_what_c_cannot_see_is_refused_by_the_face():
    with pytest.raises(attn.InvalidArgumentError, match=r"param \('no_such'\) is not one of"):
        attn.param_info("no_such")
    with pytest.raises(attn.InvalidArgumentError, match=r"operand \(2147483648\) does not fit"):
        attn.operand_info(2 ** 31)
    with pytest.raises(attn.ArgumentTypeError, match="param must be an integer, got float"):
        attn.param_info(1.5)
    with pytest.raises(attn.ArgumentTypeError, match="operand must be an integer, got bool"):
        attn.operand_info(True)


def test_every_operand_has_the_shape_of_its_dims_and_required_length():
    """Desc.shape follows attn_operand_dims: rank words, and (dense descriptor) a product equal
    to attn_desc_required_len. Written out: the shapes attn.h gives a few of them."""
    d = attn.Desc(2, 6, 3, 5, 7, 8)
    n = len(attn.Operand)
    dims = ctypes.c_char_p()
    for op in attn.Operand:
        assert _lib.attn_operand_dims(int(op), ctypes.byref(dims)) == 0
        shape = d.shape(op)
        assert len(shape) == len(dims.value.split()), (op, shape, dims.value)
        assert math.prod(shape) == d.required_len(op), (op, shape)
    assert _lib.attn_operand_dims(n, ctypes.byref(dims)) != 0
    assert d.shape(attn.Operand.NEW_K_SCALE) == (10, 3)
    assert d.shape(attn.Operand.NEW_V_SCALE) == (10, 3)
    assert d.shape(attn.Operand.Q_SCALE) == (6,)
    assert d.shape(attn.Operand.Q) == (2, 6, 5, 8)
    assert d.shape(attn.Operand.CU_SEQLENS_Q) == (3,)
