package attn

// The per-call tensors of the extensible call (attn_args / attn_run, since 0.2) and the serving
// calls that take them: Args.KVAppend, Args.KVAppendArgs and Desc.Merge.

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// Op is an operation of Args.Run (attn_op). The values are pinned by the C API.
type Op int

// Operations, with the values of attn_op.
const (
	OpForward  Op = 0 // out (+ lse, key_mass) from q, k, v
	OpWeights  Op = 1 // weights from q, k
	OpBackward Op = 2 // the gradients from the forward's operands and dout
)

// String returns "forward", "weights" or "backward" ("Op(n)" for other values).
func (op Op) String() string { return enumName("Op", int(op), "forward", "weights", "backward") }

// A binding code: the attn_dtype of the setter (DType), plus goOut for an attn_args_set_out_*
// setter; goPart (into Merge's part) and goCache (KVAppend's caches) only inside goCall.
const (
	dtF32, dtF16, dtBF16 = int(DTypeF32), int(DTypeF16), int(DTypeBF16)
	dtI8, dtU8, dtI32    = int(DTypeI8), int(DTypeU8), int(DTypeI32)
	goOut, goPart        = 16, 32
	goCache              = 64
	goFP8                = 128 // attn_args_set_fp8 / _out_fp8, the format in bits 32-63
	goSlots              = 32  // pointer parameters of attn_go_call
)

// The calls of attn_go_call.
const (
	goRun = iota
	goKVAppend
	goKVAppendArgs
	goMerge
)

// binding is one operand as the Go side holds it: the address of the slice's first element
// (emptyAnchor for an empty slice, nil when unbound), its length and its setter's code.
type binding struct {
	p     unsafe.Pointer
	n     int
	code  int
	which Operand
}

// emptyAnchor is the address passed for a non-nil slice of length 0: C tells "bound, empty"
// (a varlen pack of 0 tokens) from "not bound" (NULL) and never reads it.
var emptyAnchor uint64

func bind[T any](s []T, code int) binding {
	switch {
	case s == nil:
		return binding{code: code}
	case cap(s) == 0:
		return binding{p: unsafe.Pointer(&emptyAnchor), code: code}
	}
	return binding{p: unsafe.Pointer(&s[:1][0]), n: len(s), code: code}
}

// bindBool binds a []bool as bytes (Go bools are one byte of 0/1).
func bindBool(s []bool) binding { return bind(s, dtU8) }

// slotPool holds the (which, code, len) triplets goCall hands to C: Go memory without pointers,
// reused so a call allocates nothing.
var slotPool = sync.Pool{New: func() interface{} { return new([3 * goSlots]int64) }}

// goCall is the one cgo call of Run, KVAppend, KVAppendArgs, Merge and Desc.Backward: the
// bindings of a are bound into ah (nil: a temporary attn_args) and those of part into ph
// (Merge), or passed through (KVAppend's caches, code goCache); the call runs, and everything
// is unbound again before it returns (attn_go_call).
func goCall(h capi.Struct_SS_attn_desc, call int, op Op, ah, ph capi.Struct_SS_attn_args, a, part []binding) error {
	if err := fitsInt("op", int(op)); err != nil {
		return err
	}
	slots := slotPool.Get().(*[3 * goSlots]int64)
	defer slotPool.Put(slots)
	var p [goSlots]*float32
	n := 0
	for i, set := range [2][]binding{a, part} {
		for _, b := range set {
			if b.p == nil {
				continue
			}
			if n == goSlots {
				return argError(StatusInvalidArgument, "more than %d operands bound", goSlots)
			}
			slots[3*n], slots[3*n+1], slots[3*n+2] = int64(b.which), int64(b.code|i*goPart), int64(b.n)
			p[n] = (*float32)(b.p)
			n++
		}
	}
	if ah == nil {
		ah = capi.SwigcptrStruct_SS_attn_args(0)
	}
	if ph == nil {
		ph = capi.SwigcptrStruct_SS_attn_args(0)
	}
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_go_call(h, call, capi.Enum_SS_attn_op(op), ah, ph, &slots[0], n,
			p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13],
			p[14], p[15], p[16], p[17], p[18], p[19], p[20], p[21], p[22], p[23], p[24], p[25],
			p[26], p[27], p[28], p[29], p[30], p[31])
	})
}

// Args holds the per-call slices of the extensible call (attn_args) for one Desc: create it
// with Desc.NewArgs, bind slices with the setters, run, Close. The setter that binds an operand
// sets its element type (capi/attn.h, "Storage types"); nil unbinds it. The library checks
// each binding's operand and setter when it is made, and every length and value in the call.
//
// Zero copy: the slices stay in Go and reach C for the duration of each call only (cgo's rule:
// C never keeps a Go pointer); a call allocates nothing. An Args serializes its own calls (one
// mutex): use one Args per goroutine to run in parallel on a shared Desc.
type Args struct {
	mu sync.Mutex
	d  *Desc
	h  capi.Struct_SS_attn_args // the C attn_args*, nil once closed; empty between calls
	b  []binding                // indexed by Operand
}

