package attn

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// Error paths of Simple and Desc, and the shared error cases (tests/vectors/errors.txt): each an
// *Error with the library's status and its message naming the argument, never a panic.

func TestErrorsSimple(t *testing.T) {
	q := []float32{0, 0, 0, 0}
	wantError(t, func() error { _, err := Simple(nil, q, q, 2, 2, false, nil); return err }(),
		StatusNullPointer, "q is nil (needs 4 elements)")
	// Empty (non-nil) slices are length errors, required or optional.
	wantError(t, func() error { _, err := Simple(q, []float32{}, q, 2, 2, false, nil); return err }(),
		StatusInvalidArgument, "k has 0 elements, needs at least 4")
	wantError(t, func() error { _, err := Simple(q, q, q, 2, 2, false, []bool{}); return err }(),
		StatusInvalidArgument, "pad_mask has 0 elements, needs at least 2")
	// Impossible sizes with tiny arrays: refused before anything is allocated.
	wantError(t, func() error { _, err := Simple(q, q, q, 40000, 2, false, nil); return err }(),
		StatusInvalidArgument, "q has 4 elements, needs at least 80000")
	wantError(t, func() error { _, err := Simple(q, q, q, 1<<31, 1, false, nil); return err }(),
		StatusInvalidArgument, "n (2147483648) must be in [1, 2147483647]")
	wantError(t, func() error { _, err := Simple(q, q, q, 2, 1<<40, false, nil); return err }(),
		StatusInvalidArgument, "d (1099511627776) must be in [1, 2147483647]")
	wantError(t, func() error { _, err := Simple(q, q, q[:3], 2, 2, false, nil); return err }(),
		StatusInvalidArgument, "v has 3 elements, needs at least 4")
	wantError(t, func() error { _, err := Simple(q, q, q, 2, 2, false, []bool{true}); return err }(),
		StatusInvalidArgument, "pad_mask has 1 elements, needs at least 2")
	wantError(t, func() error { _, err := Simple(q, q, q, 0, 2, false, nil); return err }(),
		StatusInvalidArgument, "n (0) must be in [1, 2147483647]")
	wantError(t, func() error { _, err := Simple(q, q, q, 2, -1, false, nil); return err }(),
		StatusInvalidArgument, "d (-1) must be in [1, 2147483647]")
	wantError(t, func() error { _, err := Simple(q, q, q, math.MaxInt/2, 3, false, nil); return err }(),
		StatusInvalidArgument, "must be in [1, 2147483647]")
}

