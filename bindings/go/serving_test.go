package attn

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// Tests of the serving layouts (capi/attn.h "Serving layouts"): varlen packs, paged caches filled
// with Args.KVAppend, Desc.Merge, batch invariance (rows bit-identical to each sequence computed
// alone), and the errors naming the sequence and the slot. The sequences are the ones of
// tests/core/test_serving_merge.cpp's varlen merge case: q {5, 0, 9}, k {40, 7, 66}, GQA 4/2, d 24.

const servHQ, servHKV, servD = 4, 2, 24

var (
	servLQ = []int{5, 0, 9}
	servLK = []int{40, 7, 66}
	// the pools' and packs' filler: a quiet NaN with a payload, so "untouched" is a bit compare
	servNaN = math.Float32frombits(0x7fc0beef)
)

const servSentinel = float32(777)

// servSeq is one sequence, dense per head: q [hq][lq][d], k and v [hkv][lk][d].
type servSeq struct {
	lq, lk  int
	q, k, v []float32
}

func servSequences(seed int64) []servSeq {
	g := rand.New(rand.NewSource(seed))
	uni := func(n int, lo, hi float32) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = lo + (hi-lo)*g.Float32()
		}
		return s
	}
	seqs := make([]servSeq, len(servLQ))
	for b := range seqs {
		lq, lk := servLQ[b], servLK[b]
		seqs[b] = servSeq{lq: lq, lk: lk, q: uni(servHQ*lq*servD, -1, 1),
			k: uni(servHKV*lk*servD, -1, 1), v: uni(servHKV*lk*servD, -2, 2)}
	}
	return seqs
}

func filled(n int, x float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = x
	}
	return s
}

func must(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// cumulative returns the prefix sums [len(n)+1] of n.
func cumulative(n []int) []int32 {
	cu := make([]int32, len(n)+1)
	for b, x := range n {
		cu[b+1] = cu[b] + int32(x)
	}
	return cu
}

// servPack lays sequences out as a varlen pack: Q [total_q][hq][d], K/V [total_k][hkv][kvRow]
// (kvRow >= hkv*d; the padding and the keys of sequences without queries hold servNaN).
type servPack struct {
	seqs           []servSeq
	cuQ, cuK       []int32
	totalQ, totalK int
	maxQ, maxK     int
	kvRow          int
	q, k, v        []float32
}

func newPack(seqs []servSeq, kvRow int) servPack {
	p := servPack{seqs: seqs, kvRow: kvRow}
	var lq, lk []int
	for _, s := range seqs {
		lq, lk = append(lq, s.lq), append(lk, s.lk)
		if s.lq > p.maxQ {
			p.maxQ = s.lq
		}
		if s.lk > p.maxK {
			p.maxK = s.lk
		}
	}
	p.cuQ, p.cuK = cumulative(lq), cumulative(lk)
	p.totalQ, p.totalK = int(p.cuQ[len(seqs)]), int(p.cuK[len(seqs)])
	p.q = filled(p.totalQ*servHQ*servD, servNaN)
	p.k = filled(p.totalK*kvRow, servNaN)
	p.v = filled(p.totalK*kvRow, servNaN)
	for b, s := range seqs {
		for h := 0; h < servHQ; h++ {
			for i := 0; i < s.lq; i++ {
				copy(p.q[((int(p.cuQ[b])+i)*servHQ+h)*servD:][:servD], s.q[(h*s.lq+i)*servD:])
			}
		}
		if s.lq == 0 {
			continue // its keys stay NaN: a query of another sequence that read one would be NaN
		}
		for h := 0; h < servHKV; h++ {
			for j := 0; j < s.lk; j++ {
				at := (int(p.cuK[b])+j)*kvRow + h*servD
				copy(p.k[at:at+servD], s.k[(h*s.lk+j)*servD:])
				copy(p.v[at:at+servD], s.v[(h*s.lk+j)*servD:])
			}
		}
	}
	return p
}

// outAt / lseAt: where row (b, h, i) of the pack's output lives.
func (p servPack) outAt(b, h, i int) int { return ((int(p.cuQ[b])+i)*servHQ + h) * servD }
func (p servPack) lseAt(b, h, i int) int { return h*p.totalQ + int(p.cuQ[b]) + i }

// denseAlone computes one sequence by itself with a dense Desc (batch 1): out [hq][lq][d] and
// lse [hq][lq].
func denseAlone(t *testing.T, s servSeq, opts ...Option) (out, lse []float32) {
	t.Helper()
	d := mustDesc(t, 1, servHQ, servHKV, s.lq, s.lk, servD, opts...)
	defer d.Close()
	a, err := d.NewArgs()
	must(t, err)
	defer a.Close()
	out, lse = filled(d.RequiredLen(OperandOut), servSentinel), filled(d.RequiredLen(OperandLSE), servSentinel)
	must(t, a.SetF32(OperandQ, s.q), a.SetF32(OperandK, s.k), a.SetF32(OperandV, s.v),
		a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse))
	must(t, a.Run(OpForward))
	return out, lse
}

