package attn

// The per-call tensors of the extensible call (attn_args / attn_run, since 0.2).

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// Op is an operation of Args.Run (attn_op). The values are pinned by the C API.
type Op int

// Operations, with the values of attn_op.
const (
	OpForward  Op = 0 // reads q, k, v (+ optional operands); writes out, optional lse and key_mass
	OpWeights  Op = 1 // reads q, k (+ optional operands); writes weights
	OpBackward Op = 2 // reserved: StatusUnsupported in this version
)

// String returns "forward", "weights" or "backward" ("Op(n)" for other values).
func (op Op) String() string {
	switch op {
	case OpForward:
		return "forward"
	case OpWeights:
		return "weights"
	case OpBackward:
		return "backward"
	}
	return fmt.Sprintf("Op(%d)", int(op))
}

func checkOp(op Op) error {
	if op < OpForward || op > OpBackward {
		return argError(StatusInvalidArgument,
			"op (%d) is not an attn_op (0 forward, 1 weights, 2 backward)", int(op))
	}
	return nil
}

// Element type and direction of each operand: which setter binds it.
type kind int8

const (
	kindF32In kind = iota
	kindF32Out
	kindMask
	kindI32
)

var operandKinds = [numOperands]kind{
	OperandQ: kindF32In, OperandK: kindF32In, OperandV: kindF32In,
	OperandOut: kindF32Out, OperandLSE: kindF32Out, OperandWeights: kindF32Out,
	OperandKeyValid: kindMask, OperandAllowed: kindMask,
	OperandBias: kindF32In, OperandAlibiSlopes: kindF32In, OperandSinks: kindF32In,
	OperandQueryValid: kindMask, OperandSeqLensK: kindI32, OperandKeyMass: kindF32Out,
}

var kindSetters = [...]string{kindF32In: "SetF32", kindF32Out: "SetOutF32", kindMask: "SetBool or SetU8",
	kindI32: "SetI32"}

// Args holds the per-call slices of the extensible call (attn_args) for one Desc, and runs
// operations with them (attn_run). Create it with Desc.NewArgs, bind slices with the setters,
// call Run(OpForward) or Run(OpWeights) as often as needed, and Close it.
//
// The setters check every slice against Desc.RequiredLen before anything reaches C: nil
// unbinds the operand ("not given"), a shorter slice (an empty one included) is a
// StatusInvalidArgument error, a longer one is fine (only the required prefix is read or
// written). Required operands (q, k; v and out for OpForward; weights for OpWeights) that are
// not bound make Run fail with StatusNullPointer; an output overlapping another operand with the
// library's StatusInvalidArgument ("out overlaps q").
//
// Zero copy: the slices stay in Go and are handed to C for the duration of each Run only (cgo's
// rule: C never keeps a Go pointer); a Run allocates nothing on the Go side. The Args keeps the
// slices reachable until they are unbound, Clear or Close.
//
// An Args may be used from several goroutines, but its calls are serialized (one mutex); use
// one Args per goroutine to run in parallel on a shared Desc.
type Args struct {
	mu   sync.Mutex
	d    *Desc
	h    capi.Struct_SS_attn_args // the C attn_args*, nil once closed
	f32  [numOperands][]float32   // float32 operands (inputs and outputs)
	mask [numOperands][]byte      // byte masks (a []bool is viewed as bytes: Go bools are 0/1)
	i32  []int32                  // OperandSeqLensK
}