func TestErrorsDesc(t *testing.T) {
	// Bad dimensions: the library's own message, with the numbers of this call.
	_, err := NewDesc(1, 6, 4, 3, 3, 8)
	wantError(t, err, StatusInvalidArgument, "heads_q", "6", "heads_kv", "4")
	_, err = NewDesc(0, 1, 1, 3, 3, 8)
	wantError(t, err, StatusInvalidArgument, "batch")
	_, err = NewDesc(1, 1, 1, 3, 3, 0)
	wantError(t, err, StatusInvalidArgument, "head_dim")
	_, err = NewDesc(1, 1, 1, -3, 3, 8)
	wantError(t, err, StatusInvalidArgument, "seq_q (-3) is negative")
	// Bad causal mode, scale and strides.
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithCausal(Causal(7)))
	wantError(t, err, StatusInvalidArgument, "causal (7) is not an attn_causal value")
	// 64-bit values are range-checked, never truncated to the C enum's 32 bits.
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithCausal(Causal(1<<40)))
	wantError(t, err, StatusInvalidArgument, "causal (1099511627776) does not fit a C int")
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithCausal(Causal(1<<32+1)))
	wantError(t, err, StatusInvalidArgument, "causal (4294967297)")
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithStrides(Operand(1<<32), 24, 24, 8))
	wantError(t, err, StatusInvalidArgument, "which (4294967296) does not fit a C int")
	_, err = NewDesc(1<<31, 1, 1, 3, 3, 8)
	wantError(t, err, StatusInvalidArgument, "batch (2147483648) exceeds the limit")
	_, err = NewDesc(1, 1, 1, 1<<32+3, 3, 8)
	wantError(t, err, StatusInvalidArgument, "seq_q (4294967299) exceeds the limit")
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithScale(float32(math.NaN())))
	wantError(t, err, StatusInvalidArgument, "scale")
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithScale(float32(math.Inf(1))))
	wantError(t, err, StatusInvalidArgument, "scale")
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithStrides(OperandLSE, 24, 24, 8))
	wantError(t, err, StatusInvalidArgument)
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithStrides(OperandQ, 24, -1, 8))
	wantError(t, err, StatusInvalidArgument, "head_stride (-1) is negative")
	_, err = NewDesc(1, 2, 2, 3, 3, 8, WithStrides(OperandOut, 48, 24, 4)) // OUT rows overlap
	wantError(t, err, StatusInvalidArgument)

	// Nil, empty and short slices, each named, before any pointer reaches C.
	desc := mustDesc(t, 2, 2, 1, 3, 4, 8)
	defer desc.Close()
	nq, nk, nv := desc.RequiredLen(OperandQ), desc.RequiredLen(OperandK), desc.RequiredLen(OperandV)
	if nq != 2*2*3*8 || nk != 2*1*4*8 || nv != nk || desc.RequiredLen(OperandOut) != nq ||
		desc.RequiredLen(OperandLSE) != 2*2*3 || desc.RequiredLen(OperandWeights) != 2*2*3*4 ||
		desc.RequiredLen(OperandKeyValid) != 2*4 || desc.RequiredLen(OperandAllowed) != 3*4 {
		t.Fatalf("RequiredLen wrong: q %d k %d v %d", nq, nk, nv)
	}
	if desc.RequiredLen(Operand(255)) != 0 || desc.RequiredLen(Operand(-1)) != 0 || desc.RequiredLen(Operand(1<<32)) != 0 {
		t.Errorf("RequiredLen of an unknown operand is not 0")
	}
	q, k, v := pattern(nq, 1), pattern(nk, 2), pattern(nv, 3)
	out, lse, w := make([]float32, nq), make([]float32, 12), make([]float32, 48)
	kv, al := make([]bool, 8), make([]bool, 12)
	wantError(t, desc.Forward(nil, k, v, nil, nil, out, nil), StatusNullPointer, "q is nil (needs 96 elements)")
	wantError(t, desc.Forward(q, k, nil, nil, nil, out, nil), StatusNullPointer, "v is nil")
	wantError(t, desc.Forward(q, k, v, nil, nil, nil, nil), StatusNullPointer, "out is nil")
	// Empty (non-nil) slices: length errors, never "null pointer" and never "not given".
	wantError(t, desc.Forward(q, []float32{}, v, nil, nil, out, nil), StatusInvalidArgument, "k has 0 elements, needs at least 64")
	wantError(t, desc.Forward(q, k, v, nil, nil, []float32{}, nil), StatusInvalidArgument, "out has 0 elements")
	wantError(t, desc.Forward(q, k, v, []bool{}, nil, out, nil), StatusInvalidArgument, "key_valid has 0 elements, needs at least 8")
	wantError(t, desc.Forward(q, k, v, nil, []bool{}, out, nil), StatusInvalidArgument, "allowed has 0 elements, needs at least 12")
	wantError(t, desc.Forward(q, k, v, nil, nil, out, []float32{}), StatusInvalidArgument, "lse has 0 elements, needs at least 12")
	wantError(t, desc.Weights(q, k, []bool{}, nil, w), StatusInvalidArgument, "key_valid has 0 elements")
	wantError(t, desc.Weights(q, k, nil, nil, []float32{}), StatusInvalidArgument, "weights has 0 elements")
	wantError(t, desc.Forward(q[:47], k, v, nil, nil, out, nil), StatusInvalidArgument, "q has 47 elements, needs at least 96")
	wantError(t, desc.Forward(q, k[:1], v, nil, nil, out, nil), StatusInvalidArgument, "k has 1 elements, needs at least 64")
	wantError(t, desc.Forward(q, k, v[:31], nil, nil, out, nil), StatusInvalidArgument, "v has 31 elements, needs at least 64")
	wantError(t, desc.Forward(q, k, v, kv[:7], nil, out, nil), StatusInvalidArgument, "key_valid has 7 elements, needs at least 8")
	wantError(t, desc.Forward(q, k, v, nil, al[:11], out, nil), StatusInvalidArgument, "allowed has 11 elements, needs at least 12")
	wantError(t, desc.Forward(q, k, v, nil, nil, out[:40], nil), StatusInvalidArgument, "out has 40 elements, needs at least 96")
	wantError(t, desc.Forward(q, k, v, nil, nil, out, lse[:11]), StatusInvalidArgument, "lse has 11 elements, needs at least 12")
	wantError(t, desc.Weights(nil, k, nil, nil, w), StatusNullPointer, "q is nil")
	wantError(t, desc.Weights(q, k[:31], nil, nil, w), StatusInvalidArgument, "k has 31 elements")
	wantError(t, desc.Weights(q, k, kv[:1], nil, w), StatusInvalidArgument, "key_valid has 1 elements")
	wantError(t, desc.Weights(q, k, nil, al[:1], w), StatusInvalidArgument, "allowed has 1 elements")
	wantError(t, desc.Weights(q, k, nil, nil, nil), StatusNullPointer, "weights is nil")
	wantError(t, desc.Weights(q, k, nil, nil, w[:47]), StatusInvalidArgument, "weights has 47 elements, needs at least 48")
	// Rejected by the library itself: an output aliasing an input or another output.
	wantError(t, desc.Forward(q, k, v, nil, nil, q, nil), StatusInvalidArgument, "attn_forward: out overlaps q")
	wantError(t, desc.Forward(q, k, v, nil, nil, out, out), StatusInvalidArgument, "overlaps")
	wantError(t, desc.Weights(q, k, nil, nil, k), StatusInvalidArgument, "attn_weights: weights overlaps k")
	// None of the failures wrote anything.
	for i, x := range out {
		if x != 0 {
			t.Fatalf("out[%d] = %v written by a failing call", i, x)
		}
	}
	// Longer slices are fine (only the required prefix is used), and inputs may share memory.
	if err := desc.Forward(q, k, append(v, 1, 2), append(kv, true), nil, append(out, 0), append(lse, 5)); err != nil {
		t.Fatal(err)
	}
	if err := desc.Forward(q, q, q, nil, nil, out, nil); err != nil {
		t.Fatal(err)
	}
	// Library-wide settings.
	wantError(t, SetNumThreads(257), StatusInvalidArgument)
	wantError(t, SetNumThreads(-1), StatusInvalidArgument, "n (-1) is negative")
	wantError(t, SetISA("no-such-isa"), StatusInvalidArgument,
		`attn_set_isa: name "no-such-isa" is not one of scalar, sse2, avx2, avx512`)
	// C would read "avx2\x00junk" as "avx2": an embedded NUL or a non-ASCII byte is refused
	// first, in the library's wording, and the ISA is unchanged.
	before := ISA()
	// The list of names is the library's own (one table in C), for every refusal.
	list := func(err error) string {
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Message, "is not one of ") {
			t.Fatalf("SetISA: %v", err)
		}
		return e.Message[strings.Index(e.Message, "is not one of "):]
	}
	libList := list(SetISA("no-such-isa"))
	if !strings.HasSuffix(libList, ", avx512fp16") {
		t.Errorf("the library's list of ISA names: %q", libList)
	}
	for _, name := range []string{"avx2\x00junk", "scalar\x00", "\x00", "avx\u00b2", "sse2\xff", "\u0073calar\u00a0"} {
		err := SetISA(name)
		wantError(t, err, StatusInvalidArgument, fmt.Sprintf("attn_set_isa: name %q is not one of scalar, sse2, avx2, avx512", name))
		if got := list(err); got != libList {
			t.Errorf("SetISA(%q): %q, the library's list is %q", name, got, libList)
		}
	}
	if ISA() != before {
		t.Errorf("a refused SetISA changed the ISA from %q to %q", before, ISA())
	}
	if err := SetISA(""); err != nil {
		t.Errorf("SetISA(\"\"): %v", err)
	}
	// errors.Is by status.
	err = desc.Forward(nil, k, v, nil, nil, out, nil)
	if !errors.Is(err, &Error{Status: StatusNullPointer}) || errors.Is(err, &Error{Status: StatusInvalidArgument}) ||
		errors.Is(err, ErrClosed) {
		t.Errorf("errors.Is by status wrong for %v", err)
	}
}

