package attn

// The storage types' conversion helpers (since 0.2): filling f16 / bf16 / int8 K/V caches
// (attn_convert_* and attn_quantize_i8). The buffers they fill are bound with Args.SetF16,
// SetBF16 and SetI8 (+ the scales with SetF32(OperandKScale / OperandVScale, ...)).

import "github.com/libattn/libattn/bindings/go/internal/capi"

// checkConvert checks a conversion's dst against len(src): nil with values to convert is a
// StatusNullPointer error, a shorter one a StatusInvalidArgument error, both naming dst.
func checkConvert(dstLen int, dstNil bool, n int) error {
	if n == 0 {
		return nil
	}
	if dstNil {
		return argError(StatusNullPointer, "dst is nil (needs %d elements)", n)
	}
	if dstLen < n {
		return argError(StatusInvalidArgument, "dst has %d elements, needs at least %d (len(src))", dstLen, n)
	}
	return nil
}

// ConvertF32ToF16 writes the IEEE binary16 bit patterns of the len(src) values of src into dst
// (attn_convert_f32_to_f16): round to nearest even, overflow gives infinity, NaN stays NaN.
// dst needs at least len(src) elements (only those are written) and must not overlap src.
// Zero copy: both slices reach C as they are.
func ConvertF32ToF16(dst []uint16, src []float32) error {
	if err := checkConvert(len(dst), dst == nil, len(src)); err != nil || len(src) == 0 {
		return err
	}
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_convert_f32_to_f16(&src[0], &dst[0], int64(len(src)))
	})
}

// ConvertF32ToBF16 writes the bfloat16 bit patterns of src into dst (attn_convert_f32_to_bf16),
// rounded to nearest even; as ConvertF32ToF16.
func ConvertF32ToBF16(dst []uint16, src []float32) error {
	if err := checkConvert(len(dst), dst == nil, len(src)); err != nil || len(src) == 0 {
		return err
	}
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_convert_f32_to_bf16(&src[0], &dst[0], int64(len(src)))
	})
}

// ConvertF16ToF32 widens the len(src) binary16 values of src into dst, exactly as the kernels
// do (attn_convert_f16_to_f32). dst needs at least len(src) elements.
func ConvertF16ToF32(dst []float32, src []uint16) error {
	if err := checkConvert(len(dst), dst == nil, len(src)); err != nil || len(src) == 0 {
		return err
	}
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_convert_f16_to_f32(&src[0], &dst[0], int64(len(src)))
	})
}

// ConvertBF16ToF32 widens the len(src) bfloat16 values of src into dst
// (attn_convert_bf16_to_f32). dst needs at least len(src) elements.
func ConvertBF16ToF32(dst []float32, src []uint16) error {
	if err := checkConvert(len(dst), dst == nil, len(src)); err != nil || len(src) == 0 {
		return err
	}
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_convert_bf16_to_f32(&src[0], &dst[0], int64(len(src)))
	})
}

// QuantizeI8 quantizes rows contiguous rows of dim floats of src (a K or V cache's rows, e.g.
// [tokens][heads_kv] rows of head_dim) to symmetric int8 (attn_quantize_i8): per row
// scale = max|x| / 127 and dst = x / scale rounded to nearest even (|dst| <= 127); an all-zero
// row gets scale 0 and zeros. dst needs rows*dim elements, scales rows (the scale operand in the
// row order of src: bind them with Args.SetI8 and SetF32(OperandKScale / OperandVScale, ...)),
// src rows*dim. A NaN or infinity is a StatusInvalidArgument error naming its row ("src row 3
// holds a non-finite value"); the rows before it are written. The slices must not overlap.
func QuantizeI8(dst []int8, scales []float32, src []float32, rows, dim int) error {
	if err := nonNegative("rows", rows); err != nil {
		return err
	}
	if err := nonNegative("dim", dim); err != nil {
		return err
	}
	if dim != 0 && rows > maxInt/dim {
		return argError(StatusInvalidArgument, "rows (%d) x dim (%d) overflows", rows, dim)
	}
	if rows == 0 {
		return nil
	}
	n := rows * dim
	for _, x := range [...]struct {
		name  string
		l     int
		isNil bool
		need  int
	}{{"src", len(src), src == nil, n}, {"dst", len(dst), dst == nil, n}, {"scales", len(scales), scales == nil, rows}} {
		if x.need == 0 {
			continue
		}
		if x.isNil {
			return argError(StatusNullPointer, "%s is nil (needs %d elements)", x.name, x.need)
		}
		if x.l < x.need {
			return argError(StatusInvalidArgument, "%s has %d elements, needs at least %d", x.name, x.l, x.need)
		}
	}
	ps, pd := pf(src), pi8(dst) // dim 0: nothing is read or written through them
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_quantize_i8(ps, int64(rows), int64(dim), pd, &scales[0])
	})
}
