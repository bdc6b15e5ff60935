package attn

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// Tests of the 0.2 call: every parameter and operand on the shared vectors (tests/vectors,
// written by the float64 reference tests/reference/attn_ref.py), the weights modes, the
// getters, the argument checks, finalizers and zero allocations.

func boolsFrom(n int, f func(i int) bool) []bool {
	s := make([]bool, n)
	for i := range s {
		s[i] = f(i)
	}
	return s
}

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
		checkVec(t, c.name, "out", out, vecExpected(t, c, d, OperandOut))
		checkVec(t, c.name, "lse", lse, vecExpected(t, c, d, OperandLSE))
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

// cpuHasAVX512FP16 reports whether this CPU has AVX512-FP16 (Linux: the avx512_fp16 flag of
// /proc/cpuinfo; false where that file is missing).
func cpuHasAVX512FP16() bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "flags") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if f == "avx512_fp16" {
				return true
			}
		}
	}
	return false
}

func TestComputeDefaultAndRoundTrip(t *testing.T) {
	if ParamCompute != 14 || ComputeExact != 0 || ComputeFP16 != 1 || ParamCompute.String() != "compute" ||
		ParamCompute.cName() != "ATTN_PARAM_COMPUTE" || ComputeExact.String() != "exact" ||
		ComputeFP16.String() != "fp16" || Compute(2).String() != "Compute(2)" {
		t.Errorf("constants: %d %d %d %v %v %v %v", ParamCompute, ComputeExact, ComputeFP16, ParamCompute,
			ComputeExact, ComputeFP16, Compute(2))
	}
	if r, err := ParamBounds(ParamCompute); err != nil || r.IsFloat || r.Min != 0 || r.Max != float64(ComputeFP16) {
		t.Errorf("ParamBounds(ParamCompute) = %+v, %v", r, err)
	}
	d := mustDesc(t, 1, 2, 2, 64, 64, 32)
	defer d.Close()
	if v, err := d.ParamInt(ParamCompute); err != nil || v != 0 || d.Compute() != ComputeExact {
		t.Errorf("default: ParamInt %d, %v; Compute() %v", v, err, d.Compute())
	}
	f := mustDesc(t, 1, 2, 2, 64, 64, 32, WithCompute(ComputeFP16))
	defer f.Close()
	if v, err := f.Param(ParamCompute); err != nil || v != 1 || f.Compute() != ComputeFP16 {
		t.Errorf("WithCompute(ComputeFP16): Param %v, %v; Compute() %v", v, err, f.Compute())
	}
	// the generic setters reach the same state; the last option wins
	for _, opts := range [][]Option{{WithParamInt(ParamCompute, 1)}, {WithParamFloat(ParamCompute, 1)},
		{WithCompute(ComputeExact), WithCompute(ComputeFP16)}} {
		g := mustDesc(t, 1, 2, 2, 64, 64, 32, opts...)
		if g.Compute() != ComputeFP16 {
			t.Errorf("generic setter: Compute() = %v", g.Compute())
		}
		g.Close()
	}
	d.Close()
	if d.Compute() != ComputeExact {
		t.Errorf("Compute() on a closed Desc = %v, want the zero value", d.Compute())
	}
}

func TestComputeInvalidValue(t *testing.T) {
	// Checked in Go before the C call, named as the library names it (no 32-bit truncation).
	for _, c := range []struct {
		opt  Option
		want string
	}{
		{WithCompute(2), "ATTN_PARAM_COMPUTE (2) is outside [0, 1]"},
		{WithCompute(-1), "ATTN_PARAM_COMPUTE (-1) is outside [0, 1]"},
		{WithCompute(1 << 32), "ATTN_PARAM_COMPUTE (4294967296) is outside [0, 1]"},
		{WithParamInt(ParamCompute, 2), "ATTN_PARAM_COMPUTE (2) is outside [0, 1]"},
		{WithParamFloat(ParamCompute, 2), "ATTN_PARAM_COMPUTE (2) is outside [0, 1]"},
		{WithParamFloat(ParamCompute, 0.5), "ATTN_PARAM_COMPUTE (0.5) must be an integer"},
	} {
		_, err := NewDesc(1, 2, 2, 64, 64, 32, c.opt)
		wantError(t, err, StatusInvalidArgument, c.want)
	}
	// The library's own check agrees, with its message.
	d := mustDesc(t, 1, 2, 2, 64, 64, 32)
	defer d.Close()
	err := check(func() capi.Enum_SS_attn_status {
		return capi.Attn_desc_set_int(d.h, capi.Enum_SS_attn_param(ParamCompute), 2)
	})
	wantError(t, err, StatusInvalidArgument, "attn_desc_set_int: ATTN_PARAM_COMPUTE (2)")
	if d.Compute() != ComputeExact {
		t.Errorf("a refused value changed the mode: %v", d.Compute())
	}
}

