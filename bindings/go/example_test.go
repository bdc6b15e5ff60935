package attn_test

import (
	"fmt"

	attn "github.com/libattn/libattn/bindings/go"
)

// The original 3-token example: Q = 0, so each query averages the values it may see.
func ExampleSimple() {
	q := []float32{0, 0, 0}
	k := []float32{1, 2, 3}
	v := []float32{10, 20, 30}
	out, err := attn.Simple(q, k, v, 3, 1, true, nil) // n = 3, d = 1, causal
	if err != nil {
		panic(err)
	}
	fmt.Println(out)
	// Output: [10 15 20]
}

// The descriptor call: a padded batch of two sequences (the second has 2 real keys of 3), causal,
// with the log-sum-exp. Q = 0, so each query averages the values of the keys it may see, and
// its lse is log(number of visible keys).
func ExampleDesc_Forward() {
	desc, err := attn.NewDesc(2, 1, 1, 3, 3, 1, // batch, heads_q, heads_kv, seq_q, seq_k, head_dim
		attn.WithCausal(attn.CausalTopLeft))
	if err != nil {
		panic(err)
	}
	defer desc.Close()
	q := []float32{0, 0, 0, 0, 0, 0}
	k := []float32{1, 2, 3, 1, 2, 3}
	v := []float32{10, 20, 30, 10, 20, 30}
	keyValid := []bool{true, true, true, true, true, false} // [batch][seq_k]; key 2 of sequence 1 is padding
	out := make([]float32, desc.RequiredLen(attn.OperandOut))
	lse := make([]float32, desc.RequiredLen(attn.OperandLSE))
	if err := desc.Forward(q, k, v, keyValid, nil, out, lse); err != nil { // allowed = nil: no extra mask
		panic(err)
	}
	fmt.Println("out", out)
	fmt.Printf("lse %.4f\n", lse)

	weights := make([]float32, desc.RequiredLen(attn.OperandWeights)) // [batch][heads][seq_q][seq_k]
	if err := desc.Weights(q, k, keyValid, nil, weights); err != nil {
		panic(err)
	}
	fmt.Printf("weights of sequence 1 %.4f\n", weights[9:])

	// Lengths are checked before any pointer reaches C.
	fmt.Println(desc.Forward(q[:5], k, v, nil, nil, out, nil))
	// Output:
	// out [10 15 20 10 15 15]
	// lse [0.0000 0.6931 1.0986 0.0000 0.6931 0.6931]
	// weights of sequence 1 [1.0000 0.0000 0.0000 0.5000 0.5000 0.0000 0.5000 0.5000 0.0000]
	// attn: invalid argument: q has 5 elements, needs at least 6
}

// A descriptor with the 0.2 parameters; the getters read the values back from the library.
func ExampleNewDesc() {
	desc, err := attn.NewDesc(1, 8, 2, 16, 64, 64, // batch, heads_q, heads_kv (GQA), seq_q, seq_k, head_dim
		attn.WithCausal(attn.CausalBottomRight),
		attn.WithWindow(32, 0), // 32 keys to the left of the diagonal, none to the right
		attn.WithSoftcap(50),   // Gemma 2
		attn.WithAlibi(attn.AlibiStandard))
	if err != nil {
		panic(err)
	}
	defer desc.Close()
	left, right := desc.Window()
	fmt.Println(desc.Causal(), desc.Scale(), left, right, desc.Softcap(), desc.Alibi())
	fmt.Println("out needs", desc.RequiredLen(attn.OperandOut), "floats")

	// Out-of-range values are the library's errors, naming the value.
	_, err = attn.NewDesc(1, 1, 1, 4, 4, 8, attn.WithCausal(attn.Causal(7)))
	fmt.Println(err)
	// Output:
	// bottom-right 0.125 32 0 50 standard
	// out needs 8192 floats
	// attn: invalid argument: attn_desc_set_causal: causal (7) is not an attn_causal value (0 none, 1 top-left, 2 bottom-right)
}

