// libattn demo in Go: the same program as examples/c/demo.c, printing the same text.
//
//  1. The original 3-token example: Q all zero, so every visible key gets the same weight;
//     causal, so query i sees keys 0..i. out[1][0] = (10 + 20) / 2 = 15.
//  2. A batch of three sequences of lengths 5, 3 and 4, padded to 5: padding keys get weight 0
//     from every query, on top of the causal rule.
//
// Run (from the repository root, after building the library into build/):
//
//	cd examples/go && PKG_CONFIG_PATH=$PWD/../../build/go/pkgconfig go run .
//
// (with libattn installed where pkg-config finds it, plain `go run .`), or
// `ninja -C build attn_go_demo`. It exits with status 1 unless out[1][0] == 15.
package main

import (
	"fmt"
	"io"
	"os"

	attn "github.com/libattn/libattn/bindings/go"
)

// value gives deterministic demo values in [-1, 1].
func value(b, i, d, salt int) float32 {
	return float32((b*131+i*17+d*7+salt)%23)/11.0 - 1.0
}

// printWeights prints a weight table: rows = queries, columns = keys; "." marks a hidden key
// (weight exactly 0), "*" a padding key.
func printWeights(w io.Writer, wt []float32, rows, cols int, keyValid []bool) {
	fmt.Fprintf(w, "        ")
	for j := 0; j < cols; j++ {
		mark := " "
		if keyValid != nil && !keyValid[j] {
			mark = "*"
		}
		fmt.Fprintf(w, "  key%d%s", j, mark)
	}
	fmt.Fprintf(w, "\n")
	for i := 0; i < rows; i++ {
		fmt.Fprintf(w, "  q%-4d", i)
		for j := 0; j < cols; j++ {
			if x := wt[i*cols+j]; x == 0 {
				fmt.Fprintf(w, "  %6s", ".")
			} else {
				fmt.Fprintf(w, "  %6.4f", x)
			}
		}
		fmt.Fprintf(w, "\n")
	}
}

// run prints the demo to w; it fails unless out[1][0] == 15.
func run(w io.Writer) error {
	fmt.Fprintf(w, "libattn %s  (kernel: %s, threads: %d)\n\n", attn.Version(), attn.ISA(), attn.NumThreads())

	// ---- 1. The seed example: attention(Q, K, V, causal=True) ----
	{
		q, k, v := []float32{0, 0, 0}, []float32{1, 2, 3}, []float32{10, 20, 30}
		out, err := attn.Simple(q, k, v, 3, 1, true, nil)
		if err != nil {
			return err
		}
		desc, err := attn.NewDesc(1, 1, 1, 3, 3, 1, attn.WithCausal(attn.CausalTopLeft))
		if err != nil {
			return err
		}
		wt := make([]float32, desc.RequiredLen(attn.OperandWeights))
		err = desc.Weights(q, k, nil, nil, wt)
		desc.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "1. Three tokens, Q = 0, V = [10, 20, 30], causal\n")
		fmt.Fprintf(w, "   weights (rows = queries, columns = keys, . = masked):\n")
		printWeights(w, wt, 3, 3, nil)
		fmt.Fprintf(w, "   out = [%g, %g, %g]   (out[1][0] = %g: the mean of V[0] and V[1])\n\n",
			out[0], out[1], out[2], out[1])
		if out[1] != 15 {
			return fmt.Errorf("out[1][0] = %g, want 15", out[1])
		}
	}

	// ---- 2. A padded batch: lengths 5, 3, 4 padded to 5, causal ----
	{
		const B, S, D = 3, 5, 4
		lengths := [B]int{5, 3, 4}
		q, k, v := make([]float32, B*S*D), make([]float32, B*S*D), make([]float32, B*S*D)
		keyValid := make([]bool, B*S)
		for b := 0; b < B; b++ {
			for i := 0; i < S; i++ {
				keyValid[b*S+i] = i < lengths[b]
				for d := 0; d < D; d++ {
					q[(b*S+i)*D+d] = value(b, i, d, 0)
					k[(b*S+i)*D+d] = value(b, i, d, 5)
					v[(b*S+i)*D+d] = value(b, i, d, 11)
				}
			}
		}
		desc, err := attn.NewDesc(B, 1, 1, S, S, D, attn.WithCausal(attn.CausalTopLeft))
		if err != nil {
			return err
		}
		defer desc.Close()
		out := make([]float32, desc.RequiredLen(attn.OperandOut))
		wt := make([]float32, desc.RequiredLen(attn.OperandWeights))
		if err := desc.Forward(q, k, v, keyValid, nil, out, nil); err != nil {
			return err
		}
		if err := desc.Weights(q, k, keyValid, nil, wt); err != nil {
			return err
		}
		fmt.Fprintf(w, "2. Batch of 3 sequences (lengths 5, 3, 4) padded to 5, causal; * = padding key\n")
		for b := 0; b < B; b++ {
			fmt.Fprintf(w, "   sequence %d (length %d):\n", b, lengths[b])
			printWeights(w, wt[b*S*S:], S, S, keyValid[b*S:])
			fmt.Fprintf(w, "   out:\n")
			for i := 0; i < S; i++ {
				fmt.Fprintf(w, "  q%-4d", i)
				for d := 0; d < D; d++ {
					fmt.Fprintf(w, "  %8.5f", out[(b*S+i)*D+d])
				}
				fmt.Fprintf(w, "\n")
			}
		}
	}
	fmt.Fprintf(w, "\nkernel: %s, threads: %d\n", attn.ISA(), attn.NumThreads())
	return nil
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
