package attn

// Test-side names for what the face no longer keeps: the tests read operand kinds and storage
// types to drive the shared vectors. The kinds come from the library (its setters' verdict on
// each operand), not from a table of the face.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

type storage int8

const (
	storeF32 storage = iota
	storeF16
	storeBF16
	storeI8
)

var (
	numOperands = Operand(len(operandNames))
	numParams   = Param(len(paramNames))
	numStored   = numOperands
)

type kind int8

const (
	kindF32In kind = iota
	kindF32Out
	kindMask
	kindI32
)

// operandKinds: how the library's operand table (attn_operand_info) says each operand is bound
// as float32 or its one other type: a float32 input, a float32 output, a byte mask or int32.
var operandKinds = func() (k []kind) {
	for o := Operand(0); o < numOperands; o++ {
		var in, out uint32
		if capi.Attn_operand_info(capi.Enum_SS_attn_operand(o), nil, &in, &out, nil, nil) != 0 {
			panic("attn_operand_info")
		}
		switch {
		case in&(1<<dtF32) != 0:
			k = append(k, kindF32In)
		case out&(1<<dtF32) != 0:
			k = append(k, kindF32Out)
		case in&(1<<dtU8) != 0:
			k = append(k, kindMask)
		default:
			k = append(k, kindI32)
		}
	}
	return k
}()

// cName is the C enumerator the library's messages use ("ATTN_PARAM_WINDOW_LEFT").
func (p Param) cName() string { return "ATTN_PARAM_" + strings.ToUpper(p.String()) }

// enumMsg is the message expected for an enum argument: the library's verdict (lib) for a value
// that fits C's int, the face's for one that does not (C never sees it).
func enumMsg(name string, v int, lib string) string {
	if int(int32(v)) != v {
		return fmt.Sprintf("%s (%d) does not fit a C int", name, v)
	}
	return lib
}

