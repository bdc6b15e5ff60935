// Package attn is the Go binding of libattn: exact, masked scaled dot-product attention on the
// CPU in float32.
//
//	out_i = sum_j softmax_j(scale * q_i . k_j | key j visible to query i) * v_j
//
// Install: the module needs the libattn C package (libattn.so, attn.h and attn.pc), which cgo
// finds with pkg-config; then
//
//	go get github.com/libattn/libattn/bindings/go
//
// and import it as
//
//	import attn "github.com/libattn/libattn/bindings/go"
//
// For a C package installed outside pkg-config's default search path, set
// PKG_CONFIG_PATH=<prefix>/lib/pkgconfig (Debian: <prefix>/lib/x86_64-linux-gnu/pkgconfig).
// No swig is needed: the SWIG wrappers (internal/capi) are generated once and shipped in the
// module. cgo must be enabled (CGO_ENABLED=1, a C compiler); Go's int must be 64 bits.
//
// This package is the idiomatic face over those raw wrappers. Slices cross into C without
// copies (a pointer to the first element, with the length where the C call takes one). Only a
// nil slice means "not given". The library checks every argument; failures are returned as
// *Error, carrying the library's status and its message for that very call. The semantics of
// every call are those of the C header, capi/attn.h, which each member names.
//
// Three ways to call: Simple (one sequence, the original function); a Desc (batch, heads, GQA,
// causal rule, scale, strides) with Desc.Forward and Desc.Weights; and the extensible 0.2 call:
// a Desc configured with options (WithWindow, WithSoftcap, WithAlibi, ...) and an Args holding
// the per-call slices, run with Args.Run(OpForward) or Args.Run(OpWeights).
//
// Storage types: Q, K and V may also be []uint16 f16 / bf16 bit patterns (Args.SetF16,
// SetBF16) and K, V []int8 with per-row float32 scales (Args.SetI8, OperandKScale /
// OperandVScale), passed to C without copies like the float32 slices; ConvertF32ToF16,
// ConvertF32ToBF16, ConvertF16ToF32, ConvertBF16ToF32 and QuantizeI8 fill and read them.
// Gradients: Args.Backward (OpBackward) with OperandDOut in and OperandDQ, DK, DV, DBias, DSinks
// out; Desc.Backward is the counterpart of Desc.Forward.
//
// Serving layouts: WithVarlen (packed variable-length batches, OperandCuSeqlensQ/K), WithPageSize
// (paged K/V caches, OperandBlockTable + OperandSeqLensK), Args.KVAppend (new key/value rows into
// their cache positions), Desc.Merge (the exact merge of results over disjoint key sets) and
// WithBatchInvariant (a query's output bits depend only on its own sequence).
//
// Arithmetic: WithCompute(ComputeFP16) runs prefill-like forward calls on the AVX512-FP16 fast
// path (outputs within about 1e-2 max|v| of ComputeExact, the default); other calls and CPUs
// run exactly as ComputeExact.
//
// Introspection: ISAs (the ISAs this build knows, and whether this CPU runs each), Param.Info
// and Operand.Info (name, kind, bounds and default of a parameter; name, storage types, rank
// and strides of an operand) read the library's own tables (capi/attn.h "Introspection").
//
// A *Desc may be shared by any number of goroutines; Close waits for calls in flight. A Desc or
// Args that is never closed is freed by a finalizer (a safety net: call Close).
package attn

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// Status is a libattn status code (attn_status). The values are pinned by the C API.
type Status int

// Status codes, with the values of attn_status (capi/attn.h says when each is returned).
const (
	StatusOK              Status = 0 // ATTN_OK
	StatusNullPointer     Status = 1 // ATTN_ERR_NULL_POINTER
	StatusInvalidArgument Status = 2 // ATTN_ERR_INVALID_ARGUMENT
	StatusOutOfMemory     Status = 3 // ATTN_ERR_OUT_OF_MEMORY
	StatusUnsupported     Status = 4 // ATTN_ERR_UNSUPPORTED
	StatusInternal        Status = 5 // ATTN_ERR_INTERNAL
)

// String returns the library's short description of the status (attn_status_string).
func (s Status) String() string {
	if int(int32(s)) != int(s) {
		return "unknown status" // never truncated to a valid status by the 32-bit C enum
	}
	return capi.Attn_status_string(capi.Enum_SS_attn_status(s))
}

// Causal is the causal rule (attn_causal).
type Causal int