// hasWord: msg contains word case-insensitively, with no letter or digit right before or after
// (the C test's rule: "ATTN_PARAM_WINDOW_LEFT" names window_left).
func hasWord(msg, word string) bool {
	lm, lw := strings.ToLower(msg), strings.ToLower(word)
	alnum := func(r byte) bool { return r < 0x80 && (unicode.IsLetter(rune(r)) || unicode.IsDigit(rune(r))) }
	for i := 0; i+len(lw) <= len(lm); i++ {
		if lm[i:i+len(lw)] == lw && (i == 0 || !alnum(lm[i-1])) && (i+len(lw) == len(lm) || !alnum(lm[i+len(lw)])) {
			return true
		}
	}
	return false
}

// errorRun configures, binds and runs one errors.txt case with its break; it returns the first
// failing call's error (nil when everything succeeded).
func errorRun(t *testing.T, c variantCase, generic bool) error {
	n := c.dims
	d, err := NewDesc(n[0], n[1], n[2], n[3], n[4], n[5], c.options(t, generic)...)
	if err != nil {
		return err
	}
	defer d.Close()
	a, err := d.NewArgs()
	if err != nil {
		return err
	}
	defer a.Close()
	bound := map[Operand]bool{}
	for o := range c.in {
		bound[o] = true
	}
	switch {
	case c.serve == "kv_append": // k and v are the caches
		bound[OperandQ] = false
	case c.serve == "merge": // acc: out and lse (and cu_seqlens_q)
		bound[OperandQ], bound[OperandK], bound[OperandV] = false, false, false
		bound[OperandOut], bound[OperandLSE] = true, true
	case c.op == OpForward:
		bound[OperandOut], bound[OperandLSE], bound[OperandKeyMass] = true, true, c.mass
	default:
		bound[OperandWeights] = true
	}
	target := func(prefix string) (Operand, string, bool) {
		if !strings.HasPrefix(c.brk, prefix+":") {
			return 0, "", false
		}
		rest := c.brk[len(prefix)+1:]
		name := rest
		if i := strings.IndexAny(rest, "=["); i >= 0 {
			name = rest[:i]
		}
		o, ok := operandByName(name)
		if !ok {
			t.Fatalf("%s: bad break %q", c.name, c.brk)
		}
		return o, rest[len(name):], true
	}
	shortOp, _, isShort := target("short")
	nullPart := c.brk == "null:part"
	var nullOp Operand
	isNull := false
	if !nullPart {
		nullOp, _, isNull = target("null")
	}
	empty := map[Operand]bool{} // empty:<a>,<b>: bound with 0 elements (not nil)
	if strings.HasPrefix(c.brk, "empty:") {
		for _, n := range strings.Split(c.brk[len("empty:"):], ",") {
			o, ok := operandByName(n)
			if !ok {
				t.Fatalf("%s: bad break %q", c.name, c.brk)
			}
			empty[o] = true
		}
	}
	aliasA, aliasRest, isAlias := target("alias")
	setOp, setRest, isSet := target("set")
	op := c.op
	if c.brk == "op:backward" {
		op = OpBackward
	}
	// Zero-filled buffers of the required length; an alias shares its target's buffer.
	f32 := map[Operand][]float32{}
	masks := map[Operand][]byte{}
	i32 := map[Operand][]int32{}
	for o := Operand(0); o < numOperands; o++ {
		if !bound[o] {
			continue
		}
		switch operandKinds[o] {
		case kindF32In, kindF32Out:
			f32[o] = make([]float32, d.RequiredLen(o))
		case kindMask:
			masks[o] = make([]byte, d.RequiredLen(o))
		case kindI32:
			i32[o] = make([]int32, d.RequiredLen(o))
		}
	}
	if isAlias {
		b, ok := operandByName(strings.TrimPrefix(aliasRest, "="))
		if !ok || f32[aliasA] == nil || f32[b] == nil {
			t.Fatalf("%s: bad break %q", c.name, c.brk)
		}
		need := d.RequiredLen(aliasA)
		if len(f32[b]) < need {
			f32[b] = make([]float32, need)
		}
		f32[aliasA] = f32[b][:need]
	}
	if isSet {
		var idx int
		var val int32
		if _, err := fmt.Sscanf(setRest, "[%d]=%d", &idx, &val); err != nil || idx >= len(i32[setOp]) {
			t.Fatalf("%s: bad break %q", c.name, c.brk)
		}
		i32[setOp][idx] = val
	}
	for o := Operand(0); o < numOperands; o++ {
		if !bound[o] || (isNull && o == nullOp) || (c.serve == "kv_append" && (o == OperandK || o == OperandV)) {
			continue
		}
		shorten := isShort && o == shortOp
		if empty[o] {
			f32[o], masks[o], i32[o] = f32[o][:0], masks[o][:0], i32[o][:0]
		}
		switch operandKinds[o] {
		case kindF32In, kindF32Out:
			s := f32[o]
			if shorten {
				s = s[:len(s)-1]
			}
			if operandKinds[o] == kindF32In {
				err = a.SetF32(o, s)
			} else {
				err = a.SetOutF32(o, s)
			}
		case kindMask:
			s := masks[o]
			if shorten {
				s = s[:len(s)-1]
			}
			err = a.SetU8(o, s)
		case kindI32:
			s := i32[o]
			if shorten {
				s = s[:len(s)-1]
			}
			err = a.SetI32(o, s)
		}
		if err != nil {
			return err
		}
	}
	switch c.serve {
	case "kv_append":
		return a.KVAppend(f32[OperandK], f32[OperandV])
	case "merge":
		if nullPart {
			return d.Merge(a, nil)
		}
		part, err := d.NewArgs()
		if err != nil {
			return err
		}
		defer part.Close()
		for _, o := range []Operand{OperandOut, OperandLSE} {
			if err := part.SetOutF32(o, make([]float32, d.RequiredLen(o))); err != nil {
				return err
			}
		}
		return d.Merge(a, part)
	}
	return a.Run(op)
}

func TestSharedErrors(t *testing.T) {
	path := filepath.Join(vectorsDir(), "errors.txt")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	cases := readVariantFile(t, path)
	if len(cases) < 40 {
		t.Fatalf("errors.txt lists %d cases, expected at least 40", len(cases))
	}
	for _, generic := range []bool{false, true} {
		for _, c := range cases {
			if c.status < 0 || c.brk == "" || (c.status != 0 && c.names == "") {
				t.Fatalf("%s: errors.txt lines need break, status and names", c.name)
			}
			err := errorRun(t, c, generic)
			if c.status == 0 {
				if err != nil {
					t.Errorf("%s (%s): %v, want success", c.name, c.brk, err)
				}
				continue
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("%s (%s): %v, want status %d", c.name, c.brk, err, c.status)
				continue
			}
			if int(e.Status) != c.status {
				t.Errorf("%s (%s): status %d (%v), want %d; message %q", c.name, c.brk, int(e.Status), e.Status, c.status, e.Message)
			}
			if !hasWord(e.Message, c.names) {
				t.Errorf("%s (%s): message %q does not name %q", c.name, c.brk, e.Message, c.names)
			}
		}
	}
	t.Logf("errors.txt: %d cases checked (typed and generic options)", len(cases))
}
