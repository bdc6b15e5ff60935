package org.libattn;

/**
 * The arithmetic of {@link Op#FORWARD} (attn_compute, ATTN_PARAM_COMPUTE). See capi/attn.h for
 * the error bound of {@link #FP16} and the calls it applies to.
 */
public enum Compute {
    /**
     * Everything in fp32 (16-bit and int8 operands widened on load; the default): about 1e-6
     * relative to a float64 reference. The mode for gradients and reference results.
     */
    EXACT(attn_compute.ATTN_COMPUTE_EXACT),
    /**
     * The fast path on CPUs with AVX512-FP16: scale * Q, K, V and the probabilities rounded to
     * fp16, Q.K^T and P.V as fp16 multiply-adds widened to fp32 at fixed intervals, the softmax
     * state in fp32; outputs within about 1e-2 max|v| of EXACT. Only prefill-like calls (at
     * least 16 query rows per KV head) with fp32 or fp16 Q, K, V, dense or strided, and no
     * variant beyond causal rules, windows, GQA and SEQ_LENS_K take it; every other call, and
     * every CPU without AVX512-FP16, runs exactly as EXACT.
     */
    FP16(attn_compute.ATTN_COMPUTE_FP16);

    final attn_compute raw;

    Compute(attn_compute raw) {
        this.raw = raw;
    }

    /** The numeric value of the C enum. */
    public int code() {
        return raw.swigValue();
    }

    /**
     * The compute mode with this numeric value.
     *
     * @throws IllegalArgumentException if no mode has this value
     */
    public static Compute fromCode(long code) {
        for (Compute c : values()) {
            if (c.code() == code) {
                return c;
            }
        }
        throw new IllegalArgumentException("compute (" + code + ") is not a Compute value (0 exact, "
                + "1 fp16)");
    }
}
