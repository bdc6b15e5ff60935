package attn

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// The static parameters: every parameter and operand on the shared vectors (tests/vectors/
// variants.txt), the weights modes, the getters, the bounds and the range check of every enum.

// runBoth runs OpForward (out, lse, key_mass) and OpWeights through an Args and returns the
// outputs; every operand is bound, in.* nil slices with nil (unbound), every mask as []bool.
func runBoth(t *testing.T, d *Desc, in vecInputs) (out, lse, w, mass []float32) {
	t.Helper()
	a, err := d.NewArgs()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.SetF32(OperandQ, in.q))
	must(a.SetF32(OperandK, in.k))
	must(a.SetF32(OperandV, in.v))
	must(a.SetBool(OperandKeyValid, in.keyValid))
	must(a.SetBool(OperandAllowed, in.allowed))
	must(a.SetBool(OperandQueryValid, in.queryValid))
	must(a.SetF32(OperandBias, in.bias))
	must(a.SetF32(OperandAlibiSlopes, in.slopes))
	must(a.SetF32(OperandSinks, in.sinks))
	must(a.SetI32(OperandSeqLensK, in.seqLensK))
	for o, x := range in.other {
		switch x := x.(type) {
		case []float32:
			must(a.SetF32(o, x))
		case []bool:
			must(a.SetBool(o, x))
		case []int32:
			must(a.SetI32(o, x))
		}
	}
	out = make([]float32, d.RequiredLen(OperandOut))
	lse = make([]float32, d.RequiredLen(OperandLSE))
	w = make([]float32, d.RequiredLen(OperandWeights))
	mass = make([]float32, d.RequiredLen(OperandKeyMass))
	must(a.SetOutF32(OperandOut, out))
	must(a.SetOutF32(OperandLSE, lse))
	must(a.SetOutF32(OperandKeyMass, mass))
	must(a.Run(OpForward))
	must(a.SetOutF32(OperandWeights, w))
	must(a.Run(OpWeights))
	return out, lse, w, mass
}

// Every case of variants.txt (windows, softcap, bias before and after it, -inf bias, ALiBi
// operand and standard, sinks, "+1", query padding, seq_lens_k over NaN keys, head_dim_v,
// strides, key_mass) through runBoth: all masks with SetBool, the operands a case lacks bound
// as nil, key_mass always bound, weights after the forward on the same Args.
func TestParamsSharedVectors(t *testing.T) {
	cases := readVariantFile(t, filepath.Join(vectorsDir(), "variants.txt"))
	if len(cases) < vectorFileMin["variants.txt"] {
		t.Fatalf("variants.txt lists %d cases", len(cases))
	}
	for _, c := range cases {
		n := c.dims
		d := mustDesc(t, n[0], n[1], n[2], n[3], n[4], n[5], c.options(t, false)...)
		out, lse, w, mass := runBoth(t, d, loadVecInputs(t, c, d))
		checkVecTol(t, c.name, "out", out, vecExpected(t, c, d, OperandOut), c.tol)
		checkVecTol(t, c.name, "lse", lse, vecExpected(t, c, d, OperandLSE), c.tol)
		checkVec(t, c.name, "weights", w, vecExpected(t, c, d, OperandWeights))
		if c.mass {
			checkVec(t, c.name, "key_mass", mass, vecExpected(t, c, d, OperandKeyMass))
		}
		d.Close()
	}
	t.Logf("variants.txt: %d cases checked", len(cases))
}

// checkLogits checks a score matrix z of a weights mode against a case's expected softmax
// weights w and lse (each row's weights are exp(z - lse) of the logits that enter the softmax):
// where w is 0, z is -inf; elsewhere exp(z - lse) is w within 1e-5. It returns how many
// entries were finite.
func checkLogits(t *testing.T, label string, z, lse, w []float32, sk int) int {
	t.Helper()
	if len(z) != len(w) || len(lse)*sk != len(w) {
		t.Fatalf("%s: %d scores, %d weights, %d lse rows of %d keys", label, len(z), len(w), len(lse), sk)
	}
	bad, finite := 0, 0
	for i := range w {
		ok := true
		if w[i] == 0 {
			ok = math.IsInf(float64(z[i]), -1)
		} else {
			e := math.Exp(float64(z[i]) - float64(lse[i/sk]))
			ok = math.Abs(e-float64(w[i])) <= 1e-5*math.Max(1, float64(w[i]))
			finite++
		}
		if !ok {
			if bad++; bad <= 5 {
				t.Errorf("%s: score[%d] = %v: exp(score - lse %v) is not the weight %v", label, i, z[i], lse[i/sk], w[i])
			}
		}
	}
	return finite
}