// The Go constants are the header's values (SWIG's enums), and every operand and parameter the
// library lists has one.
func TestConstantsMatchHeader(t *testing.T) {
	type pair struct{ goVal, cVal int }
	ops := []pair{{int(OperandQ), int(capi.ATTN_Q)}, {int(OperandK), int(capi.ATTN_K)}, {int(OperandV), int(capi.ATTN_V)},
		{int(OperandOut), int(capi.ATTN_OUT)}, {int(OperandLSE), int(capi.ATTN_LSE)}, {int(OperandWeights), int(capi.ATTN_WEIGHTS)},
		{int(OperandKeyValid), int(capi.ATTN_KEY_VALID)}, {int(OperandAllowed), int(capi.ATTN_ALLOWED)},
		{int(OperandBias), int(capi.ATTN_BIAS)}, {int(OperandAlibiSlopes), int(capi.ATTN_ALIBI_SLOPES)},
		{int(OperandSinks), int(capi.ATTN_SINKS)}, {int(OperandQueryValid), int(capi.ATTN_QUERY_VALID)},
		{int(OperandSeqLensK), int(capi.ATTN_SEQ_LENS_K)}, {int(OperandKeyMass), int(capi.ATTN_KEY_MASS)},
		{int(OperandCuSeqlensQ), int(capi.ATTN_CU_SEQLENS_Q)}, {int(OperandCuSeqlensK), int(capi.ATTN_CU_SEQLENS_K)},
		{int(OperandBlockTable), int(capi.ATTN_BLOCK_TABLE)}, {int(OperandNewK), int(capi.ATTN_NEW_K)},
		{int(OperandNewV), int(capi.ATTN_NEW_V)}, {int(OperandDOut), int(capi.ATTN_DOUT)}, {int(OperandDQ), int(capi.ATTN_DQ)},
		{int(OperandDK), int(capi.ATTN_DK)}, {int(OperandDV), int(capi.ATTN_DV)}, {int(OperandDBias), int(capi.ATTN_DBIAS)},
		{int(OperandDSinks), int(capi.ATTN_DSINKS)}, {int(OperandKScale), int(capi.ATTN_K_SCALE)},
		{int(OperandVScale), int(capi.ATTN_V_SCALE)}, {int(OperandNewKScale), int(capi.ATTN_NEW_K_SCALE)},
		{int(OperandNewVScale), int(capi.ATTN_NEW_V_SCALE)}}
	params := []pair{{int(ParamCausal), int(capi.ATTN_PARAM_CAUSAL)}, {int(ParamScale), int(capi.ATTN_PARAM_SCALE)},
		{int(ParamWindowLeft), int(capi.ATTN_PARAM_WINDOW_LEFT)}, {int(ParamWindowRight), int(capi.ATTN_PARAM_WINDOW_RIGHT)},
		{int(ParamSoftcap), int(capi.ATTN_PARAM_SOFTCAP)}, {int(ParamAlibi), int(capi.ATTN_PARAM_ALIBI)},
		{int(ParamSoftmaxPlusOne), int(capi.ATTN_PARAM_SOFTMAX_PLUS_ONE)}, {int(ParamHeadDimV), int(capi.ATTN_PARAM_HEAD_DIM_V)},
		{int(ParamWeightsMode), int(capi.ATTN_PARAM_WEIGHTS_MODE)}, {int(ParamBiasFirst), int(capi.ATTN_PARAM_BIAS_FIRST)},
		{int(ParamVarlen), int(capi.ATTN_PARAM_VARLEN)}, {int(ParamPageSize), int(capi.ATTN_PARAM_PAGE_SIZE)},
		{int(ParamMaxPages), int(capi.ATTN_PARAM_MAX_PAGES)}, {int(ParamBatchInvariant), int(capi.ATTN_PARAM_BATCH_INVARIANT)},
		{int(ParamCompute), int(capi.ATTN_PARAM_COMPUTE)}, {int(ParamDiagonal), int(capi.ATTN_PARAM_DIAGONAL)},
		{int(ParamAlibiForm), int(capi.ATTN_PARAM_ALIBI_FORM)}}
	others := []pair{{int(StatusOK), int(capi.ATTN_OK)}, {int(StatusNullPointer), int(capi.ATTN_ERR_NULL_POINTER)},
		{int(StatusInvalidArgument), int(capi.ATTN_ERR_INVALID_ARGUMENT)}, {int(StatusOutOfMemory), int(capi.ATTN_ERR_OUT_OF_MEMORY)},
		{int(StatusUnsupported), int(capi.ATTN_ERR_UNSUPPORTED)}, {int(StatusInternal), int(capi.ATTN_ERR_INTERNAL)},
		{int(CausalNone), int(capi.ATTN_CAUSAL_NONE)}, {int(CausalTopLeft), int(capi.ATTN_CAUSAL_TOP_LEFT)},
		{int(CausalBottomRight), int(capi.ATTN_CAUSAL_BOTTOM_RIGHT)}, {int(OpForward), int(capi.ATTN_OP_FORWARD)},
		{int(OpWeights), int(capi.ATTN_OP_WEIGHTS)}, {int(OpBackward), int(capi.ATTN_OP_BACKWARD)},
		{int(AlibiNone), int(capi.ATTN_ALIBI_NONE)}, {int(AlibiOperand), int(capi.ATTN_ALIBI_OPERAND)},
		{int(AlibiStandard), int(capi.ATTN_ALIBI_STANDARD)}, {int(DiagonalCausal), int(capi.ATTN_DIAGONAL_CAUSAL)},
		{int(DiagonalTopLeft), int(capi.ATTN_DIAGONAL_TOP_LEFT)}, {int(DiagonalBottomRight), int(capi.ATTN_DIAGONAL_BOTTOM_RIGHT)},
		{int(AlibiLinear), int(capi.ATTN_ALIBI_LINEAR)}, {int(AlibiSymmetric), int(capi.ATTN_ALIBI_SYMMETRIC)},
		{int(WeightsSoftmax), int(capi.ATTN_WEIGHTS_SOFTMAX)}, {int(WeightsScores), int(capi.ATTN_WEIGHTS_SCORES)},
		{int(WeightsMasked), int(capi.ATTN_WEIGHTS_MASKED)}, {int(WeightsCapped), int(capi.ATTN_WEIGHTS_CAPPED)},
		{int(WeightsSoftcapped), int(capi.ATTN_WEIGHTS_SOFTCAPPED)}, {int(ComputeExact), int(capi.ATTN_COMPUTE_EXACT)},
		{int(ComputeFP16), int(capi.ATTN_COMPUTE_FP16)},
		{dtF32, int(capi.ATTN_DTYPE_F32)}, {dtF16, int(capi.ATTN_DTYPE_F16)}, {dtBF16, int(capi.ATTN_DTYPE_BF16)},
		{dtI8, int(capi.ATTN_DTYPE_I8)}, {dtU8, int(capi.ATTN_DTYPE_U8)}, {dtI32, int(capi.ATTN_DTYPE_I32)}}
	for i, set := range [][]pair{ops, params, others} {
		for j, p := range set {
			if p.goVal != p.cVal {
				t.Errorf("set %d, constant %d: Go %d, attn.h %d", i, j, p.goVal, p.cVal)
			}
		}
	}
	if len(ops) != len(operandNames) || len(params) != len(paramNames) {
		t.Errorf("the library lists %d operands and %d parameters; Go has %d and %d constants",
			len(operandNames), len(paramNames), len(ops), len(params))
	}
	if OperandCuSeqlensQ.String() != "cu_seqlens_q" || ParamBatchInvariant.String() != "batch_invariant" ||
		Operand(len(operandNames)).String() != fmt.Sprintf("Operand(%d)", len(operandNames)) {
		t.Errorf("names: %v %v %v", OperandCuSeqlensQ, ParamBatchInvariant, Operand(len(operandNames)))
	}
}
