package attn

// The static parameters of a descriptor (attn_param, since 0.2): the options that set them in
// NewDesc and the getters that read them back. The library checks every value.

import (
	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// Param is a static parameter of a descriptor (attn_param); capi/attn.h gives each one's meaning,
// kind, bounds and default. The values are pinned by the C API.
type Param int

// Parameters, with the values of attn_param (String: the library's names, attn_param_info).
const (
	ParamCausal         Param = 0  // Causal (WithCausal)
	ParamScale          Param = 1  // the score scale (WithScale)
	ParamWindowLeft     Param = 2  // left side of the sliding window (WithWindow)
	ParamWindowRight    Param = 3  // right side of the sliding window (WithWindow)
	ParamSoftcap        Param = 4  // logit softcap (WithSoftcap)
	ParamAlibi          Param = 5  // Alibi (WithAlibi)
	ParamSoftmaxPlusOne Param = 6  // "+1" softmax (WithSoftmaxPlusOne)
	ParamHeadDimV       Param = 7  // V / OUT row size (WithHeadDimV)
	ParamWeightsMode    Param = 8  // WeightsMode (WithWeightsMode)
	ParamBiasFirst      Param = 9  // bias before the softcap (WithBiasFirst)
	ParamVarlen         Param = 10 // packed variable-length batch (WithVarlen)
	ParamPageSize       Param = 11 // paged K/V cache (WithPageSize)
	ParamMaxPages       Param = 12 // block table columns (WithMaxPages)
	ParamBatchInvariant Param = 13 // batch invariance (WithBatchInvariant)
	ParamCompute        Param = 14 // Compute (WithCompute)
	ParamDiagonal       Param = 15 // Diagonal (WithDiagonal)
	ParamAlibiForm      Param = 16 // AlibiForm (WithAlibiForm)
)

var paramNames = libNames(1)

// String returns the parameter's short name ("causal", "window_left", ...; "Param(n)" for others).
func (p Param) String() string { return enumName("Param", int(p), paramNames...) }

// Alibi selects the ALiBi slopes (attn_alibi), the value of ParamAlibi.
type Alibi int

// ALiBi modes, with the values of attn_alibi.
const (
	AlibiNone     Alibi = 0 // no ALiBi (default)
	AlibiOperand  Alibi = 1 // slopes from OperandAlibiSlopes
	AlibiStandard Alibi = 2 // the geometric slopes of Press et al. 2022
)

// String returns "none", "operand" or "standard" ("Alibi(n)" for other values).
func (a Alibi) String() string { return enumName("Alibi", int(a), "none", "operand", "standard") }

// Diagonal is diag(i), where the sliding window and ALiBi measure from (attn_diagonal), the
// value of ParamDiagonal.
type Diagonal int

// Diagonals, with the values of attn_diagonal.
const (
	DiagonalCausal      Diagonal = 0 // the causal rule's (default)
	DiagonalTopLeft     Diagonal = 1 // i
	DiagonalBottomRight Diagonal = 2 // i + len_k(b) - len_q(b)
)

// String returns "causal", "top_left" or "bottom_right" ("Diagonal(n)" for other values).
func (d Diagonal) String() string {
	return enumName("Diagonal", int(d), "causal", "top_left", "bottom_right")
}

// AlibiForm is the ALiBi term (attn_alibi_form), the value of ParamAlibiForm.
type AlibiForm int

// ALiBi forms, with the values of attn_alibi_form.
const (
	AlibiLinear    AlibiForm = 0 // -slope * (diag(i) - j) (default)
	AlibiSymmetric AlibiForm = 1 // -slope * |diag(i) - j|
)

// String returns "linear" or "symmetric" ("AlibiForm(n)" for other values).
func (f AlibiForm) String() string { return enumName("AlibiForm", int(f), "linear", "symmetric") }

// WeightsMode is what OpWeights writes (attn_weights_mode), the value of ParamWeightsMode.
type WeightsMode int

// Weights modes, with the values of attn_weights_mode.
const (
	WeightsSoftmax    WeightsMode = 0 // probabilities (default)
	WeightsScores     WeightsMode = 1 // scale * q.k, no mask
	WeightsMasked     WeightsMode = 2 // + bias + ALiBi, masks applied, no softcap
	WeightsCapped     WeightsMode = 3 // the final logits
	WeightsSoftcapped WeightsMode = 4 // softcap(scale * q.k), no bias, no mask
)

// String returns "softmax", "scores", "masked", "capped" or "softcapped" ("WeightsMode(n)" for
// other values).
func (m WeightsMode) String() string {
	return enumName("WeightsMode", int(m), "softmax", "scores", "masked", "capped", "softcapped")
}

// Compute is the arithmetic of OpForward (attn_compute), the value of ParamCompute.
type Compute int

// Compute modes, with the values of attn_compute.
const (
	ComputeExact Compute = 0 // fp32 throughout (default)
	ComputeFP16  Compute = 1 // the AVX512-FP16 fast path where it applies (capi/attn.h)
	ComputeINT8  Compute = 2 // Q.K^T in integers with K smoothing on prefill (capi/attn.h)
	ComputeBF16  Compute = 3 // bf16 products requested; runs as ComputeExact on today's CPUs
)

// String returns "exact", "fp16", "int8" or "bf16" ("Compute(n)" for other values).
func (c Compute) String() string { return enumName("Compute", int(c), "exact", "fp16", "int8", "bf16") }

// ParamRange is the kind and closed range of accepted values of a parameter.
type ParamRange struct {
	IsFloat  bool
	Min, Max float64
}

// ParamBounds returns the library's kind and range of p (attn_param_bounds).
func ParamBounds(p Param) (ParamRange, error) {
	var isFloat int32
	var r ParamRange
	if err := fitsInt("param", int(p)); err != nil {
		return r, err
	}
	err := check(func() capi.Enum_SS_attn_status {
		return capi.Attn_param_bounds(capi.Enum_SS_attn_param(p), &isFloat, &r.Min, &r.Max)
	})
	r.IsFloat = isFloat != 0
	if err != nil {
		return ParamRange{}, err
	}
	return r, nil
}

// WithParamInt sets any parameter from an integer (attn_desc_set_int).
func WithParamInt(p Param, v int64) Option {
	return Option{func(h capi.Struct_SS_attn_desc) error {
		if err := fitsInt("param", int(p)); err != nil {
			return err
		}
		return check(func() capi.Enum_SS_attn_status {
			return capi.Attn_desc_set_int(h, capi.Enum_SS_attn_param(p), v)
		})
	}}
}

// WithParamFloat sets any parameter from a float64 (attn_desc_set_float).
func WithParamFloat(p Param, v float64) Option {
	return Option{func(h capi.Struct_SS_attn_desc) error {
		if err := fitsInt("param", int(p)); err != nil {
			return err
		}
		return check(func() capi.Enum_SS_attn_status {
			return capi.Attn_desc_set_float(h, capi.Enum_SS_attn_param(p), v)
		})
	}}
}

// WithWindow sets the sliding window (ParamWindowLeft, ParamWindowRight; -1 = unbounded side).
func WithWindow(left, right int) Option {
	return Option{func(h capi.Struct_SS_attn_desc) error {
		if err := WithParamInt(ParamWindowLeft, int64(left)).apply(h); err != nil {
			return err
		}
		return WithParamInt(ParamWindowRight, int64(right)).apply(h)
	}}
}

// WithSoftcap sets ParamSoftcap (0 = off).
func WithSoftcap(c float32) Option { return WithParamFloat(ParamSoftcap, float64(c)) }

// WithAlibi sets ParamAlibi.
func WithAlibi(mode Alibi) Option { return WithParamInt(ParamAlibi, int64(mode)) }

// WithSoftmaxPlusOne turns ParamSoftmaxPlusOne on.
func WithSoftmaxPlusOne() Option { return WithParamInt(ParamSoftmaxPlusOne, 1) }

// WithHeadDimV sets ParamHeadDimV.
func WithHeadDimV(n int) Option { return WithParamInt(ParamHeadDimV, int64(n)) }

// WithWeightsMode sets ParamWeightsMode.
func WithWeightsMode(m WeightsMode) Option { return WithParamInt(ParamWeightsMode, int64(m)) }

// WithBiasFirst turns ParamBiasFirst on.
func WithBiasFirst() Option { return WithParamInt(ParamBiasFirst, 1) }

// WithVarlen turns ParamVarlen on: a packed variable-length batch.
func WithVarlen() Option { return WithParamInt(ParamVarlen, 1) }

// WithPageSize sets ParamPageSize: a paged K/V cache of pages of n tokens.
func WithPageSize(n int) Option { return WithParamInt(ParamPageSize, int64(n)) }

// WithMaxPages sets ParamMaxPages.
func WithMaxPages(n int) Option { return WithParamInt(ParamMaxPages, int64(n)) }

// WithBatchInvariant turns ParamBatchInvariant on.
func WithBatchInvariant() Option { return WithParamInt(ParamBatchInvariant, 1) }

// WithCompute sets ParamCompute.
func WithCompute(c Compute) Option { return WithParamInt(ParamCompute, int64(c)) }

// WithDiagonal sets ParamDiagonal.
func WithDiagonal(d Diagonal) Option { return WithParamInt(ParamDiagonal, int64(d)) }

// WithAlibiForm sets ParamAlibiForm.
func WithAlibiForm(f AlibiForm) Option { return WithParamInt(ParamAlibiForm, int64(f)) }

// Param reads a parameter's value (attn_desc_get_float).
func (d *Desc) Param(p Param) (v float64, err error) {
	if err := fitsInt("param", int(p)); err != nil {
		return 0, err
	}
	err = d.use(func(h capi.Struct_SS_attn_desc) error {
		return check(func() capi.Enum_SS_attn_status { return capi.Attn_desc_get_float(h, capi.Enum_SS_attn_param(p), &v) })
	})
	return v, err
}

// ParamInt reads a parameter's value as an integer (attn_desc_get_int).
func (d *Desc) ParamInt(p Param) (v int64, err error) {
	if err := fitsInt("param", int(p)); err != nil {
		return 0, err
	}
	err = d.use(func(h capi.Struct_SS_attn_desc) error {
		return check(func() capi.Enum_SS_attn_status { return capi.Attn_desc_get_int(h, capi.Enum_SS_attn_param(p), &v) })
	})
	return v, err
}

// The typed getters read the library (Param / ParamInt); on a closed Desc they return the zero
// value (use Param for an error).

// Causal is ParamCausal.
func (d *Desc) Causal() Causal { v, _ := d.ParamInt(ParamCausal); return Causal(v) }

// Scale is ParamScale: exactly the float32 the kernels multiply by.
func (d *Desc) Scale() float32 { v, _ := d.Param(ParamScale); return float32(v) }

// Window is the sliding window (ParamWindowLeft, ParamWindowRight).
func (d *Desc) Window() (left, right int) {
	l, _ := d.ParamInt(ParamWindowLeft)
	r, _ := d.ParamInt(ParamWindowRight)
	return int(l), int(r)
}

// Softcap is ParamSoftcap.
func (d *Desc) Softcap() float32 { v, _ := d.Param(ParamSoftcap); return float32(v) }

// Alibi is ParamAlibi.
func (d *Desc) Alibi() Alibi { v, _ := d.ParamInt(ParamAlibi); return Alibi(v) }

// SoftmaxPlusOne is ParamSoftmaxPlusOne.
func (d *Desc) SoftmaxPlusOne() bool { v, _ := d.ParamInt(ParamSoftmaxPlusOne); return v != 0 }

// HeadDimV is ParamHeadDimV.
func (d *Desc) HeadDimV() int { v, _ := d.ParamInt(ParamHeadDimV); return int(v) }

// WeightsMode is ParamWeightsMode.
func (d *Desc) WeightsMode() WeightsMode { v, _ := d.ParamInt(ParamWeightsMode); return WeightsMode(v) }

// BiasFirst is ParamBiasFirst.
func (d *Desc) BiasFirst() bool { v, _ := d.ParamInt(ParamBiasFirst); return v != 0 }

// Varlen is ParamVarlen.
func (d *Desc) Varlen() bool { v, _ := d.ParamInt(ParamVarlen); return v != 0 }

// PageSize is ParamPageSize.
func (d *Desc) PageSize() int { v, _ := d.ParamInt(ParamPageSize); return int(v) }

// MaxPages is ParamMaxPages as set.
func (d *Desc) MaxPages() int { v, _ := d.ParamInt(ParamMaxPages); return int(v) }

// BatchInvariant is ParamBatchInvariant.
func (d *Desc) BatchInvariant() bool { v, _ := d.ParamInt(ParamBatchInvariant); return v != 0 }

// Compute is ParamCompute.
func (d *Desc) Compute() Compute { v, _ := d.ParamInt(ParamCompute); return Compute(v) }

// Diagonal is ParamDiagonal.
func (d *Desc) Diagonal() Diagonal { v, _ := d.ParamInt(ParamDiagonal); return Diagonal(v) }

// AlibiForm is ParamAlibiForm.
func (d *Desc) AlibiForm() AlibiForm { v, _ := d.ParamInt(ParamAlibiForm); return AlibiForm(v) }