// One decode step through the extensible call: a sliding window of 2 keys and the "+1"
// softmax (a sink logit of 0). Q = 0, so the two visible keys and the sink share the mass.
func ExampleArgs_Run() {
	desc, err := attn.NewDesc(1, 1, 1, 1, 4, 2, // one query, four cached keys, head_dim 2
		attn.WithCausal(attn.CausalBottomRight), attn.WithWindow(1, 0), attn.WithSoftmaxPlusOne())
	if err != nil {
		panic(err)
	}
	defer desc.Close()
	args, err := desc.NewArgs()
	if err != nil {
		panic(err)
	}
	defer args.Close()

	q := []float32{0, 0}
	k := []float32{1, 1, 2, 2, 3, 3, 4, 4}
	v := []float32{10, 1, 20, 2, 30, 3, 60, 6}
	out := make([]float32, desc.RequiredLen(attn.OperandOut))
	mass := make([]float32, desc.RequiredLen(attn.OperandKeyMass))
	weights := make([]float32, desc.RequiredLen(attn.OperandWeights))
	for _, err := range []error{
		args.SetF32(attn.OperandQ, q), args.SetF32(attn.OperandK, k), args.SetF32(attn.OperandV, v),
		args.SetOutF32(attn.OperandOut, out), args.SetOutF32(attn.OperandKeyMass, mass),
		args.Run(attn.OpForward),
		args.SetOutF32(attn.OperandWeights, weights),
		args.Run(attn.OpWeights),
	} {
		if err != nil {
			panic(err)
		}
	}
	fmt.Printf("weights %.4f\nout     %.4f\nmass    %.4f\n", weights, out, mass)

	// An empty (non-nil) slice is a length error; only nil means "not given".
	args.SetBool(attn.OperandKeyValid, []bool{})
	fmt.Println(args.Run(attn.OpForward))
	// Output:
	// weights [0.0000 0.0000 0.3333 0.3333]
	// out     [30.0000 3.0000]
	// mass    [0.0000 0.0000 0.3333 0.3333]
	// attn: invalid argument: attn_run: key_valid has 0 elements, needs at least 4
}

// The serving layouts: a varlen batch of two sequences over a paged K/V cache (pages of 2 tokens,
// a shuffled block table), filled by KVAppend. A prefill of 3 + 1 tokens, then a decode step of
// sequence 0 alone (sequence 1 adds nothing). Q = 0, so each query averages the values of the
// keys it may see (causal, bottom-right: each sequence's last query sees all its keys). The
// same Args serve the append and the attention call.
func ExampleArgs_KVAppend() {
	const pageSize, pages, headDim = 2, 4, 2
	desc, err := attn.NewDesc(2, 1, 1, 3, 4, headDim, // batch, heads_q, heads_kv, max new tokens, max keys, head_dim
		attn.WithVarlen(), attn.WithPageSize(pageSize), attn.WithCausal(attn.CausalBottomRight))
	if err != nil {
		panic(err)
	}
	defer desc.Close()
	args, err := desc.NewArgs()
	if err != nil {
		panic(err)
	}
	defer args.Close()

	kCache := make([]float32, pages*pageSize*headDim) // token-major pages [pages][pageSize][heads_kv][headDim]
	vCache := make([]float32, pages*pageSize*headDim)
	blockTable := []int32{
		2, 0, // sequence 0: keys 0-1 in page 2, keys 2-3 in page 0
		3, -1, // sequence 1: key 0 in page 3; slot 1 unused
	}
	step := func(cuSeqlensQ, seqLensK []int32, newK, newV []float32) {
		q := make([]float32, len(newK)) // one query per new token: [tokens][heads_q][headDim]
		out := make([]float32, len(newK))
		for _, err := range []error{
			args.SetCuSeqlensQ(cuSeqlensQ), args.SetSeqLensK(seqLensK), args.SetBlockTable(blockTable),
			args.SetNewK(newK), args.SetNewV(newV),
			args.KVAppend(kCache, vCache), // new rows to keys seq_lens_k[b] - n_b ..
			args.SetF32(attn.OperandQ, q), args.SetF32(attn.OperandK, kCache), args.SetF32(attn.OperandV, vCache),
			args.SetOutF32(attn.OperandOut, out),
			args.Run(attn.OpForward),
		} {
			if err != nil {
				panic(err)
			}
		}
		fmt.Println(out)
	}
	step([]int32{0, 3, 4}, []int32{3, 1}, // prefill: 3 tokens of sequence 0, 1 of sequence 1
		[]float32{1, 1, 2, 2, 3, 3, 9, 9}, []float32{10, 1, 20, 2, 30, 3, 50, 5})
	step([]int32{0, 1, 1}, []int32{4, 1}, // decode: one token of sequence 0
		[]float32{4, 4}, []float32{60, 6})

	// A block table naming a page the cache does not hold: the sequence and the slot.
	blockTable[1] = 7
	fmt.Println(args.Run(attn.OpForward))
	// Output:
	// [10 1 15 1.5 20 2 50 5]
	// [30 3]
	// attn: invalid argument: attn_run: block_table[0][1] (7) is not a page of the K/V buffers, which hold 4 pages
}