// NewArgs creates an empty Args for d (attn_args_create). Close frees it; one that is never
// closed is freed by a finalizer once unreachable. The Args keeps d reachable.
func (d *Desc) NewArgs() (*Args, error) {
	if d == nil {
		return nil, ErrClosed
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.h == nil {
		return nil, ErrClosed
	}
	var handle uintptr
	if err := check(func() capi.Enum_SS_attn_status { return capi.Attn_args_create(&handle) }); err != nil {
		return nil, err
	}
	a := &Args{d: d, h: capi.SwigcptrStruct_SS_attn_args(handle)}
	runtime.SetFinalizer(a, (*Args).finalize)
	return a, nil
}

func (a *Args) finalize() {
	if a.h != nil {
		finalized(a.h.Swigcptr())
		capi.Attn_args_destroy(a.h)
		a.h = nil
		argsFinalized.Add(1)
	}
}

// Close frees the Args (not the slices it names). Afterwards every method returns
// ErrArgsClosed (a second Close too). A nil or zero Args behaves as closed.
func (a *Args) Close() error {
	if a == nil {
		return ErrArgsClosed
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.h == nil {
		return ErrArgsClosed
	}
	capi.Attn_args_destroy(a.h)
	a.h = nil
	a.f32, a.mask, a.i32 = [numOperands][]float32{}, [numOperands][]byte{}, nil
	argsClosed.Add(1)
	runtime.SetFinalizer(a, nil)
	return nil
}

// Desc is the descriptor the Args was created for.
func (a *Args) Desc() *Desc { return a.d }

// bind runs the checks common to every setter; n < 0 means "unbind" (a nil slice).
func (a *Args) bind(setter string, want kind, which Operand, n int, store func()) error {
	if a == nil {
		return ErrArgsClosed
	}
	if err := checkOperand(which); err != nil {
		return err
	}
	if k := operandKinds[which]; k != want {
		return argError(StatusInvalidArgument, "%s is bound with %s, not %s", which, kindSetters[k], setter)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.h == nil {
		return ErrArgsClosed
	}
	need := a.d.RequiredLen(which)
	if need == 0 {
		return ErrClosed
	}
	if n >= 0 && n < need { // need >= 1: an empty non-nil slice is a length error
		return argError(StatusInvalidArgument, "%s has %d elements, needs at least %d", which, n, need)
	}
	store()
	return nil
}

// SetF32 binds a float32 input: OperandQ, OperandK, OperandV, OperandBias,
// OperandAlibiSlopes or OperandSinks. nil unbinds it.
func (a *Args) SetF32(which Operand, data []float32) error {
	return a.bind("SetF32", kindF32In, which, sliceLen(len(data), data == nil), func() { a.f32[which] = data })
}

// SetOutF32 binds a float32 output: OperandOut, OperandLSE, OperandWeights or OperandKeyMass.
// nil unbinds it. Outputs must not overlap any other operand of the call.
func (a *Args) SetOutF32(which Operand, data []float32) error {
	return a.bind("SetOutF32", kindF32Out, which, sliceLen(len(data), data == nil), func() { a.f32[which] = data })
}

// SetBool binds a mask: OperandKeyValid, OperandAllowed or OperandQueryValid (true = real key /
// allowed / real query). nil unbinds it.
func (a *Args) SetBool(which Operand, mask []bool) error {
	return a.bind("SetBool", kindMask, which, sliceLen(len(mask), mask == nil), func() {
		if mask == nil {
			a.mask[which] = nil
		} else {
			a.mask[which] = unsafe.Slice((*byte)(unsafe.Pointer(&mask[0])), len(mask))
		}
	})
}

// SetU8 binds a byte mask (one byte per element, nonzero = true): OperandKeyValid,
// OperandAllowed or OperandQueryValid. nil unbinds it.
func (a *Args) SetU8(which Operand, mask []byte) error {
	return a.bind("SetU8", kindMask, which, sliceLen(len(mask), mask == nil), func() { a.mask[which] = mask })
}

// SetI32 binds an int32 operand: OperandSeqLensK ([batch], each in [0, seq_k]; checked by the
// library in Run). nil unbinds it.
func (a *Args) SetI32(which Operand, data []int32) error {
	return a.bind("SetI32", kindI32, which, sliceLen(len(data), data == nil), func() { a.i32 = data })
}

func sliceLen(n int, isNil bool) int {
	if isNil {
		return -1
	}
	return n
}

// Clear unbinds every operand (attn_args_clear).
func (a *Args) Clear() error {
	if a == nil {
		return ErrArgsClosed
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.h == nil {
		return ErrArgsClosed
	}
	a.f32, a.mask, a.i32 = [numOperands][]float32{}, [numOperands][]byte{}, nil
	return nil
}

func pf(s []float32) *float32 {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

func pb(s []byte) *uint8 {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

func pi(s []int32) *int32 {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// Run executes op (OpForward or OpWeights) with the Desc's configuration and the bound
// operands (attn_run). Results are bit-identical whatever the thread count.
func (a *Args) Run(op Op) error {
	if a == nil {
		return ErrArgsClosed
	}
	if err := checkOp(op); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.h == nil {
		return ErrArgsClosed
	}
	d := a.d
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.h == nil {
		return ErrClosed
	}
	h, ah, f, m := d.h, a.h, &a.f32, &a.mask
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_go_run(h, capi.Enum_SS_attn_op(op), ah,
			pf(f[OperandQ]), int64(len(f[OperandQ])),
			pf(f[OperandK]), int64(len(f[OperandK])),
			pf(f[OperandV]), int64(len(f[OperandV])),
			pf(f[OperandOut]), int64(len(f[OperandOut])),
			pf(f[OperandLSE]), int64(len(f[OperandLSE])),
			pf(f[OperandWeights]), int64(len(f[OperandWeights])),
			pb(m[OperandKeyValid]), int64(len(m[OperandKeyValid])),
			pb(m[OperandAllowed]), int64(len(m[OperandAllowed])),
			pf(f[OperandBias]), int64(len(f[OperandBias])),
			pf(f[OperandAlibiSlopes]), int64(len(f[OperandAlibiSlopes])),
			pf(f[OperandSinks]), int64(len(f[OperandSinks])),
			pb(m[OperandQueryValid]), int64(len(m[OperandQueryValid])),
			pi(a.i32), int64(len(a.i32)),
			pf(f[OperandKeyMass]), int64(len(f[OperandKeyMass])))
	})
}
