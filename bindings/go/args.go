package attn

// The per-call tensors of the extensible call (attn_args / attn_run, since 0.2), and the two
// serving calls that take them: Args.KVAppend (attn_kv_append) and Desc.Merge (attn_merge).

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
	OpBackward Op = 2 // reads q, k, v, out, lse (the forward's), dout; writes any of dq, dk, dv, dbias, dsinks
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
	OperandCuSeqlensQ: kindI32, OperandCuSeqlensK: kindI32, OperandBlockTable: kindI32,
	OperandNewK: kindF32In, OperandNewV: kindF32In,
	OperandDOut: kindF32In, OperandDQ: kindF32Out, OperandDK: kindF32Out, OperandDV: kindF32Out,
	OperandDBias: kindF32Out, OperandDSinks: kindF32Out,
	OperandKScale: kindF32In, OperandVScale: kindF32In,
}

var kindSetters = [...]string{kindF32In: "SetF32", kindF32Out: "SetOutF32", kindMask: "SetBool or SetU8",
	kindI32: "SetI32"}

// Storage types of Q, K and V (attn_args_set_f32 / _f16 / _bf16 / _i8).
type storage int8

const (
	storeF32 storage = iota
	storeF16
	storeBF16
	storeI8
)

var storageSetters = [...]string{storeF32: "SetF32", storeF16: "SetF16", storeBF16: "SetBF16", storeI8: "SetI8"}

// numStored is the number of operands with storage types: OperandQ, OperandK, OperandV (0, 1, 2).
const numStored = 3

// Args holds the per-call slices of the extensible call (attn_args) for one Desc, and runs
// operations with them (attn_run). Create it with Desc.NewArgs, bind slices with the setters,
// call Run(OpForward), Run(OpWeights) or Backward as often as needed, and Close it.
//
// Q, K and V may be stored as float32 (SetF32), IEEE binary16 or bfloat16 bit patterns (SetF16,
// SetBF16: []uint16) or, K and V, symmetric int8 with one float32 scale per row (SetI8: []int8,
// the scales bound with SetF32(OperandKScale / OperandVScale, ...)). The setter that binds an
// operand sets its type (binding it again with another setter replaces it); lengths count
// elements as for float32. The results are float32 attention over the widened values.
//
// The setters check every slice against Desc.RequiredLen before anything reaches C: nil
// unbinds the operand ("not given"), a shorter slice (an empty one included) is a
// StatusInvalidArgument error, a longer one is fine (only the required prefix is read or
// written). With WithVarlen the token operands of a pack, whose length follows from
// cu_seqlens, need only be non-empty in Go (see Desc.RequiredLen): the library checks the
// call's own length. Required operands (q, k; v and out for OpForward; weights for OpWeights)
// that are not bound make Run fail with StatusNullPointer; an output overlapping another
// operand with the library's StatusInvalidArgument ("out overlaps q").
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
	i32  [numOperands][]int32     // int32 operands: seq_lens_k, cu_seqlens_q/_k, block_table
	u16  [numStored][]uint16      // q, k, v stored in 16 bits (f16, or bf16 where bf16 is set)
	bf16 [numStored]bool
	i8   [numStored][]int8 // k, v stored as int8
}

// unbindAll forgets every binding of an operand, whatever its type (a.mu held).
func (a *Args) unbindAll(which Operand) {
	a.f32[which], a.mask[which], a.i32[which] = nil, nil, nil
	if which < numStored {
		a.u16[which], a.bf16[which], a.i8[which] = nil, false, nil
	}
}

// clearAll forgets every operand (a.mu held).
func (a *Args) clearAll() {
	a.f32, a.mask, a.i32 = [numOperands][]float32{}, [numOperands][]byte{}, [numOperands][]int32{}
	a.u16, a.bf16, a.i8 = [numStored][]uint16{}, [numStored]bool{}, [numStored][]int8{}
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
	a.clearAll()
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
	return a.store(which, n, store)
}

