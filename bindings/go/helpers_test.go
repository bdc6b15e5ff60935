package attn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// Helpers shared by the test files of this package: deterministic inputs, the comparisons and
// the expected-error check, the readers of tests/vectors, the operand kinds and storage types
// the vector runners use, and the serving fixtures (their sequences are the ones of
// tests/core/test_serving_merge.cpp's varlen merge case: q {5, 0, 9}, k {40, 7, 66}, GQA 4/2, d 24).

// pattern fills n floats deterministically from a seed, in [-1, 1).
func pattern(n, seed int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32((i*37+seed*101+13)%97)/48.5 - 1.0
	}
	return s
}

func close1e5(got float32, want float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(float64(got))
	}
	if math.IsInf(want, 0) {
		return float64(got) == want
	}
	return math.Abs(float64(got)-want) <= 1e-5*math.Max(1, math.Abs(want))
}

func wantError(t *testing.T, err error, status Status, msgParts ...string) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error with status %v containing %q, got nil", status, msgParts)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *attn.Error, got %T: %v", err, err)
	}
	if e.Status != status {
		t.Errorf("status = %d (%v), want %d (%v); message %q", int(e.Status), e.Status, int(status), status, e.Message)
	}
	if e.Message == "" {
		t.Errorf("empty message for status %v", e.Status)
	}
	for _, p := range msgParts {
		if !strings.Contains(e.Message, p) {
			t.Errorf("message %q does not contain %q", e.Message, p)
		}
	}
	if !strings.HasPrefix(err.Error(), "attn: ") || !strings.Contains(err.Error(), e.Message) {
		t.Errorf("Error() = %q does not carry the message %q", err.Error(), e.Message)
	}
	return e
}

func mustDesc(t testing.TB, b, hq, hkv, sq, sk, d int, opts ...Option) *Desc {
	t.Helper()
	desc, err := NewDesc(b, hq, hkv, sq, sk, d, opts...)
	if err != nil {
		t.Fatalf("NewDesc(%d,%d,%d,%d,%d,%d): %v", b, hq, hkv, sq, sk, d, err)
	}
	return desc
}

func vectorsDir() string {
	if dir := os.Getenv("ATTN_VECTORS_DIR"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "tests", "vectors")
}

// readRaw reads a little-endian vector file of n elements of size bytes each.
func readRaw(t *testing.T, path string, n, size int) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != size*n {
		t.Fatalf("%s: %d bytes, want %d elements of %d bytes", path, len(raw), n, size)
	}
	return raw
}

