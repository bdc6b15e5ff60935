package attn

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"
)

// The storage types (SetF16 / SetBF16 / SetI8, the conversion helpers) and the backward
// (Args.Backward, Desc.Backward) beyond the shared vectors: errors named by operand, rounding
// of the converters, zero copy, zero allocations, and agreement with float32 attention over the
// widened values.

func TestStorageSetterErrors(t *testing.T) {
	const b, hq, hkv, sq, sk, dd = 2, 4, 2, 3, 5, 8
	d := mustDesc(t, b, hq, hkv, sq, sk, dd)
	defer d.Close()
	a := mustArgs(t, d)
	defer a.Close()
	nq, nk := d.RequiredLen(OperandQ), d.RequiredLen(OperandK)

	// Lengths: as for float32, in elements, checked by the library in Run; empty non-nil is a
	// length error.
	for _, c := range []struct {
		set  func(a *Args) error
		want string
	}{
		{func(a *Args) error { return a.SetF16(OperandQ, make([]uint16, nq-1)) }, "q has 191 elements, needs at least 192"},
		{func(a *Args) error { return a.SetBF16(OperandK, []uint16{}) }, "k has 0 elements, needs at least 160"},
		{func(a *Args) error {
			return firstErr(a.SetI8(OperandV, make([]int8, nk-1)), a.SetVScale(make([]float32, d.RequiredLen(OperandVScale))))
		}, "v has 159 elements, needs at least 160"},
		{func(a *Args) error {
			return firstErr(a.SetI8(OperandK, make([]int8, nk)), a.SetKScale(make([]float32, d.RequiredLen(OperandKScale)-1)))
		}, "k_scale has 19 elements, needs at least 20"},
	} {
		a2 := mustArgs(t, d)
		must(t, a2.SetF32(OperandQ, make([]float32, nq)), a2.SetF32(OperandK, make([]float32, nk)),
			a2.SetF32(OperandV, make([]float32, nk)), a2.SetOutF32(OperandOut, make([]float32, d.RequiredLen(OperandOut))),
			c.set(a2))
		wantError(t, a2.Run(OpForward), StatusInvalidArgument, c.want)
		a2.Close()
	}
	if d.RequiredLen(OperandKScale) != b*hkv*sk || d.RequiredLen(OperandVScale) != b*hkv*sk {
		t.Errorf("RequiredLen(k_scale, v_scale) = %d, %d, want %d", d.RequiredLen(OperandKScale),
			d.RequiredLen(OperandVScale), b*hkv*sk)
	}

	// Operands: 16 bits for Q, K, V, DOut, NewK, NewV; int8 for K, V, NewK, NewV; the message
	// names the operand.
	wantError(t, a.SetI8(OperandQ, make([]int8, nq)), StatusInvalidArgument,
		"attn_args_set_i8: q cannot be bound with attn_args_set_i8 (int8 storage is for K, V, NEW_K and NEW_V)")
	wantError(t, a.SetF16(OperandBias, make([]uint16, 1000)), StatusInvalidArgument,
		"bias cannot be bound with attn_args_set_f16 (16-bit storage is for Q, K, V, DOUT, NEW_K and NEW_V)")
	wantError(t, a.SetBF16(OperandOut, make([]uint16, 1000)), StatusInvalidArgument, "out cannot be bound with attn_args_set_bf16")
	wantError(t, a.SetI8(OperandKScale, make([]int8, 1000)), StatusInvalidArgument, "k_scale cannot be bound with attn_args_set_i8")
	for _, o := range []Operand{-1, 255, 1 << 32} {
		wantError(t, a.SetF16(o, []uint16{1}), StatusInvalidArgument, enumMsg("which", int(o), "is not an attn_operand"))
		wantError(t, a.SetI8(o, []int8{1}), StatusInvalidArgument, enumMsg("which", int(o), "is not an attn_operand"))
	}
	// The gradients and scales have their kinds.
	wantError(t, a.SetF32(OperandDQ, make([]float32, nq)), StatusInvalidArgument, "dq is bound with attn_args_set_out_f32, not attn_args_set_f32")
	wantError(t, a.SetOutF32(OperandDOut, make([]float32, nq)), StatusInvalidArgument, "dout is bound with attn_args_set_f32, not attn_args_set_out_f32")
	wantError(t, a.SetOutF32(OperandSinks, make([]float32, 20)), StatusInvalidArgument, "sinks is bound with attn_args_set_f32")

	// Strides: the scales take them, the gradients take their counterparts'.
	if ds, err := NewDesc(b, hq, hkv, sq, sk, dd, WithStrides(OperandKScale, 2*sk*hkv, 1, hkv),
		WithStrides(OperandVScale, 0, sk, 1)); err != nil {
		t.Errorf("WithStrides(k_scale / v_scale): %v", err)
	} else {
		must(t, ds.Close())
	}
	_, err := NewDesc(b, hq, hkv, sq, sk, dd, WithStrides(OperandDQ, 96, 24, 8))
	wantError(t, err, StatusInvalidArgument, "which (20) must be ATTN_Q, ATTN_K, ATTN_V, ATTN_OUT or ATTN_BIAS (or the int8 scales ATTN_K_SCALE, ATTN_V_SCALE, or ATTN_ALIBI_SLOPES)")
	ds := mustDesc(t, b, hq, hkv, sq, sk, dd, WithStrides(OperandKScale, 40, 1, 4))
	if n := ds.RequiredLen(OperandKScale); n != (b-1)*40+(hkv-1)*1+(sk-1)*4+1 {
		t.Errorf("RequiredLen(k_scale) with strides (40, 1, 4) = %d, want 58", n)
	}
	must(t, ds.Close())

	// int8 K without its scale, a scale without int8: the library's errors, naming the scale.
	q, k, v := make([]float32, nq), make([]float32, nk), make([]float32, nk)
	out, lse := make([]float32, d.RequiredLen(OperandOut)), make([]float32, d.RequiredLen(OperandLSE))
	must(t, a.SetF32(OperandQ, q), a.SetI8(OperandK, make([]int8, nk)), a.SetF32(OperandV, v),
		a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse))
	wantError(t, a.Run(OpForward), StatusNullPointer, "k_scale is NULL but k is int8")
	must(t, a.SetKScale(make([]float32, d.RequiredLen(OperandKScale))))
	must(t, a.Run(OpForward))
	must(t, a.SetF32(OperandK, k)) // replaces the int8 K: its scale is now refused
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "k_scale is bound but k is not int8")
	must(t, a.SetKScale(nil))
	must(t, a.Run(OpForward))
	must(t, a.SetI8(OperandV, make([]int8, nk)))
	wantError(t, a.Run(OpForward), StatusNullPointer, "v_scale is NULL but v is int8")
	// nil unbinds the operand whatever setter bound it.
	must(t, a.SetF16(OperandV, nil))
	wantError(t, a.Run(OpForward), StatusNullPointer, "attn_run: v is NULL")
	must(t, a.SetBF16(OperandV, make([]uint16, nk)), a.SetF32(OperandQ, nil))
	wantError(t, a.Run(OpForward), StatusNullPointer, "attn_run: q is NULL")
	must(t, a.SetF16(OperandQ, make([]uint16, nq)), a.Clear())
	wantError(t, a.Run(OpForward), StatusNullPointer, "attn_run: q is NULL")
}

