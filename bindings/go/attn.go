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
// copies: a []float32, []bool, []byte or []int32 is passed as a pointer to its first element, and
// every length is checked against attn_desc_required_len before any pointer reaches C. Only a nil
// slice means "not given"; an empty non-nil slice is a length error. Failures are returned as
// *Error, carrying the library's status and its message for that very call.
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
// A *Desc may be shared by any number of goroutines; Close waits for calls in flight. A Desc or
// Args that is never closed is freed by a finalizer (a safety net: call Close).
package attn

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// Status is a libattn status code (attn_status). The values are pinned by the C API.
type Status int

// Status codes, with the values of attn_status.
const (
	StatusOK              Status = 0 // ATTN_OK
	StatusNullPointer     Status = 1 // ATTN_ERR_NULL_POINTER: a required slice was nil (or a required operand not bound)
	StatusInvalidArgument Status = 2 // ATTN_ERR_INVALID_ARGUMENT: a size, length, stride, enum or float is out of range
	StatusOutOfMemory     Status = 3 // ATTN_ERR_OUT_OF_MEMORY
	StatusUnsupported     Status = 4 // ATTN_ERR_UNSUPPORTED: valid request this build or CPU cannot serve
	StatusInternal        Status = 5 // ATTN_ERR_INTERNAL: a bug in libattn
)

// String returns the library's short description of the status ("ok", "null pointer", ...).
func (s Status) String() string {
	if int(int32(s)) != int(s) {
		return "unknown status" // never truncated to a valid status by the 32-bit C enum
	}
	return capi.Attn_status_string(capi.Enum_SS_attn_status(s))
}

// Causal is the causal rule (attn_causal): which keys j query i may see.
type Causal int

// Causal rules, with the values of attn_causal.
const (
	CausalNone        Causal = 0 // every key
	CausalTopLeft     Causal = 1 // j <= i (PyTorch is_causal)
	CausalBottomRight Causal = 2 // j <= i + (seq_k - seq_q) (KV-cache / decode alignment)
)

// String returns "none", "top-left" or "bottom-right" ("Causal(n)" for other values).
func (c Causal) String() string {
	switch c {
	case CausalNone:
		return "none"
	case CausalTopLeft:
		return "top-left"
	case CausalBottomRight:
		return "bottom-right"
	}
	return fmt.Sprintf("Causal(%d)", int(c))
}

func checkCausal(c Causal) error {
	if c < CausalNone || c > CausalBottomRight {
		return argError(StatusInvalidArgument,
			"causal (%d) is not an attn_causal value (0 none, 1 top-left, 2 bottom-right)", int(c))
	}
	return nil
}

// Operand names a buffer (attn_operand), for WithStrides, RequiredLen and the Args setters.
type Operand int