// The weights modes on shared vector cases. SOFTMAX is the expected weights; CAPPED (the final
// logits) gives them as exp(z - lse) with every hidden entry -inf, on the case with every
// variant. The other modes leave steps out, so each runs on a case without those steps and adds
// them to the Desc, to show they are left out: SCORES (scale * q.k, every entry) with a causal
// rule, a window, a softcap and a bias added; SOFTCAPPED (softcap(scale * q.k)) with a causal
// rule and a bias added; MASKED (bias, ALiBi and masks, no softcap) with a softcap added.
func TestWeightsModes(t *testing.T) {
	for _, c := range []struct {
		mode  WeightsMode
		name  string
		extra []Option
		bias  bool // bind a bias the case does not have
	}{
		{WeightsScores, "mass_plain", []Option{WithCausal(CausalTopLeft), WithWindow(1, 0), WithSoftcap(2)}, true},
		{WeightsSoftcapped, "softcap_only", []Option{WithCausal(CausalTopLeft)}, true},
		{WeightsMasked, "kvpad_nan_bias_alibi", []Option{WithSoftcap(1.5)}, false},
		{WeightsMasked, "alibi_standard_6h_br", []Option{WithSoftcap(0.5)}, false},
		{WeightsCapped, "all_combined", nil, false},
		{WeightsCapped, "softcap_bias_first", nil, false},
		{WeightsSoftmax, "softcap_bias_after", nil, false},
	} {
		vc := variantCaseByName(t, "variants.txt", c.name)
		n := vc.dims
		opts := append(append(vc.options(t, false), c.extra...), WithWeightsMode(c.mode))
		d := mustDesc(t, n[0], n[1], n[2], n[3], n[4], n[5], opts...)
		if d.WeightsMode() != c.mode {
			t.Errorf("WeightsMode() = %v, want %v", d.WeightsMode(), c.mode)
		}
		in := loadVecInputs(t, vc, d)
		if c.bias {
			in.bias = pattern(d.RequiredLen(OperandBias), 6)
		}
		a, err := d.NewArgs()
		if err != nil {
			t.Fatal(err)
		}
		w := make([]float32, d.RequiredLen(OperandWeights))
		for _, err := range []error{a.SetF32(OperandQ, in.q), a.SetF32(OperandK, in.k), a.SetF32(OperandBias, in.bias),
			a.SetF32(OperandAlibiSlopes, in.slopes), a.SetF32(OperandSinks, in.sinks),
			a.SetBool(OperandKeyValid, in.keyValid), a.SetBool(OperandAllowed, in.allowed),
			a.SetBool(OperandQueryValid, in.queryValid), a.SetI32(OperandSeqLensK, in.seqLensK),
			a.SetOutF32(OperandWeights, w), a.Run(OpWeights)} {
			if err != nil {
				t.Fatalf("%v on %s: %v", c.mode, c.name, err)
			}
		}
		label := c.mode.String() + " on " + c.name
		wantW := vecExpected(t, vc, d, OperandWeights)
		if c.mode == WeightsSoftmax {
			checkVec(t, label, "weights", w, wantW)
		} else if checkLogits(t, label, w, vecExpected(t, vc, d, OperandLSE), wantW, n[4]) == 0 {
			t.Errorf("%s: no visible entry", label)
		}
		a.Close()
		d.Close()
	}
}