func TestBackwardErrors(t *testing.T) {
	const b, hq, hkv, sq, sk, dd = 1, 2, 1, 3, 4, 4
	d := mustDesc(t, b, hq, hkv, sq, sk, dd)
	defer d.Close()
	a := mustArgs(t, d)
	defer a.Close()
	g := rand.New(rand.NewSource(3))
	nq, nk := d.RequiredLen(OperandQ), d.RequiredLen(OperandK)
	q, k, v := uniform(g, nq, -1, 1), uniform(g, nk, -1, 1), uniform(g, nk, -1, 1)
	out, lse := make([]float32, d.RequiredLen(OperandOut)), make([]float32, d.RequiredLen(OperandLSE))
	dout, dq := uniform(g, d.RequiredLen(OperandDOut), -1, 1), make([]float32, d.RequiredLen(OperandDQ))
	must(t, a.SetF32(OperandQ, q), a.SetF32(OperandK, k), a.SetF32(OperandV, v),
		a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse))
	must(t, a.Run(OpForward))
	wantError(t, a.Backward(), StatusNullPointer, "attn_run: dout is NULL")
	must(t, a.SetF32(OperandDOut, dout))
	wantError(t, a.Backward(), StatusNullPointer, "nothing to compute: bind dq, dk, dv, dbias or dsinks")
	must(t, a.SetOutF32(OperandDQ, dq[:len(dq)-1]))
	wantError(t, a.Backward(), StatusInvalidArgument, "dq has 23 elements, needs at least 24")
	must(t, a.SetOutF32(OperandDQ, dq))
	must(t, a.Backward())
	must(t, a.SetOutF32(OperandDBias, make([]float32, d.RequiredLen(OperandDBias))))
	wantError(t, a.Backward(), StatusInvalidArgument, "dbias is bound but bias is not")
	must(t, a.SetOutF32(OperandDBias, nil))
	must(t, a.SetOutF32(OperandDSinks, make([]float32, d.RequiredLen(OperandDSinks))))
	wantError(t, a.Backward(), StatusInvalidArgument, "dsinks is bound but sinks is not")
	must(t, a.SetOutF32(OperandDSinks, nil))
	// The gradient overlapping an input: the library's aliasing rule.
	must(t, a.SetOutF32(OperandDQ, q))
	wantError(t, a.Backward(), StatusInvalidArgument, "dq overlaps")
	must(t, a.SetOutF32(OperandDQ, dq))
	// Storage types: the backward takes 16-bit Q, K, V and DOut, not int8 K / V.
	q16 := make([]uint16, nq)
	must(t, ConvertF32ToF16(q16, q), a.SetF16(OperandQ, q16), a.Backward())
	k8, ks := make([]int8, nk), make([]float32, nk/dd)
	must(t, QuantizeI8(k8, ks, k, nk/dd, dd), a.SetI8(OperandK, k8), a.SetF32(OperandKScale, ks))
	wantError(t, a.Backward(), StatusUnsupported, "ATTN_OP_BACKWARD needs fp32, f16 or bf16 k (it is int8)")
	must(t, a.SetF32(OperandKScale, nil), a.SetF32(OperandK, k), a.SetF32(OperandQ, q), a.Backward())

	// Desc.Backward: the library's checks, naming the slice.
	dk := make([]float32, d.RequiredLen(OperandDK))
	wantError(t, d.Backward(q, k, v, nil, nil, out, lse, nil, dq, nil, nil), StatusNullPointer, "attn_run: dout is NULL")
	wantError(t, d.Backward(q, k, v, nil, nil, out, nil, dout, dq, nil, nil), StatusNullPointer, "attn_run: lse is NULL")
	wantError(t, d.Backward(q, k, v, nil, nil, out, lse, dout, dq, dk[:3], nil), StatusInvalidArgument,
		"dk has 3 elements, needs at least 16")
	wantError(t, d.Backward(q, k, v, []bool{}, nil, out, lse, dout, dq, nil, nil), StatusInvalidArgument,
		"key_valid has 0 elements")
	wantError(t, d.Backward(q, k, v, nil, nil, out, lse, dout, nil, nil, nil), StatusNullPointer,
		"nothing to compute")
	must(t, d.Close())
	if err := d.Backward(q, k, v, nil, nil, out, lse, dout, dq, nil, nil); err != ErrClosed {
		t.Errorf("Backward after Close: %v, want ErrClosed", err)
	}
	if err := a.Backward(); err != ErrClosed {
		t.Errorf("Args.Backward after the Desc's Close: %v, want ErrClosed", err)
	}
}