// Operands, with the values of attn_operand. The shapes are outermost first.
const (
	OperandQ        Operand = 0 // f32 [batch][heads_q][seq_q][head_dim]    strided, input
	OperandK        Operand = 1 // f32 [batch][heads_kv][seq_k][head_dim]   strided, input
	OperandV        Operand = 2 // f32 [batch][heads_kv][seq_k][head_dim_v] strided, input
	OperandOut      Operand = 3 // f32 [batch][heads_q][seq_q][head_dim_v]  strided, output
	OperandLSE      Operand = 4 // f32 [batch][heads_q][seq_q]              output
	OperandWeights  Operand = 5 // f32 [batch][heads_q][seq_q][seq_k]       output
	OperandKeyValid Operand = 6 // bool/byte [batch][seq_k], true = real key
	OperandAllowed  Operand = 7 // bool/byte [seq_q][seq_k], true = query i may see key j

	// since 0.2, through Args
	OperandBias        Operand = 8  // f32 [batch][heads_q][seq_q][seq_k] strided (0 broadcasts), input
	OperandAlibiSlopes Operand = 9  // f32 [heads_q] or [batch][heads_q] (WithStrides), input (with WithAlibi(AlibiOperand))
	OperandSinks       Operand = 10 // f32 [heads_q] sink logits, input
	OperandQueryValid  Operand = 11 // bool/byte [batch][seq_q], false = padded query
	OperandSeqLensK    Operand = 12 // int32 [batch] in [0, seq_k]: keys j >= len are padding
	OperandKeyMass     Operand = 13 // f32 [batch][heads_q][seq_k] attention each key received, output

	// since 0.2, the serving layouts (see docs/serving.md and attn.h)
	OperandCuSeqlensQ Operand = 14 // int32 [batch+1] prefix sums of the query lengths (WithVarlen)
	OperandCuSeqlensK Operand = 15 // int32 [batch+1] prefix sums of the key lengths (WithVarlen, unpaged K/V)
	OperandBlockTable Operand = 16 // int32 [batch][max_pages] page ids of each sequence, -1 = unused (WithPageSize)
	OperandNewK       Operand = 17 // f32 [tokens][heads_kv][head_dim] rows for Args.KVAppend, input
	OperandNewV       Operand = 18 // f32 [tokens][heads_kv][head_dim_v] rows for Args.KVAppend, input

	// since 0.2, the gradients of OpBackward (Args.Backward, Desc.Backward): each in the layout
	// of its forward counterpart
	OperandDOut   Operand = 19 // f32 gradient of OUT, in OUT's layout, input
	OperandDQ     Operand = 20 // f32 gradient of Q, in Q's layout, output
	OperandDK     Operand = 21 // f32 gradient of K, in K's layout (GQA: summed over the query heads), output
	OperandDV     Operand = 22 // f32 gradient of V, in V's layout, output
	OperandDBias  Operand = 23 // f32 gradient of BIAS, in BIAS's layout (broadcast dims summed), output
	OperandDSinks Operand = 24 // f32 [heads_q] gradient of SINKS, output

	// since 0.2, the scales of int8 K / V (Args.SetI8; see docs/storage.md)
	OperandKScale Operand = 25 // f32 [batch][heads_kv][seq_k] scale of each int8 K row, strided, input
	OperandVScale Operand = 26 // f32 [batch][heads_kv][seq_k] scale of each int8 V row, strided, input

	// since 0.2, the scales of int8 new rows (Args.KVAppendArgs into an int8 cache)
	OperandNewKScale Operand = 27 // f32 [tokens][heads_kv] scale of each int8 OperandNewK row, input
	OperandNewVScale Operand = 28 // f32 [tokens][heads_kv] scale of each int8 OperandNewV row, input
)

const numOperands = 29

var operandNames = [numOperands]string{"q", "k", "v", "out", "lse", "weights", "key_valid",
	"allowed", "bias", "alibi_slopes", "sinks", "query_valid", "seq_lens_k", "key_mass",
	"cu_seqlens_q", "cu_seqlens_k", "block_table", "new_k", "new_v",
	"dout", "dq", "dk", "dv", "dbias", "dsinks", "k_scale", "v_scale", "new_k_scale", "new_v_scale"}

// String returns the C name of the operand ("q", "k", ..., "key_mass", "cu_seqlens_q", ...,
// "new_v", "dout", "dq", ..., "dsinks", "k_scale", "v_scale", "new_k_scale", "new_v_scale").
func (o Operand) String() string {
	if o.valid() {
		return operandNames[o]
	}
	return fmt.Sprintf("Operand(%d)", int(o))
}

func (o Operand) valid() bool { return o >= 0 && o < numOperands }

func checkOperand(o Operand) error {
	if !o.valid() {
		return argError(StatusInvalidArgument, "which (%d) is not an attn_operand", int(o))
	}
	return nil
}

// Error is a failed libattn call: the status and a message naming the argument and the problem.
// For failures inside the library the message is the library's own (attn_last_error), read on
// the OS thread that made the call.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	return "attn: " + e.Status.String() + ": " + e.Message
}