// Causal rules, with the values of attn_causal.
const (
	CausalNone        Causal = 0 // every key
	CausalTopLeft     Causal = 1 // j <= i (PyTorch is_causal)
	CausalBottomRight Causal = 2 // j <= i + (seq_k - seq_q) (KV-cache / decode alignment)
)

// String returns "none", "top-left" or "bottom-right" ("Causal(n)" for other values).
func (c Causal) String() string {
	return enumName("Causal", int(c), "none", "top-left", "bottom-right")
}

// enumName is the name of value v of a Go enum type typ: names[v], else "typ(v)".
func enumName(typ string, v int, names ...string) string {
	if v >= 0 && v < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// Operand names a buffer (attn_operand); capi/attn.h gives each one's shape, type and role.
type Operand int

// Operands, with the values of attn_operand (String: the library's names, attn_operand_info).
const (
	OperandQ           Operand = 0  // queries
	OperandK           Operand = 1  // keys (a K cache for the serving calls)
	OperandV           Operand = 2  // values (a V cache for the serving calls)
	OperandOut         Operand = 3  // the output
	OperandLSE         Operand = 4  // log-sum-exp per query row, output
	OperandWeights     Operand = 5  // the weights of OpWeights, output
	OperandKeyValid    Operand = 6  // key padding mask
	OperandAllowed     Operand = 7  // [seq_q][seq_k] mask
	OperandBias        Operand = 8  // additive bias (since 0.2, through Args)
	OperandAlibiSlopes Operand = 9  // ALiBi slopes (WithAlibi(AlibiOperand))
	OperandSinks       Operand = 10 // sink logits per head
	OperandQueryValid  Operand = 11 // query padding mask
	OperandSeqLensK    Operand = 12 // keys per sequence
	OperandKeyMass     Operand = 13 // attention each key received, output
	OperandCuSeqlensQ  Operand = 14 // prefix sums of the query lengths (WithVarlen)
	OperandCuSeqlensK  Operand = 15 // prefix sums of the key lengths (WithVarlen, unpaged K/V)
	OperandBlockTable  Operand = 16 // page ids per sequence (WithPageSize)
	OperandNewK        Operand = 17 // new key rows of KVAppend
	OperandNewV        Operand = 18 // new value rows of KVAppend
	OperandDOut        Operand = 19 // gradient of OUT (OpBackward), input
	OperandDQ          Operand = 20 // gradient of Q, output
	OperandDK          Operand = 21 // gradient of K, output
	OperandDV          Operand = 22 // gradient of V, output
	OperandDBias       Operand = 23 // gradient of BIAS, output
	OperandDSinks      Operand = 24 // gradient of SINKS, output
	OperandKScale      Operand = 25 // scales of an int8 K
	OperandVScale      Operand = 26 // scales of an int8 V
	OperandNewKScale   Operand = 27 // scales of int8 new key rows
	OperandNewVScale   Operand = 28 // scales of int8 new value rows
	OperandQScale      Operand = 29 // per-head factor on Q (since 0.3)
)

// libNames is one of the library's name tables (attn_go_name: 0 operands, 1 parameters), read
// once at load: the names of the enum values 0, 1, ... up to the first it refuses.
func libNames(table int) (names []string) {
	for i := 0; ; i++ {
		n := capi.Attn_go_name(table, i)
		if n == "" {
			return names
		}
		names = append(names, n)
	}
}

var operandNames = libNames(0)

// String returns the C name of the operand ("q", "key_mass", ...; "Operand(n)" for others).
func (o Operand) String() string { return enumName("Operand", int(o), operandNames...) }

// Error is a failed libattn call: the status and the library's message naming the argument and
// the problem (attn_last_error, read on the OS thread that made the call).
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return "attn: " + e.Status.String() + ": " + e.Message }

// Is reports whether target is an *Error with the same Status and an empty Message, so
// errors.Is(err, &attn.Error{Status: attn.StatusNullPointer}) matches by status alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Status == e.Status
}

// ErrClosed is returned by every method of a Desc after Close, and by Args calls on its Desc.
var ErrClosed = &Error{Status: StatusInvalidArgument, Message: "desc is closed"}

// ErrArgsClosed is returned by every method of an Args after its Close.
var ErrArgsClosed = &Error{Status: StatusInvalidArgument, Message: "args is closed"}

// testHookBeforeLastError, when set by a test, runs between a failing C call and the read of
// attn_last_error (to give the scheduler every chance to move the goroutine).
var testHookBeforeLastError func()