// Desc.Backward and Args.Backward agree bit for bit; a central difference of a scalar loss
// agrees with the gradients; neither allocates.
func TestBackwardGradients(t *testing.T) {
	const b, hq, hkv, sq, sk, dd = 2, 4, 2, 5, 7, 8
	d := mustDesc(t, b, hq, hkv, sq, sk, dd, WithCausal(CausalBottomRight))
	defer d.Close()
	g := rand.New(rand.NewSource(11))
	nq, nk, no := d.RequiredLen(OperandQ), d.RequiredLen(OperandK), d.RequiredLen(OperandOut)
	q, k, v := uniform(g, nq, -1, 1), uniform(g, nk, -1, 1), uniform(g, nk, -1, 1)
	keyValid := make([]bool, d.RequiredLen(OperandKeyValid))
	for i := range keyValid {
		keyValid[i] = i%sk != 2
	}
	out, lse, dout := make([]float32, no), make([]float32, d.RequiredLen(OperandLSE)), uniform(g, no, -1, 1)
	must(t, d.Forward(q, k, v, keyValid, nil, out, lse))
	dq, dk, dv := make([]float32, nq), make([]float32, nk), make([]float32, nk)
	must(t, d.Backward(q, k, v, keyValid, nil, out, lse, dout, dq, dk, dv))

	a := mustArgs(t, d)
	defer a.Close()
	dq2, dk2, dv2 := make([]float32, nq), make([]float32, nk), make([]float32, nk)
	must(t, a.SetF32(OperandQ, q), a.SetF32(OperandK, k), a.SetF32(OperandV, v),
		a.SetBool(OperandKeyValid, keyValid), a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse),
		a.SetF32(OperandDOut, dout), a.SetOutF32(OperandDQ, dq2), a.SetOutF32(OperandDK, dk2),
		a.SetOutF32(OperandDV, dv2))
	must(t, a.Backward())
	for _, x := range []struct {
		name string
		a, b []float32
	}{{"dq", dq, dq2}, {"dk", dk, dk2}, {"dv", dv, dv2}} {
		for i := range x.a {
			if math.Float32bits(x.a[i]) != math.Float32bits(x.b[i]) {
				t.Fatalf("%s[%d]: Desc.Backward %v, Args.Backward %v", x.name, i, x.a[i], x.b[i])
			}
		}
	}
	// Padded keys get dK = dV = 0.
	for bb := 0; bb < b; bb++ {
		for h := 0; h < hkv; h++ {
			for x := 0; x < dd; x++ {
				i := ((bb*hkv+h)*sk+2)*dd + x
				if dk[i] != 0 || dv[i] != 0 {
					t.Fatalf("padded key: dk[%d] = %v, dv[%d] = %v", i, dk[i], i, dv[i])
				}
			}
		}
	}
	// loss = sum(dout * out): its derivative along each input is the gradient (central
	// difference in float64 over a float32 forward: a loose check of the wiring).
	loss := func() float64 {
		o := make([]float32, no)
		must(t, d.Forward(q, k, v, keyValid, nil, o, nil))
		s := 0.0
		for i := range o {
			s += float64(o[i]) * float64(dout[i])
		}
		return s
	}
	const h = 1e-2
	for _, x := range []struct {
		name string
		in   []float32
		grad []float32
		i    int
	}{{"q", q, dq, 3}, {"q", q, dq, nq - 1}, {"k", k, dk, 9}, {"v", v, dv, 17}, {"v", v, dv, nk - 5}} {
		old := x.in[x.i]
		x.in[x.i] = old + h
		up := loss()
		x.in[x.i] = old - h
		down := loss()
		x.in[x.i] = old
		fd := (up - down) / (2 * h)
		if math.Abs(fd-float64(x.grad[x.i])) > 2e-3 {
			t.Errorf("d%s[%d] = %v, central difference %v", x.name, x.i, x.grad[x.i], fd)
		}
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if err := a.Backward(); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("Args.Backward allocates %v times per call, want 0", allocs)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if err := d.Backward(q, k, v, keyValid, nil, out, lse, dout, dq, dk, dv); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("Desc.Backward allocates %v times per call, want 0", allocs)
	}
}

