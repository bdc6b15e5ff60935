package attn

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Concurrency: many goroutines on one Desc (and their own Args), each checking its own results
// and its own error messages.

func TestConcurrentOneDesc(t *testing.T) {
	// Between a failing C call and the read of its message, yield: without the locked OS thread
	// the goroutine would then often resume on another thread and read someone else's message.
	testHookBeforeLastError = runtime.Gosched
	defer func() { testHookBeforeLastError = nil }()

	const goroutines, iters = 64, 40
	// The dimensions, masks and (for job 0) the data of the shared case combined_all: GQA 6/2,
	// bottom-right, key padding and an allowed mask.
	c := indexCaseByName(t, "combined_all")
	desc := mustDesc(t, c.b, c.hq, c.hkv, c.sq, c.sk, c.d, c.options(t)...)
	defer desc.Close()
	p := func(part string) string { return filepath.Join(vectorsDir(), c.name+"."+part) }

	// Per goroutine inputs, and expected results computed serially first.
	type job struct {
		q, k, v, out, lse []float32
		kv, allowed       []bool
	}
	jobs := make([]job, goroutines)
	for g := range jobs {
		j := job{q: pattern(desc.RequiredLen(OperandQ), 3*g), k: pattern(desc.RequiredLen(OperandK), 3*g+1),
			v: pattern(desc.RequiredLen(OperandV), 3*g+2), kv: make([]bool, desc.RequiredLen(OperandKeyValid)),
			out: make([]float32, desc.RequiredLen(OperandOut)), lse: make([]float32, desc.RequiredLen(OperandLSE))}
		for i := range j.kv {
			j.kv[i] = (i+g)%5 != 0
		}
		if g == 0 {
			j.q, j.k, j.v = readF32(t, p("q.f32"), len(j.q)), readF32(t, p("k.f32"), len(j.k)), readF32(t, p("v.f32"), len(j.v))
			j.kv = readU8(t, p("key_valid.u8"), len(j.kv))
			j.allowed = readU8(t, p("allowed.u8"), desc.RequiredLen(OperandAllowed))
		}
		if err := desc.Forward(j.q, j.k, j.v, j.kv, j.allowed, j.out, j.lse); err != nil {
			t.Fatal(err)
		}
		jobs[g] = j
	}
	// The serial results themselves are right: job 0 is the shared case.
	checkVec(t, "serial "+c.name, "out", jobs[0].out, readF32(t, p("out.f32"), len(jobs[0].out)))
	checkVec(t, "serial "+c.name, "lse", jobs[0].lse, readF32(t, p("lse.f32"), len(jobs[0].lse)))

	var wg sync.WaitGroup
	errs := make(chan string, goroutines*4)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			j := jobs[g]
			out := make([]float32, len(j.out))
			lse := make([]float32, len(j.lse))
			headsKV := g + 2
			headsQ := 2*headsKV + 1 // never a multiple: a message with this goroutine's numbers
			for it := 0; it < iters; it++ {
				for i := range out {
					out[i] = -1
				}
				if err := desc.Forward(j.q, j.k, j.v, j.kv, j.allowed, out, lse); err != nil {
					errs <- fmt.Sprintf("g%d: Forward: %v", g, err)
					return
				}
				for i := range out {
					if math.Float32bits(out[i]) != math.Float32bits(j.out[i]) {
						errs <- fmt.Sprintf("g%d it%d: out[%d] = %v, serial run gave %v", g, it, i, out[i], j.out[i])
						return
					}
				}
				for i := range lse {
					if math.Float32bits(lse[i]) != math.Float32bits(j.lse[i]) {
						errs <- fmt.Sprintf("g%d it%d: lse[%d] = %v, serial run gave %v", g, it, i, lse[i], j.lse[i])
						return
					}
				}
				_, err := NewDesc(1, headsQ, headsKV, 3, 3, 8)
				var e *Error
				if !errors.As(err, &e) || e.Status != StatusInvalidArgument ||
					!strings.Contains(e.Message, fmt.Sprintf("(%d)", headsQ)) ||
					!strings.Contains(e.Message, fmt.Sprintf("(%d)", headsKV)) {
					errs <- fmt.Sprintf("g%d it%d: NewDesc(heads_q=%d, heads_kv=%d) gave %v: not this call's message",
						g, it, headsQ, headsKV, err)
					return
				}
				// A failure on the shared Desc (Go-side) and one inside the library.
				err = desc.Forward(j.q, j.k, j.v[:g%len(j.v)], nil, nil, out, nil)
				if !errors.As(err, &e) || (g == 0 && !strings.Contains(e.Message, "v has 0 elements")) ||
					(g > 0 && !strings.Contains(e.Message, fmt.Sprintf("v has %d elements", g))) {
					errs <- fmt.Sprintf("g%d it%d: short v gave %v", g, it, err)
					return
				}
				err = desc.Forward(j.q, j.k, j.v, nil, nil, j.q, nil)
				if !errors.As(err, &e) || e.Status != StatusInvalidArgument ||
					strings.Contains(e.Message, "heads_q") {
					errs <- fmt.Sprintf("g%d it%d: out aliasing q gave %v", g, it, err)
					return
				}
			}
		}(g)
	}
	reportFirst(t, &wg, errs)
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
	reportFirst(t, &wg, errs)
}

// reportFirst waits for the goroutines of wg, then reports the first 10 messages they sent.
func reportFirst(t *testing.T, wg *sync.WaitGroup, errs chan string) {
	t.Helper()
	wg.Wait()
	close(errs)
	n := 0
	for msg := range errs {
		if n++; n <= 10 {
			t.Error(msg)
		}
	}
}
