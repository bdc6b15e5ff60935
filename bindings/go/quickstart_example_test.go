package attn_test

import (
	"fmt"

	attn "github.com/libattn/libattn/bindings/go"
)

// bindings/go/README.md's example: the seed call, a masked call, an error.
func Example_quickstart() {
	// Q = 0, so each query averages the values of the keys it may see (causal).
	out, err := attn.Simple([]float32{0, 0, 0}, []float32{1, 2, 3}, []float32{10, 20, 30}, 3, 1, true, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("out[1][0] =", out[1])

	// Two sequences in a cache of 4 keys (the second holds 3), 2 query heads sharing one KV
	// head, the last query aligned with the last key, a window of 1 key to the left.
	desc, err := attn.NewDesc(2, 2, 1, 4, 4, 1, // batch, heads_q, heads_kv, seq_q, seq_k, head_dim
		attn.WithCausal(attn.CausalBottomRight), attn.WithWindow(1, 0))
	if err != nil {
		panic(err)
	}
	defer desc.Close()
	args, err := desc.NewArgs()
	if err != nil {
		panic(err)
	}
	defer args.Close()
	q := make([]float32, desc.RequiredLen(attn.OperandQ))
	k := []float32{1, 2, 3, 4, 1, 2, 3, 4}
	v := []float32{10, 20, 30, 40, 10, 20, 30, 40}
	o := make([]float32, desc.RequiredLen(attn.OperandOut))
	for _, e := range []error{args.SetF32(attn.OperandQ, q), args.SetF32(attn.OperandK, k),
		args.SetF32(attn.OperandV, v), args.SetI32(attn.OperandSeqLensK, []int32{4, 3}),
		args.SetOutF32(attn.OperandOut, o), args.Run(attn.OpForward)} {
		if e != nil {
			panic(e)
		}
	}
	fmt.Println("last query:", o[3], "and", o[11])

	fmt.Println(desc.Forward(q[:3], k, v, nil, nil, o, nil))
	// Output:
	// out[1][0] = 15
	// last query: 35 and 25
	// attn: invalid argument: q has 3 elements, needs at least 16
}
