package attn

import (
	"fmt"
	"math"
	"testing"
)

// Paged K/V caches (WithPageSize) filled by Args.KVAppend, attended with varlen queries and
// compared bit for bit with the dense calls.

// The sequences in a paged cache, filled by KVAppend from an empty (NaN) pool, then attended
// with varlen queries (chunked prefill + decode in one call): bit-identical to the dense calls,
// for page sizes 16 and 3 and token- and head-major pages.
func TestPagedCacheKVAppend(t *testing.T) {
	seqs := servSequences(41)
	p := newPack(seqs, servHKV*servD)
	alone := make([][2][]float32, len(seqs))
	for b, s := range seqs {
		if s.lq > 0 {
			o, l := denseAlone(t, s, WithCausal(CausalBottomRight), WithBatchInvariant())
			alone[b] = [2][]float32{o, l}
		}
	}
	B := len(seqs)
	for _, page := range []int{16, 3} {
		for _, headMajor := range []bool{false, true} {
			label := fmt.Sprintf("page %d, head-major %v", page, headMajor)
			maxPages := (p.maxK + page - 1) / page
			c := newPaged(t, seqs, page, maxPages, headMajor, int64(page)*7+3)
			kPool, vPool := filled(c.poolLen(), servNaN), filled(c.poolLen(), servNaN)

			// 1. prefill: every key but each sequence's last lq ones, through a descriptor whose
			// seq_q has room for the longest prefill (a varlen append adds at most seq_q rows)
			w := mustDesc(t, B, servHQ, servHKV, p.maxK, p.maxK, servD, append(c.options(), WithVarlen())...)
			wa, err := w.NewArgs()
			must(t, err)
			nk, nv, cu := newRows(seqs, func(int) int { return 0 }, func(b int) int { return seqs[b].lk - seqs[b].lq })
			lens := make([]int32, B)
			for b := range lens {
				lens[b] = int32(seqs[b].lk - seqs[b].lq)
			}
			must(t, wa.SetNewK(nk), wa.SetNewV(nv), wa.SetCuSeqlensQ(cu), wa.SetSeqLensK(lens),
				wa.SetBlockTable(c.table))
			must(t, wa.KVAppend(kPool, vPool))
			wa.Close()
			w.Close()

			// 2. the last lq keys of each sequence with the attention call's own Args, which
			// then run over the cache
			d := mustDesc(t, B, servHQ, servHKV, p.maxQ, p.maxK, servD,
				append(c.options(), WithVarlen(), WithCausal(CausalBottomRight), WithBatchInvariant())...)
			if d.RequiredLen(OperandBlockTable) != B*maxPages {
				t.Fatalf("%s: block table %d, want %d", label, d.RequiredLen(OperandBlockTable), B*maxPages)
			}
			a, err := d.NewArgs()
			must(t, err)
			nk, nv, cu = newRows(seqs, func(b int) int { return seqs[b].lk - seqs[b].lq }, func(b int) int { return seqs[b].lk })
			if fmt.Sprint(cu) != fmt.Sprint(p.cuQ) {
				t.Fatalf("decode rows %v are not the queries %v", cu, p.cuQ)
			}
			out, lse := filled(p.totalQ*servHQ*servD, servSentinel), filled(p.totalQ*servHQ, servSentinel)
			lensK := make([]int32, B)
			for b := range lensK {
				lensK[b] = int32(seqs[b].lk)
			}
			must(t, a.SetNewK(nk), a.SetNewV(nv), a.SetCuSeqlensQ(p.cuQ), a.SetSeqLensK(lensK),
				a.SetBlockTable(c.table), a.SetF32(OperandQ, p.q), a.SetF32(OperandK, kPool),
				a.SetF32(OperandV, vPool), a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse))
			must(t, a.KVAppend(kPool, vPool))

			// every used position holds its key; everything else is still the NaN it was
			wantK, wantV := filled(c.poolLen(), servNaN), filled(c.poolLen(), servNaN)
			for b, s := range seqs {
				for h := 0; h < servHKV; h++ {
					for j := 0; j < s.lk; j++ {
						copy(wantK[c.at(b, h, j):][:servD], s.k[(h*s.lk+j)*servD:])
						copy(wantV[c.at(b, h, j):][:servD], s.v[(h*s.lk+j)*servD:])
					}
				}
			}
			bad := 0
			for x := range wantK {
				if math.Float32bits(kPool[x]) != math.Float32bits(wantK[x]) ||
					math.Float32bits(vPool[x]) != math.Float32bits(wantV[x]) {
					if bad++; bad <= 5 {
						t.Errorf("%s: pool[%d] = %v / %v, want %v / %v", label, x, kPool[x], vPool[x], wantK[x], wantV[x])
					}
				}
			}

			must(t, a.Run(OpForward))
			sameBits(t, label, p, out, lse, alone)
			// appending the same rows again rewrites the same values, without allocating
			if allocs := testing.AllocsPerRun(20, func() {
				if err := a.KVAppend(kPool, vPool); err != nil {
					t.Fatal(err)
				}
			}); allocs != 0 {
				t.Errorf("%s: KVAppend allocates %v times per call, want 0", label, allocs)
			}
			must(t, a.Run(OpForward))
			sameBits(t, label+", appended twice", p, out, lse, alone)
			a.Close()
			d.Close()
		}
	}
}
