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
     * The original one-sequence, one-head {@code attention(Q, K, V, causal, pad_mask)}
     * (attn_simple): q, k, v [n][d] row-major, padMask [n] (true = real token) or null; returns
     * the output [n][d].
     */
    public static float[] simple(float[] q, float[] k, float[] v, int n, int d, boolean causal,
            boolean[] padMask) {
        long nd = (long) Math.max(n, 0) * Math.max(d, 0);
        for (int x = 0; x < 3; x++) { // before allocating (the glue checks them all again)
            atLeast(new float[][] {q, k, v}[x], nd, "qkv".substring(x, x + 1));
        }
        if (nd > Checks.MAX_ARRAY) {
            throw new IllegalArgumentException(
                    "n*d (" + nd + ") exceeds the largest Java array (" + Checks.MAX_ARRAY + ")");
        }
        float[] out = new float[(int) nd];
        simple(q, k, v, n, d, causal, padMask, out);
        return out;
    }

    /** As {@link #simple(float[], float[], float[], int, int, boolean, boolean[])}, into out. */
    public static void simple(float[] q, float[] k, float[] v, int n, int d, boolean causal,
            boolean[] padMask, float[] out) {
        AttnNative.attn_jni_simple(q, k, v, n, d, causal, padMask, out);
    }

    /** An array (if given) of at least need elements (n*d, requiredLen: the library's sizes). */
    static void atLeast(Object array, long need, String name) {
        long have = array == null ? need : java.lang.reflect.Array.getLength(array);
        if (have < need) {
            throw new IllegalArgumentException(name + " has " + have + " elements, needs at least "
                    + need + " (n*d or requiredLen)");
        }
    }

    /** The library's version, "MAJOR.MINOR.PATCH". */
    public static String version() {
        return AttnNative.attn_version_string();
    }

    /** The library's version as MAJOR*10000 + MINOR*100 + PATCH. */
    public static int versionNumber() {
        return (int) AttnNative.attn_version_number();
    }

    /** The kernel (ISA) names this build knows, weakest first (attn_isa_info). */
    public static java.util.List<String> isas() {
        java.util.List<String> names = new java.util.ArrayList<>();
        String[] name = new String[1];
        for (int i = 0;; i++) {
            try {
                AttnNative.attn_isa_info(i, name, null);
            } catch (IllegalArgumentException past) { // the library's end of the list
                return java.util.Collections.unmodifiableList(names);
            }
            names.add(name[0]);
        }
    }

    /** Name of the kernel in use (one of {@link #isas()}). */
    public static String isa() {
        return AttnNative.attn_isa();
    }

    /**
     * Caps the kernel (process-wide) at {@code name}; null or "" restores the default.
     *
     * @throws IllegalArgumentException an unknown name (the library's message lists them)
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
     * @throws IllegalArgumentException n is negative, or the library refused it
     */
    public static void setNumThreads(int n) {
        AttnNative.attn_set_num_threads(n);
    }
}
