package attn

import (
	"math"
	"math/rand"
	"testing"
)

// The fast compute modes through NewDesc: a prefill call (GQA 4/2, 64 queries, 96 keys,
// head_dim 64, bottom-right causal, gaussian inputs) in ComputeINT8 against a float64 reference
// (attend64), per (batch, head): cosine >= 0.9995 and relative L1 <= 0.01; INT8's bits differ
// from EXACT's (the integer path ran); ComputeBF16 gives EXACT's bits (no CPU this version
// supports has a bf16 path).

const cmB, cmHQ, cmHKV, cmSQ, cmSK, cmD = 1, 4, 2, 64, 96, 64

type computeModeCase struct{ q, k, v []float32 }

func newComputeModeCase() computeModeCase {
	g := rand.New(rand.NewSource(3302))
	gauss := func(n int) []float32 {
		a := make([]float32, n)
		for i := range a {
			a[i] = float32(g.NormFloat64())
		}
		return a
	}
	q := gauss(cmB * cmHQ * cmSQ * cmD)
	k := gauss(cmB * cmHKV * cmSK * cmD)
	return computeModeCase{q, k, gauss(cmB * cmHKV * cmSK * cmD)}
}

func (c computeModeCase) forward(t *testing.T, mode Compute) []float32 {
	d := mustDesc(t, cmB, cmHQ, cmHKV, cmSQ, cmSK, cmD, WithCausal(CausalBottomRight), WithCompute(mode))
	defer d.Close()
	out := make([]float32, d.RequiredLen(OperandOut))
	must(t, d.Forward(c.q, c.k, c.v, nil, nil, out, nil))
	return out
}

// reference is row i of head h in float64: query i sees keys 0 .. i + cmSK - cmSQ.
func (c computeModeCase) reference(b, h, i int) []float64 {
	hk, keys := h/(cmHQ/cmHKV), i+cmSK-cmSQ+1
	q := make([]float64, cmD)
	for e := range q {
		q[e] = float64(c.q[((b*cmHQ+h)*cmSQ+i)*cmD+e])
	}
	k, v := make([][]float64, keys), make([][]float64, keys)
	for j := 0; j < keys; j++ {
		k[j], v[j] = make([]float64, cmD), make([]float64, cmD)
		for e := 0; e < cmD; e++ {
			k[j][e] = float64(c.k[((b*cmHKV+hk)*cmSK+j)*cmD+e])
			v[j][e] = float64(c.v[((b*cmHKV+hk)*cmSK+j)*cmD+e])
		}
	}
	return attend64(q, k, v, 1/math.Sqrt(cmD))
}

func TestComputeINT8PrefillWithinBoundOfFloat64Reference(t *testing.T) {
	c := newComputeModeCase()
	got := c.forward(t, ComputeINT8)
	for b := 0; b < cmB; b++ {
		for h := 0; h < cmHQ; h++ {
			var dot, nGot, nRef, l1, l1Ref float64
			for i := 0; i < cmSQ; i++ {
				ref := c.reference(b, h, i)
				for e, r := range ref {
					o := float64(got[((b*cmHQ+h)*cmSQ+i)*cmD+e])
					dot, nGot, nRef = dot+o*r, nGot+o*o, nRef+r*r
					l1, l1Ref = l1+math.Abs(o-r), l1Ref+math.Abs(r)
				}
			}
			cosine, relL1 := dot/math.Sqrt(nGot*nRef), l1/l1Ref
			if cosine < 0.9995 || relL1 > 0.01 {
				t.Errorf("batch %d head %d: cosine %.6f (>= 0.9995), relative L1 %.5f (<= 0.01)", b, h, cosine, relL1)
			}
			t.Logf("batch %d head %d: cosine %.6f, relative L1 %.5f", b, h, cosine, relL1)
		}
	}
}

func TestComputeINT8PrefillTakesTheIntegerPath(t *testing.T) {
	// The integer Q.K^T has a kernel on every CPU (on x86 pmaddwd, from SSE2 up): its rounding
	// shows in the output.
	c := newComputeModeCase()
	int8, exact := c.forward(t, ComputeINT8), c.forward(t, ComputeExact)
	differ := 0
	for i := range exact {
		if math.Float32bits(int8[i]) != math.Float32bits(exact[i]) {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("ComputeINT8 gave ComputeExact's bits: the integer path did not run")
	}
}

func TestComputeBF16PrefillIsExactWithoutABF16Unit(t *testing.T) {
	c := newComputeModeCase()
	bf16, exact := c.forward(t, ComputeBF16), c.forward(t, ComputeExact)
	for i := range exact {
		if math.Float32bits(bf16[i]) != math.Float32bits(exact[i]) {
			t.Fatalf("ComputeBF16 differs from ComputeExact at %d: %g vs %g", i, bf16[i], exact[i])
		}
	}
}