// check turns the status of the C call f into an error carrying that call's message. f and
// attn_last_error run on one locked OS thread: the library keeps its message per thread.
func check(f func() capi.Enum_SS_attn_status) error {
	runtime.LockOSThread()
	st := f()
	if st == capi.Enum_SS_attn_status(StatusOK) {
		runtime.UnlockOSThread()
		return nil
	}
	if testHookBeforeLastError != nil {
		testHookBeforeLastError()
	}
	msg := capi.Attn_last_error()
	runtime.UnlockOSThread()
	return &Error{Status: Status(st), Message: msg}
}

func argError(st Status, format string, args ...interface{}) error {
	return &Error{Status: st, Message: fmt.Sprintf(format, args...)}
}

// What C cannot see: a Go int that is negative where C takes a size_t, or too wide for C's int.
func nonNegative(name string, v int) error {
	if v < 0 {
		return argError(StatusInvalidArgument, "%s (%d) is negative", name, v)
	}
	return nil
}

func fitsInt(name string, v int) error {
	if int(int32(v)) != v {
		return argError(StatusInvalidArgument, "%s (%d) does not fit a C int", name, v)
	}
	return nil
}

// sized checks a slice of a call whose C function takes no length (Simple, Forward, Weights):
// nil is StatusNullPointer if required, a slice shorter than need StatusInvalidArgument. It
// returns the pointer C gets. (No *error out-parameter: Go's escape analysis cannot see through
// a generic callee from another package, so the caller's error variable would be allocated on
// the heap in every call.)
func sized[T any](name string, s []T, need int, required bool) (*T, error) {
	switch {
	case s == nil && required:
		return nil, argError(StatusNullPointer, "%s is nil (needs %d elements)", name, need)
	case s != nil && len(s) < need:
		return nil, argError(StatusInvalidArgument, "%s has %d elements, needs at least %d", name, len(s), need)
	case len(s) == 0:
		return nil, nil // an empty slice of an empty operand: nothing is read or written
	}
	return &s[0], nil
}

// firstErr is the first non-nil error of a call's checks, in argument order.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// maxDim is the library's limit on every size (2^31 - 1).
const maxDim = 0x7fffffff