// sameBits compares the pack's rows of every sequence with that sequence's own result, bit for
// bit (out and lse), and checks that nothing past the pack's rows was written.
func sameBits(t *testing.T, label string, p servPack, out, lse []float32, alone [][2][]float32) {
	t.Helper()
	bad := 0
	report := func(format string, args ...interface{}) {
		if bad++; bad <= 5 {
			t.Errorf(label+": "+format, args...)
		}
	}
	for b, s := range p.seqs {
		for h := 0; h < servHQ; h++ {
			for i := 0; i < s.lq; i++ {
				for x := 0; x < servD; x++ {
					got, want := out[p.outAt(b, h, i)+x], alone[b][0][(h*s.lq+i)*servD+x]
					if math.Float32bits(got) != math.Float32bits(want) {
						report("out seq %d head %d row %d [%d] = %v (%08x), alone %v (%08x)", b, h, i, x,
							got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
				got, want := lse[p.lseAt(b, h, i)], alone[b][1][h*s.lq+i]
				if math.Float32bits(got) != math.Float32bits(want) {
					report("lse seq %d head %d row %d = %v, alone %v", b, h, i, got, want)
				}
			}
		}
	}
	for x := p.totalQ * servHQ * servD; x < len(out); x++ {
		if out[x] != servSentinel {
			report("out[%d] past the pack's %d rows was written (%v)", x, p.totalQ, out[x])
		}
	}
	for x := p.totalQ * servHQ; x < len(lse); x++ {
		if lse[x] != servSentinel {
			report("lse[%d] past the pack's heads_q x total_q was written (%v)", x, lse[x])
		}
	}
}

// forISAs runs f on every kernel this CPU supports, then restores the default.
func forISAs(t *testing.T, f func(isa string)) {
	t.Helper()
	defer func() {
		if err := SetISA(""); err != nil {
			t.Errorf("SetISA(\"\"): %v", err)
		}
	}()
	ran := 0
	for _, isa := range []string{"scalar", "sse2", "avx2", "avx512", "avx512fp16"} {
		if err := SetISA(isa); err != nil {
			if errors.Is(err, &Error{Status: StatusUnsupported}) {
				continue
			}
			t.Fatalf("SetISA(%q): %v", isa, err)
		}
		f(isa)
		ran++
	}
	if ran == 0 {
		t.Fatal("no kernel ran")
	}
}

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

// ---------------------------------------------------------------------------------------------

// The Go constants name the C operands and parameters of the same value: the library's own
// messages (wrong setter for an operand's kind; NaN for a parameter) spell the C name of the
// value Go passes. (attn.i does not export the serving enumerators, so no capi constant to
// compare with: this checks the values through the library.)
func TestServingConstantsMatchC(t *testing.T) {
	var handle uintptr
	must(t, check(func() capi.Enum_SS_attn_status { return capi.Attn_args_create(&handle) }))
	h := capi.SwigcptrStruct_SS_attn_args(handle)
	defer capi.Attn_args_destroy(h)
	cSetter := [...]string{kindF32In: "attn_args_set_f32", kindF32Out: "attn_args_set_out_f32",
		kindMask: "attn_args_set_u8", kindI32: "attn_args_set_i32"}
	for o := Operand(0); o < numOperands; o++ {
		k := operandKinds[o]
		err := check(func() capi.Enum_SS_attn_status {
			if k == kindF32In { // bind it as an int32 operand: the library names its real setter
				return capi.Attn_args_set_i32(h, capi.Enum_SS_attn_operand(o), nil, 0)
			}
			return capi.Attn_args_set_f32(h, capi.Enum_SS_attn_operand(o), nil, 0)
		})
		wantError(t, err, StatusInvalidArgument, o.String()+" is bound with "+cSetter[k]+",")
	}
	d := mustDesc(t, 1, 1, 1, 2, 2, 4)
	defer d.Close()
	for p := Param(0); p < numParams; p++ {
		err := check(func() capi.Enum_SS_attn_status {
			return capi.Attn_desc_set_float(d.h, capi.Enum_SS_attn_param(p), math.NaN())
		})
		wantError(t, err, StatusInvalidArgument, "attn_desc_set_float: "+p.cName()+" must not be NaN")
	}
	if OperandCuSeqlensQ != 14 || OperandCuSeqlensK != 15 || OperandBlockTable != 16 || OperandNewK != 17 ||
		OperandNewV != 18 || ParamVarlen != 10 || ParamPageSize != 11 || ParamMaxPages != 12 ||
		ParamBatchInvariant != 13 {
		t.Errorf("serving constants moved: the values are pinned by attn.h")
	}
	if OperandBlockTable.String() != "block_table" || ParamBatchInvariant.String() != "batch_invariant" ||
		ParamPageSize.cName() != "ATTN_PARAM_PAGE_SIZE" {
		t.Errorf("names: %v %v %v", OperandBlockTable, ParamBatchInvariant, ParamPageSize.cName())
	}
}

func TestServingGettersAndLengths(t *testing.T) {
	d := mustDesc(t, 3, servHQ, servHKV, 9, 66, servD, WithVarlen(), WithPageSize(16), WithMaxPages(7),
		WithBatchInvariant())
	defer d.Close()
	if !d.Varlen() || d.PageSize() != 16 || d.MaxPages() != 7 || !d.BatchInvariant() {
		t.Errorf("getters: varlen %v page %d max_pages %d invariant %v", d.Varlen(), d.PageSize(), d.MaxPages(),
			d.BatchInvariant())
	}
	for _, c := range []struct {
		o Operand
		n int
	}{{OperandBlockTable, 3 * 7}, {OperandCuSeqlensQ, 4}, {OperandCuSeqlensK, 4}, {OperandSeqLensK, 3},
		{OperandNewK, 3 * 9 * servHKV * servD}, {OperandNewV, 3 * 9 * servHKV * servD},
		{OperandK, 16 * servHKV * servD}, {OperandV, 16 * servHKV * servD}, // one token-major page
		{OperandQ, 3 * 9 * servHQ * servD}, {OperandLSE, 3 * servHQ * 9}} { // a full pack: upper bounds
		if got := d.RequiredLen(c.o); got != c.n {
			t.Errorf("RequiredLen(%v) = %d, want %d", c.o, got, c.n)
		}
	}
	// max_pages defaults to ceil(seq_k / page_size)
	d3 := mustDesc(t, 3, servHQ, servHKV, 9, 66, servD, WithPageSize(3))
	defer d3.Close()
	if d3.RequiredLen(OperandBlockTable) != 3*22 || d3.MaxPages() != 0 || d3.Varlen() || d3.BatchInvariant() {
		t.Errorf("default max_pages: block table %d, MaxPages() %d", d3.RequiredLen(OperandBlockTable), d3.MaxPages())
	}
	// without pages there is no block table
	plain := mustDesc(t, 3, servHQ, servHKV, 9, 66, servD)
	defer plain.Close()
	if plain.RequiredLen(OperandBlockTable) != 0 || plain.PageSize() != 0 || plain.Varlen() {
		t.Errorf("plain desc: block table %d, page %d, varlen %v", plain.RequiredLen(OperandBlockTable),
			plain.PageSize(), plain.Varlen())
	}
	a, err := plain.NewArgs()
	must(t, err)
	defer a.Close()
	must(t, a.SetBlockTable([]int32{})) // required length 0: bound as empty, the library decides
	q, k := make([]float32, plain.RequiredLen(OperandQ)), make([]float32, plain.RequiredLen(OperandK))
	must(t, a.SetF32(OperandQ, q), a.SetF32(OperandK, k), a.SetF32(OperandV, k),
		a.SetOutF32(OperandOut, make([]float32, plain.RequiredLen(OperandOut))), a.SetBlockTable([]int32{0}))
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "block_table is bound but ATTN_PARAM_PAGE_SIZE is 0")
	must(t, a.SetBlockTable(nil), a.SetCuSeqlensQ([]int32{0, 1, 2, 3}))
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "cu_seqlens_q is bound but ATTN_PARAM_VARLEN is 0")
	must(t, a.SetCuSeqlensQ(nil))
	must(t, a.Run(OpForward))
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

// runPack runs the forward of pack p (nseq sequences) in varlen mode with opts, into sentinel-filled
// out and LSE; the caller closes the descriptor and the args.
func runPack(t *testing.T, p servPack, nseq int, opts ...Option) (*Desc, *Args, []float32, []float32) {
	d := mustDesc(t, nseq, servHQ, servHKV, p.maxQ, p.maxK, servD, append(opts, WithVarlen())...)
	a, err := d.NewArgs()
	must(t, err)
	out, lse := filled(p.totalQ*servHQ*servD, servSentinel), filled(p.totalQ*servHQ, servSentinel)
	must(t, a.SetF32(OperandQ, p.q), a.SetF32(OperandK, p.k), a.SetF32(OperandV, p.v), a.SetCuSeqlensQ(p.cuQ),
		a.SetCuSeqlensK(p.cuK), a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse))
	must(t, a.Run(OpForward))
	return d, a, out, lse
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

// servPaged is a paged cache of the sequences: a shuffled block table (-1 in the unused slots)
// over pools of numPages pages, token-major or head-major.
type servPaged struct {
	page, maxPages, numPages int
	headMajor                bool
	table                    []int32
}

func newPaged(t *testing.T, seqs []servSeq, page, maxPages int, headMajor bool, seed int64) servPaged {
	g := rand.New(rand.NewSource(seed))
	c := servPaged{page: page, maxPages: maxPages, headMajor: headMajor}
	used := 0
	for _, s := range seqs {
		used += (s.lk + page - 1) / page
	}
	c.numPages = used + 2 // two spare pages nobody uses
	ids := g.Perm(c.numPages)
	c.table = make([]int32, len(seqs)*maxPages)
	for i := range c.table {
		c.table[i] = -1
	}
	next := 0
	for b, s := range seqs {
		n := (s.lk + page - 1) / page
		if n > maxPages {
			t.Fatalf("sequence %d needs %d pages, the table has %d columns", b, n, maxPages)
		}
		for slot := 0; slot < n; slot++ {
			c.table[b*maxPages+slot] = int32(ids[next])
			next++
		}
	}
	return c
}

func (c servPaged) poolLen() int { return c.numPages * c.page * servHKV * servD }

// at is the offset of key j (KV head h) of sequence b in a pool.
func (c servPaged) at(b, h, j int) int {
	pg, tok := int(c.table[b*c.maxPages+j/c.page]), j%c.page
	if c.headMajor {
		return ((pg*servHKV+h)*c.page + tok) * servD
	}
	return ((pg*c.page+tok)*servHKV + h) * servD
}

func (c servPaged) options() []Option {
	opts := []Option{WithPageSize(c.page)}
	if c.headMajor {
		for _, o := range []Operand{OperandK, OperandV} {
			opts = append(opts, WithStrides(o, servHKV*c.page*servD, c.page*servD, servD))
		}
	}
	return opts
}

// newRows gathers keys [from(b), to(b)) of every sequence as contiguous token-major rows
// [tokens][hkv][d] (the NEW_K / NEW_V layout), with the counts' prefix sums.
func newRows(seqs []servSeq, from, to func(b int) int) (k, v []float32, cu []int32) {
	var counts []int
	for b, s := range seqs {
		counts = append(counts, to(b)-from(b))
		for j := from(b); j < to(b); j++ {
			for h := 0; h < servHKV; h++ {
				k = append(k, s.k[(h*s.lk+j)*servD:][:servD]...)
				v = append(v, s.v[(h*s.lk+j)*servD:][:servD]...)
			}
		}
	}
	return k, v, cumulative(counts)
}

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
		worst := 0.0
		for x := range fullOut {
			worst = math.Max(worst, relErr(out[x], fullOut[x]))
		}
		for x := range fullLSE {
			worst = math.Max(worst, relErr(lse[x], fullLSE[x]))
		}
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
	worst := 0.0
	for x := range fullOut {
		worst = math.Max(worst, relErr(out[x], fullOut[x]))
	}
	for x := range fullLSE {
		worst = math.Max(worst, relErr(lse[x], fullLSE[x]))
	}
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

// servErrorSetup is a paged varlen call (page 3, token-major) of the standard sequences with
// its pools filled directly, ready to run; bend it and look at the error.
type servErrorSetup struct {
	d          *Desc
	a          *Args
	p          servPack
	c          servPaged
	kPool      []float32
	vPool      []float32
	lens       []int32
	out, lse   []float32
	nk, nv     []float32
	newCu      []int32
	tableClean []int32
}

func newErrorSetup(t *testing.T) *servErrorSetup {
	seqs := servSequences(3)
	s := &servErrorSetup{p: newPack(seqs, servHKV*servD)}
	s.c = newPaged(t, seqs, 3, (s.p.maxK+2)/3, false, 1)
	s.tableClean = append([]int32{}, s.c.table...)
	s.kPool, s.vPool = filled(s.c.poolLen(), servNaN), filled(s.c.poolLen(), servNaN)
	for b, q := range seqs {
		for h := 0; h < servHKV; h++ {
			for j := 0; j < q.lk; j++ {
				copy(s.kPool[s.c.at(b, h, j):][:servD], q.k[(h*q.lk+j)*servD:])
				copy(s.vPool[s.c.at(b, h, j):][:servD], q.v[(h*q.lk+j)*servD:])
			}
		}
		s.lens = append(s.lens, int32(q.lk))
	}
	s.d = mustDesc(t, len(seqs), servHQ, servHKV, s.p.maxQ, s.p.maxK, servD,
		append(s.c.options(), WithVarlen(), WithCausal(CausalBottomRight))...)
	var err error
	s.a, err = s.d.NewArgs()
	must(t, err)
	s.out, s.lse = make([]float32, s.p.totalQ*servHQ*servD), make([]float32, s.p.totalQ*servHQ)
	s.nk, s.nv, s.newCu = newRows(seqs, func(b int) int { return seqs[b].lk - seqs[b].lq },
		func(b int) int { return seqs[b].lk })
	must(t, s.a.SetF32(OperandQ, s.p.q), s.a.SetF32(OperandK, s.kPool), s.a.SetF32(OperandV, s.vPool),
		s.a.SetCuSeqlensQ(s.p.cuQ), s.a.SetSeqLensK(s.lens), s.a.SetBlockTable(s.c.table),
		s.a.SetOutF32(OperandOut, s.out), s.a.SetOutF32(OperandLSE, s.lse), s.a.SetNewK(s.nk), s.a.SetNewV(s.nv))
	return s
}

func (s *servErrorSetup) close() { s.a.Close(); s.d.Close() }

// Bad block tables, lengths and prefix sums: an error naming the slot or the index, never a
// panic, never a wild read; slices shorter than required are refused in Go before any pointer
// reaches C (for the operands whose length the descriptor fixes), or by the library for a
// pack's own length.
func TestServingErrors(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	s := newErrorSetup(t)
	defer s.close()
	must(t, s.a.Run(OpForward)) // the setup itself is fine
	must(t, s.a.KVAppend(s.kPool, s.vPool))
	mp, np := s.c.maxPages, s.c.numPages
	if mp != 22 || s.d.RequiredLen(OperandBlockTable) != 66 {
		t.Fatalf("max_pages %d, block table %d", mp, s.d.RequiredLen(OperandBlockTable))
	}
	bent := func(what string, bend func(), undo func(), st Status, parts ...string) {
		t.Helper()
		bend()
		err := s.a.Run(OpForward)
		if err == nil {
			t.Errorf("%s: Run succeeded", what)
		} else {
			wantError(t, err, st, parts...)
		}
		undo()
		must(t, s.a.Run(OpForward))
	}
	table := s.c.table
	setTable := func(slot int, id int32) func() {
		return func() { table[slot] = id }
	}
	restore := func() { copy(table, s.tableClean) }

	bent("page id out of range", setTable(1*mp+2, 99), restore, StatusInvalidArgument,
		fmt.Sprintf("attn_run: block_table[1][2] (99) is not a page of the K/V buffers, which hold %d pages", np))
	bent("page id = num_pages", setTable(2*mp+21, int32(np)), restore, StatusInvalidArgument,
		fmt.Sprintf("block_table[2][21] (%d) is not a page", np))
	bent("negative page id", setTable(2*mp, -7), restore, StatusInvalidArgument, "block_table[2][0] (-7) is not a page")
	bent("-1 among the used slots", setTable(0*mp+1, -1), restore, StatusInvalidArgument,
		"block_table[0][1] is -1 (unused) but sequence 0 has 40 keys")
	// a -1 right after the used slots is fine: sequence 1 (7 keys, page 3) uses slots 0..2
	if table[1*mp+3] != -1 {
		t.Fatalf("slot [1][3] is not unused")
	}
	bent("a pool too short for its page ids", func() { must(t, s.a.SetF32(OperandK, s.kPool[:3*servHKV*servD])) },
		func() { must(t, s.a.SetF32(OperandK, s.kPool)) }, StatusInvalidArgument,
		"is not a page of the K/V buffers, which hold 1 pages")
	bent("seq_lens_k above seq_k", func() { s.lens[1] = 67 }, func() { s.lens[1] = 7 }, StatusInvalidArgument,
		"seq_lens_k[1] (67) is outside [0, seq_k = 66]")
	bent("negative seq_lens_k", func() { s.lens[2] = -1 }, func() { s.lens[2] = 66 }, StatusInvalidArgument,
		"seq_lens_k[2] (-1) is outside [0, seq_k = 66]")
	cu := s.p.cuQ
	bent("cu_seqlens_q[0] != 0", func() { cu[0] = 1 }, func() { cu[0] = 0 }, StatusInvalidArgument,
		"cu_seqlens_q[0] (1) must be 0")
	bent("decreasing cu_seqlens_q", func() { cu[2] = 4 }, func() { cu[2] = 5 }, StatusInvalidArgument,
		"cu_seqlens_q must not decrease: cu_seqlens_q[1] = 5 > cu_seqlens_q[2] = 4")
	bent("a sequence longer than seq_q", func() { cu[3] = 15 }, func() { cu[3] = 14 }, StatusInvalidArgument,
		"cu_seqlens_q: sequence 2 has length 10, above seq_q = 9")
	bent("q shorter than the pack", func() { must(t, s.a.SetF32(OperandQ, s.p.q[:19])) },
		func() { must(t, s.a.SetF32(OperandQ, s.p.q)) }, StatusInvalidArgument,
		fmt.Sprintf("attn_run: q has 19 elements, needs at least %d", 14*servHQ*servD))
	bent("lse shorter than the pack", func() { must(t, s.a.SetOutF32(OperandLSE, s.lse[:55])) },
		func() { must(t, s.a.SetOutF32(OperandLSE, s.lse)) }, StatusInvalidArgument,
		"lse has 55 elements, needs at least 56")
	bent("no block table", func() { must(t, s.a.SetBlockTable(nil)) }, func() { must(t, s.a.SetBlockTable(table)) },
		StatusNullPointer, "block_table is NULL but ATTN_PARAM_PAGE_SIZE is set")
	bent("no seq_lens_k", func() { must(t, s.a.SetSeqLensK(nil)) }, func() { must(t, s.a.SetSeqLensK(s.lens)) },
		StatusNullPointer, "seq_lens_k is NULL")
	bent("cu_seqlens_k with pages", func() { must(t, s.a.SetCuSeqlensK(s.p.cuK)) },
		func() { must(t, s.a.SetCuSeqlensK(nil)) }, StatusInvalidArgument,
		"cu_seqlens_k is bound but a paged cache takes its key lengths from seq_lens_k")
	bent("a bias in a varlen call", func() { must(t, s.a.SetF32(OperandBias, make([]float32, s.d.RequiredLen(OperandBias)))) },
		func() { must(t, s.a.SetF32(OperandBias, nil)) }, StatusUnsupported, "bias is not supported with ATTN_PARAM_VARLEN")
	must(t, s.a.SetOutF32(OperandWeights, make([]float32, s.d.RequiredLen(OperandWeights))))
	wantError(t, s.a.Run(OpWeights), StatusUnsupported, "ATTN_OP_WEIGHTS is not supported with ATTN_PARAM_VARLEN")
	must(t, s.a.SetOutF32(OperandWeights, nil))

	// Lengths: the library's checks in Run, naming the operand.
	for _, c := range []struct {
		what       string
		bend, undo func() error
		want       string
	}{
		{"short block table", func() error { return s.a.SetBlockTable(table[:len(table)-1]) },
			func() error { return s.a.SetBlockTable(table) }, "block_table has 65 elements, needs at least 66"},
		{"empty block table", func() error { return s.a.SetBlockTable([]int32{}) },
			func() error { return s.a.SetBlockTable(table) }, "block_table has 0 elements, needs at least 66"},
		{"short cu_seqlens_q", func() error { return s.a.SetCuSeqlensQ(cu[:3]) },
			func() error { return s.a.SetCuSeqlensQ(cu) }, "cu_seqlens_q has 3 elements, needs at least 4"},
		{"short seq_lens_k", func() error { return s.a.SetSeqLensK(s.lens[:2]) },
			func() error { return s.a.SetSeqLensK(s.lens) }, "seq_lens_k has 2 elements, needs at least 3"},
		{"a pool below one page", func() error { return s.a.SetF32(OperandK, s.kPool[:3*servHKV*servD-1]) },
			func() error { return s.a.SetF32(OperandK, s.kPool) },
			fmt.Sprintf("k has %d elements, needs at least %d", 3*servHKV*servD-1, 3*servHKV*servD)},
	} {
		bent(c.what, func() { must(t, c.bend()) }, func() { must(t, c.undo()) }, StatusInvalidArgument, c.want)
	}
	// The operand and the setter: the library's verdict when the setter is called.
	for _, c := range []struct {
		err  error
		want string
	}{
		{s.a.SetF32(OperandBlockTable, s.kPool), "attn_args_set_f32: block_table is bound with attn_args_set_i32, not attn_args_set_f32"},
		{s.a.SetI32(OperandNewK, table), "new_k is bound with attn_args_set_f32, not attn_args_set_i32"},
		{s.a.SetOutF32(OperandNewV, s.out), "new_v is bound with attn_args_set_f32, not attn_args_set_out_f32"},
		{s.a.SetI32(Operand(29), table), "which (29) is not an attn_operand"},
		{s.a.KVAppend(s.kPool[:10], s.vPool), fmt.Sprintf("k_cache has 10 elements, needs at least %d", 3*servHKV*servD)},
		{s.a.KVAppend(s.kPool, []float32{}), fmt.Sprintf("v_cache has 0 elements, needs at least %d", 3*servHKV*servD)},
	} {
		wantError(t, c.err, StatusInvalidArgument, c.want)
	}
	wantError(t, s.a.KVAppend(nil, s.vPool), StatusNullPointer, "k_cache is NULL")
	wantError(t, s.a.KVAppend(s.kPool, nil), StatusNullPointer, "v_cache is NULL")
	must(t, s.a.Run(OpForward)) // the refused setters left the bindings as they were

	// KVAppend: the library's checks, naming the sequence and the slot
	wantError(t, s.a.KVAppend(s.kPool, s.kPool), StatusInvalidArgument, "attn_kv_append:", "overlaps")
	table[2*mp] = 1000
	wantError(t, s.a.KVAppend(s.kPool, s.vPool), StatusInvalidArgument,
		fmt.Sprintf("attn_kv_append: block_table[2][0] (1000) is not a page of the K/V buffers, which hold %d pages", np))
	restore()
	s.lens[0] = 4 // sequence 0 appends 5 tokens
	wantError(t, s.a.KVAppend(s.kPool, s.vPool), StatusInvalidArgument,
		"seq_lens_k[0] (4) is less than the 5 new tokens of sequence 0")
	s.lens[0] = 40
	must(t, s.a.SetNewK(s.nk[:10]))
	wantError(t, s.a.KVAppend(s.kPool, s.vPool), StatusInvalidArgument,
		fmt.Sprintf("attn_kv_append: new_k has 10 elements, needs at least %d", 14*servHKV*servD))
	must(t, s.a.SetNewK(nil))
	wantError(t, s.a.KVAppend(s.kPool, s.vPool), StatusNullPointer, "attn_kv_append: new_k is NULL")
	must(t, s.a.SetNewK(s.nk))
	must(t, s.a.SetCuSeqlensQ(nil))
	wantError(t, s.a.KVAppend(s.kPool, s.vPool), StatusNullPointer, "cu_seqlens_q is NULL but ATTN_PARAM_VARLEN is 1")
	must(t, s.a.SetCuSeqlensQ(cu))
	must(t, s.a.KVAppend(s.kPool, s.vPool), s.a.Run(OpForward))

	// After Close.
	closed, err := s.d.NewArgs()
	must(t, err)
	closed.Close()
	if err := closed.KVAppend(s.kPool, s.vPool); !errors.Is(err, ErrArgsClosed) {
		t.Errorf("KVAppend after Close: %v", err)
	}
	if err := (*Args)(nil).KVAppend(s.kPool, s.vPool); !errors.Is(err, ErrArgsClosed) {
		t.Errorf("KVAppend on nil: %v", err)
	}

	// A dense descriptor fixes the new rows' length (batch x seq_q tokens): the library checks it.
	dd := mustDesc(t, 3, servHQ, servHKV, 2, 10, servD, WithPageSize(4))
	defer dd.Close()
	da, err := dd.NewArgs()
	must(t, err)
	defer da.Close()
	must(t, da.SetNewK(make([]float32, 3*2*servHKV*servD-1)), da.SetNewV(make([]float32, 3*2*servHKV*servD)),
		da.SetSeqLensK([]int32{2, 2, 2}), da.SetBlockTable(make([]int32, dd.RequiredLen(OperandBlockTable))))
	pool := make([]float32, 4*servHKV*servD)
	wantError(t, da.KVAppend(pool, pool[:len(pool):len(pool)]), StatusInvalidArgument,
		fmt.Sprintf("new_k has %d elements, needs at least %d", 3*2*servHKV*servD-1, 3*2*servHKV*servD))
	// an unpaged varlen pack takes its key positions from cu_seqlens_k
	vd := mustDesc(t, 3, servHQ, servHKV, 9, 66, servD, WithVarlen())
	defer vd.Close()
	va, err := vd.NewArgs()
	must(t, err)
	defer va.Close()
	cuK := append([]int32{}, s.p.cuK...)
	must(t, va.SetF32(OperandQ, s.p.q), va.SetF32(OperandK, s.p.k), va.SetF32(OperandV, s.p.v), va.SetCuSeqlensQ(cu),
		va.SetOutF32(OperandOut, s.out))
	wantError(t, va.Run(OpForward), StatusNullPointer, "cu_seqlens_k is NULL but ATTN_PARAM_VARLEN is 1")
	cuK[2] = 39
	must(t, va.SetCuSeqlensK(cuK))
	wantError(t, va.Run(OpForward), StatusInvalidArgument, "cu_seqlens_k must not decrease: cu_seqlens_k[1] = 40 > cu_seqlens_k[2] = 39")
	cuK[2] = 47
	must(t, va.Run(OpForward))
	must(t, va.SetSeqLensK(s.lens))
	wantError(t, va.Run(OpForward), StatusInvalidArgument, "seq_lens_k is bound but a varlen batch takes its key lengths from cu_seqlens_k")

	// The parameters: the library's range checks, naming the parameter and the value.
	for _, c := range []struct {
		opt  Option
		want string
	}{
		{WithPageSize(-1), "ATTN_PARAM_PAGE_SIZE (-1) is outside [0, 2.14748365e+09]"},
		{WithPageSize(1 << 31), "ATTN_PARAM_PAGE_SIZE (2147483648) is outside [0, 2.14748365e+09]"},
		{WithMaxPages(-3), "ATTN_PARAM_MAX_PAGES (-3) is outside [0, 2.14748365e+09]"},
		{WithMaxPages(1 << 40), "ATTN_PARAM_MAX_PAGES (1099511627776) is outside [0, 2.14748365e+09]"},
		{WithParamInt(ParamVarlen, 2), "ATTN_PARAM_VARLEN (2) is outside [0, 1]"},
		{WithParamInt(ParamBatchInvariant, -1), "ATTN_PARAM_BATCH_INVARIANT (-1) is outside [0, 1]"},
		{WithParamFloat(ParamPageSize, 2.5), "ATTN_PARAM_PAGE_SIZE (2.5) must be an integer"},
		{WithParamFloat(ParamVarlen, math.NaN()), "ATTN_PARAM_VARLEN must not be NaN"},
	} {
		_, err := NewDesc(3, servHQ, servHKV, 9, 66, servD, c.opt)
		wantError(t, err, StatusInvalidArgument, "attn_desc_set_", c.want)
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