// FP16 on a prefill (batch 1, 2 heads, 64 x 64, head_dim 32) stays within 1e-2 of EXACT; on a
// CPU with AVX512-FP16, the kernels not capped below avx512 (ISA() "avx512", or "avx512fp16"
// where the library names that level), its rounding shows: the fast path ran.
func TestComputeFP16CloseToExact(t *testing.T) {
	const b, h, s, dim = 1, 2, 64, 32
	g := rand.New(rand.NewSource(1400))
	q, k, v := uniform(g, b*h*s*dim, -1, 1), uniform(g, b*h*s*dim, -1, 1), uniform(g, b*h*s*dim, -1, 1)
	forward := func(opts ...Option) []float32 {
		d := mustDesc(t, b, h, h, s, s, dim, opts...)
		defer d.Close()
		out := make([]float32, d.RequiredLen(OperandOut))
		must(t, d.Forward(q, k, v, nil, nil, out, nil))
		return out
	}
	exact, fp16 := forward(), forward(WithCompute(ComputeFP16))
	worst, differ := 0.0, 0
	for i := range exact {
		worst = math.Max(worst, math.Abs(float64(fp16[i])-float64(exact[i])))
		if math.Float32bits(fp16[i]) != math.Float32bits(exact[i]) {
			differ++
		}
	}
	if worst > 1e-2 {
		t.Errorf("max |fp16 - exact| = %g > 1e-2", worst)
	}
	if cpuHasAVX512FP16() && strings.HasPrefix(ISA(), "avx512") {
		if differ == 0 {
			t.Errorf("ComputeFP16 gave ComputeExact's bits on an AVX512-FP16 CPU: the fast path did not run")
		}
	} else {
		t.Logf("no AVX512-FP16 (or isa %q): only closeness is checked", ISA())
	}
	t.Logf("max |fp16 - exact| = %g, %d of %d outputs differ", worst, differ, len(exact))
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
	for _, o := range []Operand{-1, 29, 1 << 32, 1<<32 + 1} {
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

func TestArgsErrors(t *testing.T) {
	const b, hq, hkv, sq, sk, dd = 2, 2, 1, 3, 4, 4
	d := mustDesc(t, b, hq, hkv, sq, sk, dd, WithAlibi(AlibiOperand))
	defer d.Close()
	a, err := d.NewArgs()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	q, k, v := pattern(d.RequiredLen(OperandQ), 1), pattern(d.RequiredLen(OperandK), 2), pattern(d.RequiredLen(OperandV), 3)
	out := make([]float32, d.RequiredLen(OperandOut))
	slopes := []float32{0.5, 0.25}

	// Wrong setter for the operand's kind.
	wantError(t, a.SetF32(OperandOut, out), StatusInvalidArgument, "attn_args_set_f32: out is bound with attn_args_set_out_f32, not attn_args_set_f32")
	wantError(t, a.SetOutF32(OperandQ, q), StatusInvalidArgument, "q is bound with attn_args_set_f32, not attn_args_set_out_f32")
	wantError(t, a.SetF32(OperandKeyValid, q), StatusInvalidArgument, "key_valid is bound with attn_args_set_u8")
	wantError(t, a.SetBool(OperandSeqLensK, []bool{true, true}), StatusInvalidArgument, "seq_lens_k is bound with attn_args_set_i32")
	wantError(t, a.SetI32(OperandSinks, []int32{1, 2}), StatusInvalidArgument, "sinks is bound with attn_args_set_f32")

	// Short and empty (non-nil) slices: the library's length errors naming the operand, in Run.
	weights := make([]float32, d.RequiredLen(OperandWeights))
	for _, c := range []struct {
		set  func(a *Args) error
		want string
	}{
		{func(a *Args) error { return a.SetF32(OperandQ, q[:47]) }, "q has 47 elements, needs at least 48"},
		{func(a *Args) error { return a.SetF32(OperandQ, []float32{}) }, "q has 0 elements, needs at least 48"},
		{func(a *Args) error { return a.SetF32(OperandBias, []float32{}) }, "bias has 0 elements, needs at least 48"},
		{func(a *Args) error { return a.SetF32(OperandBias, make([]float32, 47)) }, "bias has 47 elements, needs at least 48"},
		{func(a *Args) error { return a.SetF32(OperandAlibiSlopes, slopes[:1]) }, "alibi_slopes has 1 elements, needs at least 2"},
		{func(a *Args) error { return a.SetF32(OperandSinks, []float32{}) }, "sinks has 0 elements, needs at least 2"},
		{func(a *Args) error { return a.SetBool(OperandKeyValid, []bool{}) }, "key_valid has 0 elements, needs at least 8"},
		{func(a *Args) error { return a.SetU8(OperandAllowed, make([]byte, 11)) }, "allowed has 11 elements, needs at least 12"},
		{func(a *Args) error { return a.SetBool(OperandQueryValid, make([]bool, 5)) }, "query_valid has 5 elements, needs at least 6"},
		{func(a *Args) error { return a.SetI32(OperandSeqLensK, []int32{}) }, "seq_lens_k has 0 elements, needs at least 2"},
		{func(a *Args) error { return a.SetOutF32(OperandOut, out[:1]) }, "out has 1 elements, needs at least 48"},
		{func(a *Args) error { return a.SetOutF32(OperandLSE, []float32{}) }, "lse has 0 elements, needs at least 12"},
		{func(a *Args) error { return a.SetOutF32(OperandKeyMass, make([]float32, 15)) }, "key_mass has 15 elements, needs at least 16"},
		{func(a *Args) error { return a.SetOutF32(OperandOut, nil) }, "out is NULL"},
	} {
		a2, err := d.NewArgs()
		if err != nil {
			t.Fatal(err)
		}
		must(t, a2.SetF32(OperandQ, q), a2.SetF32(OperandK, k), a2.SetF32(OperandV, v),
			a2.SetOutF32(OperandOut, out), a2.SetF32(OperandAlibiSlopes, slopes), c.set(a2))
		wantError(t, a2.Run(OpForward), map[bool]Status{true: StatusNullPointer, false: StatusInvalidArgument}[strings.HasSuffix(c.want, "NULL")], c.want)
		a2.Close()
	}
	must(t, a.SetF32(OperandQ, q), a.SetF32(OperandK, k), a.SetOutF32(OperandWeights, weights[:47]))
	wantError(t, a.Run(OpWeights), StatusInvalidArgument, "weights has 47 elements, needs at least 48")
	must(t, a.Clear())
	// Nothing bound: the library names the first missing required operand.
	wantError(t, a.Run(OpForward), StatusNullPointer, "attn_run: q is NULL")
	for _, err := range []error{a.SetF32(OperandQ, q), a.SetF32(OperandK, k)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	wantError(t, a.Run(OpForward), StatusNullPointer, "v is NULL")
	wantError(t, a.Run(OpWeights), StatusNullPointer, "weights is NULL")
	if err := a.SetF32(OperandV, v); err != nil {
		t.Fatal(err)
	}
	wantError(t, a.Run(OpForward), StatusNullPointer, "out is NULL")
	if err := a.SetOutF32(OperandOut, out); err != nil {
		t.Fatal(err)
	}
	wantError(t, a.Run(OpForward), StatusNullPointer, "alibi_slopes is NULL")
	if err := a.SetF32(OperandAlibiSlopes, append(slopes, 9)); err != nil { // longer: fine
		t.Fatal(err)
	}
	if err := a.Run(OpForward); err != nil {
		t.Fatal(err)
	}
	// Values the library refuses.
	if err := a.SetI32(OperandSeqLensK, []int32{4, 5}); err != nil {
		t.Fatal(err)
	}
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "seq_lens_k[1] (5) is outside [0, seq_k = 4]")
	if err := a.SetI32(OperandSeqLensK, []int32{-1, 0}); err != nil {
		t.Fatal(err)
	}
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "seq_lens_k[0] (-1)")
	if err := a.SetI32(OperandSeqLensK, nil); err != nil { // nil unbinds
		t.Fatal(err)
	}
	// Aliasing outputs: the library's error and message.
	if err := a.SetOutF32(OperandOut, q); err != nil {
		t.Fatal(err)
	}
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "out overlaps q")
	lse := make([]float32, 64)
	if err := a.SetOutF32(OperandOut, lse); err != nil {
		t.Fatal(err)
	}
	if err := a.SetOutF32(OperandLSE, lse[40:]); err != nil {
		t.Fatal(err)
	}
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "overlaps")
	if err := a.SetOutF32(OperandLSE, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.SetF32(OperandK, q); err != nil { // inputs may share memory
		t.Fatal(err)
	}
	if err := a.Run(OpForward); err != nil {
		t.Fatalf("inputs sharing memory: %v", err)
	}
	// Sinks with the "+1" softmax.
	p1 := mustDesc(t, 1, 1, 1, 2, 2, 2, WithSoftmaxPlusOne())
	defer p1.Close()
	a1, err := p1.NewArgs()
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{1, 2, 3, 4}
	for _, err := range []error{a1.SetF32(OperandQ, x), a1.SetF32(OperandK, x), a1.SetF32(OperandV, x),
		a1.SetOutF32(OperandOut, make([]float32, 4)), a1.SetF32(OperandSinks, []float32{0})} {
		if err != nil {
			t.Fatal(err)
		}
	}
	wantError(t, a1.Run(OpForward), StatusInvalidArgument, "sinks cannot be combined with ATTN_PARAM_SOFTMAX_PLUS_ONE")
	// Clear forgets everything.
	if err := a1.Clear(); err != nil {
		t.Fatal(err)
	}
	wantError(t, a1.Run(OpForward), StatusNullPointer, "q is NULL")
	a1.Close()

	// Use after Close, of the Args and of its Desc.
	for _, err := range []error{a1.Run(OpForward), a1.SetF32(OperandQ, x), a1.SetOutF32(OperandOut, x),
		a1.SetBool(OperandKeyValid, nil), a1.SetU8(OperandKeyValid, nil), a1.SetI32(OperandSeqLensK, nil),
		a1.Clear(), a1.Close()} {
		if e := wantError(t, err, StatusInvalidArgument, "args is closed"); e != ErrArgsClosed {
			t.Errorf("%v is not ErrArgsClosed", err)
		}
	}
	var nilArgs *Args
	var zero Args
	for _, aa := range []*Args{nilArgs, &zero} {
		if err := aa.Run(OpForward); !errors.Is(err, ErrArgsClosed) {
			t.Errorf("Run on %p: %v", aa, err)
		}
		if err := aa.SetF32(OperandQ, x); !errors.Is(err, ErrArgsClosed) {
			t.Errorf("SetF32 on %p: %v", aa, err)
		}
		if err := aa.Close(); !errors.Is(err, ErrArgsClosed) {
			t.Errorf("Close on %p: %v", aa, err)
		}
	}
	d2 := mustDesc(t, 1, 1, 1, 2, 2, 2)
	a2, err := d2.NewArgs()
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	if a2.Desc() != d2 {
		t.Errorf("Args.Desc() is not the Desc")
	}
	d2.Close()
	if err := a2.Run(OpForward); err != ErrClosed {
		t.Errorf("Run after the Desc's Close: %v, want ErrClosed", err)
	}
	if err := a2.SetF32(OperandQ, x); err != ErrClosed {
		t.Errorf("SetF32 after the Desc's Close: %v, want ErrClosed", err)
	}
	if _, err := d2.NewArgs(); err != ErrClosed {
		t.Errorf("NewArgs after Close: %v", err)
	}
	var nilDesc *Desc
	if _, err := nilDesc.NewArgs(); err != ErrClosed {
		t.Errorf("NewArgs on nil: %v", err)
	}
}

