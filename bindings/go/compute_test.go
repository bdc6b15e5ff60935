package attn

import (
	"math"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// ParamCompute: its default and round trip, an invalid value, and ComputeFP16 within 1e-2 of
// ComputeExact (and different bits where the AVX512-FP16 fast path runs).

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
	if ParamCompute != 14 || ComputeExact != 0 || ComputeFP16 != 1 || ComputeINT8 != 2 || ComputeBF16 != 3 ||
		ParamCompute.String() != "compute" || ParamCompute.cName() != "ATTN_PARAM_COMPUTE" ||
		ComputeExact.String() != "exact" || ComputeFP16.String() != "fp16" || ComputeINT8.String() != "int8" ||
		ComputeBF16.String() != "bf16" || Compute(4).String() != "Compute(4)" {
		t.Errorf("constants: %d %d %d %d %d %v %v %v %v %v %v", ParamCompute, ComputeExact, ComputeFP16,
			ComputeINT8, ComputeBF16, ParamCompute, ComputeExact, ComputeFP16, ComputeINT8, ComputeBF16, Compute(4))
	}
	if r, err := ParamBounds(ParamCompute); err != nil || r.IsFloat || r.Min != 0 || r.Max != float64(ComputeBF16) {
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
	for _, c := range []Compute{ComputeINT8, ComputeBF16} {
		for _, opt := range []Option{WithCompute(c), WithParamInt(ParamCompute, int64(c))} {
			g := mustDesc(t, 1, 2, 2, 64, 64, 32, opt)
			if v, err := g.ParamInt(ParamCompute); err != nil || v != int64(c) || g.Compute() != c {
				t.Errorf("%v: ParamInt %d, %v; Compute() %v", c, v, err, g.Compute())
			}
			g.Close()
		}
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
		{WithCompute(4), "ATTN_PARAM_COMPUTE (4) is outside [0, 3]"},
		{WithCompute(-1), "ATTN_PARAM_COMPUTE (-1) is outside [0, 3]"},
		{WithCompute(1 << 32), "ATTN_PARAM_COMPUTE (4294967296) is outside [0, 3]"},
		{WithParamInt(ParamCompute, 4), "ATTN_PARAM_COMPUTE (4) is outside [0, 3]"},
		{WithParamFloat(ParamCompute, 4), "ATTN_PARAM_COMPUTE (4) is outside [0, 3]"},
		{WithParamFloat(ParamCompute, 0.5), "ATTN_PARAM_COMPUTE (0.5) must be an integer"},
	} {
		_, err := NewDesc(1, 2, 2, 64, 64, 32, c.opt)
		wantError(t, err, StatusInvalidArgument, c.want)
	}
	// The library's own check agrees, with its message.
	d := mustDesc(t, 1, 2, 2, 64, 64, 32)
	defer d.Close()
	err := check(func() capi.Enum_SS_attn_status {
		return capi.Attn_desc_set_int(d.h, capi.Enum_SS_attn_param(ParamCompute), 4)
	})
	wantError(t, err, StatusInvalidArgument, "attn_desc_set_int: ATTN_PARAM_COMPUTE (4)")
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
