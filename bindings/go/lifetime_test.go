package attn

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Object lifetime: every call after Close fails with ErrClosed / ErrArgsClosed, Close waits for
// calls in flight, and the finalizers free what was never closed.

func TestUseAfterClose(t *testing.T) {
	desc := mustDesc(t, 1, 1, 1, 2, 2, 2)
	x := []float32{1, 2, 3, 4}
	out := make([]float32, 4)
	if err := desc.Forward(x, x, x, nil, nil, out, nil); err != nil {
		t.Fatal(err)
	}
	if err := desc.Close(); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		desc.Forward(x, x, x, nil, nil, out, nil),
		desc.Weights(x, x, nil, nil, out),
		desc.Close(),
	} {
		e := wantError(t, err, StatusInvalidArgument, "desc is closed")
		if !errors.Is(err, ErrClosed) || e != ErrClosed {
			t.Errorf("%v is not ErrClosed", err)
		}
	}
	if n := desc.RequiredLen(OperandQ); n != 0 {
		t.Errorf("RequiredLen after Close = %d, want 0", n)
	}
	// A nil or zero Desc behaves as a closed one: an error, never a crash.
	var nilDesc *Desc
	var zero Desc
	for _, dd := range []*Desc{nilDesc, &zero} {
		if err := dd.Forward(x, x, x, nil, nil, out, nil); !errors.Is(err, ErrClosed) {
			t.Errorf("Forward on %p: %v, want ErrClosed", dd, err)
		}
		if err := dd.Weights(x, x, nil, nil, out); !errors.Is(err, ErrClosed) {
			t.Errorf("Weights on %p: %v, want ErrClosed", dd, err)
		}
		if err := dd.Close(); !errors.Is(err, ErrClosed) {
			t.Errorf("Close on %p: %v, want ErrClosed", dd, err)
		}
		if n := dd.RequiredLen(OperandQ); n != 0 {
			t.Errorf("RequiredLen on %p = %d", dd, n)
		}
	}
}

// Close while other goroutines are calling: every call either completes or gets ErrClosed.
func TestCloseWhileInFlight(t *testing.T) {
	const sq, sk, d = 16, 16, 32
	for round := 0; round < 20; round++ {
		desc := mustDesc(t, 1, 1, 1, sq, sk, d)
		q, k, v := pattern(sq*d, 1), pattern(sk*d, 2), pattern(sk*d, 3)
		var wg sync.WaitGroup
		var mu sync.Mutex
		okCalls, closedCalls := 0, 0
		start := make(chan struct{})
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out := make([]float32, sq*d)
				<-start
				for i := 0; i < 50; i++ {
					err := desc.Forward(q, k, v, nil, nil, out, nil)
					mu.Lock()
					if err == nil {
						okCalls++
					} else if errors.Is(err, ErrClosed) {
						closedCalls++
					} else {
						t.Errorf("unexpected error: %v", err)
					}
					mu.Unlock()
				}
			}()
		}
		close(start)
		runtime.Gosched()
		if err := desc.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if okCalls+closedCalls != 16*50 {
			t.Fatalf("round %d: %d ok + %d closed != %d", round, okCalls, closedCalls, 16*50)
		}
		if err := desc.Forward(q, k, v, nil, nil, make([]float32, sq*d), nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
	}
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