// indexCaseByName is the case called name of index.txt (the 0.1 vectors).
func indexCaseByName(t *testing.T, name string) vecCase {
	t.Helper()
	for _, c := range readIndex(t, vectorsDir()) {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("index.txt has no case %q", name)
	return vecCase{}
}

// []bool and []byte masks mean the same; any nonzero byte is true; longer slices use their
// prefix. On the shared case combined_all (GQA, bottom-right, key padding and an allowed mask).
func TestArgsMasksAndPrefix(t *testing.T) {
	c := indexCaseByName(t, "combined_all")
	if !c.keyValid || !c.allowed || c.causal != int(CausalBottomRight) {
		t.Fatalf("combined_all is not a bottom-right case with both masks")
	}
	d := mustDesc(t, c.b, c.hq, c.hkv, c.sq, c.sk, c.d, c.options(t)...)
	defer d.Close()
	p := func(part string) string { return filepath.Join(vectorsDir(), c.name+"."+part) }
	q, k, v := readF32(t, p("q.f32"), d.RequiredLen(OperandQ)), readF32(t, p("k.f32"), d.RequiredLen(OperandK)),
		readF32(t, p("v.f32"), d.RequiredLen(OperandV))
	kvBool := readU8(t, p("key_valid.u8"), d.RequiredLen(OperandKeyValid))
	allowed := readU8(t, p("allowed.u8"), d.RequiredLen(OperandAllowed))
	wantOut := readF32(t, p("out.f32"), d.RequiredLen(OperandOut))
	kvByte := make([]byte, len(kvBool)+3) // longer than required: the tail is never read
	for i, x := range kvBool {
		if x {
			kvByte[i] = byte(1 + i*37%255) // any nonzero byte is true
		}
	}
	kvByte[len(kvBool)] = 0 // a tail that would hide keys if it were read
	var results [][]float32
	for _, setMask := range []func(a *Args) error{
		func(a *Args) error { return a.SetBool(OperandKeyValid, kvBool) },
		func(a *Args) error { return a.SetU8(OperandKeyValid, kvByte) },
	} {
		a, err := d.NewArgs()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, d.RequiredLen(OperandOut)+7)
		for i := range out {
			out[i] = -7
		}
		for _, err := range []error{setMask(a), a.SetBool(OperandAllowed, allowed), a.SetF32(OperandQ, append(q, 1, 2, 3)),
			a.SetF32(OperandK, k), a.SetF32(OperandV, v), a.SetOutF32(OperandOut, out), a.Run(OpForward)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		for i := d.RequiredLen(OperandOut); i < len(out); i++ {
			if out[i] != -7 {
				t.Fatalf("out[%d] = %v written past the required prefix", i, out[i])
			}
		}
		checkVec(t, "mask", "out", out[:d.RequiredLen(OperandOut)], wantOut)
		results = append(results, out)
		a.Close()
	}
	for i := range results[0] {
		if math.Float32bits(results[0][i]) != math.Float32bits(results[1][i]) {
			t.Fatalf("[]bool and []byte masks differ at %d", i)
		}
	}
	// Args.Run and the 0.1 Desc.Forward agree bit for bit.
	out := make([]float32, d.RequiredLen(OperandOut))
	if err := d.Forward(q, k, v, kvBool, allowed, out, nil); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if math.Float32bits(out[i]) != math.Float32bits(results[0][i]) {
			t.Fatalf("Forward and Args.Run differ at %d", i)
		}
	}
}