// NewArgs creates an empty Args for d (attn_args_create); the Args keeps d reachable.
func (d *Desc) NewArgs() (*Args, error) {
	var a *Args
	err := d.use(func(capi.Struct_SS_attn_desc) error {
		var handle uintptr
		if err := check(func() capi.Enum_SS_attn_status { return capi.Attn_args_create(&handle) }); err != nil {
			return err
		}
		a = &Args{d: d, h: capi.SwigcptrStruct_SS_attn_args(handle)}
		runtime.SetFinalizer(a, (*Args).finalize)
		return nil
	})
	return a, err
}

func (a *Args) finalize() {
	if a.h != nil {
		finalized(a.h.Swigcptr())
		capi.Attn_args_destroy(a.h)
		a.h = nil
		argsFinalized.Add(1)
	}
}

// locked runs f under the Args' lock; ErrArgsClosed once closed.
func (a *Args) locked(f func() error) error {
	if a == nil {
		return ErrArgsClosed
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.h == nil {
		return ErrArgsClosed
	}
	return f()
}

// Close frees the Args (not the slices it names); afterwards every method returns ErrArgsClosed.
func (a *Args) Close() error {
	return a.locked(func() error {
		capi.Attn_args_destroy(a.h)
		a.h, a.b = nil, nil
		argsClosed.Add(1)
		runtime.SetFinalizer(a, nil)
		return nil
	})
}

// Desc is the descriptor the Args was created for.
func (a *Args) Desc() *Desc { return a.d }

// set binds (or with a nil slice unbinds) which: the library's setter for the code judges the
// operand and the setter first (attn_go_check binds NULL), the slice is kept for the calls.
func (a *Args) set(which Operand, b binding) error {
	return a.locked(func() error {
		return a.d.use(func(capi.Struct_SS_attn_desc) error {
			if err := fitsInt("which", int(which)); err != nil {
				return err
			}
			h := a.h
			if err := check(func() capi.Enum_SS_attn_status {
				return capi.Attn_go_check(h, capi.Enum_SS_attn_operand(which), int64(b.code))
			}); err != nil {
				return err
			}
			for int(which) >= len(a.b) {
				a.b = append(a.b, binding{which: Operand(len(a.b))})
			}
			b.which = which
			a.b[which] = b
			return nil
		})
	})
}

// SetF32 binds a float32 input (attn_args_set_f32).
func (a *Args) SetF32(which Operand, data []float32) error { return a.set(which, bind(data, dtF32)) }

// SetOutF32 binds a float32 output, or a float32 K / V cache (or an int8 cache's scales)
// writable for KVAppendArgs (attn_args_set_out_f32).
func (a *Args) SetOutF32(which Operand, data []float32) error {
	return a.set(which, bind(data, dtF32|goOut))
}

// SetOutF16 binds a K or V cache of binary16 bit patterns writable (attn_args_set_out_f16).
func (a *Args) SetOutF16(which Operand, data []uint16) error {
	return a.set(which, bind(data, dtF16|goOut))
}

// SetOutBF16 binds a K or V cache of bfloat16 bit patterns writable (attn_args_set_out_bf16).
func (a *Args) SetOutBF16(which Operand, data []uint16) error {
	return a.set(which, bind(data, dtBF16|goOut))
}

// SetOutI8 binds an int8 K or V cache writable (attn_args_set_out_i8).
func (a *Args) SetOutI8(which Operand, data []int8) error {
	return a.set(which, bind(data, dtI8|goOut))
}

// SetOutFP8 binds an fp8 K or V cache of format format (DTypeFP8E4M3 or DTypeFP8E5M2)
// writable (attn_args_set_out_fp8); its scale, if any, is only read (SetKScale / SetVScale).
func (a *Args) SetOutFP8(which Operand, format DType, data []byte) error {
	return a.setFP8(which, format, data, goOut)
}

// setFP8 binds data with attn_args_set_fp8 (out 0) or _out_fp8 (out goOut): the library judges
// the format.
func (a *Args) setFP8(which Operand, format DType, data []byte, out int) error {
	if err := fitsInt("format", int(format)); err != nil {
		return err
	}
	return a.set(which, bind(data, goFP8|out|int(int32(format))<<32))
}

// SetBool binds a mask, true = real / allowed (attn_args_set_u8 over Go's one-byte bools).
func (a *Args) SetBool(which Operand, mask []bool) error { return a.set(which, bindBool(mask)) }

// SetU8 binds a byte mask, nonzero = true (attn_args_set_u8).
func (a *Args) SetU8(which Operand, mask []byte) error { return a.set(which, bind(mask, dtU8)) }

// SetI32 binds an int32 operand (attn_args_set_i32).
func (a *Args) SetI32(which Operand, data []int32) error { return a.set(which, bind(data, dtI32)) }

// SetF16 binds an operand stored as IEEE binary16 bit patterns (attn_args_set_f16).
func (a *Args) SetF16(which Operand, data []uint16) error { return a.set(which, bind(data, dtF16)) }

// SetBF16 binds an operand stored as bfloat16 bit patterns (attn_args_set_bf16).
func (a *Args) SetBF16(which Operand, data []uint16) error { return a.set(which, bind(data, dtBF16)) }

// SetI8 binds an operand stored as symmetric int8 (attn_args_set_i8); its scales are
// OperandKScale / OperandVScale (SetKScale, SetVScale).
func (a *Args) SetI8(which Operand, data []int8) error { return a.set(which, bind(data, dtI8)) }

// SetFP8 binds K or V (or NewK / NewV for KVAppendArgs) stored as fp8 codes of format format
// (DTypeFP8E4M3 or DTypeFP8E5M2; attn_args_set_fp8), one byte per value; its optional scale is
// OperandKScale / OperandVScale (one per tensor with strides (0, 0, 0), per KV head with
// (0, 1, 0), per row by default).
func (a *Args) SetFP8(which Operand, format DType, data []byte) error {
	return a.setFP8(which, format, data, 0)
}

// SetKScale binds OperandKScale: the scales of an int8 K.
func (a *Args) SetKScale(scales []float32) error { return a.SetF32(OperandKScale, scales) }

// SetVScale binds OperandVScale: the scales of an int8 V.
func (a *Args) SetVScale(scales []float32) error { return a.SetF32(OperandVScale, scales) }

// SetSeqLensK binds OperandSeqLensK.
func (a *Args) SetSeqLensK(lens []int32) error { return a.SetI32(OperandSeqLensK, lens) }

// SetCuSeqlensQ binds OperandCuSeqlensQ.
func (a *Args) SetCuSeqlensQ(cu []int32) error { return a.SetI32(OperandCuSeqlensQ, cu) }

// SetCuSeqlensK binds OperandCuSeqlensK.
func (a *Args) SetCuSeqlensK(cu []int32) error { return a.SetI32(OperandCuSeqlensK, cu) }

// SetBlockTable binds OperandBlockTable.
func (a *Args) SetBlockTable(table []int32) error { return a.SetI32(OperandBlockTable, table) }

// SetNewK binds OperandNewK: the new key rows of KVAppend.
func (a *Args) SetNewK(rows []float32) error { return a.SetF32(OperandNewK, rows) }

// SetNewV binds OperandNewV: the new value rows of KVAppend.
func (a *Args) SetNewV(rows []float32) error { return a.SetF32(OperandNewV, rows) }

// Clear unbinds every operand (attn_args_clear).
func (a *Args) Clear() error {
	return a.locked(func() error {
		for i := range a.b {
			a.b[i].p = nil
		}
		return nil
	})
}

// call runs one attn_go_call with the Args' bindings (and extra ones), under the Args' lock and
// the Desc's read lock.
func (a *Args) call(call int, op Op, extra []binding) error {
	return a.locked(func() error {
		return a.d.use(func(h capi.Struct_SS_attn_desc) error {
			return goCall(h, call, op, a.h, nil, a.b, extra)
		})
	})
}

// Run executes op with the bound operands (attn_run).
func (a *Args) Run(op Op) error { return a.call(goRun, op, nil) }

// Backward runs OpBackward (Run(OpBackward)).
func (a *Args) Backward() error { return a.Run(OpBackward) }

// KVAppend writes the bound OperandNewK / OperandNewV rows into their positions of the float32
// caches kCache and vCache (attn_kv_append).
func (a *Args) KVAppend(kCache, vCache []float32) error {
	caches := [...]binding{bind(kCache, goCache), bind(vCache, goCache)} // nil: NULL, named by the library
	caches[1].which = 1
	return a.call(goKVAppend, OpForward, caches[:])
}

// KVAppendArgs writes the bound new rows into the caches bound writable as OperandK / OperandV,
// of any storage type (attn_kv_append_args).
func (a *Args) KVAppendArgs() error { return a.call(goKVAppendArgs, OpForward, nil) }

// Merge folds part into acc (attn_merge): acc's OperandOut and OperandLSE are updated in place.
// A nil acc or part is StatusNullPointer, as NULL is in C.
func (d *Desc) Merge(acc, part *Args) error {
	if acc == nil {
		return argError(StatusNullPointer, "acc is nil")
	}
	if part == nil {
		return argError(StatusNullPointer, "part is nil")
	}
	if acc == part {
		return argError(StatusInvalidArgument, "acc and part are the same Args (acc is updated in place "+
			"from part: part must hold another result)")
	}
	// Both Args in a fixed order (two Merges of the same pair cannot deadlock), then the Desc.
	first, second := acc, part
	if uintptr(unsafe.Pointer(second)) < uintptr(unsafe.Pointer(first)) {
		first, second = second, first
	}
	return first.locked(func() error {
		return second.locked(func() error {
			return d.use(func(h capi.Struct_SS_attn_desc) error {
				return goCall(h, goMerge, OpForward, acc.h, part.h, acc.b, part.b)
			})
		})
	})
}
