package attn

// The static parameters of a descriptor (attn_param, since 0.2): options that set them in
// NewDesc, validated against attn_param_bounds before the C call, and getters that read them
// back from the library.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// Param is a static parameter of a descriptor (attn_param). The values are pinned by the C API.
type Param int

// Parameters, with the values of attn_param.
const (
	ParamCausal         Param = 0 // int, Causal; the same as WithCausal (default CausalNone)
	ParamScale          Param = 1 // float, finite; the same as WithScale (default 1/sqrt(head_dim))
	ParamWindowLeft     Param = 2 // int >= -1: key j visible only if diag(i) - left <= j; -1 = unbounded
	ParamWindowRight    Param = 3 // int >= -1: key j visible only if j <= diag(i) + right; -1 = unbounded
	ParamSoftcap        Param = 4 // float >= 0: s = c * tanh(s / c) (Gemma 2); 0 = off
	ParamAlibi          Param = 5 // int, Alibi (default AlibiNone)
	ParamSoftmaxPlusOne Param = 6 // int 0/1: "+1" quiet softmax (a sink logit 0 for every head)
	ParamHeadDimV       Param = 7 // int >= 1: size of a V row and an OUT row (default head_dim)
	ParamWeightsMode    Param = 8 // int, WeightsMode: what OpWeights writes (default WeightsSoftmax)
	ParamBiasFirst      Param = 9 // int 0/1: add the bias before the softcap (ONNX order)

	// since 0.2, the serving layouts
	ParamVarlen         Param = 10 // int 0/1: packed variable-length batch; seq_q, seq_k are the maxima
	ParamPageSize       Param = 11 // int >= 0: tokens per page of a paged K/V cache; 0 = contiguous K/V
	ParamMaxPages       Param = 12 // int >= 0: columns of the block table; 0 = ceil(seq_k / page_size)
	ParamBatchInvariant Param = 13 // int 0/1: a query's output bits depend only on its own sequence

	// since 0.2, the forward's arithmetic
	ParamCompute Param = 14 // int, Compute: the arithmetic of OpForward (default ComputeExact)

	// since 0.2, the diagonal of the window and ALiBi, and the ALiBi form
	ParamDiagonal  Param = 15 // int, Diagonal: diag(i) of the window and ALiBi (default DiagonalCausal)
	ParamAlibiForm Param = 16 // int, AlibiForm: the ALiBi term (default AlibiLinear)
)

const numParams = 17

var paramNames = [numParams]string{"causal", "scale", "window_left", "window_right", "softcap",
	"alibi", "softmax_plus_one", "head_dim_v", "weights_mode", "bias_first", "varlen", "page_size",
	"max_pages", "batch_invariant", "compute", "diagonal", "alibi_form"}

// String returns the parameter's short name ("causal", "scale", "window_left", ...).
func (p Param) String() string {
	if p.valid() {
		return paramNames[p]
	}
	return fmt.Sprintf("Param(%d)", int(p))
}

func (p Param) valid() bool { return p >= 0 && p < numParams }

// cName is the C enumerator the library's messages use ("ATTN_PARAM_WINDOW_LEFT").
func (p Param) cName() string { return "ATTN_PARAM_" + strings.ToUpper(paramNames[p]) }

func checkParam(p Param) error {
	if !p.valid() {
		return argError(StatusInvalidArgument, "param (%d) is not an attn_param", int(p))
	}
	return nil
}

// Alibi selects the ALiBi slopes (attn_alibi), the value of ParamAlibi.
type Alibi int

// ALiBi modes, with the values of attn_alibi.
const (
	AlibiNone     Alibi = 0 // no ALiBi (default)
	AlibiOperand  Alibi = 1 // slopes from OperandAlibiSlopes ([heads_q] float32, required per call)
	AlibiStandard Alibi = 2 // the geometric slopes of Press et al. 2022 (as BLOOM computes them)
)

// String returns "none", "operand" or "standard" ("Alibi(n)" for other values).
func (a Alibi) String() string {
	switch a {
	case AlibiNone:
		return "none"
	case AlibiOperand:
		return "operand"
	case AlibiStandard:
		return "standard"
	}
	return fmt.Sprintf("Alibi(%d)", int(a))
}

// Diagonal is diag(i), the diagonal the sliding window and ALiBi measure from (attn_diagonal),
// the value of ParamDiagonal, for query i of batch entry (varlen / paged: sequence) b. The
// causal rule keeps its own diagonal whatever this says (capi/attn.h, "The score pipeline").
type Diagonal int

