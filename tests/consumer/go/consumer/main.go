// consumer_go: an outside program that uses the Go binding as a Go user does, built by
// tests/consumer/go/run_go_consumer.cmake against an installed libattn (pkg-config), a copy of the
// module and no swig. It runs the seed example through the simple call and the extensible call
// and prints one line; it exits 1 unless out[1][0] == 15 exactly in both.
package main

import (
	"fmt"
	"os"

	attn "github.com/libattn/libattn/bindings/go"
)

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "consumer_go: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	// Q = 0, K = [1 2 3], V = [10 20 30], n = 3, d = 1, causal: query 1 averages keys 0 and 1.
	q := []float32{0, 0, 0}
	k := []float32{1, 2, 3}
	v := []float32{10, 20, 30}
	out, err := attn.Simple(q, k, v, 3, 1, true, nil)
	if err != nil {
		fail("Simple: %v", err)
	}
	if out[1] != 15 {
		fail("Simple: out[1][0] = %v, want exactly 15 (out = %v)", out[1], out)
	}

	desc, err := attn.NewDesc(1, 1, 1, 3, 3, 1, attn.WithCausal(attn.CausalTopLeft))
	if err != nil {
		fail("NewDesc: %v", err)
	}
	defer desc.Close()
	args, err := desc.NewArgs()
	if err != nil {
		fail("NewArgs: %v", err)
	}
	defer args.Close()
	out2 := make([]float32, desc.RequiredLen(attn.OperandOut))
	for _, err := range []error{
		args.SetF32(attn.OperandQ, q), args.SetF32(attn.OperandK, k), args.SetF32(attn.OperandV, v),
		args.SetOutF32(attn.OperandOut, out2), args.Run(attn.OpForward),
	} {
		if err != nil {
			fail("Args.Run: %v", err)
		}
	}
	if out2[1] != 15 {
		fail("Args.Run: out[1][0] = %v, want exactly 15 (out = %v)", out2[1], out2)
	}
	fmt.Printf("consumer_go: libattn %s simple %v run %v out[1][0] = %v OK\n", attn.Version(), out, out2, out[1])
}