// bindStored is bind for the storage setters SetF16, SetBF16 and SetI8 (Q, K, V only; int8 K
// and V only).
func (a *Args) bindStored(st storage, which Operand, n int, store func()) error {
	if a == nil {
		return ErrArgsClosed
	}
	if err := checkOperand(which); err != nil {
		return err
	}
	switch {
	case st == storeI8 && which != OperandK && which != OperandV:
		return argError(StatusInvalidArgument, "%s cannot be bound with SetI8 (int8 storage is for K and V)", which)
	case which >= numStored:
		return argError(StatusInvalidArgument, "%s cannot be bound with %s (16-bit storage is for Q, K and V)",
			which, storageSetters[st])
	}
	return a.store(which, n, store)
}

// store checks the length n (< 0: unbind) against the Desc and runs store under the lock, after
// unbinding every earlier binding of which (one operand has one type).
func (a *Args) store(which Operand, n int, store func()) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.h == nil {
		return ErrArgsClosed
	}
	need := a.d.leastLen(which)
	if need < 0 {
		return ErrClosed
	}
	if n >= 0 && n < need { // an empty non-nil slice is a length error unless need is 0
		return argError(StatusInvalidArgument, "%s has %d elements, needs at least %d", which, n, need)
	}
	a.unbindAll(which)
	store()
	return nil
}

// leastLen is the length the setters demand for which (Desc.least), -1 once d is closed.
func (d *Desc) leastLen(which Operand) int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.h == nil {
		return -1
	}
	return d.least[which]
}

// SetF32 binds a float32 input: OperandQ, OperandK, OperandV, OperandBias,
// OperandAlibiSlopes, OperandSinks, OperandNewK, OperandNewV, OperandDOut (the gradient of out,
// for OpBackward) or the int8 scales OperandKScale / OperandVScale. nil unbinds it (for Q, K
// and V whatever setter bound it).
func (a *Args) SetF32(which Operand, data []float32) error {
	return a.bind("SetF32", kindF32In, which, sliceLen(len(data), data == nil), func() { a.f32[which] = data })
}

// SetOutF32 binds a float32 output: OperandOut, OperandLSE, OperandWeights, OperandKeyMass, or
// a gradient of OpBackward: OperandDQ, OperandDK, OperandDV, OperandDBias, OperandDSinks (the
// forward's out and lse, which OpBackward reads, stay bound with SetOutF32 too). nil unbinds it.
// Outputs must not overlap any other operand of the call.
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

// SetI32 binds an int32 operand: OperandSeqLensK ([batch], each in [0, seq_k]),
// OperandCuSeqlensQ, OperandCuSeqlensK ([batch+1]) or OperandBlockTable ([batch][max_pages]).
// Their values are checked by the library in Run, KVAppend and Merge, the message naming the
// sequence and the slot. nil unbinds it.
func (a *Args) SetI32(which Operand, data []int32) error {
	return a.bind("SetI32", kindI32, which, sliceLen(len(data), data == nil), func() { a.i32[which] = data })
}

// SetF16 binds OperandQ, OperandK or OperandV stored as IEEE binary16 bit patterns
// (attn_args_set_f16), RequiredLen elements in the operand's strides, like SetF32: the slice
// reaches C without a copy and each value is widened to float32 on load (ConvertF32ToF16 fills
// such a buffer). nil unbinds the operand. Any other operand is a StatusInvalidArgument error
// naming it. OpBackward needs float32 Q, K and V (StatusUnsupported otherwise).
func (a *Args) SetF16(which Operand, data []uint16) error {
	return a.bindStored(storeF16, which, sliceLen(len(data), data == nil), func() {
		if data != nil {
			a.u16[which], a.bf16[which] = data, false
		}
	})
}

// SetBF16 binds OperandQ, OperandK or OperandV stored as bfloat16 bit patterns
// (attn_args_set_bf16); as SetF16 (ConvertF32ToBF16 fills such a buffer).
func (a *Args) SetBF16(which Operand, data []uint16) error {
	return a.bindStored(storeBF16, which, sliceLen(len(data), data == nil), func() {
		if data != nil {
			a.u16[which], a.bf16[which] = data, true
		}
	})
}

