package attn

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// Args, the per-call operands of the 0.2 call: masks as []bool or []byte, slice prefixes, and
// every argument check (wrong setter, length, closed objects) with the library's message.

func TestArgsErrors(t *testing.T) {
	const b, hq, hkv, sq, sk, dd = 2, 2, 1, 3, 4, 4
	d := mustDesc(t, b, hq, hkv, sq, sk, dd, WithAlibi(AlibiOperand))
	defer d.Close()
	a, err := d.NewArgs()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	q, k, v := pattern(d.RequiredLen(OperandQ), 1), pattern(d.RequiredLen(OperandK), 2), pattern(d.RequiredLen(OperandV), 3)
	out := make([]float32, d.RequiredLen(OperandOut))
	slopes := []float32{0.5, 0.25}

	// Wrong setter for the operand's kind.
	wantError(t, a.SetF32(OperandOut, out), StatusInvalidArgument, "attn_args_set_f32: out is bound with attn_args_set_out_f32, not attn_args_set_f32")
	wantError(t, a.SetOutF32(OperandQ, q), StatusInvalidArgument, "q is bound with attn_args_set_f32, not attn_args_set_out_f32")
	wantError(t, a.SetF32(OperandKeyValid, q), StatusInvalidArgument, "key_valid is bound with attn_args_set_u8")
	wantError(t, a.SetBool(OperandSeqLensK, []bool{true, true}), StatusInvalidArgument, "seq_lens_k is bound with attn_args_set_i32")
	wantError(t, a.SetI32(OperandSinks, []int32{1, 2}), StatusInvalidArgument, "sinks is bound with attn_args_set_f32")

	// Short and empty (non-nil) slices: the library's length errors naming the operand, in Run.
	weights := make([]float32, d.RequiredLen(OperandWeights))
	for _, c := range []struct {
		set  func(a *Args) error
		want string
	}{
		{func(a *Args) error { return a.SetF32(OperandQ, q[:47]) }, "q has 47 elements, needs at least 48"},
		{func(a *Args) error { return a.SetF32(OperandQ, []float32{}) }, "q has 0 elements, needs at least 48"},
		{func(a *Args) error { return a.SetF32(OperandBias, []float32{}) }, "bias has 0 elements, needs at least 48"},
		{func(a *Args) error { return a.SetF32(OperandBias, make([]float32, 47)) }, "bias has 47 elements, needs at least 48"},
		{func(a *Args) error { return a.SetF32(OperandAlibiSlopes, slopes[:1]) }, "alibi_slopes has 1 elements, needs at least 2"},
		{func(a *Args) error { return a.SetF32(OperandSinks, []float32{}) }, "sinks has 0 elements, needs at least 2"},
		{func(a *Args) error { return a.SetBool(OperandKeyValid, []bool{}) }, "key_valid has 0 elements, needs at least 8"},
		{func(a *Args) error { return a.SetU8(OperandAllowed, make([]byte, 11)) }, "allowed has 11 elements, needs at least 12"},
		{func(a *Args) error { return a.SetBool(OperandQueryValid, make([]bool, 5)) }, "query_valid has 5 elements, needs at least 6"},
		{func(a *Args) error { return a.SetI32(OperandSeqLensK, []int32{}) }, "seq_lens_k has 0 elements, needs at least 2"},
		{func(a *Args) error { return a.SetOutF32(OperandOut, out[:1]) }, "out has 1 elements, needs at least 48"},
		{func(a *Args) error { return a.SetOutF32(OperandLSE, []float32{}) }, "lse has 0 elements, needs at least 12"},
		{func(a *Args) error { return a.SetOutF32(OperandKeyMass, make([]float32, 15)) }, "key_mass has 15 elements, needs at least 16"},
		{func(a *Args) error { return a.SetOutF32(OperandOut, nil) }, "out is NULL"},
	} {
		a2, err := d.NewArgs()
		if err != nil {
			t.Fatal(err)
		}
		must(t, a2.SetF32(OperandQ, q), a2.SetF32(OperandK, k), a2.SetF32(OperandV, v),
			a2.SetOutF32(OperandOut, out), a2.SetF32(OperandAlibiSlopes, slopes), c.set(a2))
		wantError(t, a2.Run(OpForward), map[bool]Status{true: StatusNullPointer, false: StatusInvalidArgument}[strings.HasSuffix(c.want, "NULL")], c.want)
		a2.Close()
	}
	must(t, a.SetF32(OperandQ, q), a.SetF32(OperandK, k), a.SetOutF32(OperandWeights, weights[:47]))
	wantError(t, a.Run(OpWeights), StatusInvalidArgument, "weights has 47 elements, needs at least 48")
	must(t, a.Clear())
	// Nothing bound: the library names the first missing required operand.
	wantError(t, a.Run(OpForward), StatusNullPointer, "attn_run: q is NULL")
	for _, err := range []error{a.SetF32(OperandQ, q), a.SetF32(OperandK, k)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	wantError(t, a.Run(OpForward), StatusNullPointer, "v is NULL")
	wantError(t, a.Run(OpWeights), StatusNullPointer, "weights is NULL")
	if err := a.SetF32(OperandV, v); err != nil {
		t.Fatal(err)
	}
	wantError(t, a.Run(OpForward), StatusNullPointer, "out is NULL")
	if err := a.SetOutF32(OperandOut, out); err != nil {
		t.Fatal(err)
	}
	wantError(t, a.Run(OpForward), StatusNullPointer, "alibi_slopes is NULL")
	if err := a.SetF32(OperandAlibiSlopes, append(slopes, 9)); err != nil { // longer: fine
		t.Fatal(err)
	}
	if err := a.Run(OpForward); err != nil {
		t.Fatal(err)
	}
	// Values the library refuses.
	if err := a.SetI32(OperandSeqLensK, []int32{4, 5}); err != nil {
		t.Fatal(err)
	}
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "seq_lens_k[1] (5) is outside [0, seq_k = 4]")
	if err := a.SetI32(OperandSeqLensK, []int32{-1, 0}); err != nil {
		t.Fatal(err)
	}
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "seq_lens_k[0] (-1)")
	if err := a.SetI32(OperandSeqLensK, nil); err != nil { // nil unbinds
		t.Fatal(err)
	}
	// Aliasing outputs: the library's error and message.
	if err := a.SetOutF32(OperandOut, q); err != nil {
		t.Fatal(err)
	}
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "out overlaps q")
	lse := make([]float32, 64)
	if err := a.SetOutF32(OperandOut, lse); err != nil {
		t.Fatal(err)
	}
	if err := a.SetOutF32(OperandLSE, lse[40:]); err != nil {
		t.Fatal(err)
	}
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "overlaps")
	if err := a.SetOutF32(OperandLSE, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.SetF32(OperandK, q); err != nil { // inputs may share memory
		t.Fatal(err)
	}
	if err := a.Run(OpForward); err != nil {
		t.Fatalf("inputs sharing memory: %v", err)
	}
	// Sinks with the "+1" softmax.
	p1 := mustDesc(t, 1, 1, 1, 2, 2, 2, WithSoftmaxPlusOne())
	defer p1.Close()
	a1, err := p1.NewArgs()
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{1, 2, 3, 4}
	for _, err := range []error{a1.SetF32(OperandQ, x), a1.SetF32(OperandK, x), a1.SetF32(OperandV, x),
		a1.SetOutF32(OperandOut, make([]float32, 4)), a1.SetF32(OperandSinks, []float32{0})} {
		if err != nil {
			t.Fatal(err)
		}
	}
	wantError(t, a1.Run(OpForward), StatusInvalidArgument, "sinks cannot be combined with ATTN_PARAM_SOFTMAX_PLUS_ONE")
	// Clear forgets everything.
	if err := a1.Clear(); err != nil {
		t.Fatal(err)
	}
	wantError(t, a1.Run(OpForward), StatusNullPointer, "q is NULL")
	a1.Close()

	// Use after Close, of the Args and of its Desc.
	for _, err := range []error{a1.Run(OpForward), a1.SetF32(OperandQ, x), a1.SetOutF32(OperandOut, x),
		a1.SetBool(OperandKeyValid, nil), a1.SetU8(OperandKeyValid, nil), a1.SetI32(OperandSeqLensK, nil),
		a1.Clear(), a1.Close()} {
		if e := wantError(t, err, StatusInvalidArgument, "args is closed"); e != ErrArgsClosed {
			t.Errorf("%v is not ErrArgsClosed", err)
		}
	}
	var nilArgs *Args
	var zero Args
	for _, aa := range []*Args{nilArgs, &zero} {
		if err := aa.Run(OpForward); !errors.Is(err, ErrArgsClosed) {
			t.Errorf("Run on %p: %v", aa, err)
		}
		if err := aa.SetF32(OperandQ, x); !errors.Is(err, ErrArgsClosed) {
			t.Errorf("SetF32 on %p: %v", aa, err)
		}
		if err := aa.Close(); !errors.Is(err, ErrArgsClosed) {
			t.Errorf("Close on %p: %v", aa, err)
		}
	}
	d2 := mustDesc(t, 1, 1, 1, 2, 2, 2)
	a2, err := d2.NewArgs()
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	if a2.Desc() != d2 {
		t.Errorf("Args.Desc() is not the Desc")
	}
	d2.Close()
	if err := a2.Run(OpForward); err != ErrClosed {
		t.Errorf("Run after the Desc's Close: %v, want ErrClosed", err)
	}
	if err := a2.SetF32(OperandQ, x); err != ErrClosed {
		t.Errorf("SetF32 after the Desc's Close: %v, want ErrClosed", err)
	}
	if _, err := d2.NewArgs(); err != ErrClosed {
		t.Errorf("NewArgs after Close: %v", err)
	}
	var nilDesc *Desc
	if _, err := nilDesc.NewArgs(); err != ErrClosed {
		t.Errorf("NewArgs on nil: %v", err)
	}
}

