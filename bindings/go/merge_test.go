package attn

import (
	"errors"
	"math"
	"math/rand"
	"testing"
)

// Desc.Merge: the exact merge of results over disjoint key sets, dense and varlen.

func relErr(got float32, want float32) float64 {
	if math.IsInf(float64(want), 0) {
		if got == want {
			return 0
		}
		return math.Inf(1)
	}
	if math.IsNaN(float64(got)) {
		return math.Inf(1)
	}
	return math.Abs(float64(got)-float64(want)) / math.Max(1, math.Abs(float64(want)))
}

// worstRelErr is the largest relErr of a merged out and lse against one call's.
func worstRelErr(out, lse, fullOut, fullLSE []float32) float64 {
	worst := 0.0
	for x := range fullOut {
		worst = math.Max(worst, relErr(out[x], fullOut[x]))
	}
	for x := range fullLSE {
		worst = math.Max(worst, relErr(lse[x], fullLSE[x]))
	}
	return worst
}

// Merge of a key split equals one call over all keys; a part with lse -Inf leaves acc unchanged.
func TestMergeKeySplit(t *testing.T) {
	const B, hq, hkv, sq, sk, D = 2, 4, 2, 13, 100, 16
	g := rand.New(rand.NewSource(9))
	rnd := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = 4*g.Float32() - 2
		}
		return s
	}
	q, k, v := rnd(B*hq*sq*D), rnd(B*hkv*sk*D), rnd(B*hkv*sk*D)
	// part runs the keys [k0, k1) of the full K/V: a descriptor of k1 - k0 keys whose K/V strides
	// are those of the full buffers, over sub-slices starting at key k0
	var descs []*Desc
	defer func() {
		for _, d := range descs {
			d.Close()
		}
	}()
	part := func(k0, k1 int) (*Args, []float32, []float32) {
		d := mustDesc(t, B, hq, hkv, sq, k1-k0, D, WithScale(0.125),
			WithStrides(OperandK, hkv*sk*D, sk*D, D), WithStrides(OperandV, hkv*sk*D, sk*D, D))
		descs = append(descs, d)
		a, err := d.NewArgs()
		must(t, err)
		out, lse := filled(B*hq*sq*D, servSentinel), filled(B*hq*sq, servSentinel)
		must(t, a.SetF32(OperandQ, q), a.SetF32(OperandK, k[k0*D:]), a.SetF32(OperandV, v[k0*D:]),
			a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse))
		must(t, a.Run(OpForward))
		return a, out, lse
	}
	full, fullOut, fullLSE := part(0, sk)
	defer full.Close()
	md := mustDesc(t, B, hq, hkv, sq, sk, D)
	defer md.Close()
	var first []float32
	for rep := 0; rep < 2; rep++ {
		acc, out, lse := part(0, 37)
		rest, _, _ := part(37, sk)
		must(t, md.Merge(acc, rest))
		worst := worstRelErr(out, lse, fullOut, fullLSE)
		if worst > 1e-6 {
			t.Errorf("merged vs one call: relative error %g > 1e-6", worst)
		}
		if worst == 0 {
			t.Logf("merged result equals the single call exactly")
		}
		both := append(append([]float32{}, out...), lse...)
		if rep == 0 {
			first = both
		} else {
			for x := range both {
				if math.Float32bits(both[x]) != math.Float32bits(first[x]) {
					t.Fatalf("merge is not bit-identical from run to run at %d", x)
				}
			}
		}
		acc.Close()
		rest.Close()
	}

	// a part that saw no key (lse -Inf, out anything) changes nothing
	acc, err := md.NewArgs()
	must(t, err)
	defer acc.Close()
	empty, err := md.NewArgs()
	must(t, err)
	defer empty.Close()
	out, lse := append([]float32{}, fullOut...), append([]float32{}, fullLSE...)
	emptyOut, emptyLSE := filled(len(fullOut), servNaN), filled(len(fullLSE), float32(math.Inf(-1)))
	must(t, acc.SetOutF32(OperandOut, out), acc.SetOutF32(OperandLSE, lse),
		empty.SetOutF32(OperandOut, emptyOut), empty.SetOutF32(OperandLSE, emptyLSE))
	must(t, md.Merge(acc, empty))
	for x := range out {
		if math.Float32bits(out[x]) != math.Float32bits(fullOut[x]) {
			t.Fatalf("a -Inf part changed out[%d]: %v -> %v", x, fullOut[x], out[x])
		}
	}
	for x := range lse {
		if math.Float32bits(lse[x]) != math.Float32bits(fullLSE[x]) {
			t.Fatalf("a -Inf part changed lse[%d]: %v -> %v", x, fullLSE[x], lse[x])
		}
	}
	if allocs := testing.AllocsPerRun(50, func() {
		if err := md.Merge(acc, empty); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("Merge allocates %v times per call, want 0", allocs)
	}
	// both -Inf: out 0, lse -Inf
	z, zl := filled(len(fullOut), 5), filled(len(fullLSE), float32(math.Inf(-1)))
	must(t, acc.SetOutF32(OperandOut, z), acc.SetOutF32(OperandLSE, zl))
	must(t, md.Merge(acc, empty))
	for x := range z {
		if z[x] != 0 {
			t.Fatalf("two empty parts: out[%d] = %v, want 0", x, z[x])
		}
	}
	for x := range zl {
		if !math.IsInf(float64(zl[x]), -1) {
			t.Fatalf("two empty parts: lse[%d] = %v, want -Inf", x, zl[x])
		}
	}

	// errors: Go's own (same Args, closed objects) and the library's (missing, overlapping)
	wantError(t, md.Merge(acc, acc), StatusInvalidArgument, "acc and part are the same Args")
	wantError(t, md.Merge(acc, nil), StatusNullPointer, "part is nil") // as NULL in C
	wantError(t, md.Merge(nil, acc), StatusNullPointer, "acc is nil")
	bare, err := md.NewArgs()
	must(t, err)
	defer bare.Close()
	wantError(t, md.Merge(acc, bare), StatusNullPointer, "attn_merge: part's out is NULL")
	must(t, bare.SetOutF32(OperandOut, emptyOut))
	wantError(t, md.Merge(acc, bare), StatusNullPointer, "part's lse is NULL")
	must(t, bare.SetOutF32(OperandLSE, zl)) // acc's own lse
	wantError(t, md.Merge(acc, bare), StatusInvalidArgument, "overlaps")
	closed, err := md.NewArgs()
	must(t, err)
	closed.Close()
	wantError(t, md.Merge(acc, closed), StatusInvalidArgument, "args is closed")
	gone := mustDesc(t, B, hq, hkv, sq, sk, D)
	gone.Close()
	if err := gone.Merge(acc, empty); !errors.Is(err, ErrClosed) {
		t.Errorf("Merge on a closed Desc: %v", err)
	}
}

