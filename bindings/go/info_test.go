package attn

import (
	"errors"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// The introspection queries (ISAs, Param.Info, Operand.Info) against what C answers to the
// same question through the raw wrappers, and against what the library does with the answer
// (SetISA, a new Desc's values).

// cSays makes a raw C call and returns its status and, if it failed, the message
// attn_last_error gives on the same OS thread.
func cSays(f func() capi.Enum_SS_attn_status) (Status, string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := Status(f()); st != StatusOK {
		return st, capi.Attn_last_error()
	}
	return StatusOK, ""
}

// cCount is the number of values C's query accepts, counting from 0 until it refuses one (the
// loop capi/attn.h gives for listing a table); it must be the face's count of the table's names
// (faceLen) and cover the last constant the face declares (last).
func cCount(t *testing.T, what string, query func(v int) capi.Enum_SS_attn_status, faceLen, last int) int {
	t.Helper()
	n := 0
	for query(n) == capi.Enum_SS_attn_status(StatusOK) {
		n++
	}
	if n != faceLen || n <= last {
		t.Fatalf("C lists %d %s, the face %d names (its last constant: %d)", n, what, faceLen, last)
	}
	return n
}

// wantCErrors checks that the face refuses each value with the *Error C gives for the same
// query: its status and its message.
func wantCErrors(t *testing.T, typ string, face func(v int) error, query func(v int) capi.Enum_SS_attn_status,
	values ...int) {
	t.Helper()
	for _, v := range values {
		err := face(v)
		st, msg := cSays(func() capi.Enum_SS_attn_status { return query(v) })
		var e *Error
		if !errors.As(err, &e) || st == StatusOK || msg == "" || e.Status != st || e.Message != msg {
			t.Errorf("%s(%d).Info(): %v; want C's %v %q", typ, v, err, st, msg)
		}
	}
}

func TestISAs(t *testing.T) {
	got := ISAs()
	// C's loop: attn_isa_info from 0 until it refuses the index.
	var want []ISAInfo
	for i := 0; ; i++ {
		var supported int32
		st, msg := cSays(func() capi.Enum_SS_attn_status { return capi.Attn_isa_info(i, nil, &supported) })
		if st != StatusOK {
			if st != StatusInvalidArgument || msg == "" {
				t.Errorf("attn_isa_info(%d) ended the list with %v %q", i, st, msg)
			}
			break
		}
		want = append(want, ISAInfo{Name: capi.Attn_go_name(2, i), Supported: supported != 0})
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ISAs() = %v, C lists %v", got, want)
	}
	if len(got) < 2 || got[0] != (ISAInfo{Name: "scalar", Supported: true}) {
		t.Fatalf("ISAs() = %v: want the scalar ISA first, supported, and the others after it", got)
	}
	defer func() {
		if err := SetISA(""); err != nil {
			t.Errorf(`SetISA(""): %v`, err)
		}
	}()
	inUse, seen := ISA(), map[string]bool{}
	found := false
	for _, isa := range got {
		if isa.Name == "" || seen[isa.Name] {
			t.Errorf("ISAs(): empty or repeated name %q in %v", isa.Name, got)
		}
		seen[isa.Name] = true
		found = found || (isa.Name == inUse && isa.Supported)
		// Supported means SetISA(Name) succeeds; otherwise it is StatusUnsupported.
		err := SetISA(isa.Name)
		switch {
		case isa.Supported && err != nil:
			t.Errorf("ISAs() says %q is supported, SetISA: %v", isa.Name, err)
		case isa.Supported && ISA() != isa.Name:
			t.Errorf("after SetISA(%q), ISA() = %q", isa.Name, ISA())
		case !isa.Supported && !errors.Is(err, &Error{Status: StatusUnsupported}):
			t.Errorf("ISAs() says %q is unsupported, SetISA: %v", isa.Name, err)
		}
	}
	if !found {
		t.Errorf("the ISA in use, %q, is not a supported entry of %v", inUse, got)
	}
}

func TestParamInfo(t *testing.T) {
	paramQuery := func(v int) capi.Enum_SS_attn_status {
		return capi.Attn_param_info(capi.Enum_SS_attn_param(v), nil, nil, nil, nil, nil)
	}
	n := cCount(t, "parameters", paramQuery, int(numParams), int(ParamAlibiForm))
	const headDim = 16
	d := mustDesc(t, 1, 1, 1, 2, 3, headDim)
	defer d.Close()
	same := func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
	for p := Param(0); int(p) < n; p++ {
		info, err := p.Info()
		if err != nil {
			t.Fatalf("%v.Info(): %v", p, err)
		}
		var isFloat int32
		var lo, hi, def float64
		capi.Attn_param_info(capi.Enum_SS_attn_param(p), nil, &isFloat, &lo, &hi, &def)
		want := ParamInfo{Name: capi.Attn_go_name(1, int(p)), ParamRange: ParamRange{isFloat != 0, lo, hi}, Default: def}
		if info.Name != want.Name || info.Name != p.String() || info.ParamRange != want.ParamRange ||
			!same(info.Default, want.Default) {
			t.Errorf("%d.Info() = %+v, C says %+v", int(p), info, want)
		}
		if r, err := ParamBounds(p); err != nil || r != info.ParamRange {
			t.Errorf("%v: ParamBounds %+v (%v), Info %+v", p, r, err, info.ParamRange)
		}
		// The default is what a new Desc holds; NaN only where it follows the shape.
		v, err := d.Param(p)
		switch {
		case err != nil:
			t.Errorf("%v: Desc.Param: %v", p, err)
		case p == ParamScale || p == ParamHeadDimV:
			if !math.IsNaN(info.Default) {
				t.Errorf("%v: default %g, want NaN (it follows head_dim)", p, info.Default)
			}
		case v != info.Default:
			t.Errorf("%v: default %g, a new Desc holds %g", p, info.Default, v)
		}
	}
	causal, _ := ParamCausal.Info()
	if causal != (ParamInfo{Name: "causal", ParamRange: ParamRange{IsFloat: false, Min: 0, Max: float64(CausalBottomRight)}}) {
		t.Errorf("ParamCausal.Info() = %+v, want causal: int in [0, 2], default 0", causal)
	}
	if scale, _ := ParamScale.Info(); scale.Name != "scale" || !scale.IsFloat || !math.IsNaN(scale.Default) {
		t.Errorf("ParamScale.Info() = %+v, want scale: float, default NaN", scale)
	}
	wantCErrors(t, "Param", func(v int) error { _, err := Param(v).Info(); return err }, paramQuery, n, -1, 1000)
	_, err := Param(1 << 40).Info()
	wantError(t, err, StatusInvalidArgument, "param (1099511627776) does not fit a C int")
}

func TestOperandInfo(t *testing.T) {
	operandQuery := func(v int) capi.Enum_SS_attn_status {
		return capi.Attn_operand_info(capi.Enum_SS_attn_operand(v), nil, nil, nil, nil, nil)
	}
	n := cCount(t, "operands", operandQuery, int(numOperands), int(OperandNewVScale))
	for o := Operand(0); int(o) < n; o++ {
		info, err := o.Info()
		if err != nil {
			t.Fatalf("%v.Info(): %v", o, err)
		}
		var in, out uint32
		var rank, strided int32
		var dims uintptr
		capi.Attn_operand_info(capi.Enum_SS_attn_operand(o), nil, &in, &out, &rank, &strided)
		if capi.Attn_operand_dims(capi.Enum_SS_attn_operand(o), &dims) != 0 {
			t.Fatalf("attn_operand_dims(%d) failed", int(o))
		}
		want := OperandInfo{Name: capi.Attn_go_name(0, int(o)), In: DTypes(in), Out: DTypes(out), Rank: int(rank),
			Strided: strided != 0, Dims: info.Dims}
		if !reflect.DeepEqual(info, want) || info.Name != o.String() {
			t.Errorf("%d.Info() = %+v, C says %+v", int(o), info, want)
		}
		if info.In == 0 && info.Out == 0 || info.Rank < 1 || info.Rank > 4 {
			t.Errorf("%v.Info() = %+v: no type, or a rank outside [1, 4]", o, info)
		}
		if len(info.Dims) != info.Rank || strings.Join(info.Dims, " ") != capi.GoString(dims) {
			t.Errorf("%v.Info().Dims = %q (rank %d), C says %q", o, info.Dims, info.Rank, capi.GoString(dims))
		}
	}
	dimsQuery := func(v int) capi.Enum_SS_attn_status {
		var dims uintptr
		return capi.Attn_operand_dims(capi.Enum_SS_attn_operand(v), &dims)
	}
	if d := cCount(t, "operand dims", dimsQuery, int(numOperands), int(OperandNewVScale)); d != n {
		t.Errorf("attn_operand_dims lists %d operands, attn_operand_info %d", d, n)
	}
	// Entries read in capi/attn.h's shapes and setters.
	const kvTypes = 1<<DTypeF32 | 1<<DTypeF16 | 1<<DTypeBF16 | 1<<DTypeI8 | 1<<DTypeFP8E4M3 |
		1<<DTypeFP8E5M2
	for _, c := range []struct {
		o    Operand
		want OperandInfo
	}{
		{OperandQ, OperandInfo{"q", 1<<DTypeF32 | 1<<DTypeF16 | 1<<DTypeBF16, 0, 4, true,
			[]string{"batch", "heads_q", "seq_q", "head_dim"}}},
		{OperandK, OperandInfo{"k", kvTypes, kvTypes, 4, true,
			[]string{"batch", "heads_kv", "seq_k", "head_dim"}}},
		{OperandOut, OperandInfo{"out", 0, 1 << DTypeF32, 4, true,
			[]string{"batch", "heads_q", "seq_q", "head_dim_v"}}},
		{OperandLSE, OperandInfo{"lse", 0, 1 << DTypeF32, 3, false, []string{"batch", "heads_q", "seq_q"}}},
		{OperandKeyValid, OperandInfo{"key_valid", 1 << DTypeU8, 0, 2, false, []string{"batch", "seq_k"}}},
		{OperandSinks, OperandInfo{"sinks", 1 << DTypeF32, 0, 1, false, []string{"heads_q"}}},
		{OperandSeqLensK, OperandInfo{"seq_lens_k", 1 << DTypeI32, 0, 1, false, []string{"batch"}}},
	} {
		if got, err := c.o.Info(); err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v.Info() = %+v (%v), want %+v", c.o, got, err, c.want)
		}
	}
	if q, _ := OperandQ.Info(); q.In.String() != "{f32, f16, bf16}" || q.Out.String() != "{}" ||
		!q.In.Has(DTypeBF16) || q.In.Has(DTypeI8) || !reflect.DeepEqual(q.In.List(), []DType{DTypeF32, DTypeF16, DTypeBF16}) {
		t.Errorf("q: In %v (%v), Out %v", q.In, q.In.List(), q.Out)
	}
	wantCErrors(t, "Operand", func(v int) error { _, err := Operand(v).Info(); return err }, operandQuery, n, -1, 1000)
	_, err := Operand(1 << 40).Info()
	wantError(t, err, StatusInvalidArgument, "which (1099511627776) does not fit a C int")
}

