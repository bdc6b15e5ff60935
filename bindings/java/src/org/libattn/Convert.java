package org.libattn;

import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;

/**
 * Conversions for filling 16-bit and int8 Q/K/V buffers ({@link StorageType}; attn.h "Storage
 * types"): fp32 to IEEE binary16 (f16) and bfloat16 (bf16) bit patterns, round to nearest even
 * (overflow gives infinity, NaN stays NaN); the exact widening back (as the kernels do it); and
 * symmetric int8 quantization of rows with one fp32 scale per row. All vectorised in the
 * library, and without copies: arrays are pinned for the call (JNI critical access), direct
 * buffers are used in place.
 *
 * <p>Each conversion comes three ways: into a new array; between array ranges in the style of
 * {@link System#arraycopy} (to fill part of a cache, e.g. the new tokens' rows); and between
 * direct buffers in native byte order, from their positions (the positions are not changed).
 *
 * <pre>{@code
 * short[] kCache = new short[(int) desc.requiredLen(Operand.K)];   // f16 K cache
 * Convert.toF16(newRows, 0, kCache, rowOffset, newRows.length);    // write new rows in place
 * Convert.Int8 v8 = Convert.quantizeI8(v, rows, headDimV);         // rows = batch * headsKv * seqK
 * args.setF16(Operand.K, kCache).setI8(Operand.V, v8.values).set(Operand.V_SCALE, v8.scales);
 * }</pre>
 *
 * <p>Errors: a null array or buffer is a {@link NullPointerException}; a negative position or
 * count, a range past the end of an array or buffer, a heap or wrongly ordered buffer, a
 * read-only destination an {@link IllegalArgumentException} naming it; so is what the library
 * refuses (buffers that overlap, a row to quantize holding NaN or infinity, naming the row),
 * with the library's message.
 */
public final class Convert {
    private Convert() {}

    /** attn_jni_convert's kinds. */
    private static final int TO_F16 = 0, TO_BF16 = 1, FROM_F16 = 2, FROM_BF16 = 3;

    // ------------------------------------------------------------------------------ f16

    /** The f16 bit patterns of {@code src} (round to nearest even), in a new array. */
    public static short[] toF16(float[] src) {
        return narrow(TO_F16, src);
    }

    /** {@code n} values from {@code src[srcPos]} as f16 into {@code dst[dstPos]}. */
    public static void toF16(float[] src, int srcPos, short[] dst, int dstPos, int n) {
        narrow(TO_F16, src, srcPos, dst, dstPos, n);
    }

    /** {@code src.remaining()} values as f16 into {@code dst} (from the positions; unchanged). */
    public static void toF16(FloatBuffer src, ShortBuffer dst) {
        narrow(TO_F16, src, dst);
    }

    /** The floats of f16 bit patterns (exact), in a new array. */
    public static float[] fromF16(short[] src) {
        return widen(FROM_F16, src);
    }

    /** {@code n} f16 values from {@code src[srcPos]} as floats into {@code dst[dstPos]}. */
    public static void fromF16(short[] src, int srcPos, float[] dst, int dstPos, int n) {
        widen(FROM_F16, src, srcPos, dst, dstPos, n);
    }

    /** {@code src.remaining()} f16 values as floats into {@code dst} (positions unchanged). */
    public static void fromF16(ShortBuffer src, FloatBuffer dst) {
        widen(FROM_F16, src, dst);
    }

    // ------------------------------------------------------------------------------ bf16

    /** The bf16 bit patterns of {@code src} (round to nearest even), in a new array. */
    public static short[] toBf16(float[] src) {
        return narrow(TO_BF16, src);
    }

    /** {@code n} values from {@code src[srcPos]} as bf16 into {@code dst[dstPos]}. */
    public static void toBf16(float[] src, int srcPos, short[] dst, int dstPos, int n) {
        narrow(TO_BF16, src, srcPos, dst, dstPos, n);
    }

    /** {@code src.remaining()} values as bf16 into {@code dst} (positions unchanged). */
    public static void toBf16(FloatBuffer src, ShortBuffer dst) {
        narrow(TO_BF16, src, dst);
    }

    /** The floats of bf16 bit patterns (exact), in a new array. */
    public static float[] fromBf16(short[] src) {
        return widen(FROM_BF16, src);
    }

    /** {@code n} bf16 values from {@code src[srcPos]} as floats into {@code dst[dstPos]}. */
    public static void fromBf16(short[] src, int srcPos, float[] dst, int dstPos, int n) {
        widen(FROM_BF16, src, srcPos, dst, dstPos, n);
    }

    /** {@code src.remaining()} bf16 values as floats into {@code dst} (positions unchanged). */
    public static void fromBf16(ShortBuffer src, FloatBuffer dst) {
        widen(FROM_BF16, src, dst);
    }

    // ------------------------------------------------------------------------------ int8

    /**
     * Rows quantized to int8 with one fp32 scale per row: row r's element x is
     * {@code values[r * dim + x] * scales[r]}, the operand pair of an int8 K or V
     * ({@link AttentionArgs#setI8} + {@link Operand#K_SCALE} / {@link Operand#V_SCALE}).
     */
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

    /**
     * Symmetric int8 quantization (attn_quantize_i8) of the first {@code rows} rows of
     * {@code dim} floats of {@code src}, into new arrays.
     *
     * @throws IllegalArgumentException a row holds NaN or infinity (the message names the row)
     */
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

    /**
     * As {@link #quantizeI8(float[], int, int)}, from {@code src[srcPos]} into
     * {@code dst[dstPos]} (rows * dim values) and {@code scales[scalesPos]} (rows scales).
     */
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

    private static short[] narrow(int kind, float[] src) {
        if (src == null) {
            throw Checks.missing("src");
        }
        short[] dst = new short[src.length];
        narrow(kind, src, 0, dst, 0, dst.length);
        return dst;
    }

    private static float[] widen(int kind, short[] src) {
        if (src == null) {
            throw Checks.missing("src");
        }
        float[] dst = new float[src.length];
        widen(kind, src, 0, dst, 0, dst.length);
        return dst;
    }

    private static void narrow(int kind, float[] src, int srcPos, short[] dst, int dstPos, int n) {
        AttnNative.attn_jni_convert(kind, src, srcPos, dst, dstPos, n);
    }

    private static void widen(int kind, short[] src, int srcPos, float[] dst, int dstPos, int n) {
        AttnNative.attn_jni_convert(kind, src, srcPos, dst, dstPos, n);
    }

    /** Between buffers: src.remaining() values. */
    private static void narrow(int kind, FloatBuffer src, ShortBuffer dst) {
        AttnNative.attn_jni_convert(kind, Checks.buffer(src, "src", false), 0,
                Checks.buffer(dst, "dst", true), 0, src == null ? 0 : src.remaining());
    }

    private static void widen(int kind, ShortBuffer src, FloatBuffer dst) {
        AttnNative.attn_jni_convert(kind, Checks.buffer(src, "src", false), 0,
                Checks.buffer(dst, "dst", true), 0, src == null ? 0 : src.remaining());
    }
}
