package org.libattn;

import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * An attention problem: sizes, causal rule, scale and strides, fixed when {@link Builder#build()}
 * returns. Use it in try-with-resources; {@link #close()} frees the native descriptor (there is
 * no finalizer).
 *
 * <pre>{@code
 * try (AttentionDesc desc = AttentionDesc.builder()
 *         .batch(2).heads(8, 2).seqLen(128, 128).headDim(64)
 *         .causal(Causal.TOP_LEFT)
 *         .build()) {
 *     float[] out = new float[(int) desc.requiredLen(Operand.OUT)];
 *     desc.forward(q, k, v, null, null, out, null);
 * }
 * }</pre>
 *
 * <h2>Arrays and buffers</h2>
 * Every float[] / boolean[] is passed to native code without a copy (JNI critical array access);
 * the buffer overloads take direct buffers, also without a copy: {@link FloatBuffer}s must be
 * direct and in native byte order, mask {@link ByteBuffer}s direct (one byte per element, nonzero
 * = true). A buffer is used from its position on. Each array or buffer must hold at least
 * {@link #requiredLen(Operand)} elements (longer is fine: the extra elements are neither read
 * nor written); the lengths are checked before anything reaches native code.
 *
 * <h2>Errors</h2>
 * <ul>
 * <li>{@link NullPointerException}: a required array/buffer is null (q, k, v, out, weights);
 * <li>{@link IllegalArgumentException}: too short; a heap buffer, a buffer in the wrong byte
 * order or a read-only output buffer; an output that is the same array as another argument; a
 * negative size or stride given to the builder;
 * <li>{@link IllegalStateException}: the descriptor is closed;
 * <li>{@link AttentionException}: the library refused the call (status + the library's message),
 * e.g. a dimension of 0, heads_q not a multiple of heads_kv, a non-finite scale, overlapping
 * buffers.
 * </ul>
 *
 * <h2>Threads</h2>
 * Any number of threads may call {@code forward}, {@code weights} and {@code requiredLen} on one
 * descriptor at once. {@link #close()} waits for calls in flight and makes later calls throw
 * {@link IllegalStateException}; it never frees the native descriptor under a running call.
 */
public final class AttentionDesc implements AutoCloseable {
    /** The native attn_desc*; freed by close() once no call is in flight. */
    private final long handle;
    /**
     * Calls in flight, and whether close() has started. A call increments inFlight and then
     * reads closed; close() sets closed and then waits for inFlight to reach 0: with both
     * volatile (sequentially consistent), either the call sees closed and backs out, or close()
     * sees the call and waits for it. New calls cannot starve close(): they see closed.
     */
    private final AtomicInteger inFlight = new AtomicInteger();
    private volatile boolean closed;
    private final Object closeLock = new Object();
    private boolean destroyed; // guarded by closeLock

    private final int batch;
    private final int headsQ;
    private final int headsKv;
    private final int seqQ;
    private final int seqK;
    private final int headDim;
    private final Causal causal;
    private final float scale;
    /** attn_desc_required_len per Operand (ordinal), read once: the descriptor is immutable. */
    private final long[] required = new long[Operand.values().length];

    private AttentionDesc(long handle, Builder b, float scale) {
        this.handle = handle;
        this.batch = b.batch;
        this.headsQ = b.headsQ;
        this.headsKv = b.headsKv;
        this.seqQ = b.seqQ;
        this.seqK = b.seqK;
        this.headDim = b.headDim;
        this.causal = b.causal;
        this.scale = scale;
        for (Operand op : Operand.values()) {
            required[op.ordinal()] = AttnNative.attn_desc_required_len(handle, op.raw);
        }
    }

    /** A builder with batch 1, 1 head, causal NONE and default scale and strides. */
    public static Builder builder() {
        return new Builder();
    }

    // ------------------------------------------------------------------------------ forward

    /**
     * Attention forward pass on arrays: out = softmax(scale * q k^T | visible) v.
     *
     * @param q        queries [batch][headsQ][seqQ][headDim] (strides of Operand.Q)
     * @param k        keys [batch][headsKv][seqK][headDim] (strides of Operand.K)
     * @param v        values [batch][headsKv][seqK][headDim] (strides of Operand.V)
     * @param keyValid [batch][seqK], true = real token, false = padding; null = all real
     * @param allowed  [seqQ][seqK], true = query i may see key j, for every batch and head;
     *                 null = all allowed
     * @param out      output [batch][headsQ][seqQ][headDim] (strides of Operand.OUT); only the
     *                 elements the strides address are written
     * @param lse      [batch][headsQ][seqQ] log-sum-exp of the scaled visible scores
     *                 (-infinity for a row with no visible key); null = not wanted
     */
    public void forward(float[] q, float[] k, float[] v, boolean[] keyValid, boolean[] allowed,
            float[] out, float[] lse) {
        long h = enter();
        try {
            Checks.minLength(q, "q", need(Operand.Q), Operand.Q);
            Checks.minLength(k, "k", need(Operand.K), Operand.K);
            Checks.minLength(v, "v", need(Operand.V), Operand.V);
            Checks.minLength(keyValid, "keyValid", need(Operand.KEY_VALID), Operand.KEY_VALID);
            Checks.minLength(allowed, "allowed", need(Operand.ALLOWED), Operand.ALLOWED);
            Checks.minLength(out, "out", need(Operand.OUT), Operand.OUT);
            if (lse != null) {
                Checks.minLength(lse, "lse", need(Operand.LSE), Operand.LSE);
            }
            Checks.notSameArray(out, "out", q, "q", k, "k", v, "v", lse, "lse");
            Checks.notSameArray(lse, "lse", q, "q", k, "k", v, "v");
            AttnNative.attn_forward(h, q, k, v, keyValid, allowed, out, lse);
        } finally {
            inFlight.decrementAndGet();
        }
    }

    /** {@link #forward(float[], float[], float[], boolean[], boolean[], float[], float[])} without masks or lse. */
    public void forward(float[] q, float[] k, float[] v, float[] out) {
        forward(q, k, v, null, null, out, null);
    }

    /** Forward pass into a new zero-initialised array of {@code requiredLen(Operand.OUT)} floats. */
    public float[] forward(float[] q, float[] k, float[] v, boolean[] keyValid, boolean[] allowed) {
        float[] out = new float[arrayLength(Operand.OUT)];
        forward(q, k, v, keyValid, allowed, out, null);
        return out;
    }

    /**
     * Forward pass on direct buffers (see the class comment); same shapes as the array version.
     * keyValid, allowed and lse may be null.
     */
    public void forward(FloatBuffer q, FloatBuffer k, FloatBuffer v, ByteBuffer keyValid,
            ByteBuffer allowed, FloatBuffer out, FloatBuffer lse) {
        long h = enter();
        try {
            FloatBuffer q2 = Checks.floats(q, "q", need(Operand.Q), Operand.Q, true, false);
            FloatBuffer k2 = Checks.floats(k, "k", need(Operand.K), Operand.K, true, false);
            FloatBuffer v2 = Checks.floats(v, "v", need(Operand.V), Operand.V, true, false);
            ByteBuffer kv2 = Checks.bytes(keyValid, "keyValid", need(Operand.KEY_VALID),
                    Operand.KEY_VALID);
            ByteBuffer al2 = Checks.bytes(allowed, "allowed", need(Operand.ALLOWED), Operand.ALLOWED);
            FloatBuffer out2 = Checks.floats(out, "out", need(Operand.OUT), Operand.OUT, true, true);
            FloatBuffer lse2 = Checks.floats(lse, "lse", need(Operand.LSE), Operand.LSE, false, true);
            AttnNative.attn_forward(h, q2, k2, v2, kv2, al2, out2, lse2);
        } finally {
            inFlight.decrementAndGet();
        }
    }

    // ------------------------------------------------------------------------------ weights

    /**
     * The attention weights: weights[b][h][i][j] = softmax over the visible keys j of
     * scale * q_i . k_j; hidden keys get exactly 0.
     *
     * @param q        as in forward
     * @param k        as in forward
     * @param keyValid as in forward, or null
     * @param allowed  as in forward, or null
     * @param weights  [batch][headsQ][seqQ][seqK], contiguous, written
     */
    public void weights(float[] q, float[] k, boolean[] keyValid, boolean[] allowed,
            float[] weights) {
        long h = enter();
        try {
            Checks.minLength(q, "q", need(Operand.Q), Operand.Q);
            Checks.minLength(k, "k", need(Operand.K), Operand.K);
            Checks.minLength(keyValid, "keyValid", need(Operand.KEY_VALID), Operand.KEY_VALID);
            Checks.minLength(allowed, "allowed", need(Operand.ALLOWED), Operand.ALLOWED);
            Checks.minLength(weights, "weights", need(Operand.WEIGHTS), Operand.WEIGHTS);
            Checks.notSameArray(weights, "weights", q, "q", k, "k");
            AttnNative.attn_weights(h, q, k, keyValid, allowed, weights);
        } finally {
            inFlight.decrementAndGet();
        }
    }

    /** The weights into a new array of {@code requiredLen(Operand.WEIGHTS)} floats. */
    public float[] weights(float[] q, float[] k, boolean[] keyValid, boolean[] allowed) {
        float[] w = new float[arrayLength(Operand.WEIGHTS)];
        weights(q, k, keyValid, allowed, w);
        return w;
    }

    /** The weights on direct buffers (see the class comment). */
    public void weights(FloatBuffer q, FloatBuffer k, ByteBuffer keyValid, ByteBuffer allowed,
            FloatBuffer weights) {
        long h = enter();
        try {
            FloatBuffer q2 = Checks.floats(q, "q", need(Operand.Q), Operand.Q, true, false);
            FloatBuffer k2 = Checks.floats(k, "k", need(Operand.K), Operand.K, true, false);
            ByteBuffer kv2 = Checks.bytes(keyValid, "keyValid", need(Operand.KEY_VALID),
                    Operand.KEY_VALID);
            ByteBuffer al2 = Checks.bytes(allowed, "allowed", need(Operand.ALLOWED), Operand.ALLOWED);
            FloatBuffer w2 = Checks.floats(weights, "weights", need(Operand.WEIGHTS),
                    Operand.WEIGHTS, true, true);
            AttnNative.attn_weights(h, q2, k2, kv2, al2, w2);
        } finally {
            inFlight.decrementAndGet();
        }
    }

    // ------------------------------------------------------------------------------ queries

    /**
     * The number of elements (floats, or booleans for the masks) the buffer for {@code which}
     * must hold, from the sizes and strides (attn_desc_required_len).
     *
     * @throws IllegalStateException the descriptor is closed
     */
    public long requiredLen(Operand which) {
        if (which == null) {
            throw new NullPointerException("which must not be null");
        }
        enter();
        try {
            return need(which);
        } finally {
            inFlight.decrementAndGet();
        }
    }

    public int batch() {
        return batch;
    }

    public int headsQ() {
        return headsQ;
    }

    public int headsKv() {
        return headsKv;
    }

    public int seqQ() {
        return seqQ;
    }

    public int seqK() {
        return seqK;
    }

    public int headDim() {
        return headDim;
    }

    public Causal causal() {
        return causal;
    }

    /** The score scale (1/sqrt(headDim) unless the builder set one). */
    public float scale() {
        return scale;
    }

    /** True once {@link #close()} has run. */
    public boolean isClosed() {
        return closed;
    }

    /**
     * Frees the native descriptor, after waiting for the calls in flight on other threads.
     * Idempotent; later calls (other than close) throw {@link IllegalStateException}.
     */
    @Override
    public void close() {
        synchronized (closeLock) {
            closed = true;
            if (destroyed) {
                return;
            }
            long pause = 1_000; // ns, doubling up to 1 ms: calls in flight are finishing
            while (inFlight.get() != 0) {
                LockSupport.parkNanos(pause);
                pause = Math.min(2 * pause, 1_000_000);
            }
            AttnNative.attn_desc_destroy(handle);
            destroyed = true;
        }
    }

    @Override
    public String toString() {
        return "AttentionDesc[batch=" + batch + ", headsQ=" + headsQ + ", headsKv=" + headsKv
                + ", seqQ=" + seqQ + ", seqK=" + seqK + ", headDim=" + headDim + ", causal="
                + causal + ", scale=" + scale + (isClosed() ? ", closed]" : "]");
    }

    /** Registers a call in flight (the caller must decrement inFlight in a finally block). */
    private long enter() {
        inFlight.incrementAndGet();
        if (closed) {
            inFlight.decrementAndGet();
            throw new IllegalStateException("AttentionDesc is closed");
        }
        return handle;
    }

    private long need(Operand op) {
        return required[op.ordinal()];
    }

    private int arrayLength(Operand op) {
        long n = need(op);
        if (n > Checks.MAX_ARRAY) {
            throw new IllegalArgumentException("requiredLen(" + op + ") = " + n
                    + " exceeds the largest Java array; use direct buffers");
        }
        return (int) n;
    }

    // ------------------------------------------------------------------------------ builder

    /**
     * Configures and creates an {@link AttentionDesc}. Defaults: batch 1, 1 query head and 1
     * key/value head, causal {@link Causal#NONE}, scale 1/sqrt(headDim), contiguous
     * [batch][heads][seq][headDim] strides. seqLen and headDim have no default. Sizes the library
     * refuses (0, headsQ not a multiple of headsKv) make {@link #build()} throw
     * {@link AttentionException}; negative values are refused at once with
     * {@link IllegalArgumentException}. A builder may build several descriptors.
     */
    public static final class Builder {
        private int batch = 1;
        private int headsQ = 1;
        private int headsKv = 1;
        private int seqQ;
        private int seqK;
        private int headDim;
        private Causal causal = Causal.NONE;
        private boolean scaleSet;
        private float scale;
        /** Strides per Operand (ordinal); null = the library's default. */
        private final long[][] strides = new long[Operand.values().length][];

        private Builder() {}

        /** Number of sequences (default 1). */
        public Builder batch(int batch) {
            this.batch = nonNegative(batch, "batch");
            return this;
        }

        /** The same number of query and key/value heads (multi-head attention). */
        public Builder heads(int heads) {
            return heads(heads, heads);
        }

        /**
         * headsQ query heads reading headsKv key/value heads (headsQ a multiple of headsKv:
         * MHA, GQA and MQA); query head h reads key/value head h / (headsQ / headsKv).
         */
        public Builder heads(int headsQ, int headsKv) {
            this.headsQ = nonNegative(headsQ, "headsQ");
            this.headsKv = nonNegative(headsKv, "headsKv");
            return this;
        }

        /** The same number of queries and keys. */
        public Builder seqLen(int seqLen) {
            return seqLen(seqLen, seqLen);
        }

        /** seqQ queries and seqK keys per sequence. */
        public Builder seqLen(int seqQ, int seqK) {
            this.seqQ = nonNegative(seqQ, "seqQ");
            this.seqK = nonNegative(seqK, "seqK");
            return this;
        }

        /** Vector size of q, k and v. */
        public Builder headDim(int headDim) {
            this.headDim = nonNegative(headDim, "headDim");
            return this;
        }

        /** The causal rule (default NONE). */
        public Builder causal(Causal causal) {
            if (causal == null) {
                throw new NullPointerException("causal must not be null (use Causal.NONE)");
            }
            this.causal = causal;
            return this;
        }

        /** The score scale (any finite value, 0 included; default 1/sqrt(headDim)). */
        public Builder scale(float scale) {
            this.scaleSet = true;
            this.scale = scale;
            return this;
        }

        /**
         * Element strides of Q, K, V or OUT: element (b, h, s, d) is at
         * b*batchStride + h*headStride + s*rowStride + d. For example, with H heads, S rows and
         * D = headDim: BHSD (default) = (H*S*D, S*D, D); BSHD = (S*H*D, D, H*D). Inputs may use
         * 0 to broadcast; OUT rows must not overlap.
         */
        public Builder strides(Operand which, long batchStride, long headStride, long rowStride) {
            if (which == null) {
                throw new NullPointerException("which must not be null");
            }
            nonNegative(batchStride, "batchStride");
            nonNegative(headStride, "headStride");
            nonNegative(rowStride, "rowStride");
            strides[which.ordinal()] = new long[] {batchStride, headStride, rowStride};
            return this;
        }

        /**
         * Creates the descriptor.
         *
         * @throws AttentionException the library refused a size, the scale or a stride; the
         *                            message names it
         */
        public AttentionDesc build() {
            long[] out = new long[1];
            AttnNative.attn_desc_create(out, batch, headsQ, headsKv, seqQ, seqK, headDim);
            long h = out[0];
            try {
                AttnNative.attn_desc_set_causal(h, causal.raw);
                if (scaleSet) {
                    AttnNative.attn_desc_set_scale(h, scale);
                }
                for (Operand op : Operand.values()) {
                    long[] s = strides[op.ordinal()];
                    if (s != null) {
                        AttnNative.attn_desc_set_strides(h, op.raw, s[0], s[1], s[2]);
                    }
                }
                float effective = scaleSet ? scale : (float) (1.0 / Math.sqrt(headDim));
                return new AttentionDesc(h, this, effective);
            } catch (RuntimeException | Error e) {
                AttnNative.attn_desc_destroy(h);
                throw e;
            }
        }

        private static int nonNegative(int value, String name) {
            if (value < 0) {
                throw new IllegalArgumentException(name + " (" + value + ") is negative");
            }
            return value;
        }

        private static long nonNegative(long value, String name) {
            if (value < 0) {
                throw new IllegalArgumentException(name + " (" + value + ") is negative");
            }
            return value;
        }
    }
}