// The DType constants are attn_dtype's values (SWIG's enum), with their names.
func TestDTypesMatchC(t *testing.T) {
	for _, c := range []struct {
		goVal DType
		cVal  capi.Enum_SS_attn_dtype
		name  string
	}{{DTypeF32, capi.ATTN_DTYPE_F32, "f32"}, {DTypeF16, capi.ATTN_DTYPE_F16, "f16"},
		{DTypeBF16, capi.ATTN_DTYPE_BF16, "bf16"}, {DTypeI8, capi.ATTN_DTYPE_I8, "i8"},
		{DTypeU8, capi.ATTN_DTYPE_U8, "u8"}, {DTypeI32, capi.ATTN_DTYPE_I32, "i32"}} {
		if int(c.goVal) != int(c.cVal) || c.goVal.String() != c.name {
			t.Errorf("%v = %d, C %d; want name %q", c.goVal, int(c.goVal), int(c.cVal), c.name)
		}
	}
	if s := DType(9).String(); s != "DType(9)" {
		t.Errorf("DType(9).String() = %q", s)
	}
	if all := DTypes(1<<6 - 1); all.String() != "{f32, f16, bf16, i8, u8, i32}" || all.Has(-1) || all.Has(6) {
		t.Errorf("DTypes(63) = %v", all)
	}
}