// SetI8 binds OperandK or OperandV stored as symmetric int8 (attn_args_set_i8): element x of a
// row is float32(data[x]) * scale of its row, the scales bound with SetF32(OperandKScale, ...) /
// SetF32(OperandVScale, ...) ([batch][heads_kv][seq_k] floats, strided like K: WithStrides of
// OperandKScale / OperandVScale). Run requires the scale of an int8 operand (StatusNullPointer
// naming k_scale / v_scale) and refuses a scale without one. QuantizeI8 fills data and scales.
// nil unbinds the operand; OperandQ or any other operand is a StatusInvalidArgument error
// naming it.
func (a *Args) SetI8(which Operand, data []int8) error {
	return a.bindStored(storeI8, which, sliceLen(len(data), data == nil), func() {
		if data != nil {
			a.i8[which] = data
		}
	})
}

// SetKScale binds OperandKScale: the scales of an int8 K (SetF32(OperandKScale, scales)).
func (a *Args) SetKScale(scales []float32) error { return a.SetF32(OperandKScale, scales) }

// SetVScale binds OperandVScale: the scales of an int8 V (SetF32(OperandVScale, scales)).
func (a *Args) SetVScale(scales []float32) error { return a.SetF32(OperandVScale, scales) }

// The serving operands by name (the same as SetI32 / SetF32 with the Operand).

// SetSeqLensK binds OperandSeqLensK: [batch] keys of each sequence (with a paged cache: the keys
// in its cache, the new ones of a KVAppend included).
func (a *Args) SetSeqLensK(lens []int32) error { return a.SetI32(OperandSeqLensK, lens) }

// SetCuSeqlensQ binds OperandCuSeqlensQ: [batch+1] prefix sums of the query lengths (WithVarlen).
func (a *Args) SetCuSeqlensQ(cu []int32) error { return a.SetI32(OperandCuSeqlensQ, cu) }

// SetCuSeqlensK binds OperandCuSeqlensK: [batch+1] prefix sums of the key lengths (WithVarlen
// without pages).
func (a *Args) SetCuSeqlensK(cu []int32) error { return a.SetI32(OperandCuSeqlensK, cu) }

// SetBlockTable binds OperandBlockTable: [batch][max_pages] page ids, -1 = unused (WithPageSize).
func (a *Args) SetBlockTable(table []int32) error { return a.SetI32(OperandBlockTable, table) }

// SetNewK binds OperandNewK: the new key rows of KVAppend, contiguous [tokens][heads_kv][head_dim].
func (a *Args) SetNewK(rows []float32) error { return a.SetF32(OperandNewK, rows) }

// SetNewV binds OperandNewV: the new value rows of KVAppend, [tokens][heads_kv][head_dim_v].
func (a *Args) SetNewV(rows []float32) error { return a.SetF32(OperandNewV, rows) }

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
	a.clearAll()
	return nil
}

// emptyAnchor is the address passed for a non-nil slice of length 0: C tells "bound, empty"
// (a varlen pack of 0 tokens) from "not bound" (NULL) and never reads it.
var emptyAnchor uint64

// ptrOf is the address of s's first element; nil only for a nil slice.
func ptrOf[T any](s []T) *T {
	if s == nil {
		return nil
	}
	if cap(s) == 0 {
		return (*T)(unsafe.Pointer(&emptyAnchor))
	}
	return &s[:1][0]
}

func pf(s []float32) *float32 { return ptrOf(s) }
func pb(s []byte) *uint8      { return ptrOf(s) }
func pi(s []int32) *int32     { return ptrOf(s) }
func pu16(s []uint16) *uint16 { return ptrOf(s) }
func pi8(s []int8) *int8      { return ptrOf(s) }