// []bool and []byte masks mean the same; any nonzero byte is true; longer slices use their
// prefix. On the shared case combined_all (GQA, bottom-right, key padding and an allowed mask).
func TestArgsMasksAndPrefix(t *testing.T) {
	c := indexCaseByName(t, "combined_all")
	if !c.keyValid || !c.allowed || c.causal != int(CausalBottomRight) {
		t.Fatalf("combined_all is not a bottom-right case with both masks")
	}
	d := mustDesc(t, c.b, c.hq, c.hkv, c.sq, c.sk, c.d, c.options(t)...)
	defer d.Close()
	p := func(part string) string { return filepath.Join(vectorsDir(), c.name+"."+part) }
	q, k, v := readF32(t, p("q.f32"), d.RequiredLen(OperandQ)), readF32(t, p("k.f32"), d.RequiredLen(OperandK)),
		readF32(t, p("v.f32"), d.RequiredLen(OperandV))
	kvBool := readU8(t, p("key_valid.u8"), d.RequiredLen(OperandKeyValid))
	allowed := readU8(t, p("allowed.u8"), d.RequiredLen(OperandAllowed))
	wantOut := readF32(t, p("out.f32"), d.RequiredLen(OperandOut))
	kvByte := make([]byte, len(kvBool)+3) // longer than required: the tail is never read
	for i, x := range kvBool {
		if x {
			kvByte[i] = byte(1 + i*37%255) // any nonzero byte is true
		}
	}
	kvByte[len(kvBool)] = 0 // a tail that would hide keys if it were read
	var results [][]float32
	for _, setMask := range []func(a *Args) error{
		func(a *Args) error { return a.SetBool(OperandKeyValid, kvBool) },
		func(a *Args) error { return a.SetU8(OperandKeyValid, kvByte) },
	} {
		a, err := d.NewArgs()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, d.RequiredLen(OperandOut)+7)
		for i := range out {
			out[i] = -7
		}
		for _, err := range []error{setMask(a), a.SetBool(OperandAllowed, allowed), a.SetF32(OperandQ, append(q, 1, 2, 3)),
			a.SetF32(OperandK, k), a.SetF32(OperandV, v), a.SetOutF32(OperandOut, out), a.Run(OpForward)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		for i := d.RequiredLen(OperandOut); i < len(out); i++ {
			if out[i] != -7 {
				t.Fatalf("out[%d] = %v written past the required prefix", i, out[i])
			}
		}
		checkVec(t, "mask", "out", out[:d.RequiredLen(OperandOut)], wantOut)
		results = append(results, out)
		a.Close()
	}
	for i := range results[0] {
		if math.Float32bits(results[0][i]) != math.Float32bits(results[1][i]) {
			t.Fatalf("[]bool and []byte masks differ at %d", i)
		}
	}
	// Args.Run and the 0.1 Desc.Forward agree bit for bit.
	out := make([]float32, d.RequiredLen(OperandOut))
	if err := d.Forward(q, k, v, kvBool, allowed, out, nil); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if math.Float32bits(out[i]) != math.Float32bits(results[0][i]) {
			t.Fatalf("Forward and Args.Run differ at %d", i)
		}
	}
}
