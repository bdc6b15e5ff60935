package attn

// The storage types' conversion helpers (since 0.2): attn_convert_*, attn_quantize_i8 and
// attn_quantize_fp8 / attn_dequantize_fp8. Their
// C functions take no buffer lengths, so the face checks each slice against the count first.

import "github.com/libattn/libattn/bindings/go/internal/capi"

// convert checks dst against len(src) and runs f on the first elements (nothing for an empty src).
func convert[S, D any](dst []D, src []S, f func(*S, *D, int64) capi.Enum_SS_attn_status) error {
	pd, err := sized("dst", dst, len(src), len(src) > 0)
	if err != nil || len(src) == 0 {
		return err
	}
	return check(func() capi.Enum_SS_attn_status { return f(&src[0], pd, int64(len(src))) })
}

// ConvertF32ToF16 writes the binary16 bit patterns of src into dst (attn_convert_f32_to_f16).
func ConvertF32ToF16(dst []uint16, src []float32) error {
	return convert(dst, src, capi.Attn_convert_f32_to_f16)
}

// ConvertF32ToBF16 writes the bfloat16 bit patterns of src into dst (attn_convert_f32_to_bf16).
func ConvertF32ToBF16(dst []uint16, src []float32) error {
	return convert(dst, src, capi.Attn_convert_f32_to_bf16)
}

// ConvertF16ToF32 widens the binary16 values of src into dst (attn_convert_f16_to_f32).
func ConvertF16ToF32(dst []float32, src []uint16) error {
	return convert(dst, src, capi.Attn_convert_f16_to_f32)
}

// ConvertBF16ToF32 widens the bfloat16 values of src into dst (attn_convert_bf16_to_f32).
func ConvertBF16ToF32(dst []float32, src []uint16) error {
	return convert(dst, src, capi.Attn_convert_bf16_to_f32)
}

// QuantizeI8 quantizes rows rows of dim floats of src to symmetric int8 in dst with one scale
// per row in scales (attn_quantize_i8).
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
	ps, e0 := sized("src", src, n, n > 0)
	pd, e1 := sized("dst", dst, n, n > 0)
	pscale, e2 := sized("scales", scales, rows, true)
	if err := firstErr(e0, e1, e2); err != nil {
		return err
	}
	return check(func() capi.Enum_SS_attn_status {
		return capi.Attn_quantize_i8(ps, int64(rows), int64(dim), pd, pscale)
	})
}

// QuantizeFP8 quantizes rows rows of dim floats of src to fp8 codes of format format
// (DTypeFP8E4M3 or DTypeFP8E5M2) in dst with one scale: code = src / scale rounded to nearest
// even, saturating (attn_quantize_fp8).
func QuantizeFP8(dst []byte, src []float32, rows, dim int, format DType, scale float32) error {
	return fp8(dst, src, rows, dim, format, scale, capi.Attn_quantize_fp8)
}

// DequantizeFP8 writes the exact values of rows * dim fp8 codes of format format times scale
// into dst, as the kernels read them (attn_dequantize_fp8).
func DequantizeFP8(dst []float32, src []byte, rows, dim int, format DType, scale float32) error {
	return fp8(dst, src, rows, dim, format, scale, capi.Attn_dequantize_fp8)
}

// fp8 checks rows, dim, format's range (the library judges its value) and both slices against
// rows * dim, then runs f (nothing for an empty operation).
func fp8[S, D any](dst []D, src []S, rows, dim int, format DType, scale float32,
	f func(*S, int64, int64, capi.Enum_SS_attn_dtype, float32, *D) capi.Enum_SS_attn_status) error {
	if err := firstErr(nonNegative("rows", rows), nonNegative("dim", dim), fitsInt("format", int(format))); err != nil {
		return err
	}
	if dim != 0 && rows > maxInt/dim {
		return argError(StatusInvalidArgument, "rows (%d) x dim (%d) overflows", rows, dim)
	}
	n := rows * dim
	if n == 0 {
		return nil
	}
	ps, e0 := sized("src", src, n, true)
	pd, e1 := sized("dst", dst, n, true)
	if err := firstErr(e0, e1); err != nil {
		return err
	}
	return check(func() capi.Enum_SS_attn_status {
		return f(ps, int64(rows), int64(dim), capi.Enum_SS_attn_dtype(format), scale, pd)
	})
}

const maxInt = int(^uint(0) >> 1)