// Is reports whether target is an *Error with the same Status and an empty Message, so
// errors.Is(err, &attn.Error{Status: attn.StatusNullPointer}) matches by status alone.
// errors.Is(err, attn.ErrClosed) matches the sentinel itself.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.Message == "" && t.Status == e.Status
}

// ErrClosed is returned by every method of a Desc after Close (Close included), and by
// Args.Run when the Args' Desc was closed.
var ErrClosed = &Error{Status: StatusInvalidArgument, Message: "desc is closed"}

// ErrArgsClosed is returned by every method of an Args after its Close (Close included).
var ErrArgsClosed = &Error{Status: StatusInvalidArgument, Message: "args is closed"}

// testHookBeforeLastError, when set by a test, runs between a failing C call and the read of
// attn_last_error (to give the scheduler every chance to move the goroutine).
var testHookBeforeLastError func()

// check turns the status of a C call made by f into an error carrying that call's message.
// f and attn_last_error run on one locked OS thread: the C side keeps its message per thread,
// and a goroutine may otherwise move to another thread between two cgo calls.
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

// Go-side checks, done before any pointer reaches C. Only nil means "not given": a required
// slice that is nil is a StatusNullPointer error; a slice shorter than required (an empty one
// included) a StatusInvalidArgument error. Longer slices are fine: only the first `need`
// elements are read or written.
func checkF32(name string, s []float32, need int, required bool) (*float32, error) {
	if s == nil {
		if required {
			return nil, argError(StatusNullPointer, "%s is nil (needs %d float32 elements)", name, need)
		}
		return nil, nil
	}
	if len(s) < need {
		return nil, argError(StatusInvalidArgument, "%s has %d elements, needs at least %d", name, len(s), need)
	}
	return pf(s), nil
}

func checkBool(name string, s []bool, need int) (*bool, error) {
	if s == nil {
		return nil, nil // optional mask: nil means "none"
	}
	if len(s) < need || len(s) == 0 {
		return nil, argError(StatusInvalidArgument, "%s has %d elements, needs at least %d", name, len(s), need)
	}
	return &s[0], nil
}

func nonNegative(name string, v int) error {
	if v < 0 {
		return argError(StatusInvalidArgument, "%s (%d) is negative", name, v)
	}
	return nil
}

// maxDim is the library's limit on every size (2^31 - 1).
const maxDim = 0x7fffffff

