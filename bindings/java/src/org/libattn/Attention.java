package org.libattn;

/**
 * Entry points of libattn that need no descriptor: the simple one-sequence attention, version,
 * thread count and kernel (ISA) selection.
 *
 * <p>Errors (one rule, whether this class or the library finds the problem): a {@code null}
 * required array and the library's NULL_POINTER throw {@link NullPointerException}; a negative
 * size, an array shorter than required and the library's INVALID_ARGUMENT throw
 * {@link IllegalArgumentException}; any other failure the library reports throws
 * {@link AttentionException} with its status. The message names the argument (the library's
 * own message for what it refused). All methods are thread-safe.
 */
public final class Attention {
    private Attention() {}

    /**
     * The original one-sequence, one-head {@code attention(Q, K, V, causal, pad_mask)}, scale
     * 1/sqrt(d).
     *
     * @param q       queries, [n][d] row-major, at least n*d elements (longer: the prefix is used)
     * @param k       keys, [n][d], at least n*d elements
     * @param v       values, [n][d], at least n*d elements
     * @param n       sequence length (the library rejects 0)
     * @param d       vector size (the library rejects 0)
     * @param causal  true: query i sees keys j &lt;= i; false: no causal rule
     * @param padMask [n], true = real token, false = padding (never attended, never read);
     *                null = no padding
     * @return the output, [n][d] row-major (allocated only once every argument has been checked)
     * @throws NullPointerException     q, k or v is null
     * @throws IllegalArgumentException n or d is negative, an array is shorter than n*d (padMask
     *                                  than n), or n*d exceeds the largest Java array
     * @throws IllegalArgumentException the library refused the call (e.g. n or d is 0)
     */
    public static float[] simple(float[] q, float[] k, float[] v, int n, int d, boolean causal,
            boolean[] padMask) {
        long nd = checkSimple(q, k, v, n, d, padMask);
        if (nd > Checks.MAX_ARRAY) {
            throw new IllegalArgumentException(
                    "n*d (" + nd + ") exceeds the largest Java array (" + Checks.MAX_ARRAY + ")");
        }
        float[] out = new float[(int) nd];
        AttnNative.attn_jni_simple(q, k, v, n, d, causal, padMask, out);
        return out;
    }

    /**
     * As {@link #simple(float[], float[], float[], int, int, boolean, boolean[])}, writing into
     * {@code out} (at least n*d elements). An out that overlaps q, k or v (the same array) is
     * refused by the library: {@link IllegalArgumentException} "out overlaps q".
     */
    public static void simple(float[] q, float[] k, float[] v, int n, int d, boolean causal,
            boolean[] padMask, float[] out) {
        long nd = checkSimple(q, k, v, n, d, padMask);
        if (out == null) {
            throw Checks.missing("out");
        }
        Checks.length(out.length, "out", nd, "n*d", "elements");
        AttnNative.attn_jni_simple(q, k, v, n, d, causal, padMask, out);
    }

    /** Every check of simple() that needs no output: returns n*d. */
    private static long checkSimple(float[] q, float[] k, float[] v, int n, int d,
            boolean[] padMask) {
        if (n < 0) {
            throw new IllegalArgumentException("n (" + n + ") is negative");
        }
        if (d < 0) {
            throw new IllegalArgumentException("d (" + d + ") is negative");
        }
        long nd = (long) n * d; // cannot overflow a long
        String[] names = {"q", "k", "v"};
        float[][] in = {q, k, v};
        for (int x = 0; x < 3; x++) {
            if (in[x] == null) {
                throw Checks.missing(names[x]);
            }
            Checks.length(in[x].length, names[x], nd, "n*d", "elements");
        }
        if (padMask != null) {
            Checks.length(padMask.length, "padMask", n, "n", "elements");
        }
        return nd;
    }

    /** The library's version, "MAJOR.MINOR.PATCH". */
    public static String version() {
        return AttnNative.attn_version_string();
    }

    /** The library's version as MAJOR*10000 + MINOR*100 + PATCH. */
    public static int versionNumber() {
        return (int) AttnNative.attn_version_number();
    }

    /** Name of the kernel in use: "scalar", "sse2", "avx2", "avx512" or "avx512fp16". */
    public static String isa() {
        return AttnNative.attn_isa();
    }

    /**
     * Caps the kernel (process-wide) at {@code name}; null or "" restores the default.
     *
     * @throws IllegalArgumentException an unknown name (embedded NULs and non-ASCII characters
     *                                  included: the library's "name ... is not one of scalar,
     *                                  sse2, ...")
     * @throws AttentionException       {@link Status#UNSUPPORTED}: this CPU or build lacks it
     */
    public static void setIsa(String name) {
        AttnNative.attn_set_isa(name);
    }

    /** The number of threads attention calls use now. */
    public static int numThreads() {
        return (int) AttnNative.attn_get_num_threads();
    }

    /**
     * Sets the number of threads attention calls use (the caller counts as one); 0 restores the
     * default (ATTN_NUM_THREADS, else the hardware thread count).
     *
     * @throws IllegalArgumentException n is negative, or the library refused it (above 256)
     */
    public static void setNumThreads(int n) {
        if (n < 0) {
            throw new IllegalArgumentException("n (" + n + ") is negative");
        }
        AttnNative.attn_set_num_threads(n);
    }
}
