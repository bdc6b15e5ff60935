package org.libattn;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;

/**
 * fp32 to and from f16 / bf16 bit patterns and int8 row quantization for {@link StorageType}
 * buffers (rounding and errors: attn.h "Storage types"). Each conversion comes into a new array,
 * between array ranges ({@link System#arraycopy} style), or between direct native-order buffers
 * from their positions (unchanged); nothing is copied.
 */
public final class Convert {
    private Convert() {}

    /** attn_jni_convert's kinds. */
    private static final int TO_F16 = 0, TO_BF16 = 1, FROM_F16 = 2, FROM_BF16 = 3;


    /** The f16 bit patterns of {@code src} (round to nearest even), in a new array. */
    public static short[] toF16(float[] src) {
        return narrow(TO_F16, src);
    }

    /** {@code n} values from {@code src[srcPos]} as f16 into {@code dst[dstPos]}. */
    public static void toF16(float[] src, int srcPos, short[] dst, int dstPos, int n) {
        AttnNative.attn_jni_convert(TO_F16, src, srcPos, dst, dstPos, n);
    }

    /** {@code src.remaining()} values as f16 into {@code dst} (from the positions; unchanged). */
    public static void toF16(FloatBuffer src, ShortBuffer dst) {
        convert(TO_F16, src, dst);
    }

    /** The floats of f16 bit patterns (exact), in a new array. */
    public static float[] fromF16(short[] src) {
        return widen(FROM_F16, src);
    }

    /** {@code n} f16 values from {@code src[srcPos]} as floats into {@code dst[dstPos]}. */
    public static void fromF16(short[] src, int srcPos, float[] dst, int dstPos, int n) {
        AttnNative.attn_jni_convert(FROM_F16, src, srcPos, dst, dstPos, n);
    }

    /** {@code src.remaining()} f16 values as floats into {@code dst} (positions unchanged). */
    public static void fromF16(ShortBuffer src, FloatBuffer dst) {
        convert(FROM_F16, src, dst);
    }


    /** The bf16 bit patterns of {@code src} (round to nearest even), in a new array. */
    public static short[] toBf16(float[] src) {
        return narrow(TO_BF16, src);
    }

    /** {@code n} values from {@code src[srcPos]} as bf16 into {@code dst[dstPos]}. */
    public static void toBf16(float[] src, int srcPos, short[] dst, int dstPos, int n) {
        AttnNative.attn_jni_convert(TO_BF16, src, srcPos, dst, dstPos, n);
    }

    /** {@code src.remaining()} values as bf16 into {@code dst} (positions unchanged). */
    public static void toBf16(FloatBuffer src, ShortBuffer dst) {
        convert(TO_BF16, src, dst);
    }

    /** The floats of bf16 bit patterns (exact), in a new array. */
    public static float[] fromBf16(short[] src) {
        return widen(FROM_BF16, src);
    }

    /** {@code n} bf16 values from {@code src[srcPos]} as floats into {@code dst[dstPos]}. */
    public static void fromBf16(short[] src, int srcPos, float[] dst, int dstPos, int n) {
        AttnNative.attn_jni_convert(FROM_BF16, src, srcPos, dst, dstPos, n);
    }

    /** {@code src.remaining()} bf16 values as floats into {@code dst} (positions unchanged). */
    public static void fromBf16(ShortBuffer src, FloatBuffer dst) {
        convert(FROM_BF16, src, dst);
    }


    /** Int8 rows and one fp32 scale per row: an int8 K or V and its K_SCALE / V_SCALE. */
    public static final class Int8 {
        /** rows * dim int8 values, row-major. */
        public final byte[] values;
        /** rows scales, in the row order of the source. */
        public final float[] scales;

        Int8(byte[] values, float[] scales) {
            this.values = values;
            this.scales = scales;
        }
    }

    /** Symmetric int8 quantization (attn_quantize_i8) of rows x dim floats, into new arrays. */
    public static Int8 quantizeI8(float[] src, int rows, int dim) {
        long n = (long) rows * dim;
        if (n > Checks.MAX_ARRAY) {
            throw new IllegalArgumentException("rows * dim (" + n + ") exceeds the largest Java "
                    + "array; use direct buffers");
        }
        byte[] values = new byte[(int) Math.max(n, 0)];
        float[] scales = new float[Math.max(rows, 0)];
        quantizeI8(src, 0, rows, dim, values, 0, scales, 0);
        return new Int8(values, scales);
    }