// The getters read the library: defaults, and every value an option set.
func TestGetters(t *testing.T) {
	d := mustDesc(t, 1, 2, 1, 3, 5, 7)
	if got, want := d.Scale(), float32(1)/float32(math.Sqrt(7)); got != want {
		t.Errorf("default Scale() = %v (bits %08x), want the float 1/sqrtf(7) = %v", got, math.Float32bits(got), want)
	}
	if v, err := d.Param(ParamScale); err != nil || float32(v) != d.Scale() || float64(float32(v)) != v {
		t.Errorf("Param(ParamScale) = %v, %v: not the float Scale() returns", v, err)
	}
	if d.Causal() != CausalNone || d.Softcap() != 0 || d.Alibi() != AlibiNone || d.SoftmaxPlusOne() ||
		d.HeadDimV() != 7 || d.WeightsMode() != WeightsSoftmax || d.BiasFirst() {
		t.Errorf("defaults wrong: causal %v softcap %v alibi %v +1 %v dv %d mode %v bias_first %v", d.Causal(),
			d.Softcap(), d.Alibi(), d.SoftmaxPlusOne(), d.HeadDimV(), d.WeightsMode(), d.BiasFirst())
	}
	if l, r := d.Window(); l != -1 || r != -1 {
		t.Errorf("default Window() = %d, %d", l, r)
	}
	d.Close()
	if d.Scale() != 0 || d.HeadDimV() != 0 {
		t.Errorf("getters on a closed Desc are not zero")
	}
	if _, err := d.Param(ParamScale); !errors.Is(err, ErrClosed) {
		t.Errorf("Param after Close: %v", err)
	}

	d = mustDesc(t, 2, 4, 2, 3, 5, 8, WithCausal(CausalBottomRight), WithScale(0.3), WithWindow(4, 0),
		WithSoftcap(2.5), WithAlibi(AlibiStandard), WithSoftmaxPlusOne(), WithHeadDimV(3),
		WithWeightsMode(WeightsCapped), WithBiasFirst())
	defer d.Close()
	if l, r := d.Window(); l != 4 || r != 0 {
		t.Errorf("Window() = %d, %d", l, r)
	}
	if d.Causal() != CausalBottomRight || d.Scale() != 0.3 || d.Softcap() != 2.5 || d.Alibi() != AlibiStandard ||
		!d.SoftmaxPlusOne() || d.HeadDimV() != 3 || d.WeightsMode() != WeightsCapped || !d.BiasFirst() {
		t.Errorf("getters wrong: causal %v scale %v softcap %v alibi %v +1 %v dv %d mode %v bias_first %v",
			d.Causal(), d.Scale(), d.Softcap(), d.Alibi(), d.SoftmaxPlusOne(), d.HeadDimV(), d.WeightsMode(), d.BiasFirst())
	}
	if n, err := d.ParamInt(ParamScale); err != nil || n != 0 {
		t.Errorf("ParamInt(ParamScale) = %d, %v (0.3 rounds toward zero)", n, err)
	}
	// head_dim_v changes the V and OUT lengths (contiguous strides follow it).
	if d.RequiredLen(OperandV) != 2*2*5*3 || d.RequiredLen(OperandOut) != 2*4*3*3 || d.RequiredLen(OperandK) != 2*2*5*8 {
		t.Errorf("RequiredLen with head_dim_v 3: v %d out %d k %d", d.RequiredLen(OperandV),
			d.RequiredLen(OperandOut), d.RequiredLen(OperandK))
	}
	for _, c := range []struct {
		o Operand
		n int
	}{{OperandBias, 2 * 4 * 3 * 5}, {OperandAlibiSlopes, 4}, {OperandSinks, 4}, {OperandQueryValid, 2 * 3},
		{OperandSeqLensK, 2}, {OperandKeyMass, 2 * 4 * 5}} {
		if got := d.RequiredLen(c.o); got != c.n {
			t.Errorf("RequiredLen(%v) = %d, want %d", c.o, got, c.n)
		}
	}
	// Generic setters reach the same state.
	g := mustDesc(t, 2, 4, 2, 3, 5, 8, WithParamInt(ParamCausal, 2), WithParamFloat(ParamScale, 0.3),
		WithParamInt(ParamWindowLeft, 4), WithParamFloat(ParamWindowRight, 0), WithParamInt(ParamSoftcap, 3),
		WithParamFloat(ParamHeadDimV, 3))
	defer g.Close()
	if g.Causal() != CausalBottomRight || g.Scale() != 0.3 || g.Softcap() != 3 || g.HeadDimV() != 3 {
		t.Errorf("generic setters: causal %v scale %v softcap %v dv %d", g.Causal(), g.Scale(), g.Softcap(), g.HeadDimV())
	}
}