func TestConvertRounding(t *testing.T) {
	f := func(x float64) float32 { return float32(x) }
	src := []float32{1, f(1 + 1.0/2048), f(1 + 3.0/2048), -2, 0.5, f(math.Ldexp(1, -24)), 65504, 65520,
		float32(math.Inf(-1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1))}
	want := []uint16{0x3c00, 0x3c00, 0x3c02, 0xc000, 0x3800, 0x0001, 0x7bff, 0x7c00, 0xfc00, 0, 0x0000, 0x8000}
	h := make([]uint16, len(src)+2) // longer dst: only len(src) elements are written
	h[len(src)], h[len(src)+1] = 0xabcd, 0xabcd
	must(t, ConvertF32ToF16(h, src))
	for i, w := range want {
		if i == 9 {
			if h[i]&0x7c00 != 0x7c00 || h[i]&0x03ff == 0 {
				t.Errorf("f16(NaN) = %#04x, not a NaN", h[i])
			}
			continue
		}
		if h[i] != w {
			t.Errorf("f16(%v) = %#04x, want %#04x", src[i], h[i], w)
		}
	}
	if h[len(src)] != 0xabcd || h[len(src)+1] != 0xabcd {
		t.Errorf("ConvertF32ToF16 wrote past len(src)")
	}
	back := make([]float32, len(src))
	must(t, ConvertF16ToF32(back, h[:len(src)]))
	for i, w := range []float32{1, 1, f(1 + 1.0/512), -2, 0.5, f(math.Ldexp(1, -24)), 65504, float32(math.Inf(1)),
		float32(math.Inf(-1))} {
		if back[i] != w {
			t.Errorf("f32(f16(%v)) = %v, want %v", src[i], back[i], w)
		}
	}
	if !math.IsNaN(float64(back[9])) || math.Float32bits(back[11]) != 0x80000000 {
		t.Errorf("f32(f16(NaN)) = %v, f32(f16(-0)) = %#x", back[9], math.Float32bits(back[11]))
	}

	// bfloat16: 7 mantissa bits, ties to even.
	bsrc := []float32{1, f(1 + 1.0/256), f(1 + 3.0/256), -3, 3e38, float32(math.NaN())}
	bwant := []uint16{0x3f80, 0x3f80, 0x3f82, 0xc040, 0x7f62}
	bh := make([]uint16, len(bsrc))
	must(t, ConvertF32ToBF16(bh, bsrc))
	for i, w := range bwant {
		if bh[i] != w {
			t.Errorf("bf16(%v) = %#04x, want %#04x", bsrc[i], bh[i], w)
		}
	}
	if bh[5]&0x7f80 != 0x7f80 || bh[5]&0x007f == 0 {
		t.Errorf("bf16(NaN) = %#04x, not a NaN", bh[5])
	}
	bback := make([]float32, len(bsrc))
	must(t, ConvertBF16ToF32(bback, bh))
	for i, w := range []float32{1, 1, f(1 + 1.0/64), -3} {
		if bback[i] != w {
			t.Errorf("f32(bf16(%v)) = %v, want %v", bsrc[i], bback[i], w)
		}
	}

	// Errors name the argument; nothing to convert is fine.
	wantError(t, ConvertF32ToF16(make([]uint16, 2), src), StatusInvalidArgument, "dst has 2 elements, needs at least 12")
	wantError(t, ConvertF32ToBF16(nil, src), StatusNullPointer, "dst is nil")
	wantError(t, ConvertF16ToF32([]float32{}, h), StatusInvalidArgument, "dst has 0 elements")
	wantError(t, ConvertBF16ToF32(nil, bh), StatusNullPointer, "dst is nil")
	must(t, ConvertF32ToF16(nil, nil), ConvertF16ToF32(nil, []uint16{}), ConvertF32ToBF16([]uint16{}, nil))
	// Overlap (only through unsafe in Go): the library refuses it.
	buf := make([]float32, 16)
	alias := unsafe.Slice((*uint16)(unsafe.Pointer(&buf[0])), 32)
	wantError(t, ConvertF32ToF16(alias, buf), StatusInvalidArgument, "src and dst overlap")
	wantError(t, ConvertF16ToF32(buf, alias[4:12]), StatusInvalidArgument, "src and dst overlap")

	if allocs := testing.AllocsPerRun(100, func() {
		if err := ConvertF32ToF16(h, src); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("ConvertF32ToF16 allocates %v times per call, want 0", allocs)
	}
}

func TestQuantizeI8(t *testing.T) {
	const rows, dim = 4, 5
	src := []float32{
		1, -2, 0.5, 0, 2, // max 2: scale 2/127
		0, 0, 0, 0, 0, // all zeros: scale 0
		-127, 63.5, 1, -1, 0.25, // max 127: scale 1, 63.5 -> 64 (ties to even), 0.25 -> 0
		3, 3, 3, 3, 3,
	}
	dst, scales := make([]int8, rows*dim), make([]float32, rows)
	must(t, QuantizeI8(dst, scales, src, rows, dim))
	if scales[0] != float32(2)/127 || scales[1] != 0 || scales[2] != 1 || scales[3] != float32(3)/127 {
		t.Errorf("scales = %v", scales)
	}
	for i, w := range []int8{64, -127, 32, 0, 127, 0, 0, 0, 0, 0, -127, 64, 1, -1, 0, 127, 127, 127, 127, 127} {
		if dst[i] != w {
			t.Errorf("dst[%d] = %d, want %d (src %v)", i, dst[i], w, src[i])
		}
	}
	// A non-finite value names its row; the rows before it are written.
	bad := append([]float32(nil), src...)
	bad[2*dim+3] = float32(math.NaN())
	dst2, scales2 := make([]int8, rows*dim), make([]float32, rows)
	wantError(t, QuantizeI8(dst2, scales2, bad, rows, dim), StatusInvalidArgument,
		"src row 2 holds a non-finite value")
	if dst2[0] != 64 || scales2[0] != scales[0] {
		t.Errorf("rows before the bad one not written: %v %v", dst2[:dim], scales2)
	}
	bad[2*dim+3] = float32(math.Inf(1))
	wantError(t, QuantizeI8(dst2, scales2, bad, rows, dim), StatusInvalidArgument, "src row 2")
	// Lengths and sizes, named.
	wantError(t, QuantizeI8(dst[:19], scales, src, rows, dim), StatusInvalidArgument, "dst has 19 elements, needs at least 20")
	wantError(t, QuantizeI8(dst, scales[:3], src, rows, dim), StatusInvalidArgument, "scales has 3 elements, needs at least 4")
	wantError(t, QuantizeI8(dst, scales, src[:10], rows, dim), StatusInvalidArgument, "src has 10 elements, needs at least 20")
	wantError(t, QuantizeI8(dst, nil, src, rows, dim), StatusNullPointer, "scales is nil")
	wantError(t, QuantizeI8(dst, scales, src, -1, dim), StatusInvalidArgument, "rows (-1) is negative")
	wantError(t, QuantizeI8(dst, scales, src, rows, -5), StatusInvalidArgument, "dim (-5) is negative")
	wantError(t, QuantizeI8(dst, scales, src, maxInt/2, 3), StatusInvalidArgument, "overflows")
	must(t, QuantizeI8(nil, nil, nil, 0, dim))
	// rows of dim 0 have max |x| = 0: scale 0 each, as in C and every face
	s3 := []float32{7, 7, 7}
	must(t, QuantizeI8([]int8{}, s3, []float32{}, 3, 0))
	if s3[0] != 0 || s3[1] != 0 || s3[2] != 0 {
		t.Errorf("rows of dim 0: scales %v, want [0 0 0]", s3)
	}
	// Overlap of scales and src (through unsafe): the library refuses it.
	wantError(t, QuantizeI8(dst, src[4:8], src, rows, dim), StatusInvalidArgument, "scales overlaps src or dst")
}

// Attention over f16 / bf16 / int8 operands is float32 attention over the widened values; the
// slices are not copied (changing one after binding changes the next Run); no allocation.
func TestStorageMatchesWidenedF32(t *testing.T) {
	const b, hq, hkv, sq, sk, dd = 2, 4, 2, 6, 11, 16
	d := mustDesc(t, b, hq, hkv, sq, sk, dd, WithCausal(CausalBottomRight), WithSoftcap(4))
	defer d.Close()
	g := rand.New(rand.NewSource(5))
	nq, nk, no := d.RequiredLen(OperandQ), d.RequiredLen(OperandK), d.RequiredLen(OperandOut)
	q, k, v := uniform(g, nq, -1, 1), uniform(g, nk, -2, 2), uniform(g, nk, -1, 1)

	// Q in bf16, K in int8 (rows of head_dim in BHSD order: the scale operand's default order),
	// V in f16, each with its widened float32 copy.
	q16, k8, v16 := make([]uint16, nq), make([]int8, nk), make([]uint16, nk)
	kScale := make([]float32, d.RequiredLen(OperandKScale))
	must(t, ConvertF32ToBF16(q16, q), QuantizeI8(k8, kScale, k, len(kScale), dd), ConvertF32ToF16(v16, v))
	qw, kw, vw := make([]float32, nq), make([]float32, nk), make([]float32, nk)
	must(t, ConvertBF16ToF32(qw, q16), ConvertF16ToF32(vw, v16))
	for i := range kw {
		kw[i] = float32(k8[i]) * kScale[i/dd]
	}

	want, wantLSE := make([]float32, no), make([]float32, d.RequiredLen(OperandLSE))
	must(t, d.Forward(qw, kw, vw, nil, nil, want, wantLSE))
	a := mustArgs(t, d)
	defer a.Close()
	out, lse := make([]float32, no), make([]float32, d.RequiredLen(OperandLSE))
	must(t, a.SetBF16(OperandQ, q16), a.SetI8(OperandK, k8), a.SetKScale(kScale), a.SetF16(OperandV, v16),
		a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse))
	must(t, a.Run(OpForward))
	same := func(label string) {
		t.Helper()
		for i := range want {
			if !closeVariant(out[i], want[i]) {
				t.Fatalf("%s: out[%d] = %v, float32 over the widened values %v", label, i, out[i], want[i])
			}
		}
		for i := range wantLSE {
			if !closeVariant(lse[i], wantLSE[i]) {
				t.Fatalf("%s: lse[%d] = %v, want %v", label, i, lse[i], wantLSE[i])
			}
		}
	}
	same("bf16 q, int8 k, f16 v")

	// Zero copy: the bound slices are read at Run, not at Set.
	v16[0] ^= 0x4000 // another value for V's first element
	vw[0] = 0
	must(t, ConvertF16ToF32(vw[:1], v16[:1]))
	must(t, d.Forward(qw, kw, vw, nil, nil, want, wantLSE))
	must(t, a.Run(OpForward))
	same("after changing v16[0] in place")

	// f16 Q and K, bf16 V: the same rule.
	qf, kf, vb := make([]uint16, nq), make([]uint16, nk), make([]uint16, nk)
	must(t, ConvertF32ToF16(qf, q), ConvertF32ToF16(kf, k), ConvertF32ToBF16(vb, v))
	must(t, ConvertF16ToF32(qw, qf), ConvertF16ToF32(kw, kf), ConvertBF16ToF32(vw, vb))
	must(t, d.Forward(qw, kw, vw, nil, nil, want, wantLSE))
	must(t, a.SetF16(OperandQ, qf), a.SetF16(OperandK, kf), a.SetKScale(nil), a.SetBF16(OperandV, vb))
	must(t, a.Run(OpForward))
	same("f16 q, f16 k, bf16 v")

	if allocs := testing.AllocsPerRun(100, func() {
		if err := a.Run(OpForward); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("Args.Run with 16-bit operands allocates %v times per call, want 0", allocs)
	}
	must(t, a.SetI8(OperandV, make([]int8, nk)), a.SetVScale(make([]float32, d.RequiredLen(OperandVScale))))
	if allocs := testing.AllocsPerRun(100, func() {
		if err := a.Run(OpForward); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("Args.Run with int8 V allocates %v times per call, want 0", allocs)
	}
	// All-zero V with scale 0: out is 0.
	for i, x := range out {
		if x != 0 {
			t.Fatalf("out[%d] = %v with a zero int8 V", i, x)
		}
	}
}