// Simple is the original one-sequence, one-head attention(Q, K, V, causal, pad_mask):
// q, k, v are [n][d] row-major; causal means query i sees keys j <= i; padMask (nil = none, else
// n entries) marks real tokens true and padding false. It returns a new [n][d] slice. Sizes and
// lengths are checked before anything is allocated.
func Simple(q, k, v []float32, n, d int, causal bool, padMask []bool) ([]float32, error) {
	if n <= 0 {
		return nil, argError(StatusInvalidArgument, "n (%d) must be positive", n)
	}
	if d <= 0 {
		return nil, argError(StatusInvalidArgument, "d (%d) must be positive", d)
	}
	if n > maxDim || d > maxDim {
		name, x := "n", n
		if n <= maxDim {
			name, x = "d", d
		}
		return nil, argError(StatusInvalidArgument, "%s (%d) exceeds the limit %d", name, x, maxDim)
	}
	if n > maxInt/d {
		return nil, argError(StatusInvalidArgument, "n*d (%d*%d) overflows int", n, d)
	}
	need := n * d
	pq, err := checkF32("q", q, need, true)
	if err != nil {
		return nil, err
	}
	pk, err := checkF32("k", k, need, true)
	if err != nil {
		return nil, err
	}
	pv, err := checkF32("v", v, need, true)
	if err != nil {
		return nil, err
	}
	pm, err := checkBool("pad_mask", padMask, n)
	if err != nil {
		return nil, err
	}
	out := make([]float32, need)
	err = check(func() capi.Enum_SS_attn_status {
		return capi.Attn_simple(pq, pk, pv, int64(n), int64(d), causal, pm, &out[0])
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const maxInt = int(^uint(0) >> 1)

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

// Desc is a configured attention problem (attn_desc): sizes, causal rule, scale, strides and
// the 0.2 parameters. It is immutable once NewDesc returns, and safe for concurrent use. Close
// frees it; one that is never closed is freed by a finalizer once unreachable.
type Desc struct {
	mu   sync.RWMutex             // read-held by calls, write-held by Close
	h    capi.Struct_SS_attn_desc // the C attn_desc*, nil once closed (boxed once: no per-call allocation)
	need [numOperands]int         // attn_desc_required_len per Operand, read once at creation
	// least is what the Args setters demand of a slice for each Operand: need, except for the
	// operands whose length in a varlen call follows from cu_seqlens (need is then the upper
	// bound of a full pack and the library checks the call's own length: 0, since a pack of 0
	// tokens is valid). An empty non-nil slice is passed as bound and empty, never as nil.
	least [numOperands]int
}

// Option configures a Desc in NewDesc: WithCausal, WithScale, WithStrides, WithWindow,
// WithSoftcap, WithAlibi, WithSoftmaxPlusOne, WithHeadDimV, WithWeightsMode, WithBiasFirst,
// WithVarlen, WithPageSize, WithMaxPages, WithBatchInvariant, WithCompute, WithParamInt,
// WithParamFloat.
// Options apply in order.
type Option struct {
	apply func(h capi.Struct_SS_attn_desc) error
}

// WithCausal sets the causal rule (default CausalNone). Values other than the three Causal
// constants are refused before the C call.
func WithCausal(c Causal) Option {
	return Option{func(h capi.Struct_SS_attn_desc) error {
		if err := checkCausal(c); err != nil {
			return err
		}
		return check(func() capi.Enum_SS_attn_status {
			return capi.Attn_desc_set_causal(h, capi.Enum_SS_attn_causal(c))
		})
	}}
}

// WithScale sets the score scale (default 1/sqrt(headDim)); any finite value, 0 included.
func WithScale(scale float32) Option {
	return Option{func(h capi.Struct_SS_attn_desc) error {
		return check(func() capi.Enum_SS_attn_status { return capi.Attn_desc_set_scale(h, scale) })
	}}
}

// WithStrides sets the element strides of OperandQ, OperandK, OperandV, OperandOut,
// OperandBias, or of the int8 scales OperandKScale / OperandVScale: element (b, h, s, d) is at
// b*batchStride + h*headStride + s*rowStride + d (for the bias, s runs over seq_q and d over the
// keys; 0 broadcasts; a scale has no d: one float per row). Default: contiguous BHSD (for the
// scales K's default layout with head_dim 1). The strides count elements whatever the storage
// type (f16, bf16, int8 or float32). The gradients take the strides of their forward
// counterparts (OperandDQ those of Q, ...). OperandAlibiSlopes is [batch][heads_q] with no row
// dimension: the slope of (b, h) at b*batchStride + h*headStride, rowStride 0; default (0, 1,
// 0), one [heads_q] row for every batch entry; (heads_q, 1, 0) = per-batch slopes (b is the
// sequence of a varlen or paged call).
// With WithVarlen the batch stride of Q and OUT (and of K and V without pages) is not used:
// rows are tokens of the pack. With WithPageSize the batch stride of K and V is the page
// stride and the row stride the token stride inside a page: head-major pages
// [pages][heads_kv][page_size][head_dim] are WithStrides(OperandK, headsKV*pageSize*headDim,
// pageSize*headDim, headDim). Custom strides survive WithVarlen / WithPageSize in either order.
func WithStrides(which Operand, batchStride, headStride, rowStride int) Option {
	return Option{func(h capi.Struct_SS_attn_desc) error {
		switch which {
		case OperandQ, OperandK, OperandV, OperandOut, OperandBias, OperandKScale, OperandVScale,
			OperandAlibiSlopes:
		default:
			return argError(StatusInvalidArgument,
				"which (%d) must be ATTN_Q, ATTN_K, ATTN_V, ATTN_OUT or ATTN_BIAS (or the int8 scales "+
					"ATTN_K_SCALE, ATTN_V_SCALE, or ATTN_ALIBI_SLOPES)", int(which))
		}
		if err := nonNegative("batch_stride", batchStride); err != nil {
			return err
		}
		if err := nonNegative("head_stride", headStride); err != nil {
			return err
		}
		if err := nonNegative("row_stride", rowStride); err != nil {
			return err
		}
		return check(func() capi.Enum_SS_attn_status {
			return capi.Attn_desc_set_strides(h, capi.Enum_SS_attn_operand(which),
				int64(batchStride), int64(headStride), int64(rowStride))
		})
	}}
}

// NewDesc creates a descriptor for q: [batch][headsQ][seqQ][headDim], k: [batch][headsKV][seqK]
// [headDim], v: [batch][headsKV][seqK][headDimV] (headDimV = headDim unless WithHeadDimV);
// headsQ must be a multiple of headsKV (MHA, GQA, MQA). The options are applied in order; the
// first failure is returned and nothing is leaked.
func NewDesc(batch, headsQ, headsKV, seqQ, seqK, headDim int, opts ...Option) (*Desc, error) {
	dims := [...]struct {
		name string
		v    int
	}{{"batch", batch}, {"heads_q", headsQ}, {"heads_kv", headsKV}, {"seq_q", seqQ},
		{"seq_k", seqK}, {"head_dim", headDim}}
	for _, x := range dims {
		if err := nonNegative(x.name, x.v); err != nil {
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
	d := &Desc{h: h}
	for op := range d.need {
		n := capi.Attn_desc_required_len(h, capi.Enum_SS_attn_operand(op))
		// 0 only for the block table of a descriptor without pages
		if n < 0 || uint64(n) > uint64(maxInt) || (n == 0 && Operand(op) != OperandBlockTable) {
			capi.Attn_desc_destroy(h)
			return nil, argError(StatusInvalidArgument, "%s needs %d elements, which does not fit an int",
				Operand(op), n)
		}
		d.need[op] = int(n)
	}
	var varlen, pageSize int64
	for _, x := range []struct {
		p Param
		v *int64
	}{{ParamVarlen, &varlen}, {ParamPageSize, &pageSize}} {
		if err := check(func() capi.Enum_SS_attn_status {
			return capi.Attn_desc_get_int(h, capi.Enum_SS_attn_param(x.p), x.v)
		}); err != nil {
			capi.Attn_desc_destroy(h)
			return nil, err
		}
	}
	for op := range d.least {
		d.least[op] = d.need[op]
		switch Operand(op) {
		case OperandQ, OperandOut, OperandLSE, OperandNewK, OperandNewV, OperandDOut, OperandDQ,
			OperandNewKScale, OperandNewVScale:
			if varlen != 0 {
				d.least[op] = 0 // the pack's length comes from cu_seqlens_q: the library checks it
			}
		case OperandK, OperandV, OperandDK, OperandDV, OperandKScale, OperandVScale:
			if varlen != 0 && pageSize == 0 {
				d.least[op] = 0 // from cu_seqlens_k (with pages, need is one page: a true minimum)
			}
		}
	}
	runtime.SetFinalizer(d, (*Desc).finalize)
	return d, nil
}

// finalize is the safety net for a Desc nobody closed: it runs only once d is unreachable, so
// no call can be in flight.
func (d *Desc) finalize() {
	if d.h != nil {
		finalized(d.h.Swigcptr())
		capi.Attn_desc_destroy(d.h)
		d.h = nil
		descsFinalized.Add(1)
	}
}

// Close frees the descriptor. It waits for calls in flight on other goroutines; afterwards
// every method returns ErrClosed (a second Close too). A nil or zero Desc behaves as closed.
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

// RequiredLen is the number of elements (float32, bool/byte for the masks, int32 for
// OperandSeqLensK, OperandCuSeqlensQ/K and OperandBlockTable; uint16 or int8 for Q, K, V bound
// with SetF16 / SetBF16 / SetI8) the slice for `which` must hold, from attn_desc_required_len. 0 once closed, for an unknown operand, and for OperandBlockTable
// without WithPageSize.
//
// Serving layouts: with WithVarlen, OperandQ, OperandOut, OperandLSE, OperandNewK and OperandNewV
// (and OperandK, OperandV, OperandKScale, OperandVScale without pages; the gradients likewise)
// get the length of a full pack, every sequence at its
// maximum (seq_q, seq_k): an upper bound. A pack needs only its real tokens (total_q =
// cu_seqlens_q[batch] rows, LSE heads_q * total_q), so the Args setters accept any non-empty
// slice for them and the library checks the call's own length in Run, KVAppend and Merge
// ("attn_run: q has 19 elements, needs at least 40"). With WithPageSize, OperandK and OperandV
// are one page: a pool holds any number of pages (the block table's ids must be below it).
func (d *Desc) RequiredLen(which Operand) int {
	if d == nil {
		return 0
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.h == nil || !which.valid() {
		return 0
	}
	return d.need[which]
}

// Forward computes out = softmax(scale * q k^T | visible) v (attn_forward).
//
//	q:        RequiredLen(OperandQ) elements, k and v likewise (strided as configured)
//	keyValid: [batch][seqK], true = real token, false = padding; nil = all real
//	allowed:  [seqQ][seqK], true = query i may see key j; nil = all allowed
//	out:      RequiredLen(OperandOut) elements, written where the OUT strides address
//	lse:      [batch][headsQ][seqQ] log-sum-exp (-Inf for a row with no visible key); nil = not wanted
//
// out and lse must not overlap any other argument. The 0.2 parameters of the Desc (window,
// softcap, ...) apply too; the 0.2 operands (bias, sinks, ...) need an Args.
func (d *Desc) Forward(q, k, v []float32, keyValid, allowed []bool, out, lse []float32) error {
	if d == nil {
		return ErrClosed
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.h == nil {
		return ErrClosed
	}
	pq, err := checkF32("q", q, d.need[OperandQ], true)
	if err != nil {
		return err
	}
	pk, err := checkF32("k", k, d.need[OperandK], true)
	if err != nil {
		return err
	}
	pv, err := checkF32("v", v, d.need[OperandV], true)
	if err != nil {
		return err
	}
	pkv, err := checkBool("key_valid", keyValid, d.need[OperandKeyValid])
	if err != nil {
		return err
	}
	pal, err := checkBool("allowed", allowed, d.need[OperandAllowed])
	if err != nil {
		return err
	}
	pout, err := checkF32("out", out, d.need[OperandOut], true)
	if err != nil {
		return err
	}
	plse, err := checkF32("lse", lse, d.need[OperandLSE], false)
	if err != nil {
		return err
	}
	h := d.h
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_forward(h, pq, pk, pv, pkv, pal, pout, plse)
	})
}

// Backward computes the gradients of Forward (OpBackward through a temporary attn_args): from
// the forward's q, k, v, keyValid, allowed (as Forward), its out and lse (RequiredLen elements
// each, as Forward wrote them) and dout, the gradient of out (OUT's layout), it writes
//
//	dq: the gradient of q (Q's layout), dk: of k, dv: of v (K's / V's layouts; GQA: summed over
//	    a KV head's query heads)
//
// each optional (nil = not wanted), at least one. The Desc's 0.2 parameters apply too; the
// gradients of a bias or of sinks (OperandDBias, OperandDSinks) and the storage types need an
// Args (Args.Backward). Every slice is checked as in Forward; outputs must not overlap any
// other argument. Nothing is allocated on the Go side.
func (d *Desc) Backward(q, k, v []float32, keyValid, allowed []bool, out, lse, dout, dq, dk, dv []float32) error {
	if d == nil {
		return ErrClosed
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.h == nil {
		return ErrClosed
	}
	var f [numOperands][]float32
	var m [numOperands][]byte
	var i [numOperands][]int32
	var u16 [numStored][]uint16
	var bf16 [numStored]bool
	var i8 [numStored][]int8
	for _, x := range [...]struct {
		o        Operand
		s        []float32
		required bool
	}{{OperandQ, q, true}, {OperandK, k, true}, {OperandV, v, true}, {OperandOut, out, true},
		{OperandLSE, lse, true}, {OperandDOut, dout, true}, {OperandDQ, dq, false},
		{OperandDK, dk, false}, {OperandDV, dv, false}} {
		if _, err := checkF32(x.o.String(), x.s, d.need[x.o], x.required); err != nil {
			return err
		}
		f[x.o] = x.s
	}
	for _, x := range [...]struct {
		o Operand
		s []bool
	}{{OperandKeyValid, keyValid}, {OperandAllowed, allowed}} {
		if _, err := checkBool(x.o.String(), x.s, d.need[x.o]); err != nil {
			return err
		}
		if x.s != nil {
			m[x.o] = unsafe.Slice((*byte)(unsafe.Pointer(&x.s[0])), len(x.s))
		}
	}
	return goRun(d.h, OpBackward, nil, &f, &m, &i, &u16, &bf16, &i8)
}

// Weights writes the attention weight matrix [batch][headsQ][seqQ][seqK] (attn_weights): the
// softmax over visible keys; hidden keys get exactly 0. q, k, keyValid and allowed as Forward;
// weights needs RequiredLen(OperandWeights) elements.
func (d *Desc) Weights(q, k []float32, keyValid, allowed []bool, weights []float32) error {
	if d == nil {
		return ErrClosed
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.h == nil {
		return ErrClosed
	}
	pq, err := checkF32("q", q, d.need[OperandQ], true)
	if err != nil {
		return err
	}
	pk, err := checkF32("k", k, d.need[OperandK], true)
	if err != nil {
		return err
	}
	pkv, err := checkBool("key_valid", keyValid, d.need[OperandKeyValid])
	if err != nil {
		return err
	}
	pal, err := checkBool("allowed", allowed, d.need[OperandAllowed])
	if err != nil {
		return err
	}
	pw, err := checkF32("weights", weights, d.need[OperandWeights], true)
	if err != nil {
		return err
	}
	h := d.h
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_weights(h, pq, pk, pkv, pal, pw)
	})
}

// Version is the library's version "MAJOR.MINOR.PATCH" (attn_version_string).
func Version() string { return capi.Attn_version_string() }

// VersionNumber is MAJOR*10000 + MINOR*100 + PATCH (attn_version_number).
func VersionNumber() int { return int(capi.Attn_version_number()) }

// ISA is the name of the kernel in use: "scalar", "sse2", "avx2", "avx512" or "avx512fp16"
// (attn_isa).
func ISA() string { return capi.Attn_isa() }

// SetISA caps the kernel at name ("scalar", "sse2", "avx2", "avx512", "avx512fp16"), or restores the default
// with "" (attn_set_isa). A name with an embedded NUL or a non-ASCII byte, which C would misread
// ("avx2\x00junk" as "avx2"), reaches C in its %q form without the quotes (no name either), so
// the refusal and its list of names are the library's own.
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

// SetNumThreads sets the thread count (the caller counts as one); 0 restores the default
// (attn_set_num_threads).
func SetNumThreads(n int) error {
	if err := nonNegative("n", n); err != nil {
		return err
	}
	return check(func() capi.Enum_SS_attn_status { return capi.Attn_set_num_threads(int64(n)) })
}
