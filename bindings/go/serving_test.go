package attn

import (
	"math"
	"testing"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// The serving layouts (capi/attn.h "Serving layouts"): the serving constants against the
// library, and the getters and required lengths of varlen and paged descriptors. The layouts
// themselves: varlen_test.go, paged_test.go, merge_test.go, serving_errors_test.go.

// The Go constants name the C operands and parameters of the same value: the library's own
// messages (wrong setter for an operand's kind; NaN for a parameter) spell the C name of the
// value Go passes. (attn.i does not export the serving enumerators, so no capi constant to
// compare with: this checks the values through the library.)
func TestServingConstantsMatchC(t *testing.T) {
	var handle uintptr
	must(t, check(func() capi.Enum_SS_attn_status { return capi.Attn_args_create(&handle) }))
	h := capi.SwigcptrStruct_SS_attn_args(handle)
	defer capi.Attn_args_destroy(h)
	cSetter := [...]string{kindF32In: "attn_args_set_f32", kindF32Out: "attn_args_set_out_f32",
		kindMask: "attn_args_set_u8", kindI32: "attn_args_set_i32"}
	for o := Operand(0); o < numOperands; o++ {
		k := operandKinds[o]
		err := check(func() capi.Enum_SS_attn_status {
			if k == kindF32In { // bind it as an int32 operand: the library names its real setter
				return capi.Attn_args_set_i32(h, capi.Enum_SS_attn_operand(o), nil, 0)
			}
			return capi.Attn_args_set_f32(h, capi.Enum_SS_attn_operand(o), nil, 0)
		})
		wantError(t, err, StatusInvalidArgument, o.String()+" is bound with "+cSetter[k]+",")
	}
	d := mustDesc(t, 1, 1, 1, 2, 2, 4)
	defer d.Close()
	for p := Param(0); p < numParams; p++ {
		err := check(func() capi.Enum_SS_attn_status {
			return capi.Attn_desc_set_float(d.h, capi.Enum_SS_attn_param(p), math.NaN())
		})
		wantError(t, err, StatusInvalidArgument, "attn_desc_set_float: "+p.cName()+" must not be NaN")
	}
	if OperandCuSeqlensQ != 14 || OperandCuSeqlensK != 15 || OperandBlockTable != 16 || OperandNewK != 17 ||
		OperandNewV != 18 || ParamVarlen != 10 || ParamPageSize != 11 || ParamMaxPages != 12 ||
		ParamBatchInvariant != 13 {
		t.Errorf("serving constants moved: the values are pinned by attn.h")
	}
	if OperandBlockTable.String() != "block_table" || ParamBatchInvariant.String() != "batch_invariant" ||
		ParamPageSize.cName() != "ATTN_PARAM_PAGE_SIZE" {
		t.Errorf("names: %v %v %v", OperandBlockTable, ParamBatchInvariant, ParamPageSize.cName())
	}
}

func TestServingGettersAndLengths(t *testing.T) {
	d := mustDesc(t, 3, servHQ, servHKV, 9, 66, servD, WithVarlen(), WithPageSize(16), WithMaxPages(7),
		WithBatchInvariant())
	defer d.Close()
	if !d.Varlen() || d.PageSize() != 16 || d.MaxPages() != 7 || !d.BatchInvariant() {
		t.Errorf("getters: varlen %v page %d max_pages %d invariant %v", d.Varlen(), d.PageSize(), d.MaxPages(),
			d.BatchInvariant())
	}
	for _, c := range []struct {
		o Operand
		n int
	}{{OperandBlockTable, 3 * 7}, {OperandCuSeqlensQ, 4}, {OperandCuSeqlensK, 4}, {OperandSeqLensK, 3},
		{OperandNewK, 3 * 9 * servHKV * servD}, {OperandNewV, 3 * 9 * servHKV * servD},
		{OperandK, 16 * servHKV * servD}, {OperandV, 16 * servHKV * servD}, // one token-major page
		{OperandQ, 3 * 9 * servHQ * servD}, {OperandLSE, 3 * servHQ * 9}} { // a full pack: upper bounds
		if got := d.RequiredLen(c.o); got != c.n {
			t.Errorf("RequiredLen(%v) = %d, want %d", c.o, got, c.n)
		}
	}
	// max_pages defaults to ceil(seq_k / page_size)
	d3 := mustDesc(t, 3, servHQ, servHKV, 9, 66, servD, WithPageSize(3))
	defer d3.Close()
	if d3.RequiredLen(OperandBlockTable) != 3*22 || d3.MaxPages() != 0 || d3.Varlen() || d3.BatchInvariant() {
		t.Errorf("default max_pages: block table %d, MaxPages() %d", d3.RequiredLen(OperandBlockTable), d3.MaxPages())
	}
	// without pages there is no block table
	plain := mustDesc(t, 3, servHQ, servHKV, 9, 66, servD)
	defer plain.Close()
	if plain.RequiredLen(OperandBlockTable) != 0 || plain.PageSize() != 0 || plain.Varlen() {
		t.Errorf("plain desc: block table %d, page %d, varlen %v", plain.RequiredLen(OperandBlockTable),
			plain.PageSize(), plain.Varlen())
	}
	a, err := plain.NewArgs()
	must(t, err)
	defer a.Close()
	must(t, a.SetBlockTable([]int32{})) // required length 0: bound as empty, the library decides
	q, k := make([]float32, plain.RequiredLen(OperandQ)), make([]float32, plain.RequiredLen(OperandK))
	must(t, a.SetF32(OperandQ, q), a.SetF32(OperandK, k), a.SetF32(OperandV, k),
		a.SetOutF32(OperandOut, make([]float32, plain.RequiredLen(OperandOut))), a.SetBlockTable([]int32{0}))
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "block_table is bound but ATTN_PARAM_PAGE_SIZE is 0")
	must(t, a.SetBlockTable(nil), a.SetCuSeqlensQ([]int32{0, 1, 2, 3}))
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "cu_seqlens_q is bound but ATTN_PARAM_VARLEN is 0")
	must(t, a.SetCuSeqlensQ(nil))
	must(t, a.Run(OpForward))
}
