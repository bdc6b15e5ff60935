// Go call benchmark for libattn, the counterpart of bench/c/call_bench.c (same shapes, inputs,
// calibration and loops), run by bench/bindings.sh next to the C reference.
//
// Prints exactly two lines:
//
//	lang=go shape=tiny ns_per_call=<x>    Desc.Forward, B=1, H=1, n=16,   d=64, non-causal
//	lang=go shape=large ns_per_call=<x>   Desc.Forward, B=1, H=1, n=2048, d=64, non-causal
//
// Each figure is the best (lowest) mean over several timed loops, after a warm-up. Threads and
// ISA are the library defaults (ATTN_NUM_THREADS / ATTN_ISA apply).
//
// Run: cd bench/go && PKG_CONFIG_PATH=<build>/go/pkgconfig go run .   (or `ninja -C <build> run_go_bench`)
package main

import (
	"fmt"
	"os"
	"time"

	attn "github.com/libattn/libattn/bindings/go"
)

// fill gives deterministic values in [-1, 1), the same sequence as the C bench.
func fill(x []float32, seed uint32) {
	s := seed*2654435761 + 12345
	for i := range x {
		s = s*1664525 + 1013904223
		x[i] = float32(s>>8)/float32(1<<23) - 1.0
	}
}

// benchShape returns the best ns per call of Forward over `loops` timed loops.
func benchShape(n, d int, targetLoop time.Duration, loops int) (float64, error) {
	desc, err := attn.NewDesc(1, 1, 1, n, n, d)
	if err != nil {
		return 0, err
	}
	defer desc.Close()
	q, k, v, out := make([]float32, n*d), make([]float32, n*d), make([]float32, n*d), make([]float32, n*d)
	fill(q, 1)
	fill(k, 2)
	fill(v, 3)

	// Warm-up (thread pool start, scratch allocation, caches) and calibration.
	calls := 1
	for {
		t0 := time.Now()
		for c := 0; c < calls; c++ {
			if err := desc.Forward(q, k, v, nil, nil, out, nil); err != nil {
				return 0, err
			}
		}
		dt := time.Since(t0)
		if dt >= targetLoop || calls >= 1<<30 {
			break
		}
		if dt > 0 && dt*4 < targetLoop {
			calls *= 4
		} else {
			calls *= 2
		}
	}

	best := -1.0
	for l := 0; l < loops; l++ {
		t0 := time.Now()
		for c := 0; c < calls; c++ {
			_ = desc.Forward(q, k, v, nil, nil, out, nil)
		}
		perCall := float64(time.Since(t0).Nanoseconds()) / float64(calls)
		if best < 0 || perCall < best {
			best = perCall
		}
	}
	if out[len(out)-1] != out[len(out)-1] { // NaN: the library misbehaved
		return 0, fmt.Errorf("NaN in the output")
	}
	return best, nil
}

func main() {
	tiny, err := benchShape(16, 64, 50*time.Millisecond, 7)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tiny:", err)
		os.Exit(1)
	}
	large, err := benchShape(2048, 64, 200*time.Millisecond, 5)
	if err != nil {
		fmt.Fprintln(os.Stderr, "large:", err)
		os.Exit(1)
	}
	fmt.Printf("lang=go shape=tiny ns_per_call=%.1f\n", tiny)
	fmt.Printf("lang=go shape=large ns_per_call=%.1f\n", large)
}
