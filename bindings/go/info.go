package attn

// The library's own tables (capi/attn.h "Introspection"): the ISAs this build knows, and the
// facts of each parameter and operand. Every answer is read from the library; nothing here is a
// copy of its tables.

import (
	"strings"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// ISAInfo is one ISA this build knows (attn_isa_info).
type ISAInfo struct {
	Name      string // what SetISA and the ATTN_ISA environment variable accept
	Supported bool   // this CPU and build run it: SetISA(Name) then succeeds
}

// ISAs lists the ISAs this build knows, in the library's order, weakest first ("scalar" first),
// each with whether this CPU and build run it (attn_isa_info).
func ISAs() []ISAInfo {
	var isas []ISAInfo
	for i := 0; ; i++ {
		var supported int32
		if capi.Attn_isa_info(i, nil, &supported) != capi.Enum_SS_attn_status(StatusOK) {
			return isas // past the last
		}
		isas = append(isas, ISAInfo{Name: capi.Attn_go_name(2, i), Supported: supported != 0})
	}
}

// ParamInfo is the library's entry for a parameter (attn_param_info).
type ParamInfo struct {
	Name string // its name, as String and the library's messages spell it ("causal")
	ParamRange
	// Default is its value in a new Desc; NaN where the default follows the shape (ParamScale:
	// 1/sqrt(head_dim); ParamHeadDimV: head_dim).
	Default float64
}

// Info returns the library's entry for p: name, kind, closed range and default
// (attn_param_info). A value that is not a parameter is an *Error with the library's message.
func (p Param) Info() (ParamInfo, error) {
	if err := fitsInt("param", int(p)); err != nil {
		return ParamInfo{}, err
	}
	var isFloat int32
	var lo, hi, def float64
	if err := check(func() capi.Enum_SS_attn_status {
		return capi.Attn_param_info(capi.Enum_SS_attn_param(p), nil, &isFloat, &lo, &hi, &def)
	}); err != nil {
		return ParamInfo{}, err
	}
	return ParamInfo{Name: p.String(), ParamRange: ParamRange{IsFloat: isFloat != 0, Min: lo, Max: hi},
		Default: def}, nil
}

// DType is a storage type an operand may be bound with (attn_dtype). The values are pinned by
// the C API.
type DType int

// Storage types, with the values of attn_dtype; each with the Args setters that bind it.
const (
	DTypeF32  DType = 0 // []float32 (SetF32, SetOutF32)
	DTypeF16  DType = 1 // IEEE binary16 bit patterns in []uint16 (SetF16, SetOutF16)
	DTypeBF16 DType = 2 // bfloat16 bit patterns in []uint16 (SetBF16, SetOutBF16)
	DTypeI8   DType = 3 // symmetric int8 with float32 scales (SetI8, SetOutI8)
	DTypeU8   DType = 4 // byte masks (SetU8, SetBool)
	DTypeI32  DType = 5 // []int32 (SetI32)
	// OCP fp8 K / V caches (attn_args_set_fp8 in C; no Go setter yet)
	DTypeFP8E4M3 DType = 6
	DTypeFP8E5M2 DType = 7
)

// String returns "f32", "f16", "bf16", "i8", "u8", "i32", "fp8_e4m3" or "fp8_e5m2" ("DType(n)"
// for other values).
func (t DType) String() string {
	return enumName("DType", int(t), "f32", "f16", "bf16", "i8", "u8", "i32", "fp8_e4m3",
		"fp8_e5m2")
}

// DTypes is a set of storage types: bit 1<<t for each DType t in it, as attn_operand_info
// gives them.
type DTypes uint32

// Has reports whether t is in the set.
func (s DTypes) Has(t DType) bool { return t >= 0 && t < 32 && s&(1<<uint(t)) != 0 }

// List returns the types in the set in increasing value (nil for the empty set).
func (s DTypes) List() []DType {
	var ts []DType
	for t := DType(0); t < 32; t++ {
		if s.Has(t) {
			ts = append(ts, t)
		}
	}
	return ts
}

// String returns the set as "{f32, f16, bf16}" ("{}" for the empty set).
func (s DTypes) String() string {
	names := []string{}
	for _, t := range s.List() {
		names = append(names, t.String())
	}
	return "{" + strings.Join(names, ", ") + "}"
}

// OperandInfo is the library's entry for an operand (attn_operand_info).
type OperandInfo struct {
	Name string // its name, as String and the library's messages spell it ("q", "k_scale")
	// In holds the types it may be bound with as an input (Args.SetF32, SetF16, ...), Out those
	// as an output (Args.SetOutF32, ...; for K and V the caches KVAppend writes); an empty set:
	// never an input, or never an output.
	In, Out DTypes
	// Rank is the number of dimensions of its dense shape (Q 4, LSE 3, KeyValid 2, Sinks 1).
	Rank int
	// Strided: WithStrides accepts it.
	Strided bool
	// Dims names the Rank dimensions of its dense shape, outermost first, in capi/attn.h's
	// words (attn_operand_dims): Q's are batch, heads_q, seq_q, head_dim.
	Dims []string
}

// Info returns the library's entry for o: name, input and output types, rank, whether it may
// be strided (attn_operand_info) and the names of its dimensions (attn_operand_dims). A value
// that is not an operand is an *Error with the library's message.
func (o Operand) Info() (OperandInfo, error) {
	if err := fitsInt("which", int(o)); err != nil {
		return OperandInfo{}, err
	}
	var in, out uint32
	var rank, strided int32
	var dims uintptr
	if err := check(func() capi.Enum_SS_attn_status {
		return capi.Attn_operand_info(capi.Enum_SS_attn_operand(o), nil, &in, &out, &rank, &strided)
	}); err != nil {
		return OperandInfo{}, err
	}
	if err := check(func() capi.Enum_SS_attn_status {
		return capi.Attn_operand_dims(capi.Enum_SS_attn_operand(o), &dims)
	}); err != nil {
		return OperandInfo{}, err
	}
	return OperandInfo{Name: o.String(), In: DTypes(in), Out: DTypes(out), Rank: int(rank),
		Strided: strided != 0, Dims: strings.Fields(capi.GoString(dims))}, nil
}
