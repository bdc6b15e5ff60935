package attn

// Test-side names for what the face no longer keeps: the tests read operand kinds and storage
// types to drive the shared vectors. The kinds come from the library (its setters' verdict on
// each operand), not from a table of the face.

import (
	"fmt"
	"strings"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

type storage int8

const (
	storeF32 storage = iota
	storeF16
	storeBF16
	storeI8
)

const numStored = numOperands

type kind int8

const (
	kindF32In kind = iota
	kindF32Out
	kindMask
	kindI32
)

// operandKinds: the first setter the library accepts for each operand.
var operandKinds = func() (k [numOperands]kind) {
	var handle uintptr
	if capi.Attn_args_create(&handle) != 0 {
		panic("attn_args_create")
	}
	h := capi.SwigcptrStruct_SS_attn_args(handle)
	defer capi.Attn_args_destroy(h)
	for o := range k {
		for i, code := range [...]int{dtF32, dtF32 | goOut, dtU8, dtI32} {
			if capi.Attn_go_check(h, capi.Enum_SS_attn_operand(o), code) == 0 {
				k[o] = kind(i)
				break
			}
		}
	}
	return k
}()

// cName is the C enumerator the library's messages use ("ATTN_PARAM_WINDOW_LEFT").
func (p Param) cName() string { return "ATTN_PARAM_" + strings.ToUpper(p.String()) }

// enumMsg is the message expected for an enum argument: the library's verdict (lib) for a value
// that fits C's int, the face's for one that does not (C never sees it).
func enumMsg(name string, v int, lib string) string {
	if int(int32(v)) != v {
		return fmt.Sprintf("%s (%d) does not fit a C int", name, v)
	}
	return lib
}

// firstErr is the first non-nil error of errs.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
