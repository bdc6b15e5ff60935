package attn

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// Varlen packs (WithVarlen): rows bit-identical to each sequence computed alone (batch
// invariance), on every ISA and thread count; strided packs; per-sequence diagonals and ALiBi.

func withThreads(t *testing.T, n int, f func()) {
	t.Helper()
	must(t, SetNumThreads(n))
	defer func() {
		if err := SetNumThreads(0); err != nil {
			t.Errorf("SetNumThreads(0): %v", err)
		}
	}()
	f()
}

// A varlen pack with batch invariance gives every sequence's rows and LSE bit for bit as that
// sequence computed alone by a dense call, on every kernel and with 1 or 2 threads; the
// sequence without queries produces nothing (and its keys, NaN, are read by nobody). And the
// last query of a sequence computed as a decode step (one query over all its keys) has the bits
// of that row of the whole sequence.
func TestVarlenPackBatchInvariant(t *testing.T) {
	seqs := servSequences(13)
	p := newPack(seqs, servHKV*servD)
	forISAs(t, func(isa string) {
		alone := make([][2][]float32, len(seqs))
		withThreads(t, 1, func() {
			for b, s := range seqs {
				if s.lq > 0 {
					o, l := denseAlone(t, s, WithCausal(CausalBottomRight), WithBatchInvariant())
					alone[b] = [2][]float32{o, l}
					last := servSeq{lq: 1, lk: s.lk, k: s.k, v: s.v}
					for h := 0; h < servHQ; h++ {
						last.q = append(last.q, s.q[(h*s.lq+s.lq-1)*servD:][:servD]...)
					}
					do, dl := denseAlone(t, last, WithCausal(CausalBottomRight), WithBatchInvariant())
					for h := 0; h < servHQ; h++ {
						for x := 0; x < servD; x++ {
							if whole, step := o[(h*s.lq+s.lq-1)*servD+x], do[h*servD+x]; math.Float32bits(whole) != math.Float32bits(step) {
								t.Fatalf("%s: sequence %d head %d: the decode step's out[%d] = %v, the whole sequence's %v",
									isa, b, h, x, step, whole)
							}
						}
						if math.Float32bits(l[h*s.lq+s.lq-1]) != math.Float32bits(dl[h]) {
							t.Errorf("%s: sequence %d head %d: decode lse %v, whole %v", isa, b, h, dl[h], l[h*s.lq+s.lq-1])
						}
					}
				}
			}
		})
		d := mustDesc(t, len(seqs), servHQ, servHKV, p.maxQ, p.maxK, servD, WithVarlen(),
			WithCausal(CausalBottomRight), WithBatchInvariant())
		defer d.Close()
		a, err := d.NewArgs()
		must(t, err)
		defer a.Close()
		// the outputs are longer than the pack (the required lengths of a full pack): the
		// rows past total_q must stay untouched
		out := filled(d.RequiredLen(OperandOut), servSentinel)
		lse := filled(d.RequiredLen(OperandLSE), servSentinel)
		if len(out) <= p.totalQ*servHQ*servD {
			t.Fatalf("out (%d) is not longer than the pack", len(out))
		}
		must(t, a.SetF32(OperandQ, p.q), a.SetF32(OperandK, p.k), a.SetF32(OperandV, p.v),
			a.SetCuSeqlensQ(p.cuQ), a.SetCuSeqlensK(p.cuK), a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse))
		for _, threads := range []int{1, 2} {
			withThreads(t, threads, func() {
				for i := range out {
					out[i] = servSentinel
				}
				for i := range lse {
					lse[i] = servSentinel
				}
				must(t, a.Run(OpForward))
				sameBits(t, fmt.Sprintf("%s, %d threads", isa, threads), p, out, lse, alone)
			})
		}
		// the exact lengths of the pack are enough (no more than its real tokens)
		exact := filled(p.totalQ*servHQ*servD, 0)
		exactLSE := filled(p.totalQ*servHQ, 0)
		must(t, a.SetF32(OperandQ, p.q[:p.totalQ*servHQ*servD]), a.SetOutF32(OperandOut, exact),
			a.SetOutF32(OperandLSE, exactLSE))
		must(t, a.Run(OpForward))
		sameBits(t, isa+", exact lengths", p, exact, exactLSE, alone)
	})
}

