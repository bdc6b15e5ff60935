package attn

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// The Go constants against the C header, the seed example and Simple on the shared vectors
// (tests/vectors, written by the float64 reference tests/reference/attn_ref.py).

func TestConstantsMatchC(t *testing.T) {
	pairs := []struct {
		goVal, cVal int
		name        string
	}{
		{int(StatusOK), int(capi.ATTN_OK), "ATTN_OK"},
		{int(StatusNullPointer), int(capi.ATTN_ERR_NULL_POINTER), "ATTN_ERR_NULL_POINTER"},
		{int(StatusInvalidArgument), int(capi.ATTN_ERR_INVALID_ARGUMENT), "ATTN_ERR_INVALID_ARGUMENT"},
		{int(StatusOutOfMemory), int(capi.ATTN_ERR_OUT_OF_MEMORY), "ATTN_ERR_OUT_OF_MEMORY"},
		{int(StatusUnsupported), int(capi.ATTN_ERR_UNSUPPORTED), "ATTN_ERR_UNSUPPORTED"},
		{int(StatusInternal), int(capi.ATTN_ERR_INTERNAL), "ATTN_ERR_INTERNAL"},
		{int(CausalNone), int(capi.ATTN_CAUSAL_NONE), "ATTN_CAUSAL_NONE"},
		{int(CausalTopLeft), int(capi.ATTN_CAUSAL_TOP_LEFT), "ATTN_CAUSAL_TOP_LEFT"},
		{int(CausalBottomRight), int(capi.ATTN_CAUSAL_BOTTOM_RIGHT), "ATTN_CAUSAL_BOTTOM_RIGHT"},
		{int(OperandQ), int(capi.ATTN_Q), "ATTN_Q"},
		{int(OperandK), int(capi.ATTN_K), "ATTN_K"},
		{int(OperandV), int(capi.ATTN_V), "ATTN_V"},
		{int(OperandOut), int(capi.ATTN_OUT), "ATTN_OUT"},
		{int(OperandLSE), int(capi.ATTN_LSE), "ATTN_LSE"},
		{int(OperandWeights), int(capi.ATTN_WEIGHTS), "ATTN_WEIGHTS"},
		{int(OperandKeyValid), int(capi.ATTN_KEY_VALID), "ATTN_KEY_VALID"},
		{int(OperandAllowed), int(capi.ATTN_ALLOWED), "ATTN_ALLOWED"},
		{int(OperandBias), int(capi.ATTN_BIAS), "ATTN_BIAS"},
		{int(OperandAlibiSlopes), int(capi.ATTN_ALIBI_SLOPES), "ATTN_ALIBI_SLOPES"},
		{int(OperandSinks), int(capi.ATTN_SINKS), "ATTN_SINKS"},
		{int(OperandQueryValid), int(capi.ATTN_QUERY_VALID), "ATTN_QUERY_VALID"},
		{int(OperandSeqLensK), int(capi.ATTN_SEQ_LENS_K), "ATTN_SEQ_LENS_K"},
		{int(OperandKeyMass), int(capi.ATTN_KEY_MASS), "ATTN_KEY_MASS"},
		{int(ParamCausal), int(capi.ATTN_PARAM_CAUSAL), "ATTN_PARAM_CAUSAL"},
		{int(ParamScale), int(capi.ATTN_PARAM_SCALE), "ATTN_PARAM_SCALE"},
		{int(ParamWindowLeft), int(capi.ATTN_PARAM_WINDOW_LEFT), "ATTN_PARAM_WINDOW_LEFT"},
		{int(ParamWindowRight), int(capi.ATTN_PARAM_WINDOW_RIGHT), "ATTN_PARAM_WINDOW_RIGHT"},
		{int(ParamSoftcap), int(capi.ATTN_PARAM_SOFTCAP), "ATTN_PARAM_SOFTCAP"},
		{int(ParamAlibi), int(capi.ATTN_PARAM_ALIBI), "ATTN_PARAM_ALIBI"},
		{int(ParamSoftmaxPlusOne), int(capi.ATTN_PARAM_SOFTMAX_PLUS_ONE), "ATTN_PARAM_SOFTMAX_PLUS_ONE"},
		{int(ParamHeadDimV), int(capi.ATTN_PARAM_HEAD_DIM_V), "ATTN_PARAM_HEAD_DIM_V"},
		{int(ParamWeightsMode), int(capi.ATTN_PARAM_WEIGHTS_MODE), "ATTN_PARAM_WEIGHTS_MODE"},
		{int(ParamBiasFirst), int(capi.ATTN_PARAM_BIAS_FIRST), "ATTN_PARAM_BIAS_FIRST"},
		{int(AlibiNone), int(capi.ATTN_ALIBI_NONE), "ATTN_ALIBI_NONE"},
		{int(AlibiOperand), int(capi.ATTN_ALIBI_OPERAND), "ATTN_ALIBI_OPERAND"},
		{int(AlibiStandard), int(capi.ATTN_ALIBI_STANDARD), "ATTN_ALIBI_STANDARD"},
		{int(WeightsSoftmax), int(capi.ATTN_WEIGHTS_SOFTMAX), "ATTN_WEIGHTS_SOFTMAX"},
		{int(WeightsScores), int(capi.ATTN_WEIGHTS_SCORES), "ATTN_WEIGHTS_SCORES"},
		{int(WeightsMasked), int(capi.ATTN_WEIGHTS_MASKED), "ATTN_WEIGHTS_MASKED"},
		{int(WeightsCapped), int(capi.ATTN_WEIGHTS_CAPPED), "ATTN_WEIGHTS_CAPPED"},
		{int(WeightsSoftcapped), int(capi.ATTN_WEIGHTS_SOFTCAPPED), "ATTN_WEIGHTS_SOFTCAPPED"},
		{int(WeightsSoftcapped), int(weightsModeMax(t)), "ATTN_WEIGHTS_SOFTCAPPED (the last mode: max of ATTN_PARAM_WEIGHTS_MODE)"},
		{int(ComputeExact), int(capi.ATTN_COMPUTE_EXACT), "ATTN_COMPUTE_EXACT"},
		{int(ComputeFP16), int(capi.ATTN_COMPUTE_FP16), "ATTN_COMPUTE_FP16"},
		{int(ComputeINT8), int(capi.ATTN_COMPUTE_INT8), "ATTN_COMPUTE_INT8"},
		{int(ComputeBF16), int(capi.ATTN_COMPUTE_BF16), "ATTN_COMPUTE_BF16"},
		{int(OpForward), int(capi.ATTN_OP_FORWARD), "ATTN_OP_FORWARD"},
		{int(OpWeights), int(capi.ATTN_OP_WEIGHTS), "ATTN_OP_WEIGHTS"},
		{int(OpBackward), int(capi.ATTN_OP_BACKWARD), "ATTN_OP_BACKWARD"},
	}
	for _, p := range pairs {
		if p.goVal != p.cVal {
			t.Errorf("%s: Go constant %d, C value %d", p.name, p.goVal, p.cVal)
		}
	}
	if got := StatusOK.String(); got != "ok" {
		t.Errorf("StatusOK.String() = %q, want \"ok\"", got)
	}
	if got := StatusNullPointer.String(); got != "null pointer" {
		t.Errorf("StatusNullPointer.String() = %q, want \"null pointer\"", got)
	}
	if got := Status(99).String(); got != "unknown status" {
		t.Errorf("Status(99).String() = %q, want \"unknown status\"", got)
	}
	if CausalTopLeft.String() != "top-left" || CausalBottomRight.String() != "bottom-right" ||
		CausalNone.String() != "none" || Causal(9).String() != "Causal(9)" {
		t.Errorf("Causal.String() wrong: %v %v %v %v", CausalNone, CausalTopLeft, CausalBottomRight, Causal(9))
	}
	if OperandKeyValid.String() != "key_valid" || OperandOut.String() != "out" || Operand(255).String() != "Operand(255)" ||
		OperandSeqLensK.String() != "seq_lens_k" || OperandKeyMass.String() != "key_mass" || OperandBias.String() != "bias" {
		t.Errorf("Operand.String() wrong: %v %v %v %v", OperandKeyValid, OperandOut, Operand(255), OperandSeqLensK)
	}
	if ParamWindowLeft.String() != "window_left" || ParamBiasFirst.String() != "bias_first" || Param(17).String() != "Param(17)" ||
		OpWeights.String() != "weights" || Op(3).String() != "Op(3)" || AlibiStandard.String() != "standard" ||
		WeightsCapped.String() != "capped" || Alibi(3).String() != "Alibi(3)" || WeightsMode(5).String() != "WeightsMode(5)" || WeightsSoftcapped.String() != "softcapped" {
		t.Errorf("Param/Op/Alibi/WeightsMode.String() wrong: %v %v %v %v %v %v", ParamWindowLeft, ParamBiasFirst,
			Param(17), OpWeights, AlibiStandard, WeightsCapped)
	}
	if VersionNumber() < 200 {
		t.Errorf("VersionNumber() = %d: the 0.2 call needs libattn >= 0.2", VersionNumber())
	}
	if v := Version(); v != fmt.Sprintf("%d.%d.%d", VersionNumber()/10000, VersionNumber()/100%100, VersionNumber()%100) {
		t.Errorf("Version() = %q does not match VersionNumber() = %d", v, VersionNumber())
	}
	switch ISA() {
	case "scalar", "sse2", "avx2", "avx512", "avx512fp16":
	default:
		t.Errorf("ISA() = %q", ISA())
	}
	if NumThreads() < 1 {
		t.Errorf("NumThreads() = %d", NumThreads())
	}
}