func readF32(t *testing.T, path string, n int) []float32 {
	raw, s := readRaw(t, path, n, 4), make([]float32, n)
	for i := range s {
		s[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return s
}

func readI32(t *testing.T, path string, n int) []int32 {
	raw, s := readRaw(t, path, n, 4), make([]int32, n)
	for i := range s {
		s[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return s
}

func readU16(t *testing.T, path string, n int) []uint16 {
	raw, s := readRaw(t, path, n, 2), make([]uint16, n)
	for i := range s {
		s[i] = binary.LittleEndian.Uint16(raw[2*i:])
	}
	return s
}

func readU8(t *testing.T, path string, n int) []bool {
	raw, s := readRaw(t, path, n, 1), make([]bool, n)
	for i, b := range raw {
		s[i] = b != 0
	}
	return s
}

func readI8(t *testing.T, path string, n int) []int8 {
	raw, s := readRaw(t, path, n, 1), make([]int8, n)
	for i, b := range raw {
		s[i] = int8(b)
	}
	return s
}

func f32Bytes(s []float32) []byte {
	raw := make([]byte, 4*len(s))
	for i, x := range s {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	return raw
}

// closeVariant is VARIANTS.md's check: within 1e-5 relative-or-absolute, an expected 0 exactly
// 0, an expected infinity exactly that infinity.
func closeVariant(got, want float32) bool { return closeWithin(got, want, 1e-5) }

// closeWithin is closeVariant with the tolerance tol. backward.txt's gradients (tol 1e-4) have
// no exact-zero rule: a gradient that cancels to 0 in exact arithmetic is about 1e-7 in float32.
func closeWithin(got, want float32, tol float64) bool {
	switch {
	case want == 0 && tol <= 1e-5:
		return got == 0
	case math.IsInf(float64(want), 0) || math.IsInf(float64(got), 0):
		return got == want
	case math.IsNaN(float64(want)) || math.IsNaN(float64(got)):
		return false
	}
	return math.Abs(float64(got)-float64(want)) <= tol*math.Max(1, math.Abs(float64(want)))
}

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

// forISAs runs f on every kernel this CPU supports (ISAs; the scalar one first), each selected
// with SetISA, then restores the default; it returns the names of those that ran.
func forISAs(t *testing.T, f func(isa string)) (ran []string) {
	t.Helper()
	defer func() {
		if err := SetISA(""); err != nil {
			t.Errorf("SetISA(\"\"): %v", err)
		}
	}()
	for _, isa := range ISAs() {
		if !isa.Supported {
			continue // this CPU or build lacks it (TestISAs: SetISA refuses it)
		}
		if err := SetISA(isa.Name); err != nil {
			t.Fatalf("SetISA(%q): %v", isa.Name, err)
		}
		if ISA() != isa.Name {
			t.Fatalf("after SetISA(%q), ISA() = %q", isa.Name, ISA())
		}
		f(isa.Name)
		ran = append(ran, isa.Name)
	}
	if len(ran) == 0 || ran[0] != "scalar" {
		t.Fatalf("the scalar kernel did not run (ran %v)", ran)
	}
	return ran
}

// cumulative returns the prefix sums [len(n)+1] of n.
func cumulative(n []int) []int32 {
	cu := make([]int32, len(n)+1)
	for b, x := range n {
		cu[b+1] = cu[b] + int32(x)
	}
	return cu
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

// Test-side names for what the face does not keep: the tests read operand kinds and storage
// types to drive the shared vectors. The kinds come from the library (attn_operand_info), not
// from a table of the face.
type storage int8

const (
	storeF32 storage = iota
	storeF16
	storeBF16
	storeI8
)

var (
	numOperands = Operand(len(operandNames))
	numParams   = Param(len(paramNames))
	numStored   = numOperands
)

type kind int8

const (
	kindF32In kind = iota
	kindF32Out
	kindMask
	kindI32
)

// operandKinds: how the library's operand table (attn_operand_info) says each operand is bound
// as float32 or its one other type: a float32 input, a float32 output, a byte mask or int32.
var operandKinds = func() (k []kind) {
	for o := Operand(0); o < numOperands; o++ {
		var in, out uint32
		if capi.Attn_operand_info(capi.Enum_SS_attn_operand(o), nil, &in, &out, nil, nil) != 0 {
			panic("attn_operand_info")
		}
		switch {
		case in&(1<<dtF32) != 0:
			k = append(k, kindF32In)
		case out&(1<<dtF32) != 0:
			k = append(k, kindF32Out)
		case in&(1<<dtU8) != 0:
			k = append(k, kindMask)
		default:
			k = append(k, kindI32)
		}
	}
	return k
}()

// cName is the C enumerator the library's messages use ("ATTN_PARAM_WINDOW_LEFT").
func (p Param) cName() string { return "ATTN_PARAM_" + strings.ToUpper(p.String()) }

// enumMsg is the message expected for an enum argument: the library's verdict (lib) for a value
// that fits C's int, the face's for one that does not (C never sees it).
func enumMsg(name string, v int, lib string) string {
	if int(int32(v)) != v {
		return fmt.Sprintf("%s (%d) does not fit a C int", name, v)
	}
	return lib
}

// uniform draws n floats uniformly from [lo, hi).
func uniform(g *rand.Rand, n int, lo, hi float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = lo + (hi-lo)*g.Float32()
	}
	return s
}

// mustArgs is d.NewArgs, failing the test on an error.
func mustArgs(t *testing.T, d *Desc) *Args {
	t.Helper()
	a, err := d.NewArgs()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// minifloat is the value of a finite IEEE-style code with ebits exponent and mbits mantissa bits
// and the sign above them (binary16: 5, 10; fp8 E4M3: 4, 3; E5M2: 5, 2), from the definition.
func minifloat(u uint32, ebits, mbits int) float64 {
	bias := 1<<(ebits-1) - 1
	e, m := int(u>>mbits)&(1<<ebits-1), float64(u&(1<<mbits-1))
	mag := math.Ldexp(m, 1-bias-mbits)
	if e != 0 {
		mag = math.Ldexp(float64(int(1)<<mbits)+m, e-bias-mbits)
	}
	if u>>(ebits+mbits)&1 != 0 {
		return -mag
	}
	return mag
}

// checkPagedDecode compares out ([b][hq][d], one query per sequence) with float64 attention
// over each sequence's lens[b] cached keys: key j of KV head h is row slot(b, j)*hkv + h, its
// element e val(false, row, e) for K and val(true, row, e) for V.
func checkPagedDecode(t *testing.T, label string, out, q []float32, lens []int32, hq, hkv, d int,
	slot func(b, j int) int, val func(v bool, r, e int) float64) {
	t.Helper()
	for b := range lens {
		for h := 0; h < hq; h++ {
			kvh := h / (hq / hkv)
			var kk, vv [][]float64
			for j := 0; j < int(lens[b]); j++ {
				r := slot(b, j)*hkv + kvh
				kr, vr := make([]float64, d), make([]float64, d)
				for e := 0; e < d; e++ {
					kr[e], vr[e] = val(false, r, e), val(true, r, e)
				}
				kk, vv = append(kk, kr), append(vv, vr)
			}
			qr := make([]float64, d)
			for e := range qr {
				qr[e] = float64(q[(b*hq+h)*d+e])
			}
			for e, w := range attend64(qr, kk, vv, 1/math.Sqrt(float64(d))) {
				if got := out[(b*hq+h)*d+e]; math.Abs(float64(got)-w) > 1e-5 {
					t.Fatalf("%s: out[%d][%d][%d] = %g, float64 %g", label, b, h, e, got, w)
				}
			}
		}
	}
}
