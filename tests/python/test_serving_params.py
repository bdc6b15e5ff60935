"""The serving parameters and operands of the numpy face: read back, shapes, the enums against
C, checks and ranges. Data: serving_cases.py."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_cases import B, D, HKV, HQ, MAX_K, MAX_Q, _lib, attn  # noqa: E402


def test_serving_parameters_read_back_and_shapes():
    assert [int(o) for o in (attn.Operand.CU_SEQLENS_Q, attn.Operand.CU_SEQLENS_K,
                             attn.Operand.BLOCK_TABLE, attn.Operand.NEW_K,
                             attn.Operand.NEW_V)] == [14, 15, 16, 17, 18]
    assert [int(p) for p in (attn.Param.VARLEN, attn.Param.PAGE_SIZE, attn.Param.MAX_PAGES,
                             attn.Param.BATCH_INVARIANT)] == [10, 11, 12, 13]
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, varlen=True, page_size=16, max_pages=7,
                   batch_invariant=True, causal="bottom_right") as d:
        assert (d.varlen, d.page_size, d.max_pages, d.batch_invariant, d.page_layout) == (
            True, 16, 7, True, "token_major")
        assert [d.param(p) for p in ("varlen", "page_size", "max_pages",
                                     "batch_invariant")] == [1, 16, 7, 1]
        assert d.shape(attn.Operand.BLOCK_TABLE) == (B, 7)
        assert d.shape("q", total_q=14) == (14, HQ, D)
        assert d.shape("out", total_q=0) == (0, HQ, D)
        assert d.shape("lse", total_q=14) == (HQ, 14)
        assert d.shape("new_v", total_q=3) == (3, HKV, D)
        assert d.shape("k", num_pages=5) == (5, 16, HKV, D)
        assert d.shape("cu_seqlens_q") == d.shape("cu_seqlens_k") == (B + 1,)
        with pytest.raises(ValueError, match=r"shape of q \(total_q, heads_q, head_dim\) "
                                             r"depends on the call: pass total_q="):
            d.shape("q")
        with pytest.raises(ValueError, match="pass num_pages="):
            d.shape("v")
        # the library's lengths: a full pack for the token operands (an upper bound), one page
        # for a pool
        assert d.required_len(attn.Operand.Q) == B * MAX_Q * HQ * D
        assert d.required_len(attn.Operand.LSE) == B * HQ * MAX_Q
        assert d.required_len(attn.Operand.K) == 16 * HKV * D
        assert d.required_len(attn.Operand.BLOCK_TABLE) == B * 7
        r = repr(d)
        assert "varlen=True" in r and "page_size=16" in r and "max_pages=7" in r
        assert "batch_invariant=True" in r
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, page_size=3, page_layout="head_major") as d:
        assert (d.varlen, d.page_size, d.max_pages, d.page_layout) == (False, 3, 0, "head_major")
        assert d.shape("block_table") == (B, 22)  # ceil(66 / 3)
        assert d.shape("v", num_pages=2) == (2, HKV, 3, D)
        assert d.shape("q") == (B, HQ, MAX_Q, D)  # dense queries over the paged cache
        assert d.shape("new_k") == (B * MAX_Q, HKV, D)
        assert "page_layout='head_major'" in repr(d)
    with attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D) as d:
        assert (d.varlen, d.page_size, d.max_pages, d.batch_invariant) == (False, 0, 0, False)
        assert d.shape("block_table") == (B, 0) and d.required_len("block_table") == 0


def test_serving_enums_name_the_c_operands_and_parameters():
    """The values name the C operands and parameters of the same value: the library's messages
    spell the C name of the value Python passes."""
    with attn.Args() as a:
        for op in (attn.Operand.NEW_K, attn.Operand.NEW_V):
            with pytest.raises(attn.InvalidArgumentError,
                               match="%s is bound with attn_args_set_f32" % op.name.lower()):
                a.set_i32(op, np.zeros(4, np.int32))
        for op in (attn.Operand.CU_SEQLENS_Q, attn.Operand.CU_SEQLENS_K,
                   attn.Operand.BLOCK_TABLE):
            with pytest.raises(attn.InvalidArgumentError,
                               match="%s is bound with attn_args_set_i32" % op.name.lower()):
                a.set_f32(op, np.zeros(4, np.float32))
    with attn.Desc(1, 1, 1, 2, 2, 4) as d:
        for p in (attn.Param.VARLEN, attn.Param.PAGE_SIZE, attn.Param.MAX_PAGES,
                  attn.Param.BATCH_INVARIANT):
            assert _lib.attn_desc_set_float(d._handle, int(p), float("nan")) != 0
            assert (_lib.attn_last_error().decode() ==
                    "attn_desc_set_float: ATTN_PARAM_%s must not be NaN" % p.name)


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(page_size=2.5), TypeError, "page_size must be an integer, got float"),
    (dict(batch_invariant="yes"), TypeError, "batch_invariant must be an integer, got str"),
    (dict(page_size=4, page_layout="column_major"), ValueError,
     "page_layout ('column_major') is not one of 'token_major', 'head_major'"),
    (dict(page_size=4, page_layout=1), TypeError, "page_layout must be"),
    (dict(page_layout="head_major"), ValueError,
     "page_layout='head_major' needs a paged cache (page_size >= 1)"),
])
def test_serving_parameters_are_checked_before_c(kwargs, exc, words):
    """Python types and the face's page_layout: checked by the binding."""
    with pytest.raises(exc) as e:
        attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, **kwargs)
    assert isinstance(e.value, attn.AttentionError) and words in e.value.message
    assert not e.value.message.startswith("attn_")  # the binding's check, not the library's


@pytest.mark.parametrize("kwargs,words", [
    (dict(page_size=-1), "attn_desc_set_int: ATTN_PARAM_PAGE_SIZE (-1) is outside [0, "),
    (dict(page_size=2 ** 31), "ATTN_PARAM_PAGE_SIZE (2147483648) is outside"),
    (dict(max_pages=2 ** 40), "ATTN_PARAM_MAX_PAGES (1099511627776) is outside"),
    (dict(varlen=2), "ATTN_PARAM_VARLEN (2) is outside [0, 1]"),
])
def test_serving_parameter_ranges_are_the_librarys(kwargs, words):
    with pytest.raises(attn.InvalidArgumentError) as e:
        attn.Desc(B, HQ, HKV, MAX_Q, MAX_K, D, **kwargs)
    assert words in e.value.message, e.value.message