func weightsModeMax(t *testing.T) float64 {
	r, err := ParamBounds(ParamWeightsMode)
	if err != nil {
		t.Fatal(err)
	}
	return r.Max
}

func TestSeedExample(t *testing.T) {
	q := []float32{0, 0, 0}
	k := []float32{1, 2, 3}
	v := []float32{10, 20, 30}
	out, err := Simple(q, k, v, 3, 1, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	// All scores are 0, so each query averages the values it sees: 10, (10+20)/2, (10+20+30)/3.
	if out[0] != 10 || out[1] != 15.0 || out[2] != 20 {
		t.Fatalf("out = %v, want [10 15 20] (out[1][0] exactly 15)", out)
	}

	desc := mustDesc(t, 1, 1, 1, 3, 3, 1, WithCausal(CausalTopLeft))
	defer desc.Close()
	w := make([]float32, desc.RequiredLen(OperandWeights))
	if err := desc.Weights(q, k, nil, nil, w); err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 0, 0, 0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3}
	for i := range want {
		if !close1e5(w[i], want[i]) || (want[i] == 0 && w[i] != 0) {
			t.Errorf("weights[%d][%d] = %v, want %v", i/3, i%3, w[i], want[i])
		}
	}
}

// Simple on the shared vectors it can express: one (batch, head) at a time of every index.txt
// case with seq_q = seq_k, the default scale and strides, no allowed mask and no or top-left
// causal; key_valid as padMask (the padded K/V rows hold NaN, which must never be read).
func TestSimpleSharedVectors(t *testing.T) {
	dir := vectorsDir()
	ran, padded, causal := 0, 0, 0
	for _, c := range readIndex(t, dir) {
		if c.sq != c.sk || c.scale != "default" || c.allowed || c.causal > 1 ||
			c.strides != [4]string{"default", "default", "default", "default"} {
			continue
		}
		desc := mustDesc(t, c.b, c.hq, c.hkv, c.sq, c.sk, c.d, c.options(t)...)
		p := func(part string) string { return filepath.Join(dir, c.name+"."+part) }
		q := readF32(t, p("q.f32"), desc.RequiredLen(OperandQ))
		k := readF32(t, p("k.f32"), desc.RequiredLen(OperandK))
		v := readF32(t, p("v.f32"), desc.RequiredLen(OperandV))
		want := readF32(t, p("out.f32"), desc.RequiredLen(OperandOut))
		var keyValid []bool
		if c.keyValid {
			keyValid = readU8(t, p("key_valid.u8"), desc.RequiredLen(OperandKeyValid))
		}
		desc.Close()
		n, d, rows := c.sq, c.d, c.sq*c.d
		for b := 0; b < c.b; b++ {
			var pad []bool
			if keyValid != nil {
				pad = keyValid[b*n : (b+1)*n]
			}
			for h := 0; h < c.hq; h++ {
				hk := b*c.hkv + h/(c.hq/c.hkv)
				got, err := Simple(q[(b*c.hq+h)*rows:][:rows], k[hk*rows:][:rows], v[hk*rows:][:rows], n, d,
					c.causal == 1, pad)
				if err != nil {
					t.Fatalf("%s: Simple: %v", c.name, err)
				}
				checkVec(t, fmt.Sprintf("%s batch %d head %d", c.name, b, h), "out", got,
					want[(b*c.hq+h)*rows:][:rows])
			}
		}
		ran++
		if c.keyValid {
			padded++
		}
		if c.causal == 1 {
			causal++
		}
	}
	if ran < 4 || padded == 0 || causal == 0 {
		t.Fatalf("index.txt has %d cases for Simple (%d padded, %d causal)", ran, padded, causal)
	}
	t.Logf("Simple: %d shared cases checked", ran)
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
		{int(OperandNewVScale), int(capi.ATTN_NEW_V_SCALE)}, {int(OperandQScale), int(capi.ATTN_Q_SCALE)}}
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
		{int(ComputeFP16), int(capi.ATTN_COMPUTE_FP16)}, {int(ComputeINT8), int(capi.ATTN_COMPUTE_INT8)},
		{int(ComputeBF16), int(capi.ATTN_COMPUTE_BF16)},
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