// Zero copy and zero allocations per Run (and per setter), in place at a sub-slice's offset. On
// the shared case all_combined, which binds every input operand and key_mass.
func TestArgsZeroAlloc(t *testing.T) {
	c := variantCaseByName(t, "variants.txt", "all_combined")
	n := c.dims
	d := mustDesc(t, n[0], n[1], n[2], n[3], n[4], n[5], c.options(t, false)...)
	defer d.Close()
	a, err := d.NewArgs()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	in := loadVecInputs(t, c, d)
	for o, s := range map[string]interface{}{"q": in.q, "bias": in.bias, "alibi_slopes": in.slopes, "sinks": in.sinks,
		"key_valid": in.keyValid, "allowed": in.allowed, "query_valid": in.queryValid, "seq_lens_k": in.seqLensK} {
		if fmt.Sprint(s) == "[]" {
			t.Fatalf("all_combined lacks %s", o)
		}
	}
	backing := make([]float32, 3+d.RequiredLen(OperandOut)+2)
	out := backing[3 : 3+d.RequiredLen(OperandOut)]
	lse, mass, w := make([]float32, d.RequiredLen(OperandLSE)), make([]float32, d.RequiredLen(OperandKeyMass)),
		make([]float32, d.RequiredLen(OperandWeights))
	bindAll := func() {
		for _, err := range []error{a.SetF32(OperandQ, in.q), a.SetF32(OperandK, in.k), a.SetF32(OperandV, in.v),
			a.SetF32(OperandBias, in.bias), a.SetF32(OperandSinks, in.sinks), a.SetF32(OperandAlibiSlopes, in.slopes),
			a.SetBool(OperandKeyValid, in.keyValid), a.SetBool(OperandAllowed, in.allowed),
			a.SetBool(OperandQueryValid, in.queryValid), a.SetI32(OperandSeqLensK, in.seqLensK),
			a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse), a.SetOutF32(OperandKeyMass, mass),
			a.SetOutF32(OperandWeights, w)} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	bindAll()
	if err := a.Run(OpForward); err != nil {
		t.Fatal(err)
	}
	wantOut, wantLSE, wantMass := vecExpected(t, c, d, OperandOut), vecExpected(t, c, d, OperandLSE),
		vecExpected(t, c, d, OperandKeyMass)
	checkVec(t, "all operands", "out", out, wantOut)
	checkVec(t, "all operands", "lse", lse, wantLSE)
	checkVec(t, "all operands", "key_mass", mass, wantMass)
	if backing[0] != 0 || backing[2] != 0 || backing[len(backing)-1] != 0 {
		t.Errorf("written outside the out sub-slice")
	}
	if allocs := testing.AllocsPerRun(200, func() {
		if err := a.Run(OpForward); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("Args.Run allocates %v times per call, want 0", allocs)
	}
	// After 200 more runs into the same buffers the outputs are the same (overwritten, never
	// accumulated: key_mass is a sum).
	checkVec(t, "after 200 runs", "out", out, wantOut)
	checkVec(t, "after 200 runs", "lse", lse, wantLSE)
	checkVec(t, "after 200 runs", "key_mass", mass, wantMass)
	if allocs := testing.AllocsPerRun(200, bindAll); allocs != 0 {
		t.Errorf("binding every operand allocates %v times, want 0", allocs)
	}
	if err := a.Run(OpWeights); err != nil {
		t.Fatal(err)
	}
	checkVec(t, "all operands", "weights", w, vecExpected(t, c, d, OperandWeights))
}

// A Desc or Args that is never closed is freed by its finalizer (and a closed one is not freed
// again): the finalizers report the very objects this test dropped.
func TestFinalizerSafetyNet(t *testing.T) {
	const n = 8
	var mu sync.Mutex
	freed := map[uintptr]int{}
	testHookFinalized.Store(func(h uintptr) {
		mu.Lock()
		freed[h]++
		mu.Unlock()
	})
	defer testHookFinalized.Store(func(uintptr) {})
	d0, a0 := descsFinalized.Load(), argsFinalized.Load()
	closedD, closedA := descsClosed.Load(), argsClosed.Load()
	var leaked []uintptr
	func() {
		for i := 0; i < n; i++ {
			d := mustDesc(t, 1, 1, 1, 4, 4, 4)
			a, err := d.NewArgs()
			if err != nil {
				t.Fatal(err)
			}
			x := pattern(16, i)
			for _, err := range []error{a.SetF32(OperandQ, x), a.SetF32(OperandK, x), a.SetF32(OperandV, x),
				a.SetOutF32(OperandOut, make([]float32, 16)), a.Run(OpForward)} {
				if err != nil {
					t.Fatal(err)
				}
			}
			leaked = append(leaked, d.h.Swigcptr(), a.h.Swigcptr())
			// And one pair closed explicitly: Close frees it (once: a later finalizer sees h nil).
			cd := mustDesc(t, 1, 1, 1, 4, 4, 4)
			ca, err := cd.NewArgs()
			if err != nil {
				t.Fatal(err)
			}
			ca.Close()
			cd.Close()
		}
	}()
	missing := func() int {
		mu.Lock()
		defer mu.Unlock()
		m := 0
		for _, h := range leaked {
			if freed[h] == 0 {
				m++
			}
		}
		return m
	}
	deadline := time.Now().Add(10 * time.Second)
	for missing() > 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if m := missing(); m > 0 {
		t.Errorf("%d of the %d unclosed descriptors and args were not freed by their finalizers", m, len(leaked))
	}
	mu.Lock()
	for _, h := range leaked {
		if freed[h] > 1 {
			t.Errorf("object %#x freed %d times", h, freed[h])
		}
	}
	mu.Unlock()
	if got := descsFinalized.Load() - d0; got < n {
		t.Errorf("finalizers freed %d descriptors, want at least %d", got, n)
	}
	if got := argsFinalized.Load() - a0; got < n {
		t.Errorf("finalizers freed %d args, want at least %d", got, n)
	}
	if got := descsClosed.Load() - closedD; got != n {
		t.Errorf("Close freed %d descriptors, want %d", got, n)
	}
	if got := argsClosed.Load() - closedA; got != n {
		t.Errorf("Close freed %d args, want %d", got, n)
	}
}

// Many goroutines, one shared Desc, one Args each; and one Args shared (calls serialized).
func TestArgsConcurrent(t *testing.T) {
	testHookBeforeLastError = runtime.Gosched
	defer func() { testHookBeforeLastError = nil }()
	const b, hq, hkv, sq, sk, dd = 2, 4, 2, 5, 9, 8
	d := mustDesc(t, b, hq, hkv, sq, sk, dd, WithCausal(CausalBottomRight), WithWindow(3, -1), WithSoftcap(4))
	defer d.Close()
	type job struct{ q, k, v, sinks, out []float32 }
	const goroutines = 32
	jobs := make([]job, goroutines)
	for g := range jobs {
		j := job{q: pattern(d.RequiredLen(OperandQ), g), k: pattern(d.RequiredLen(OperandK), g+1),
			v: pattern(d.RequiredLen(OperandV), g+2), sinks: pattern(hq, g+3), out: make([]float32, d.RequiredLen(OperandOut))}
		a, err := d.NewArgs()
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range []error{a.SetF32(OperandQ, j.q), a.SetF32(OperandK, j.k), a.SetF32(OperandV, j.v),
			a.SetF32(OperandSinks, j.sinks), a.SetOutF32(OperandOut, j.out), a.Run(OpForward)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		a.Close()
		jobs[g] = j
	}
	shared, err := d.NewArgs()
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	var wg sync.WaitGroup
	errs := make(chan string, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			j := jobs[g]
			a, err := d.NewArgs()
			if err != nil {
				errs <- err.Error()
				return
			}
			defer a.Close()
			out := make([]float32, len(j.out))
			for _, err := range []error{a.SetF32(OperandQ, j.q), a.SetF32(OperandK, j.k), a.SetF32(OperandV, j.v),
				a.SetF32(OperandSinks, j.sinks), a.SetOutF32(OperandOut, out)} {
				if err != nil {
					errs <- err.Error()
					return
				}
			}
			for it := 0; it < 30; it++ {
				if err := a.Run(OpForward); err != nil {
					errs <- err.Error()
					return
				}
				for i := range out {
					if math.Float32bits(out[i]) != math.Float32bits(j.out[i]) {
						errs <- fmt.Sprintf("g%d: out[%d] = %v, serial %v", g, i, out[i], j.out[i])
						return
					}
				}
				// A library failure on this goroutine carries this call's message.
				want := fmt.Sprintf("seq_lens_k[1] (%d)", 10+g)
				if err := a.SetI32(OperandSeqLensK, []int32{1, int32(10 + g)}); err != nil {
					errs <- err.Error()
					return
				}
				if err := a.Run(OpForward); err == nil || !strings.Contains(err.Error(), want) {
					errs <- fmt.Sprintf("g%d: %v, want %q", g, err, want)
					return
				}
				if err := a.SetI32(OperandSeqLensK, nil); err != nil {
					errs <- err.Error()
					return
				}
				// The shared Args: any goroutine's binding, serialized; the run may fail only
				// with the "not bound" status.
				_ = shared.SetF32(OperandQ, j.q)
				if err := shared.Run(OpForward); err == nil || !errors.Is(err, &Error{Status: StatusNullPointer}) {
					errs <- fmt.Sprintf("g%d: shared Args: %v", g, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	n := 0
	for msg := range errs {
		if n++; n <= 10 {
			t.Error(msg)
		}
	}
}