func TestParamBounds(t *testing.T) {
	for p := Param(0); p < numParams; p++ {
		r, err := ParamBounds(p)
		if err != nil {
			t.Fatal(err)
		}
		var isFloat int32
		var lo, hi float64
		if st := capi.Attn_param_bounds(capi.Enum_SS_attn_param(p), &isFloat, &lo, &hi); st != 0 ||
			r.IsFloat != (isFloat != 0) || r.Min != lo || r.Max != hi {
			t.Errorf("ParamBounds(%v) = %+v, C says %d %v %v", p, r, isFloat, lo, hi)
		}
		if r.IsFloat != (p == ParamScale || p == ParamSoftcap) {
			t.Errorf("ParamBounds(%v).IsFloat = %v", p, r.IsFloat)
		}
	}
	if r, _ := ParamBounds(ParamWindowLeft); r.Min != -1 || r.Max != maxDim {
		t.Errorf("window_left range %+v", r)
	}
	for _, p := range []Param{-1, 17, 1 << 32, 1<<32 + 1} {
		_, err := ParamBounds(p)
		wantError(t, err, StatusInvalidArgument, enumMsg("param", int(p), fmt.Sprintf("param (%d) is not an attn_param", int(p))))
	}
}

// Every enum value is range-checked before the C call, so no 64-bit value is truncated to a
// valid 32-bit one, and the message names the value.
func TestEnumsRangeChecked(t *testing.T) {
	for _, c := range []Causal{-1, 3, 1 << 40, 1<<32 + 1, 1 << 32} {
		_, err := NewDesc(1, 1, 1, 3, 3, 8, WithCausal(c))
		wantError(t, err, StatusInvalidArgument, enumMsg("causal", int(c), fmt.Sprintf("causal (%d) is not an attn_causal value", int(c))))
	}
	for _, o := range []Operand{-1, 4, 5, 6, 14, 1 << 32, 1<<32 + 3} {
		_, err := NewDesc(1, 1, 1, 3, 3, 8, WithStrides(o, 24, 24, 8))
		wantError(t, err, StatusInvalidArgument, enumMsg("which", int(o), fmt.Sprintf("which (%d) must be ATTN_Q", int(o))))
	}
	for _, p := range []Param{-1, 17, 1 << 32, 1<<32 + 1} {
		_, err := NewDesc(1, 1, 1, 3, 3, 8, WithParamInt(p, 0))
		wantError(t, err, StatusInvalidArgument, enumMsg("param", int(p), fmt.Sprintf("param (%d) is not an attn_param", int(p))))
		_, err = NewDesc(1, 1, 1, 3, 3, 8, WithParamFloat(p, 0))
		wantError(t, err, StatusInvalidArgument, fmt.Sprintf("param (%d)", int(p)))
	}
	// attn_param_bounds ranges, with the library's names (no truncation of int64 values).
	for _, c := range []struct {
		opt  Option
		want string
	}{
		{WithAlibi(3), "ATTN_PARAM_ALIBI (3) is outside [0, 2]"},
		{WithAlibi(1<<32 + 1), "ATTN_PARAM_ALIBI (4294967297) is outside [0, 2]"},
		{WithWeightsMode(WeightsSoftcapped + 1), "ATTN_PARAM_WEIGHTS_MODE (5) is outside [0, 4]"},
		{WithWeightsMode(1 << 32), "ATTN_PARAM_WEIGHTS_MODE (4294967296)"},
		{WithWindow(-2, 0), "attn_desc_set_int: ATTN_PARAM_WINDOW_LEFT (-2) is outside [-1, 2.14748365e+09]"},
		{WithWindow(0, 1<<31), "attn_desc_set_int: ATTN_PARAM_WINDOW_RIGHT (2147483648) is outside [-1, 2.14748365e+09]"},
		{WithHeadDimV(0), "ATTN_PARAM_HEAD_DIM_V (0)"},
		{WithHeadDimV(1<<32 + 8), "ATTN_PARAM_HEAD_DIM_V (4294967304)"},
		{WithSoftcap(-1), "ATTN_PARAM_SOFTCAP (-1) is outside [0, "},
		{WithSoftcap(float32(math.NaN())), "ATTN_PARAM_SOFTCAP must not be NaN"},
		{WithSoftcap(float32(math.Inf(1))), "ATTN_PARAM_SOFTCAP (inf) is outside"},
		{WithParamFloat(ParamScale, 1e39), "ATTN_PARAM_SCALE (9.9999999999999994e+38) is outside [-3.40282347e+38, 3.40282347e+38]"},
		{WithParamFloat(ParamHeadDimV, 2.5), "ATTN_PARAM_HEAD_DIM_V (2.5) must be an integer"},
		{WithParamInt(ParamSoftmaxPlusOne, 2), "ATTN_PARAM_SOFTMAX_PLUS_ONE (2)"},
		{WithParamInt(ParamBiasFirst, -1), "ATTN_PARAM_BIAS_FIRST (-1)"},
		{WithParamInt(ParamCausal, math.MaxInt64), "ATTN_PARAM_CAUSAL (9.2233720368547758e+18)"},
		{WithParamInt(ParamWindowLeft, math.MinInt64), "ATTN_PARAM_WINDOW_LEFT (-9.2233720368547758e+18)"},
	} {
		_, err := NewDesc(1, 1, 1, 3, 3, 8, c.opt)
		wantError(t, err, StatusInvalidArgument, c.want)
	}
	// The library itself refuses the rest with its own message (the Go checks agree with it).
	_, err := NewDesc(1, 1, 1, 3, 3, 8, WithStrides(OperandOut, 0, 0, 2))
	wantError(t, err, StatusInvalidArgument, "attn_desc_set_strides: out strides")

	d := mustDesc(t, 1, 1, 1, 2, 2, 2)
	defer d.Close()
	a, err := d.NewArgs()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	x := []float32{1, 2, 3, 4}
	for _, op := range []Op{-1, 3, 1 << 32, 1<<32 + 1} {
		wantError(t, a.Run(op), StatusInvalidArgument, enumMsg("op", int(op), fmt.Sprintf("op (%d) is not an attn_op", int(op))))
	}
	for _, o := range []Operand{-1, 255, 1 << 32, 1<<32 + 1} {
		wantError(t, a.SetF32(o, x), StatusInvalidArgument, enumMsg("which", int(o), fmt.Sprintf("which (%d) is not an attn_operand", int(o))))
		wantError(t, a.SetOutF32(o, x), StatusInvalidArgument, fmt.Sprintf("which (%d)", int(o)))
		wantError(t, a.SetBool(o, []bool{true}), StatusInvalidArgument, fmt.Sprintf("which (%d)", int(o)))
		wantError(t, a.SetU8(o, []byte{1}), StatusInvalidArgument, fmt.Sprintf("which (%d)", int(o)))
		wantError(t, a.SetI32(o, []int32{1}), StatusInvalidArgument, fmt.Sprintf("which (%d)", int(o)))
		if d.RequiredLen(o) != 0 {
			t.Errorf("RequiredLen(%d) = %d", int(o), d.RequiredLen(o))
		}
	}
	// A 64-bit Status never reads as a valid 32-bit one.
	if Status(1<<32).String() != "unknown status" || Status(1<<32+2).String() != "unknown status" {
		t.Errorf("Status(1<<32).String() = %q", Status(1<<32).String())
	}
	// op BACKWARD with a forward's operands only: the library asks for the gradient of out.
	for _, err := range []error{a.SetF32(OperandQ, x), a.SetF32(OperandK, x), a.SetF32(OperandV, x),
		a.SetOutF32(OperandOut, make([]float32, 4))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	wantError(t, a.Run(OpBackward), StatusNullPointer, "dout is NULL")
	if err := a.Run(OpForward); err != nil {
		t.Fatal(err)
	}
}