    /** As {@link #quantizeI8(float[], int, int)}, between array ranges. */
    public static void quantizeI8(float[] src, int srcPos, int rows, int dim, byte[] dst,
            int dstPos, float[] scales, int scalesPos) {
        AttnNative.attn_jni_quantize_i8(src, srcPos, rows, dim, dst, dstPos, scales, scalesPos);
    }

    /** As {@link #quantizeI8(float[], int, int)} between direct buffers, from their positions. */
    public static void quantizeI8(FloatBuffer src, int rows, int dim, ByteBuffer dst,
            FloatBuffer scales) {
        AttnNative.attn_jni_quantize_i8(Checks.buffer(src, "src", false), 0, rows, dim,
                Checks.buffer(dst, "dst", true), 0, Checks.buffer(scales, "scales", true), 0);
    }

    /**
     * fp8 quantization (attn_quantize_fp8) of src with one scale into new codes of {@code format}
     * ({@link Dtype#FP8_E4M3} or {@link Dtype#FP8_E5M2}): code = x / scale rounded to nearest
     * even, saturating.
     */
    public static byte[] quantizeFp8(float[] src, Dtype format, float scale) {
        byte[] dst = new byte[Checks.given(src, "src").length];
        quantizeFp8(src, 0, 1, src.length, format, scale, dst, 0);
        return dst;
    }

    /** As {@link #quantizeFp8(float[], Dtype, float)}, rows x dim values between array ranges. */
    public static void quantizeFp8(float[] src, int srcPos, int rows, int dim, Dtype format,
            float scale, byte[] dst, int dstPos) {
        AttnNative.attn_jni_fp8(0, src, srcPos, rows, dim, fmt(format), scale, dst, dstPos);
    }

    /** As {@link #quantizeFp8(float[], Dtype, float)} between direct buffers, from their positions. */
    public static void quantizeFp8(FloatBuffer src, int rows, int dim, Dtype format, float scale,
            ByteBuffer dst) {
        AttnNative.attn_jni_fp8(0, Checks.buffer(src, "src", false), 0, rows, dim, fmt(format),
                scale, Checks.buffer(dst, "dst", true), 0);
    }

    /** The exact values of fp8 codes of {@code format} times scale (attn_dequantize_fp8). */
    public static float[] dequantizeFp8(byte[] src, Dtype format, float scale) {
        float[] dst = new float[Checks.given(src, "src").length];
        dequantizeFp8(src, 0, 1, src.length, format, scale, dst, 0);
        return dst;
    }

    /** As {@link #dequantizeFp8(byte[], Dtype, float)}, rows x dim codes between array ranges. */
    public static void dequantizeFp8(byte[] src, int srcPos, int rows, int dim, Dtype format,
            float scale, float[] dst, int dstPos) {
        AttnNative.attn_jni_fp8(1, src, srcPos, rows, dim, fmt(format), scale, dst, dstPos);
    }

    /** As {@link #dequantizeFp8(byte[], Dtype, float)} between direct buffers. */
    public static void dequantizeFp8(ByteBuffer src, int rows, int dim, Dtype format, float scale,
            FloatBuffer dst) {
        AttnNative.attn_jni_fp8(1, Checks.buffer(src, "src", false), 0, rows, dim, fmt(format),
                scale, Checks.buffer(dst, "dst", true), 0);
    }

    private static attn_dtype fmt(Dtype format) {
        return attn_dtype.swigToEnum(Checks.given(format, "format").code());
    }

    private static short[] narrow(int kind, float[] src) {
        short[] dst = new short[Checks.given(src, "src").length];
        AttnNative.attn_jni_convert(kind, src, 0, dst, 0, dst.length);
        return dst;
    }

    private static float[] widen(int kind, short[] src) {
        float[] dst = new float[Checks.given(src, "src").length];
        AttnNative.attn_jni_convert(kind, src, 0, dst, 0, dst.length);
        return dst;
    }

    /** Between buffers: src.remaining() values. */
    private static void convert(int kind, Buffer src, Buffer dst) {
        AttnNative.attn_jni_convert(kind, Checks.buffer(src, "src", false), 0,
                Checks.buffer(dst, "dst", true), 0, src == null ? 0 : src.remaining());
    }
}