// A K/V cache in the storage types, filled with the converters: K as int8 with one scale per
// row (QuantizeI8), V as f16 (ConvertF32ToF16). The slices reach C without a copy; the result
// is float32 attention over the widened values. Q = 0, so the query averages the values.
func ExampleArgs_SetI8() {
	desc, err := attn.NewDesc(1, 1, 1, 1, 3, 2) // batch, heads_q, heads_kv, seq_q, seq_k, head_dim
	if err != nil {
		panic(err)
	}
	defer desc.Close()
	k := []float32{1, 2, 3, 4, 5, 6}         // [seq_k][head_dim]
	v := []float32{10, 20, 30, 40, 50, 60.5} // 60.5 is exact in f16
	k8 := make([]int8, desc.RequiredLen(attn.OperandK))
	kScale := make([]float32, desc.RequiredLen(attn.OperandKScale))        // one per (token, KV head)
	if err := attn.QuantizeI8(k8, kScale, k, len(kScale), 2); err != nil { // rows of head_dim
		panic(err)
	}
	v16 := make([]uint16, desc.RequiredLen(attn.OperandV))
	if err := attn.ConvertF32ToF16(v16, v); err != nil {
		panic(err)
	}
	fmt.Println("k8", k8)
	fmt.Printf("k_scale %.5f\n", kScale)
	fmt.Printf("v16 %#04x\n", v16[:2])

	args, err := desc.NewArgs()
	if err != nil {
		panic(err)
	}
	defer args.Close()
	out := make([]float32, desc.RequiredLen(attn.OperandOut))
	for _, err := range []error{
		args.SetF32(attn.OperandQ, []float32{0, 0}),
		args.SetI8(attn.OperandK, k8), args.SetKScale(kScale),
		args.SetF16(attn.OperandV, v16),
		args.SetOutF32(attn.OperandOut, out),
	} {
		if err != nil {
			panic(err)
		}
	}
	if err := args.Run(attn.OpForward); err != nil {
		panic(err)
	}
	fmt.Println("out", out)

	// int8 storage is for K and V (and new rows for them); an int8 K needs its scales.
	fmt.Println(args.SetI8(attn.OperandQ, []int8{0, 0}))
	args.SetKScale(nil)
	fmt.Println(args.Run(attn.OpForward))
	// Output:
	// k8 [64 127 95 127 106 127]
	// k_scale [0.01575 0.03150 0.04724]
	// v16 [0x4900 0x4d00]
	// out [30 40.166668]
	// attn: invalid argument: attn_args_set_i8: q cannot be bound with attn_args_set_i8 (int8 storage is for K, V, NEW_K and NEW_V)
	// attn: null pointer: attn_run: k_scale is NULL but k is int8
}

// The gradients: the forward writes out and lse, then Backward reads them with dout, the
// gradient of a loss with respect to out, and writes dq, dk, dv. Q = 0: both keys get weight
// 1/2, out = 20, and dv = w * dout.
func ExampleArgs_Backward() {
	desc, err := attn.NewDesc(1, 1, 1, 1, 2, 1) // one query, two keys, head_dim 1 (scale 1)
	if err != nil {
		panic(err)
	}
	defer desc.Close()
	args, err := desc.NewArgs()
	if err != nil {
		panic(err)
	}
	defer args.Close()
	q, k, v := []float32{0}, []float32{1, 2}, []float32{10, 30}
	out, lse := make([]float32, 1), make([]float32, 1)
	dout := []float32{1}
	dq, dk, dv := make([]float32, 1), make([]float32, 2), make([]float32, 2)
	for _, err := range []error{
		args.SetF32(attn.OperandQ, q), args.SetF32(attn.OperandK, k), args.SetF32(attn.OperandV, v),
		args.SetOutF32(attn.OperandOut, out), args.SetOutF32(attn.OperandLSE, lse),
	} {
		if err != nil {
			panic(err)
		}
	}
	if err := args.Run(attn.OpForward); err != nil {
		panic(err)
	}
	fmt.Println(args.Backward()) // nothing bound for the backward yet
	for _, err := range []error{
		args.SetF32(attn.OperandDOut, dout),
		args.SetOutF32(attn.OperandDQ, dq), args.SetOutF32(attn.OperandDK, dk), args.SetOutF32(attn.OperandDV, dv),
	} {
		if err != nil {
			panic(err)
		}
	}
	if err := args.Backward(); err != nil {
		panic(err)
	}
	fmt.Println("out", out, "dq", dq, "dk", dk, "dv", dv)

	// The same without an Args (the counterpart of Desc.Forward).
	dq2 := make([]float32, 1)
	if err := desc.Backward(q, k, v, nil, nil, out, lse, dout, dq2, nil, nil); err != nil {
		panic(err)
	}
	fmt.Println("dq", dq2)
	// Output:
	// attn: null pointer: attn_run: dout is NULL
	// out [20] dq [5] dk [0 0] dv [0.5 0.5]
	// dq [5]
}
