package org.libattn;

/**
 * What {@link Op#WEIGHTS} writes into {@link Operand#WEIGHTS}, [batch][headsQ][seqQ][seqK]
 * (attn_weights_mode, ATTN_PARAM_WEIGHTS_MODE): the probabilities, or the scores at one stage of
 * the pipeline. Every entry is written; padded keys (never read) hold -infinity, and so do hidden
 * entries in the modes that apply the masks. ONNX's qk_matmul_output_mode as its reference
 * implementation computes it: 0 = SCORES, 1 = SOFTCAPPED, 2 = CAPPED, 3 = SOFTMAX.
 */
public enum WeightsMode {
    /** Probabilities (the default). */
    SOFTMAX(attn_weights_mode.ATTN_WEIGHTS_SOFTMAX),
    /** scale * q.k, no mask. */
    SCORES(attn_weights_mode.ATTN_WEIGHTS_SCORES),
    /** scale * q.k + bias + ALiBi, masks applied, no softcap. */
    MASKED(attn_weights_mode.ATTN_WEIGHTS_MASKED),
    /** The final logits: every step of the pipeline, masks applied. */
    CAPPED(attn_weights_mode.ATTN_WEIGHTS_CAPPED),
    /** softcap(scale * q.k), no bias, no mask. */
    SOFTCAPPED(attn_weights_mode.ATTN_WEIGHTS_SOFTCAPPED);

    final attn_weights_mode raw;

    WeightsMode(attn_weights_mode raw) {
        this.raw = raw;
    }

    /** The numeric value of the C enum. */
    public int code() {
        return raw.swigValue();
    }

    /**
     * The weights mode with this numeric value.
     *
     * @throws IllegalArgumentException if no mode has this value
     */
    public static WeightsMode fromCode(long code) {
        for (WeightsMode m : values()) {
            if (m.code() == code) {
                return m;
            }
        }
        throw new IllegalArgumentException("weightsMode (" + code + ") is not a WeightsMode value "
                + "(0 softmax, 1 scores, 2 masked, 3 capped, 4 softcapped)");
    }
}