// Simple is the original one-sequence, one-head call (attn_simple): q, k, v are [n][d]; it
// returns the new [n][d] output.
func Simple(q, k, v []float32, n, d int, causal bool, padMask []bool) ([]float32, error) {
	for _, x := range [...]struct {
		name string
		v    int
	}{{"n", n}, {"d", d}} {
		if x.v <= 0 || x.v > maxDim {
			return nil, argError(StatusInvalidArgument, "%s (%d) must be in [1, %d]", x.name, x.v, maxDim)
		}
	}
	pq, e0 := sized("q", q, n*d, true)
	pk, e1 := sized("k", k, n*d, true)
	pv, e2 := sized("v", v, n*d, true)
	pm, e3 := sized("pad_mask", padMask, n, false)
	if err := firstErr(e0, e1, e2, e3); err != nil {
		return nil, err
	}
	out := make([]float32, n*d)
	err := check(func() capi.Enum_SS_attn_status {
		return capi.Attn_simple(pq, pk, pv, int64(n), int64(d), causal, pm, &out[0])
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Native objects freed: by Close, and by the finalizer safety net (read by the tests).
var descsClosed, descsFinalized, argsClosed, argsFinalized atomic.Int64

// testHookFinalized, when a test stores a func(uintptr) in it, sees the address of every
// native object a finalizer frees (finalizers run on their own goroutine: hence atomic).
var testHookFinalized atomic.Value

func finalized(h uintptr) {
	if f, ok := testHookFinalized.Load().(func(uintptr)); ok && f != nil {
		f(h)
	}
}

// Desc is a configured attention problem (attn_desc), immutable once NewDesc returns and safe
// for concurrent use. Close frees it; one never closed is freed by a finalizer.
type Desc struct {
	mu   sync.RWMutex             // read-held by calls, write-held by Close
	h    capi.Struct_SS_attn_desc // the C attn_desc*, nil once closed
	need []int                    // attn_desc_required_len per Operand, read once at creation
}

// use runs f with d's handle under the read lock; ErrClosed once d is closed.
func (d *Desc) use(f func(h capi.Struct_SS_attn_desc) error) error {
	if d == nil {
		return ErrClosed
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.h == nil {
		return ErrClosed
	}
	return f(d.h)
}

// Option configures a Desc in NewDesc; options apply in order.
type Option struct {
	apply func(h capi.Struct_SS_attn_desc) error
}

// WithCausal sets the causal rule (attn_desc_set_causal; default CausalNone).
func WithCausal(c Causal) Option {
	return Option{func(h capi.Struct_SS_attn_desc) error {
		if err := fitsInt("causal", int(c)); err != nil {
			return err
		}
		return check(func() capi.Enum_SS_attn_status {
			return capi.Attn_desc_set_causal(h, capi.Enum_SS_attn_causal(c))
		})
	}}
}

// WithScale sets the score scale (attn_desc_set_scale; default 1/sqrt(headDim)).
func WithScale(scale float32) Option {
	return Option{func(h capi.Struct_SS_attn_desc) error {
		return check(func() capi.Enum_SS_attn_status { return capi.Attn_desc_set_scale(h, scale) })
	}}
}

// WithStrides sets the element strides of an operand (attn_desc_set_strides: which operands,
// and what the strides mean in the serving layouts, are in capi/attn.h).
func WithStrides(which Operand, batchStride, headStride, rowStride int) Option {
	return Option{func(h capi.Struct_SS_attn_desc) error {
		if err := fitsInt("which", int(which)); err != nil {
			return err
		}
		for i, s := range [...]int{batchStride, headStride, rowStride} {
			if err := nonNegative([...]string{"batch_stride", "head_stride", "row_stride"}[i], s); err != nil {
				return err
			}
		}
		return check(func() capi.Enum_SS_attn_status {
			return capi.Attn_desc_set_strides(h, capi.Enum_SS_attn_operand(which),
				int64(batchStride), int64(headStride), int64(rowStride))
		})
	}}
}

// NewDesc creates a descriptor (attn_desc_create) for q [batch][headsQ][seqQ][headDim], k and v
// [batch][headsKV][seqK][headDim], and applies the options in order; nothing leaks on failure.
func NewDesc(batch, headsQ, headsKV, seqQ, seqK, headDim int, opts ...Option) (*Desc, error) {
	for i, v := range [...]int{batch, headsQ, headsKV, seqQ, seqK, headDim} {
		if err := nonNegative([...]string{"batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim"}[i], v); err != nil {
			return nil, err
		}
	}
	var handle uintptr
	err := check(func() capi.Enum_SS_attn_status {
		return capi.Attn_desc_create(&handle, int64(batch), int64(headsQ), int64(headsKV),
			int64(seqQ), int64(seqK), int64(headDim))
	})
	if err != nil {
		return nil, err
	}
	h := capi.SwigcptrStruct_SS_attn_desc(handle)
	for _, opt := range opts {
		if opt.apply == nil {
			continue
		}
		if err := opt.apply(h); err != nil {
			capi.Attn_desc_destroy(h)
			return nil, err
		}
	}
	d := &Desc{h: h, need: make([]int, len(operandNames))}
	for op := range d.need {
		d.need[op] = int(capi.Attn_desc_required_len(h, capi.Enum_SS_attn_operand(op)))
	}
	runtime.SetFinalizer(d, (*Desc).finalize)
	return d, nil
}

// finalize is the safety net for a Desc nobody closed (no call can be in flight).
func (d *Desc) finalize() {
	if d.h != nil {
		finalized(d.h.Swigcptr())
		capi.Attn_desc_destroy(d.h)
		d.h = nil
		descsFinalized.Add(1)
	}
}

// Close frees the descriptor, waiting for calls in flight; afterwards every method returns
// ErrClosed (a second Close too).
func (d *Desc) Close() error {
	if d == nil {
		return ErrClosed
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.h == nil {
		return ErrClosed
	}
	capi.Attn_desc_destroy(d.h)
	d.h = nil
	descsClosed.Add(1)
	runtime.SetFinalizer(d, nil)
	return nil
}

// RequiredLen is the number of elements the slice for which must hold (attn_desc_required_len;
// the serving layouts' meaning is in capi/attn.h); 0 once closed and for an unknown operand.
func (d *Desc) RequiredLen(which Operand) int {
	n := 0
	_ = d.use(func(capi.Struct_SS_attn_desc) error {
		if which >= 0 && int(which) < len(d.need) {
			n = d.need[which]
		}
		return nil
	})
	return n
}

// Forward computes the attention output (attn_forward). keyValid, allowed and lse may be nil.
// Each slice needs RequiredLen of its operand (C takes no lengths here: they are checked first).
func (d *Desc) Forward(q, k, v []float32, keyValid, allowed []bool, out, lse []float32) error {
	return d.use(func(h capi.Struct_SS_attn_desc) error {
		n := d.need
		pq, e0 := sized("q", q, n[OperandQ], true)
		pk, e1 := sized("k", k, n[OperandK], true)
		pv, e2 := sized("v", v, n[OperandV], true)
		pkv, e3 := sized("key_valid", keyValid, n[OperandKeyValid], false)
		pal, e4 := sized("allowed", allowed, n[OperandAllowed], false)
		pout, e5 := sized("out", out, n[OperandOut], true)
		plse, e6 := sized("lse", lse, n[OperandLSE], false)
		if err := firstErr(e0, e1, e2, e3, e4, e5, e6); err != nil {
			return err
		}
		return check(func() capi.Enum_SS_attn_status {
			return capi.Attn_forward(h, pq, pk, pv, pkv, pal, pout, plse)
		})
	})
}

// Weights writes the attention weights (attn_weights); slices as in Forward.
func (d *Desc) Weights(q, k []float32, keyValid, allowed []bool, weights []float32) error {
	return d.use(func(h capi.Struct_SS_attn_desc) error {
		n := d.need
		pq, e0 := sized("q", q, n[OperandQ], true)
		pk, e1 := sized("k", k, n[OperandK], true)
		pkv, e2 := sized("key_valid", keyValid, n[OperandKeyValid], false)
		pal, e3 := sized("allowed", allowed, n[OperandAllowed], false)
		pw, e4 := sized("weights", weights, n[OperandWeights], true)
		if err := firstErr(e0, e1, e2, e3, e4); err != nil {
			return err
		}
		return check(func() capi.Enum_SS_attn_status { return capi.Attn_weights(h, pq, pk, pkv, pal, pw) })
	})
}

// Backward computes the gradients of Forward (OpBackward through a temporary attn_args): dq, dk
// and dv may each be nil (at least one given). The library checks every length.
func (d *Desc) Backward(q, k, v []float32, keyValid, allowed []bool, out, lse, dout, dq, dk, dv []float32) error {
	return d.use(func(h capi.Struct_SS_attn_desc) error {
		b := [...]binding{bind(q, 0), bind(k, 0), bind(v, 0), bind(out, goOut), bind(lse, goOut),
			bindBool(keyValid), bindBool(allowed), bind(dout, 0), bind(dq, goOut), bind(dk, goOut), bind(dv, goOut)}
		ops := [...]Operand{OperandQ, OperandK, OperandV, OperandOut, OperandLSE, OperandKeyValid,
			OperandAllowed, OperandDOut, OperandDQ, OperandDK, OperandDV}
		for i := range b {
			b[i].which = ops[i]
		}
		return goCall(h, goRun, OpBackward, nil, nil, b[:], nil)
	})
}

// Version is the library's version "MAJOR.MINOR.PATCH" (attn_version_string).
func Version() string { return capi.Attn_version_string() }

// VersionNumber is MAJOR*10000 + MINOR*100 + PATCH (attn_version_number).
func VersionNumber() int { return int(capi.Attn_version_number()) }

// ISA is the name of the kernel in use (attn_isa).
func ISA() string { return capi.Attn_isa() }

// ComputeUnit is the unit mode runs its products on with the kernel in use (attn_compute_unit),
// e.g. "int16 vpmaddwd (avx2)"; a mode that runs as ComputeExact on this CPU names
// ComputeExact's unit. A value that is not a Compute (the library's NULL) is an *Error with
// StatusInvalidArgument naming mode.
func ComputeUnit(mode Compute) (string, error) {
	if err := fitsInt("mode", int(mode)); err != nil {
		return "", err
	}
	// the library never names a unit ""; swig gives "" for its NULL
	if unit := capi.Attn_compute_unit(int(mode)); unit != "" {
		return unit, nil
	}
	return "", argError(StatusInvalidArgument, "mode (%d) is not an attn_compute", int(mode))
}

// SetISA caps the kernel at the named ISA, "" restoring the default (attn_set_isa). A name with
// a NUL or non-ASCII byte, which C would misread, reaches C in its %q form without the quotes,
// so the refusal is the library's own.
func SetISA(name string) error {
	for i := 0; i < len(name); i++ {
		if name[i] == 0 || name[i] >= 0x80 {
			q := strconv.Quote(name)
			name = q[1 : len(q)-1]
			break
		}
	}
	return check(func() capi.Enum_SS_attn_status { return capi.Attn_set_isa(name) })
}

// NumThreads is the number of threads attention calls use (attn_get_num_threads).
func NumThreads() int { return int(capi.Attn_get_num_threads()) }

// SetNumThreads sets the thread count, 0 restoring the default (attn_set_num_threads).
func SetNumThreads(n int) error {
	if err := nonNegative("n", n); err != nil {
		return err
	}
	return check(func() capi.Enum_SS_attn_status { return capi.Attn_set_num_threads(int64(n)) })
}