// Merge on varlen packs: the keys of every sequence split in halves, two pack calls, merged
// with acc's cu_seqlens_q; and the library's length check of a varlen LSE (shorter than the
// full-pack RequiredLen is fine in Go, the pack's own length is checked in C).
func TestMergeVarlen(t *testing.T) {
	seqs := servSequences(5)
	var halves [2][]servSeq
	for _, s := range seqs {
		h := s.lk / 2
		for part, r := range [2][2]int{{0, h}, {h, s.lk}} {
			n := r[1] - r[0]
			x := servSeq{lq: s.lq, lk: n, q: s.q}
			for kh := 0; kh < servHKV; kh++ {
				x.k = append(x.k, s.k[(kh*s.lk+r[0])*servD:(kh*s.lk+r[1])*servD]...)
				x.v = append(x.v, s.v[(kh*s.lk+r[0])*servD:(kh*s.lk+r[1])*servD]...)
			}
			halves[part] = append(halves[part], x)
		}
	}
	run := func(seqs []servSeq) (*Desc, *Args, []float32, []float32) {
		return runPack(t, newPack(seqs, servHKV*servD), len(seqs))
	}
	fd, fa, fullOut, fullLSE := run(seqs)
	defer fd.Close()
	defer fa.Close()
	ad, acc, out, lse := run(halves[0])
	defer ad.Close()
	defer acc.Close()
	bd, part, _, partLSE := run(halves[1])
	defer bd.Close()
	defer part.Close()
	must(t, fd.Merge(acc, part))
	worst := worstRelErr(out, lse, fullOut, fullLSE)
	if worst > 1e-6 {
		t.Errorf("varlen merge vs one call: relative error %g > 1e-6", worst)
	}
	// the pack has 14 queries: its lse needs 4 x 14 = 56, far below the full-pack 108
	if fd.RequiredLen(OperandLSE) != 3*servHQ*9 {
		t.Fatalf("RequiredLen(lse) = %d", fd.RequiredLen(OperandLSE))
	}
	must(t, part.SetOutF32(OperandLSE, partLSE[:3]))
	wantError(t, fd.Merge(acc, part), StatusInvalidArgument, "attn_merge: part's lse has 3 elements, needs at least 56")
	must(t, part.SetOutF32(OperandLSE, partLSE), acc.SetCuSeqlensQ(nil))
	wantError(t, fd.Merge(acc, part), StatusNullPointer, "acc's cu_seqlens_q is NULL but ATTN_PARAM_VARLEN is 1")
}