// goRun is the one cgo call of Run, Backward and Desc.Backward: every operand of f, m, i, u16 /
// bf16 and i8 is bound into ah (nil: a temporary attn_args of the C helper), op runs, and the
// operands are unbound again before it returns.
func goRun(h capi.Struct_SS_attn_desc, op Op, ah capi.Struct_SS_attn_args, f *[numOperands][]float32,
	m *[numOperands][]byte, i *[numOperands][]int32, u16 *[numStored][]uint16, bf16 *[numStored]bool,
	i8 *[numStored][]int8) error {
	mask := 0
	for o := range bf16 {
		if bf16[o] {
			mask |= 1 << o
		}
	}
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_go_run(h, capi.Enum_SS_attn_op(op), ah, mask,
			pf(f[OperandQ]), int64(len(f[OperandQ])), pu16(u16[OperandQ]), int64(len(u16[OperandQ])),
			pf(f[OperandK]), int64(len(f[OperandK])), pu16(u16[OperandK]), int64(len(u16[OperandK])),
			pi8(i8[OperandK]), int64(len(i8[OperandK])),
			pf(f[OperandV]), int64(len(f[OperandV])), pu16(u16[OperandV]), int64(len(u16[OperandV])),
			pi8(i8[OperandV]), int64(len(i8[OperandV])),
			pf(f[OperandOut]), int64(len(f[OperandOut])),
			pf(f[OperandLSE]), int64(len(f[OperandLSE])),
			pf(f[OperandWeights]), int64(len(f[OperandWeights])),
			pb(m[OperandKeyValid]), int64(len(m[OperandKeyValid])),
			pb(m[OperandAllowed]), int64(len(m[OperandAllowed])),
			pf(f[OperandBias]), int64(len(f[OperandBias])),
			pf(f[OperandAlibiSlopes]), int64(len(f[OperandAlibiSlopes])),
			pf(f[OperandSinks]), int64(len(f[OperandSinks])),
			pb(m[OperandQueryValid]), int64(len(m[OperandQueryValid])),
			pi(i[OperandSeqLensK]), int64(len(i[OperandSeqLensK])),
			pf(f[OperandKeyMass]), int64(len(f[OperandKeyMass])),
			pi(i[OperandCuSeqlensQ]), int64(len(i[OperandCuSeqlensQ])),
			pi(i[OperandCuSeqlensK]), int64(len(i[OperandCuSeqlensK])),
			pi(i[OperandBlockTable]), int64(len(i[OperandBlockTable])),
			pf(f[OperandDOut]), int64(len(f[OperandDOut])),
			pf(f[OperandDQ]), int64(len(f[OperandDQ])),
			pf(f[OperandDK]), int64(len(f[OperandDK])),
			pf(f[OperandDV]), int64(len(f[OperandDV])),
			pf(f[OperandDBias]), int64(len(f[OperandDBias])),
			pf(f[OperandDSinks]), int64(len(f[OperandDSinks])),
			pf(f[OperandKScale]), int64(len(f[OperandKScale])),
			pf(f[OperandVScale]), int64(len(f[OperandVScale])))
	})
}

// Run executes op (OpForward, OpWeights or OpBackward) with the Desc's configuration and the
// bound operands (attn_run). Results are bit-identical whatever the thread count.
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
	return goRun(d.h, op, a.h, &a.f32, &a.mask, &a.i32, &a.u16, &a.bf16, &a.i8)
}

// Backward runs OpBackward (the same as Run(OpBackward)): from the forward's inputs, its out and
// lse (bound with SetOutF32, as the forward wrote them) and the gradient of out
// (SetF32(OperandDOut, ...)), it writes the gradients bound with SetOutF32: OperandDQ,
// OperandDK, OperandDV (GQA: summed over a KV head's query heads), OperandDBias (with a bias;
// broadcast dimensions summed) and OperandDSinks (with sinks); any of them, at least one. Every
// mask and variant of the forward applies, varlen packs too (not a paged cache); Q, K and V must
// be float32 (StatusUnsupported otherwise). Hidden and padded keys get dK = dV = 0, padded
// queries and rows with no visible key dQ = 0. FlashAttention-2's algorithm: no seq_q x seq_k
// buffer. Zero copy, no allocation, like Run. Missing operands are the library's errors, naming
// them ("attn_run: dout is NULL").
func (a *Args) Backward() error { return a.Run(OpBackward) }