// Diagonals, with the values of attn_diagonal.
const (
	DiagonalCausal      Diagonal = 0 // the causal rule's: i + len_k(b) - len_q(b) under CausalBottomRight, else i (default)
	DiagonalTopLeft     Diagonal = 1 // i
	DiagonalBottomRight Diagonal = 2 // i + len_k(b) - len_q(b): FlashAttention's, causal or not
)

// String returns "causal", "top_left" or "bottom_right" ("Diagonal(n)" for other values).
func (d Diagonal) String() string {
	switch d {
	case DiagonalCausal:
		return "causal"
	case DiagonalTopLeft:
		return "top_left"
	case DiagonalBottomRight:
		return "bottom_right"
	}
	return fmt.Sprintf("Diagonal(%d)", int(d))
}

// AlibiForm is the ALiBi term of key j for query i (attn_alibi_form), the value of
// ParamAlibiForm.
type AlibiForm int

// ALiBi forms, with the values of attn_alibi_form.
const (
	AlibiLinear    AlibiForm = 0 // -slope(b, h) * (diag(i) - j) (default)
	AlibiSymmetric AlibiForm = 1 // -slope(b, h) * |diag(i) - j|: FlashAttention's non-causal ALiBi
)

// String returns "linear" or "symmetric" ("AlibiForm(n)" for other values).
func (f AlibiForm) String() string {
	switch f {
	case AlibiLinear:
		return "linear"
	case AlibiSymmetric:
		return "symmetric"
	}
	return fmt.Sprintf("AlibiForm(%d)", int(f))
}

// WeightsMode is what OpWeights writes into OperandWeights (attn_weights_mode), the value of
// ParamWeightsMode: the probabilities, or the scores at one stage of the pipeline. The score
// modes write every entry: padded keys (never read) hold -Inf, and so do hidden entries in the
// modes that apply the masks. ONNX's qk_matmul_output_mode as its reference implementation
// computes it: 0 = WeightsScores, 1 = WeightsSoftcapped, 2 = WeightsCapped, 3 = WeightsSoftmax.
type WeightsMode int

// Weights modes, with the values of attn_weights_mode.
const (
	WeightsSoftmax    WeightsMode = 0 // probabilities (default)
	WeightsScores     WeightsMode = 1 // scale * q.k, no mask
	WeightsMasked     WeightsMode = 2 // scale * q.k + bias + ALiBi, masks applied, no softcap
	WeightsCapped     WeightsMode = 3 // the final logits: every step of the pipeline, masks applied
	WeightsSoftcapped WeightsMode = 4 // softcap(scale * q.k), no bias, no mask
)

// String returns "softmax", "scores", "masked", "capped" or "softcapped" ("WeightsMode(n)"
// otherwise).
func (m WeightsMode) String() string {
	switch m {
	case WeightsSoftmax:
		return "softmax"
	case WeightsScores:
		return "scores"
	case WeightsMasked:
		return "masked"
	case WeightsCapped:
		return "capped"
	case WeightsSoftcapped:
		return "softcapped"
	}
	return fmt.Sprintf("WeightsMode(%d)", int(m))
}

// Compute is the arithmetic of OpForward (attn_compute), the value of ParamCompute. capi/attn.h
// gives ComputeFP16's error bound and the calls it applies to.
type Compute int

// Compute modes, with the values of attn_compute.
const (
	// ComputeExact: everything in fp32 (16-bit and int8 operands widened on load; the default),
	// about 1e-6 relative to a float64 reference. The mode for gradients and reference results.
	ComputeExact Compute = 0
	// ComputeFP16: the fast path on CPUs with AVX512-FP16. scale * Q, K, V and the probabilities
	// are rounded to fp16, Q.K^T and P.V run as fp16 multiply-adds widened to fp32 at fixed
	// intervals, the softmax state stays fp32; outputs are within about 1e-2 max|v| of
	// ComputeExact. Only prefill-like calls (at least 16 query rows per KV head) with fp32 or fp16
	// Q, K, V, dense or strided, and no variant beyond causal rules, windows, GQA and
	// OperandSeqLensK take it; every other call, and every CPU without AVX512-FP16, runs exactly
	// as ComputeExact.
	ComputeFP16 Compute = 1
)

// String returns "exact" or "fp16" ("Compute(n)" for other values).
func (c Compute) String() string {
	switch c {
	case ComputeExact:
		return "exact"
	case ComputeFP16:
		return "fp16"
	}
	return fmt.Sprintf("Compute(%d)", int(c))
}

// ParamRange is the kind and closed range of accepted values of a parameter
// (attn_param_bounds). For integer parameters Min and Max are exact.
type ParamRange struct {
	IsFloat  bool
	Min, Max float64
}

