package attn

import (
	"fmt"
	"path/filepath"
	"testing"
)

// Zero copy: slices are written in place, at the offset of a sub-slice, and a call allocates
// nothing on the Go side.

func TestZeroCopyInPlace(t *testing.T) {
	// The shared case causal_br_sq_lt_sk: bottom-right, seq_q 4 < seq_k 9, two batches.
	c := indexCaseByName(t, "causal_br_sq_lt_sk")
	desc := mustDesc(t, c.b, c.hq, c.hkv, c.sq, c.sk, c.d, c.options(t)...)
	defer desc.Close()
	p := func(part string) string { return filepath.Join(vectorsDir(), c.name+"."+part) }
	q := readF32(t, p("q.f32"), desc.RequiredLen(OperandQ))
	k := readF32(t, p("k.f32"), desc.RequiredLen(OperandK))
	v := readF32(t, p("v.f32"), desc.RequiredLen(OperandV))
	want := readF32(t, p("out.f32"), desc.RequiredLen(OperandOut))
	n := desc.RequiredLen(OperandOut)
	backing := make([]float32, 3+n+5)
	out := backing[3 : 3+n]
	if err := desc.Forward(q, k, v, nil, nil, out, nil); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 2, len(backing) - 5, len(backing) - 1} {
		if backing[i] != 0 {
			t.Errorf("backing[%d] = %v written outside the sub-slice", i, backing[i])
		}
	}
	checkVec(t, c.name+" at offset 3", "out", out, want)
	allocs := testing.AllocsPerRun(200, func() {
		if err := desc.Forward(q, k, v, nil, nil, out, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Forward allocates %v times per call on the Go side, want 0 (no copies)", allocs)
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