// KVAppend writes the bound OperandNewK / OperandNewV rows into their cache positions
// (attn_kv_append, vLLM's reshape_and_cache), with the Args' Desc: token t of the n_b new tokens
// of sequence b goes to key position seq_lens_k[b] - n_b + t. OperandSeqLensK already counts the
// new tokens, so the same Args then serve Run(OpForward) over the cache.
//
//	n_b:            cu_seqlens_q[b+1] - cu_seqlens_q[b] with WithVarlen, else seq_q (the new
//	                rows are then ordered [batch][seq_q])
//	kCache, vCache: the K and V buffers: the page pools with WithPageSize (OperandBlockTable
//	                bound), dense K/V in the Desc's K/V layout otherwise; written in place, only
//	                at the destination rows
//
// Both caches are required (nil is StatusNullPointer) and checked like OperandK / OperandV (at
// least one page with a paged cache). The library checks the rest and names what is wrong:
// "seq_lens_k[0] (1) is less than the 2 new tokens of sequence 0", "block_table[2][0] (1000) is
// not a page of the K/V buffers, which hold 9 pages", caches that overlap each other or the new
// rows. Zero copy, no allocation, like Run.
func (a *Args) KVAppend(kCache, vCache []float32) error {
	if a == nil {
		return ErrArgsClosed
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
	pk, err := checkF32("k_cache", kCache, d.least[OperandK], true)
	if err != nil {
		return err
	}
	pv, err := checkF32("v_cache", vCache, d.least[OperandV], true)
	if err != nil {
		return err
	}
	h, ah, f, i := d.h, a.h, &a.f32, &a.i32
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_go_kv_append(h, ah,
			pf(f[OperandNewK]), int64(len(f[OperandNewK])),
			pf(f[OperandNewV]), int64(len(f[OperandNewV])),
			pi(i[OperandSeqLensK]), int64(len(i[OperandSeqLensK])),
			pi(i[OperandCuSeqlensQ]), int64(len(i[OperandCuSeqlensQ])),
			pi(i[OperandCuSeqlensK]), int64(len(i[OperandCuSeqlensK])),
			pi(i[OperandBlockTable]), int64(len(i[OperandBlockTable])),
			pk, int64(len(kCache)), pv, int64(len(vCache)))
	})
}

// Merge folds part into acc (attn_merge): the exact merge of two results computed over
// disjoint key sets (split-KV decode, ring attention, prefix caching), row by row
//
//	lse = log(exp(lse_acc) + exp(lse_part))
//	out = exp(lse_acc - lse) out_acc + exp(lse_part - lse) out_part
//
// acc and part are Args with OperandOut and OperandLSE bound (SetOutF32, in both: part's are
// only read), in d's OUT and LSE layouts; with WithVarlen acc also binds OperandCuSeqlensQ. acc's
// out and lse are updated in place. A part with lse -Inf contributes nothing (its out is not
// read); both -Inf gives out 0, lse -Inf. Folding parts in a fixed order is bit-identical from
// run to run. acc and part may belong to other descriptors than d (a part over a key range is
// computed with a Desc of that range's seq_k); d gives the layout and the library checks every
// length against it ("part's lse has 3 elements, needs at least 56"). Only those operands are
// read; a Merge allocates nothing. A nil acc or part is StatusNullPointer, as NULL is in C.
func (d *Desc) Merge(acc, part *Args) error {
	// nil is "not given", as NULL is in C (a closed Args is ErrArgsClosed below)
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
	// Args first (in a fixed order, so two Merges of the same pair cannot deadlock), then the
	// Desc, as Run does.
	first, second := acc, part
	if uintptr(unsafe.Pointer(second)) < uintptr(unsafe.Pointer(first)) {
		first, second = second, first
	}
	first.mu.Lock()
	defer first.mu.Unlock()
	second.mu.Lock()
	defer second.mu.Unlock()
	if acc.h == nil || part.h == nil {
		return ErrArgsClosed
	}
	if d == nil {
		return ErrClosed
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.h == nil {
		return ErrClosed
	}
	h, ah, ph, af, pfs, cu := d.h, acc.h, part.h, &acc.f32, &part.f32, acc.i32[OperandCuSeqlensQ]
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_go_merge(h, ah, ph,
			pf(af[OperandOut]), int64(len(af[OperandOut])),
			pf(af[OperandLSE]), int64(len(af[OperandLSE])),
			pi(cu), int64(len(cu)),
			pf(pfs[OperandOut]), int64(len(pfs[OperandOut])),
			pf(pfs[OperandLSE]), int64(len(pfs[OperandLSE])))
	})
}