var bounds struct {
	once sync.Once
	r    [numParams]ParamRange
	err  error
}

// ParamBounds returns the library's kind and range of p (attn_param_bounds, read once).
func ParamBounds(p Param) (ParamRange, error) {
	if err := checkParam(p); err != nil {
		return ParamRange{}, err
	}
	bounds.once.Do(func() {
		for i := range bounds.r {
			var isFloat int32
			var lo, hi float64
			err := check(func() capi.Enum_SS_attn_status {
				return capi.Attn_param_bounds(capi.Enum_SS_attn_param(i), &isFloat, &lo, &hi)
			})
			if err != nil {
				bounds.err = err
				return
			}
			bounds.r[i] = ParamRange{IsFloat: isFloat != 0, Min: lo, Max: hi}
		}
	})
	if bounds.err != nil {
		return ParamRange{}, bounds.err
	}
	return bounds.r[p], nil
}

func (r ParamRange) format(x float64) string {
	if r.IsFloat {
		return strconv.FormatFloat(x, 'g', 9, 64)
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

func (r ParamRange) outside(p Param, v string) error {
	return argError(StatusInvalidArgument, "%s (%s) is outside [%s, %s]", p.cName(), v,
		r.format(r.Min), r.format(r.Max))
}

// validateInt checks an integer value for p against attn_param_bounds (no C call with a value
// the library would refuse, and no int64 is ever narrowed).
func validateInt(p Param, v int64) error {
	r, err := ParamBounds(p)
	if err != nil {
		return err
	}
	// |v| > 2^53 rounds, but every bound is far inside that: the comparison stays exact enough.
	if float64(v) < r.Min || float64(v) > r.Max {
		return r.outside(p, strconv.FormatInt(v, 10))
	}
	return nil
}

// validateFloat checks a float value for p against attn_param_bounds.
func validateFloat(p Param, v float64) error {
	r, err := ParamBounds(p)
	if err != nil {
		return err
	}
	if math.IsNaN(v) {
		return argError(StatusInvalidArgument, "%s must not be NaN", p.cName())
	}
	if v < r.Min || v > r.Max {
		return r.outside(p, strconv.FormatFloat(v, 'g', -1, 64))
	}
	if !r.IsFloat && v != math.Floor(v) {
		return argError(StatusInvalidArgument, "%s (%s) must be an integer", p.cName(),
			strconv.FormatFloat(v, 'g', -1, 64))
	}
	return nil
}

func setInt(h capi.Struct_SS_attn_desc, p Param, v int64) error {
	if err := checkParam(p); err != nil {
		return err
	}
	if err := validateInt(p, v); err != nil {
		return err
	}
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_desc_set_int(h, capi.Enum_SS_attn_param(p), v)
	})
}

func setFloat(h capi.Struct_SS_attn_desc, p Param, v float64) error {
	if err := checkParam(p); err != nil {
		return err
	}
	if err := validateFloat(p, v); err != nil {
		return err
	}
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_desc_set_float(h, capi.Enum_SS_attn_param(p), v)
	})
}

// WithParamInt sets any parameter from an integer (attn_desc_set_int; a float parameter takes
// the integer's value). The value is checked against ParamBounds first.
func WithParamInt(p Param, v int64) Option {
	return Option{func(h capi.Struct_SS_attn_desc) error { return setInt(h, p, v) }}
}

// WithParamFloat sets any parameter from a float64 (attn_desc_set_float; an integer parameter
// accepts only integral values). The value is checked against ParamBounds first.
func WithParamFloat(p Param, v float64) Option {
	return Option{func(h capi.Struct_SS_attn_desc) error { return setFloat(h, p, v) }}
}

// WithWindow sets the sliding window: key j is visible to query i only if
// diag(i) - left <= j <= diag(i) + right, where diag(i) is the causal diagonal (i, or
// i + len_k - seq_q for CausalBottomRight). -1 leaves a side unbounded (the default).
// The same semantics as FlashAttention's window_size and ONNX's left/right_window_size.
func WithWindow(left, right int) Option {
	return Option{func(h capi.Struct_SS_attn_desc) error {
		if err := validateInt(ParamWindowLeft, int64(left)); err != nil {
			return err
		}
		if err := validateInt(ParamWindowRight, int64(right)); err != nil {
			return err
		}
		if err := setInt(h, ParamWindowLeft, int64(left)); err != nil {
			return err
		}
		return setInt(h, ParamWindowRight, int64(right))
	}}
}

// WithSoftcap sets the logit softcap c: s = c * tanh(s / c) (Gemma 2); 0 = off (default).
func WithSoftcap(c float32) Option {
	return WithParamFloat(ParamSoftcap, float64(c))
}

