package org.libattn;

/**
 * The static parameters of a descriptor (attn_param in attn.h; the numeric values are pinned),
 * for the generic {@link AttentionDesc.Builder#param(Param, long)} /
 * {@link AttentionDesc.Builder#param(Param, double)} and {@link AttentionDesc#param(Param)}. The
 * builder's typed methods ({@code causal}, {@code scale}, {@code window}, {@code softcap},
 * {@code alibi}, {@code softmaxPlusOne}, {@code headDimV}, {@code weightsMode},
 * {@code biasFirst}, {@code varlen}, {@code pageSize}, {@code maxPages},
 * {@code batchInvariant}, {@code compute}) set the same parameters. Kind and range come from the
 * library (attn_param_bounds).
 */
public enum Param {
    /** int, a {@link Causal} code. */
    CAUSAL(attn_param.ATTN_PARAM_CAUSAL),
    /** float, finite: the score scale. */
    SCALE(attn_param.ATTN_PARAM_SCALE),
    /** int &gt;= -1: sliding window, keys before diag(i) - windowLeft are hidden; -1 = unbounded. */
    WINDOW_LEFT(attn_param.ATTN_PARAM_WINDOW_LEFT),
    /** int &gt;= -1: sliding window, keys after diag(i) + windowRight are hidden; -1 = unbounded. */
    WINDOW_RIGHT(attn_param.ATTN_PARAM_WINDOW_RIGHT),
    /** float &gt;= 0: logit softcap; 0 = off. */
    SOFTCAP(attn_param.ATTN_PARAM_SOFTCAP),
    /** int, an {@link Alibi} code. */
    ALIBI(attn_param.ATTN_PARAM_ALIBI),
    /** int, 0 or 1: the "+1" quiet softmax. */
    SOFTMAX_PLUS_ONE(attn_param.ATTN_PARAM_SOFTMAX_PLUS_ONE),
    /** int, 1 .. 2^31-1: size of a V row and of an OUT row. */
    HEAD_DIM_V(attn_param.ATTN_PARAM_HEAD_DIM_V),
    /** int, a {@link WeightsMode} code. */
    WEIGHTS_MODE(attn_param.ATTN_PARAM_WEIGHTS_MODE),
    /** int, 0 or 1: bias before the softcap. */
    BIAS_FIRST(attn_param.ATTN_PARAM_BIAS_FIRST),
    /** int, 0 or 1: packed variable-length batch (seqQ / seqK become maximum lengths). Since 0.2. */
    VARLEN(attn_param.ATTN_PARAM_VARLEN),
    /** int, 0 .. 2^31-1: tokens per page of a paged K/V cache; 0 = contiguous K/V. Since 0.2. */
    PAGE_SIZE(attn_param.ATTN_PARAM_PAGE_SIZE),
    /** int, 0 .. 2^31-1: columns of the block table; 0 = ceil(seqK / pageSize). Since 0.2. */
    MAX_PAGES(attn_param.ATTN_PARAM_MAX_PAGES),
    /**
     * int, 0 or 1: batch invariance, a query's output bits depend only on its own sequence.
     * Since 0.2.
     */
    BATCH_INVARIANT(attn_param.ATTN_PARAM_BATCH_INVARIANT),
    /**
     * int, a {@link Compute} code: the arithmetic of {@link Op#FORWARD} (default EXACT; FP16 =
     * the AVX512-FP16 fast path where it applies). Since 0.2.
     */
    COMPUTE(attn_param.ATTN_PARAM_COMPUTE),
    /**
     * int, a {@link Diagonal} code: the diagonal diag(i) the sliding window and ALiBi measure
     * from (default CAUSAL: the causal rule's; the causal rule keeps its own). Since 0.2.
     */
    DIAGONAL(attn_param.ATTN_PARAM_DIAGONAL),
    /**
     * int, an {@link AlibiForm} code: -slope (diag(i) - j) (LINEAR, default) or -slope
     * |diag(i) - j| (SYMMETRIC). Since 0.2.
     */
    ALIBI_FORM(attn_param.ATTN_PARAM_ALIBI_FORM);

    final attn_param raw;
    /** The library's spelling in messages, e.g. "window_left". */
    final String cname;

    Param(attn_param raw) {
        this.raw = raw;
        this.cname = name().toLowerCase(java.util.Locale.ROOT);
    }

    /** The numeric value of the C enum. */
    public int code() {
        return raw.swigValue();
    }

    /** True for a float parameter (SCALE, SOFTCAP), false for an integer one. */
    public boolean isFloat() {
        return Params.bounds(raw).isFloat;
    }

    /** The smallest accepted value (attn_param_bounds). */
    public double min() {
        return Params.bounds(raw).min;
    }

    /** The largest accepted value (attn_param_bounds). */
    public double max() {
        return Params.bounds(raw).max;
    }

    /**
     * The parameter with this numeric value.
     *
     * @throws IllegalArgumentException if no parameter has this value
     */
    public static Param fromCode(long code) {
        for (Param p : values()) {
            if (p.code() == code) {
                return p;
            }
        }
        throw new IllegalArgumentException("param (" + code + ") is not a Param value (0 .. "
                + (values().length - 1) + ")");
    }
}