// A varlen pack with a sliding window, a softcap and K/V rows padded by strides (3 NaN floats
// after each token) against each sequence computed alone by a dense call with the same options:
// with batch invariance bit for bit (out and LSE, nothing written past the pack), without it
// within 1e-5 (VARIANTS.md's rule).
func TestVarlenPackStridedVsDense(t *testing.T) {
	seqs := servSequences(29)
	const pad = 3
	p := newPack(seqs, servHKV*servD+pad)
	for _, invariant := range []bool{true, false} {
		opts := []Option{WithCausal(CausalBottomRight), WithWindow(20, -1), WithSoftcap(5)}
		if invariant {
			opts = append(opts, WithBatchInvariant())
		}
		alone := make([][2][]float32, len(seqs))
		for b, s := range seqs {
			if s.lq > 0 {
				o, l := denseAlone(t, s, opts...)
				alone[b] = [2][]float32{o, l}
			}
		}
		d, a, out, lse := runPack(t, p, len(seqs), append(opts,
			WithStrides(OperandK, 0, servD, p.kvRow), WithStrides(OperandV, 0, servD, p.kvRow))...)
		a.Close()
		d.Close()
		if invariant {
			sameBits(t, "strided pack, batch invariant", p, out, lse, alone)
			continue
		}
		rows := 0
		for b, s := range seqs {
			if s.lq == 0 {
				continue
			}
			gotOut, gotLSE := make([]float32, 0, len(alone[b][0])), make([]float32, 0, len(alone[b][1]))
			for h := 0; h < servHQ; h++ {
				for i := 0; i < s.lq; i++ {
					gotOut = append(gotOut, out[p.outAt(b, h, i):][:servD]...)
					gotLSE = append(gotLSE, lse[p.lseAt(b, h, i)])
					rows++
				}
			}
			checkVec(t, fmt.Sprintf("strided pack, sequence %d", b), "out", gotOut, alone[b][0])
			checkVec(t, fmt.Sprintf("strided pack, sequence %d", b), "lse", gotLSE, alone[b][1])
		}
		if rows != p.totalQ*servHQ {
			t.Errorf("checked %d rows, the pack has %d", rows, p.totalQ*servHQ)
		}
	}
}

// A varlen pack with a window and ALiBi on each diagonal, both ALiBi forms, every causal rule and
// one slope row per sequence ([batch][heads_q] slopes) equals each sequence computed alone by a
// dense call with that sequence's [heads_q] slopes, bit for bit under batch invariance (the
// dense calls match float64 in the shared vectors).
func TestVarlenDiagonalAlibiFormPerSequenceSlopes(t *testing.T) {
	seqs := servSequences(31)
	p := newPack(seqs, servHKV*servD)
	g := rand.New(rand.NewSource(32))
	slopes := make([]float32, len(seqs)*servHQ)
	for i := range slopes {
		slopes[i] = 0.05 + 0.5*g.Float32()
	}
	for _, causal := range []Causal{CausalNone, CausalTopLeft, CausalBottomRight} {
		for _, diag := range []Diagonal{DiagonalCausal, DiagonalTopLeft, DiagonalBottomRight} {
			for _, form := range []AlibiForm{AlibiLinear, AlibiSymmetric} {
				opts := []Option{WithCausal(causal), WithWindow(6, 3), WithAlibi(AlibiOperand),
					WithDiagonal(diag), WithAlibiForm(form), WithBatchInvariant()}
				label := fmt.Sprintf("causal %v, diagonal %v, form %v", causal, diag, form)
				forISAs(t, func(isa string) {
					alone := make([][2][]float32, len(seqs))
					for b, s := range seqs {
						if s.lq == 0 {
							continue
						}
						d := mustDesc(t, 1, servHQ, servHKV, s.lq, s.lk, servD, opts...)
						a, err := d.NewArgs()
						must(t, err)
						out, lse := filled(d.RequiredLen(OperandOut), 0), filled(d.RequiredLen(OperandLSE), 0)
						must(t, a.SetF32(OperandQ, s.q), a.SetF32(OperandK, s.k), a.SetF32(OperandV, s.v),
							a.SetF32(OperandAlibiSlopes, slopes[b*servHQ:(b+1)*servHQ]),
							a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse), a.Run(OpForward))
						alone[b] = [2][]float32{out, lse}
						a.Close()
						d.Close()
					}
					d := mustDesc(t, len(seqs), servHQ, servHKV, p.maxQ, p.maxK, servD,
						append(opts, WithVarlen(), WithStrides(OperandAlibiSlopes, servHQ, 1, 0))...)
					defer d.Close()
					if n := d.RequiredLen(OperandAlibiSlopes); n != len(slopes) {
						t.Fatalf("RequiredLen(OperandAlibiSlopes) = %d, want %d", n, len(slopes))
					}
					if d.Diagonal() != diag || d.AlibiForm() != form {
						t.Fatalf("read back diagonal %v form %v, set %v %v", d.Diagonal(), d.AlibiForm(), diag, form)
					}
					a, err := d.NewArgs()
					must(t, err)
					defer a.Close()
					out, lse := filled(p.totalQ*servHQ*servD, servSentinel), filled(p.totalQ*servHQ, servSentinel)
					must(t, a.SetF32(OperandQ, p.q), a.SetF32(OperandK, p.k), a.SetF32(OperandV, p.v),
						a.SetF32(OperandAlibiSlopes, slopes), a.SetCuSeqlensQ(p.cuQ), a.SetCuSeqlensK(p.cuK),
						a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse), a.Run(OpForward))
					sameBits(t, isa+", "+label, p, out, lse, alone)
					// [heads_q] slopes are too short for [batch][heads_q]: the library says so
					err = a.SetF32(OperandAlibiSlopes, slopes[:servHQ])
					if err == nil {
						err = a.Run(OpForward)
					}
					wantError(t, err, StatusInvalidArgument, "alibi_slopes")
				})
			}
		}
	}
}