// WithAlibi selects the ALiBi slopes: AlibiStandard (computed by the library for heads_q
// heads), or AlibiOperand (bind OperandAlibiSlopes in every Args). The bias added to score
// (i, j) is -slope_h * (diag(i) - j).
func WithAlibi(mode Alibi) Option {
	return WithParamInt(ParamAlibi, int64(mode))
}

// WithSoftmaxPlusOne turns on the "+1" quiet softmax: a sink logit of 0 joins every row's
// denominator. Cannot be combined with OperandSinks.
func WithSoftmaxPlusOne() Option {
	return WithParamInt(ParamSoftmaxPlusOne, 1)
}

// WithHeadDimV sets the size of a V row and an OUT row (DeepSeek MLA: 192 for q/k, 128 for v).
// V and OUT go back to contiguous BHSD strides unless WithStrides set them before.
func WithHeadDimV(n int) Option {
	return WithParamInt(ParamHeadDimV, int64(n))
}

// WithWeightsMode selects what OpWeights writes (default WeightsSoftmax).
func WithWeightsMode(m WeightsMode) Option {
	return WithParamInt(ParamWeightsMode, int64(m))
}

// WithBiasFirst adds the bias before the softcap (ONNX's order: softcap(q.k * scale + mask))
// instead of after it.
func WithBiasFirst() Option {
	return WithParamInt(ParamBiasFirst, 1)
}

// WithVarlen makes the batch a packed variable-length batch (FlashAttention's varlen layout,
// ParamVarlen): seq_q and seq_k of NewDesc become the maximum lengths, every Args binds
// OperandCuSeqlensQ ([batch+1] prefix sums, cu[0] = 0; a length may be 0: that sequence produces
// nothing) and, unless the K/V cache is paged, OperandCuSeqlensK. Q and OUT are token-major
// [total_q][heads_q][head_dim], K and V [total_k][heads_kv][head_dim], LSE [heads_q][total_q].
// Masks and variants apply per sequence, positions counted from the sequence's start
// (CausalBottomRight aligns each sequence's last query with its last key). Not with varlen:
// OperandBias, OperandQueryValid, OperandKeyMass, OpWeights (StatusUnsupported).
func WithVarlen() Option {
	return WithParamInt(ParamVarlen, 1)
}

// WithPageSize makes K and V a paged cache of pages of n tokens (ParamPageSize; 0 = contiguous
// K/V, the default): every Args binds OperandBlockTable ([batch][max_pages] page ids, -1 =
// unused slot; key j of sequence b is token j % n of page block_table[b][j / n]) and
// OperandSeqLensK (the keys in each sequence's cache). Pages are token-major
// [pages][n][heads_kv][head_dim] by default, head-major with WithStrides (see there). The pool
// holds as many pages as the bound K/V slices do. Q is dense or varlen (WithVarlen).
func WithPageSize(n int) Option {
	return WithParamInt(ParamPageSize, int64(n))
}

// WithMaxPages sets the number of columns of the block table (ParamMaxPages; 0 = the default,
// ceil(seq_k / page_size)).
func WithMaxPages(n int) Option {
	return WithParamInt(ParamMaxPages, int64(n))
}

// WithBatchInvariant makes a query's output bits depend only on its own sequence
// (ParamBatchInvariant): never on its batch-mates, the batch size, the layout (alone, padded,
// varlen, paged), the prefill chunk or the thread count. It costs speed on decode-like calls.
func WithBatchInvariant() Option {
	return WithParamInt(ParamBatchInvariant, 1)
}

// WithCompute selects the arithmetic of OpForward (ParamCompute; default ComputeExact):
// ComputeFP16 is the fast path on CPUs with AVX512-FP16, outputs within about 1e-2 max|v| of
// ComputeExact; the calls it does not apply to (see ComputeFP16) and other CPUs run exactly as
// ComputeExact.
func WithCompute(c Compute) Option {
	return WithParamInt(ParamCompute, int64(c))
}

// WithDiagonal sets the diagonal diag(i) the sliding window and ALiBi measure from
// (ParamDiagonal; default DiagonalCausal, the causal rule's). DiagonalBottomRight is
// FlashAttention's window_size / alibi_slopes alignment, causal or not. The causal rule keeps
// its own diagonal.
func WithDiagonal(d Diagonal) Option {
	return WithParamInt(ParamDiagonal, int64(d))
}

