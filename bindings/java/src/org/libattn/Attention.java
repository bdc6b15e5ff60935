package org.libattn;

/**
 * Entry points that need no descriptor: attn_simple, version, threads, ISA selection and the
 * library's tables (ISAs, parameters, operands).
 * Errors as in {@link AttentionException}; thread-safe.
 */
public final class Attention {
    private Attention() {}

    /** One-sequence, one-head attention (attn_simple): q, k, v [n][d]; returns out [n][d]. */
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

    /** The kernel (ISA) names this build knows, weakest first: the names of {@link #isaInfo()}. */
    public static java.util.List<String> isas() {
        java.util.List<String> names = new java.util.ArrayList<>();
        for (IsaInfo isa : isaInfo()) {
            names.add(isa.name());
        }
        return java.util.Collections.unmodifiableList(names);
    }

    /**
     * Every kernel ISA this build knows, in the library's order (weakest first), with whether
     * this CPU runs it (attn_isa_info, asked from index 0 until the library says the list ended).
     */
    public static java.util.List<IsaInfo> isaInfo() {
        java.util.List<IsaInfo> list = new java.util.ArrayList<>();
        String[] name = new String[1];
        int[] supported = new int[1];
        for (int i = 0;; i++) {
            try {
                AttnNative.attn_isa_info(i, name, supported);
            } catch (IllegalArgumentException past) { // the library's end of the list
                return java.util.Collections.unmodifiableList(list);
            }
            list.add(new IsaInfo(name[0], supported[0] != 0));
        }
    }

    /**
     * The facts of the parameter with this numeric value (attn_param_info); for a {@link Param},
     * {@link Param#info()}.
     *
     * @throws IllegalArgumentException with the library's message if no parameter has it
     */
    public static ParamInfo paramInfo(int code) {
        return ParamInfo.of(code);
    }

    /**
     * The facts of the operand with this numeric value (attn_operand_info); for an
     * {@link Operand}, {@link Operand#info()}.
     *
     * @throws IllegalArgumentException with the library's message if no operand has it
     */
    public static OperandInfo operandInfo(int code) {
        return OperandInfo.of(code);
    }

    /** Name of the kernel in use (one of {@link #isas()}). */
    public static String isa() {
        return AttnNative.attn_isa();
    }

    /**
     * The unit compute mode {@code mode} runs its products on with the kernel in use
     * (attn_compute_unit), e.g. "int16 vpmaddwd (avx2)"; a mode that runs as
     * {@link Compute#EXACT} on this CPU names EXACT's unit.
     *
     * @throws NullPointerException if mode is null
     */
    public static String computeUnit(Compute mode) {
        return computeUnit(Checks.given(mode, "mode").code());
    }

    /**
     * {@link #computeUnit(Compute)} for the mode with this numeric value.
     *
     * @throws IllegalArgumentException if no compute mode has it (the library's NULL)
     */
    public static String computeUnit(int code) {
        String unit = AttnNative.attn_compute_unit(code);
        if (unit == null) {
            throw new IllegalArgumentException("mode (" + code + ") is not an attn_compute");
        }
        return unit;
    }

    /** Caps the kernel process-wide at {@code name} (attn_set_isa); null or "" = default. */
    public static void setIsa(String name) {
        AttnNative.attn_set_isa(name);
    }

    /** The number of threads attention calls use now. */
    public static int numThreads() {
        return (int) AttnNative.attn_get_num_threads();
    }

    /** Sets the number of threads attention calls use (attn_set_num_threads; 0 = default). */
    public static void setNumThreads(int n) {
        AttnNative.attn_set_num_threads(n);
    }
}