// WithAlibiForm sets the ALiBi term (ParamAlibiForm): AlibiLinear -slope (diag(i) - j) (the
// default) or AlibiSymmetric -slope |diag(i) - j| (FlashAttention's non-causal ALiBi).
func WithAlibiForm(f AlibiForm) Option {
	return WithParamInt(ParamAlibiForm, int64(f))
}

// Param reads a parameter's current value from the library (attn_desc_get_float: exact for
// every parameter; ParamScale is the float the kernels multiply by).
func (d *Desc) Param(p Param) (float64, error) {
	if err := checkParam(p); err != nil {
		return 0, err
	}
	if d == nil {
		return 0, ErrClosed
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.h == nil {
		return 0, ErrClosed
	}
	h := d.h
	var v float64
	err := check(func() capi.Enum_SS_attn_status {
		return capi.Attn_desc_get_float(h, capi.Enum_SS_attn_param(p), &v)
	})
	return v, err
}

// ParamInt reads a parameter's current value from the library as an integer
// (attn_desc_get_int: float parameters are rounded toward zero).
func (d *Desc) ParamInt(p Param) (int64, error) {
	if err := checkParam(p); err != nil {
		return 0, err
	}
	if d == nil {
		return 0, ErrClosed
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.h == nil {
		return 0, ErrClosed
	}
	h := d.h
	var v int64
	err := check(func() capi.Enum_SS_attn_status {
		return capi.Attn_desc_get_int(h, capi.Enum_SS_attn_param(p), &v)
	})
	return v, err
}

// The typed getters read the library (Param / ParamInt); on a closed Desc they return the zero
// value (use Param for an error).

// Causal is the causal rule.
func (d *Desc) Causal() Causal { v, _ := d.ParamInt(ParamCausal); return Causal(v) }

// Scale is the score scale: exactly the float32 the kernels multiply by (the default is the
// library's 1.0f / sqrtf(head_dim)).
func (d *Desc) Scale() float32 { v, _ := d.Param(ParamScale); return float32(v) }

// Window is the sliding window (-1 = unbounded side).
func (d *Desc) Window() (left, right int) {
	l, _ := d.ParamInt(ParamWindowLeft)
	r, _ := d.ParamInt(ParamWindowRight)
	return int(l), int(r)
}

// Softcap is the logit softcap (0 = off).
func (d *Desc) Softcap() float32 { v, _ := d.Param(ParamSoftcap); return float32(v) }

// Alibi is the ALiBi mode.
func (d *Desc) Alibi() Alibi { v, _ := d.ParamInt(ParamAlibi); return Alibi(v) }

// SoftmaxPlusOne reports whether the "+1" softmax is on.
func (d *Desc) SoftmaxPlusOne() bool { v, _ := d.ParamInt(ParamSoftmaxPlusOne); return v != 0 }

// HeadDimV is the size of a V row and an OUT row.
func (d *Desc) HeadDimV() int { v, _ := d.ParamInt(ParamHeadDimV); return int(v) }

// WeightsMode is what OpWeights writes.
func (d *Desc) WeightsMode() WeightsMode { v, _ := d.ParamInt(ParamWeightsMode); return WeightsMode(v) }

// BiasFirst reports whether the bias is added before the softcap.
func (d *Desc) BiasFirst() bool { v, _ := d.ParamInt(ParamBiasFirst); return v != 0 }

// Varlen reports whether the batch is a packed variable-length batch.
func (d *Desc) Varlen() bool { v, _ := d.ParamInt(ParamVarlen); return v != 0 }

// PageSize is the page size of a paged K/V cache (0 = contiguous K/V).
func (d *Desc) PageSize() int { v, _ := d.ParamInt(ParamPageSize); return int(v) }

// MaxPages is ParamMaxPages as set (0 = the default ceil(seq_k / page_size); the block table's
// actual width is RequiredLen(OperandBlockTable) / batch).
func (d *Desc) MaxPages() int { v, _ := d.ParamInt(ParamMaxPages); return int(v) }

// BatchInvariant reports whether batch invariance is on.
func (d *Desc) BatchInvariant() bool { v, _ := d.ParamInt(ParamBatchInvariant); return v != 0 }

// Compute is the arithmetic of OpForward.
func (d *Desc) Compute() Compute { v, _ := d.ParamInt(ParamCompute); return Compute(v) }

// Diagonal is the diagonal the sliding window and ALiBi measure from.
func (d *Desc) Diagonal() Diagonal { v, _ := d.ParamInt(ParamDiagonal); return Diagonal(v) }

// AlibiForm is the ALiBi term's form.
func (d *Desc) AlibiForm() AlibiForm { v, _ := d.ParamInt(ParamAlibiForm); return AlibiForm(v) }
