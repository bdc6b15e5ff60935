package org.libattn;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * An attention problem: sizes, causal rule, scale, strides and the 0.2 parameters (sliding
 * window, softcap, ALiBi, "+1" softmax, headDimV, weights mode, bias order; the serving
 * layouts: varlen packs, paged K/V caches, batch invariance; the forward's arithmetic,
 * {@link Compute}), fixed when {@link Builder#build()} returns. Use it in try-with-resources;
 * {@link #close()} frees the native descriptor. A descriptor that is never closed is freed by a
 * {@link Cleaner} once it is unreachable (a safety net, not a substitute for closing).
 *
 * <pre>{@code
 * try (AttentionDesc desc = AttentionDesc.builder()
 *         .batch(2).heads(8, 2).seqLen(128, 128).headDim(64)
 *         .causal(Causal.TOP_LEFT).window(32, 0).softcap(50f)
 *         .build();
 *      AttentionArgs args = desc.args()) {
 *     float[] out = new float[(int) desc.requiredLen(Operand.OUT)];
 *     args.set(Operand.Q, q).set(Operand.K, k).set(Operand.V, v).set(Operand.OUT, out)
 *         .set(Operand.SEQ_LENS_K, new int[] {128, 97});
 *     args.run(Op.FORWARD);
 *     desc.forward(q, k, v, null, null, out, null); // the 0.1 call, the same kernels
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
 * <li>{@link IllegalArgumentException}: too short (empty included; only null means "not
 * given"); a heap buffer, a buffer in the wrong byte order or a read-only output buffer; a
 * negative size or stride, or a parameter outside its range (attn_param_bounds) given to the
 * builder;
 * <li>{@link IllegalStateException}: the descriptor is closed;
 * <li>what the library refuses has the kind of its status, with the library's message:
 * INVALID_ARGUMENT an {@link IllegalArgumentException} (a dimension of 0, heads_q not a
 * multiple of heads_kv, an output overlapping another argument: "out overlaps q", also when it
 * is the same array), NULL_POINTER a {@link NullPointerException}, any other status an
 * {@link AttentionException} carrying it (e.g. UNSUPPORTED).
 * </ul>
 *
 * <h2>Threads</h2>
 * Any number of threads may call {@code forward}, {@code weights}, {@code requiredLen} and the
 * getters on one descriptor at once, and run their own {@link AttentionArgs} on it.
 * {@link #close()} waits for calls in flight and makes later calls throw
 * {@link IllegalStateException}; it never frees the native descriptor under a running call.
 */
public final class AttentionDesc implements AutoCloseable {
    /** The native attn_desc*; freed once no call is in flight (close) or by the Cleaner. */
    private final long handle;
    private final Natives.Handle owner;
    private final Cleaner.Cleanable cleanable;
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
    // The parameters, read back from the library once configured (the descriptor is immutable).
    private final Causal causal;
    private final float scale;
    private final int windowLeft;
    private final int windowRight;
    private final float softcap;
    private final Alibi alibi;
    private final boolean softmaxPlusOne;
    private final int headDimV;
    private final WeightsMode weightsMode;
    private final boolean biasFirst;
    private final boolean varlen;
    private final int pageSize;
    private final int maxPages;
    private final boolean batchInvariant;
    private final Compute compute;
    private final Diagonal diagonal;
    private final AlibiForm alibiForm;
    /** attn_desc_required_len per Operand (ordinal), read once: the descriptor is immutable. */
    private final long[] required = new long[Operand.values().length];
    /**
     * What {@link AttentionArgs#set} demands per Operand (ordinal): {@code required}, except for
     * the operands whose length in a varlen call follows from cu_seqlens ({@link #bounded}):
     * required is then the upper bound of a full pack, the library checks the call's own
     * length, and an array or buffer need only be non-empty.
     */
    private final long[] least = new long[Operand.values().length];

    private AttentionDesc(long handle, Builder b) {
        this.handle = handle;
        this.batch = b.batch;
        this.headsQ = b.headsQ;
        this.headsKv = b.headsKv;
        this.seqQ = b.seqQ;
        this.seqK = b.seqK;
        this.headDim = b.headDim;
        this.causal = Causal.fromCode(Params.getInt(handle, attn_param.ATTN_PARAM_CAUSAL));
        this.scale = (float) Params.getFloat(handle, attn_param.ATTN_PARAM_SCALE);
        this.windowLeft = (int) Params.getInt(handle, attn_param.ATTN_PARAM_WINDOW_LEFT);
        this.windowRight = (int) Params.getInt(handle, attn_param.ATTN_PARAM_WINDOW_RIGHT);
        this.softcap = (float) Params.getFloat(handle, attn_param.ATTN_PARAM_SOFTCAP);
        this.alibi = Alibi.fromCode(Params.getInt(handle, attn_param.ATTN_PARAM_ALIBI));
        this.softmaxPlusOne = Params.getInt(handle, attn_param.ATTN_PARAM_SOFTMAX_PLUS_ONE) != 0;
        this.headDimV = (int) Params.getInt(handle, attn_param.ATTN_PARAM_HEAD_DIM_V);
        this.weightsMode = WeightsMode.fromCode(
                Params.getInt(handle, attn_param.ATTN_PARAM_WEIGHTS_MODE));
        this.biasFirst = Params.getInt(handle, attn_param.ATTN_PARAM_BIAS_FIRST) != 0;
        this.varlen = Params.getInt(handle, attn_param.ATTN_PARAM_VARLEN) != 0;
        this.pageSize = (int) Params.getInt(handle, attn_param.ATTN_PARAM_PAGE_SIZE);
        this.maxPages = (int) Params.getInt(handle, attn_param.ATTN_PARAM_MAX_PAGES);
        this.batchInvariant = Params.getInt(handle, attn_param.ATTN_PARAM_BATCH_INVARIANT) != 0;
        this.compute = Compute.fromCode(Params.getInt(handle, attn_param.ATTN_PARAM_COMPUTE));
        this.diagonal = Diagonal.fromCode(Params.getInt(handle, attn_param.ATTN_PARAM_DIAGONAL));
        this.alibiForm =
                AlibiForm.fromCode(Params.getInt(handle, attn_param.ATTN_PARAM_ALIBI_FORM));
        for (Operand op : Operand.values()) {
            long n = AttnNative.attn_desc_required_len(handle, op.raw);
            required[op.ordinal()] = n;
            least[op.ordinal()] = bounded(op) ? 0 : n;
        }
        // Last: from here on the Cleaner owns the handle (the builder frees it on a failure above).
        this.owner = new Natives.Handle(handle, false);
        this.cleanable = Natives.CLEANER.register(this, owner);
    }

    /** A builder with batch 1, 1 head, causal NONE and default scale, strides and parameters. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * A new, empty binding object for this descriptor's {@link AttentionArgs#run(Op)}: the
     * extensible call with every operand. Close it (or let the Cleaner free it).
     *
     * @throws IllegalStateException the descriptor is closed
     */
    public AttentionArgs args() {
        enter();
        try {
            return new AttentionArgs(this);
        } finally {
            leave();
        }
    }

    /**
     * Folds {@code part} into {@code acc} (attn_merge): the exact merge of two results computed
     * over disjoint key sets (split-KV decode, ring attention, prefix caching), row by row
     *
     * <pre>
     * lse = log(exp(lse_acc) + exp(lse_part))
     * out = exp(lse_acc - lse) out_acc + exp(lse_part - lse) out_part
     * </pre>
     *
     * {@code acc} and {@code part} bind {@link Operand#OUT} and {@link Operand#LSE} (part's are
     * only read), in this descriptor's OUT and LSE layouts; with {@link #varlen()} acc also
     * binds {@link Operand#CU_SEQLENS_Q}. acc's out and lse are updated in place. A part with
     * lse -infinity contributes nothing (its out is not read); both -infinity gives out 0, lse
     * -infinity. Folding parts in a fixed order is bit-identical from run to run. acc and part
     * may belong to other descriptors (a part over a key range has its own seqK): this one
     * gives the layout, and the library checks every length against it ("part's lse has 3
     * elements, needs at least 56"). Only those operands are read.
     *
     * @throws NullPointerException     acc or part is null, or an operand merge needs is not
     *                                  bound
     * @throws IllegalArgumentException acc and part are the same object
     * @throws IllegalArgumentException the library refused the call (a buffer too short, acc's
     *                                  and part's buffers overlapping, bad cu_seqlens_q)
     * @throws IllegalStateException    this descriptor, acc or part is closed
     */
    public void merge(AttentionArgs acc, AttentionArgs part) {
        AttentionArgs.merge(this, acc, part);
    }

    // ------------------------------------------------------------------------------ forward

    /**
     * Attention forward pass on arrays: out = softmax(scale * q k^T | visible) v.
     *
     * @param q        queries [batch][headsQ][seqQ][headDim] (strides of Operand.Q)
     * @param k        keys [batch][headsKv][seqK][headDim] (strides of Operand.K)
     * @param v        values [batch][headsKv][seqK][headDimV] (strides of Operand.V)
     * @param keyValid [batch][seqK], true = real token, false = padding; null = all real
     * @param allowed  [seqQ][seqK], true = query i may see key j, for every batch and head;
     *                 null = all allowed
     * @param out      output [batch][headsQ][seqQ][headDimV] (strides of Operand.OUT); only the
     *                 elements the strides address are written
     * @param lse      [batch][headsQ][seqQ] log-sum-exp of the scaled visible scores
     *                 (-infinity for a row with no visible key); null = not wanted
     */
    public void forward(float[] q, float[] k, float[] v, boolean[] keyValid, boolean[] allowed,
            float[] out, float[] lse) {
        long h = enter();
        try {
            checkForwardInputs(q, k, v, keyValid, allowed);
            Checks.minLength(out, "out", need(Operand.OUT), Operand.OUT);
            Checks.optional(lse, "lse", need(Operand.LSE), Operand.LSE);
            AttnNative.attn_jni_run(h, attn_op.ATTN_OP_FORWARD, 0,
                    new Object[] {q, k, v, out, lse, null, keyValid, allowed});
        } finally {
            leave();
        }
    }

    /** {@link #forward(float[], float[], float[], boolean[], boolean[], float[], float[])} without masks or lse. */
    public void forward(float[] q, float[] k, float[] v, float[] out) {
        forward(q, k, v, null, null, out, null);
    }

    /**
     * Forward pass into a new zero-initialised array of {@code requiredLen(Operand.OUT)} floats
     * (allocated only once every argument has been checked).
     */
    public float[] forward(float[] q, float[] k, float[] v, boolean[] keyValid, boolean[] allowed) {
        enter();
        float[] out;
        try {
            checkForwardInputs(q, k, v, keyValid, allowed);
            out = new float[arrayLength(Operand.OUT)];
        } finally {
            leave();
        }
        forward(q, k, v, keyValid, allowed, out, null);
        return out;
    }

    private void checkForwardInputs(float[] q, float[] k, float[] v, boolean[] keyValid,
            boolean[] allowed) {
        Checks.minLength(q, "q", need(Operand.Q), Operand.Q);
        Checks.minLength(k, "k", need(Operand.K), Operand.K);
        Checks.minLength(v, "v", need(Operand.V), Operand.V);
        Checks.optional(keyValid, "keyValid", need(Operand.KEY_VALID), Operand.KEY_VALID);
        Checks.optional(allowed, "allowed", need(Operand.ALLOWED), Operand.ALLOWED);
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
            AttnNative.attn_jni_run(h, attn_op.ATTN_OP_FORWARD, 0,
                    new Object[] {q2, k2, v2, out2, lse2, null, kv2, al2});
        } finally {
            leave();
        }
    }

    // ------------------------------------------------------------------------------ weights

    /**
     * The attention weights: weights[b][h][i][j] = softmax over the visible keys j of
     * scale * q_i . k_j; hidden keys get exactly 0 (or, with a score {@link WeightsMode}, the
     * scores of that stage).
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
            checkWeightsInputs(q, k, keyValid, allowed);
            Checks.minLength(weights, "weights", need(Operand.WEIGHTS), Operand.WEIGHTS);
            AttnNative.attn_jni_run(h, attn_op.ATTN_OP_WEIGHTS, 0,
                    new Object[] {q, k, null, null, null, weights, keyValid, allowed});
        } finally {
            leave();
        }
    }

    /**
     * The weights into a new array of {@code requiredLen(Operand.WEIGHTS)} floats (allocated
     * only once every argument has been checked).
     */
    public float[] weights(float[] q, float[] k, boolean[] keyValid, boolean[] allowed) {
        enter();
        float[] w;
        try {
            checkWeightsInputs(q, k, keyValid, allowed);
            w = new float[arrayLength(Operand.WEIGHTS)];
        } finally {
            leave();
        }
        weights(q, k, keyValid, allowed, w);
        return w;
    }

    private void checkWeightsInputs(float[] q, float[] k, boolean[] keyValid, boolean[] allowed) {
        Checks.minLength(q, "q", need(Operand.Q), Operand.Q);
        Checks.minLength(k, "k", need(Operand.K), Operand.K);
        Checks.optional(keyValid, "keyValid", need(Operand.KEY_VALID), Operand.KEY_VALID);
        Checks.optional(allowed, "allowed", need(Operand.ALLOWED), Operand.ALLOWED);
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
            AttnNative.attn_jni_run(h, attn_op.ATTN_OP_WEIGHTS, 0,
                    new Object[] {q2, k2, null, null, null, w2, kv2, al2});
        } finally {
            leave();
        }
    }

    // ------------------------------------------------------------------------------ queries

    /**
     * The number of elements (floats, bytes for the masks, ints for SEQ_LENS_K, CU_SEQLENS_Q/K
     * and BLOCK_TABLE; 16-bit or int8 values for Q, K and V stored so) the buffer for
     * {@code which} must hold, from the sizes and strides (attn_desc_required_len).
     *
     * <p>Serving layouts: with {@link #varlen()}, Q, OUT, LSE, NEW_K and NEW_V (and K and V
     * without pages) get the length of a full pack, every sequence at its maximum length: an
     * upper bound. A pack needs only its real tokens (cuSeqlensQ[batch] rows; LSE
     * headsQ * totalQ), so {@link AttentionArgs#set} accepts any non-empty array or buffer for
     * them and the library checks the call's own length ("attn_run: q has 19 elements, needs at
     * least 40"). With {@link #pageSize()} &gt; 0, K and V are one page (a pool holds any
     * number of pages); BLOCK_TABLE is batch * (maxPages or ceil(seqK / pageSize)), 0 without
     * pages.
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
            leave();
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

    /** The causal rule (ATTN_PARAM_CAUSAL, read from the library). */
    public Causal causal() {
        return causal;
    }

    /**
     * The score scale, exactly the float the kernels multiply by (ATTN_PARAM_SCALE, read from the
     * library; 1/sqrtf(headDim) unless the builder set one).
     */
    public float scale() {
        return scale;
    }

    /** Keys visible to query i start at diag(i) - windowLeft(); -1 = unbounded (the default). */
    public int windowLeft() {
        return windowLeft;
    }

    /** Keys visible to query i end at diag(i) + windowRight(); -1 = unbounded (the default). */
    public int windowRight() {
        return windowRight;
    }

    /** The logit softcap c (s = c * tanh(s / c)); 0 = off (the default). */
    public float softcap() {
        return softcap;
    }

    /** The ALiBi mode (default NONE). */
    public Alibi alibi() {
        return alibi;
    }

    /** True for the "+1" quiet softmax (a sink logit 0 for every head). */
    public boolean softmaxPlusOne() {
        return softmaxPlusOne;
    }

    /** The size of a V row and of an OUT row (default headDim). */
    public int headDimV() {
        return headDimV;
    }

    /** What {@link Op#WEIGHTS} writes (default SOFTMAX). */
    public WeightsMode weightsMode() {
        return weightsMode;
    }

    /** True when the bias is added before the softcap (ONNX's order); false = after (default). */
    public boolean biasFirst() {
        return biasFirst;
    }

    /**
     * True for a packed variable-length batch (ATTN_PARAM_VARLEN): seqQ and seqK are the
     * maximum lengths, {@link Operand#CU_SEQLENS_Q} (and, without pages,
     * {@link Operand#CU_SEQLENS_K}) give the real ones. Default false.
     */
    public boolean varlen() {
        return varlen;
    }

    /** Tokens per page of a paged K/V cache (ATTN_PARAM_PAGE_SIZE); 0 = contiguous K/V (default). */
    public int pageSize() {
        return pageSize;
    }

    /**
     * The block table's column count as set (ATTN_PARAM_MAX_PAGES); 0 = the default
     * ceil(seqK / pageSize). The table holds {@code requiredLen(Operand.BLOCK_TABLE)} ints
     * either way.
     */
    public int maxPages() {
        return maxPages;
    }

    /** True when a query's output bits depend only on its own sequence (ATTN_PARAM_BATCH_INVARIANT). */
    public boolean batchInvariant() {
        return batchInvariant;
    }

    /** The arithmetic of {@link Op#FORWARD} (ATTN_PARAM_COMPUTE). */
    public Compute compute() {
        return compute;
    }

    /** The diagonal the sliding window and ALiBi measure from (ATTN_PARAM_DIAGONAL). */
    public Diagonal diagonal() {
        return diagonal;
    }

    /** The ALiBi term's form (ATTN_PARAM_ALIBI_FORM). */
    public AlibiForm alibiForm() {
        return alibiForm;
    }

    /**
     * Any parameter's value, read from the library (attn_desc_get_float: exact for every
     * parameter; the typed getters above return the same values).
     *
     * @throws IllegalStateException the descriptor is closed
     */
    public double param(Param p) {
        if (p == null) {
            throw new NullPointerException("param must not be null");
        }
        long h = enter();
        try {
            return Params.getFloat(h, p.raw);
        } finally {
            leave();
        }
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
            owner.closing = true;
            cleanable.clean(); // attn_desc_destroy, exactly once
            destroyed = true;
        }
    }

    @Override
    public String toString() {
        return "AttentionDesc[batch=" + batch + ", headsQ=" + headsQ + ", headsKv=" + headsKv
                + ", seqQ=" + seqQ + ", seqK=" + seqK + ", headDim=" + headDim + ", headDimV="
                + headDimV + ", causal=" + causal + ", scale=" + scale + ", window=(" + windowLeft
                + ", " + windowRight + "), softcap=" + softcap + ", alibi=" + alibi
                + ", softmaxPlusOne=" + softmaxPlusOne + ", weightsMode=" + weightsMode
                + ", biasFirst=" + biasFirst + (varlen ? ", varlen" : "")
                + (pageSize != 0 ? ", pageSize=" + pageSize + ", maxPages=" + maxPages : "")
                + (batchInvariant ? ", batchInvariant" : "")
                + (compute != Compute.EXACT ? ", compute=" + compute : "")
                + (isClosed() ? ", closed]" : "]");
    }

    /**
     * Registers a call in flight and returns the native handle; the caller must call
     * {@link #leave()} in a finally block.
     */
    long enter() {
        inFlight.incrementAndGet();
        if (closed) {
            inFlight.decrementAndGet();
            throw new IllegalStateException("AttentionDesc is closed");
        }
        return handle;
    }

    /** Ends a call in flight; keeps this object (and so the native descriptor) alive until here. */
    void leave() {
        inFlight.decrementAndGet();
        Reference.reachabilityFence(this);
    }

    long need(Operand op) {
        return required[op.ordinal()];
    }

    /** The length AttentionArgs demands of an array or buffer bound to op (see {@link #least}). */
    long least(Operand op) {
        return least[op.ordinal()];
    }

    /**
     * True when op's length in a call follows from the call's cu_seqlens (varlen mode: Q, OUT,
     * LSE, NEW_K, NEW_V, DOUT, DQ, and K, V, DK, DV and the int8 scales without pages):
     * requiredLen is then an upper bound.
     */
    boolean bounded(Operand op) {
        switch (op) {
        case Q:
        case OUT:
        case LSE:
        case NEW_K:
        case NEW_V:
        case DOUT:
        case DQ:
            return varlen;
        case K:
        case V:
        case DK:
        case DV:
        case K_SCALE:
        case V_SCALE:
            return varlen && pageSize == 0;
        default:
            return false;
        }
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
     * [batch][heads][seq][headDim] strides, and the library's defaults for every 0.2 parameter
     * (no window, no softcap, no ALiBi, ordinary softmax, headDimV = headDim, weights SOFTMAX,
     * bias after the softcap, dense batch, contiguous K/V, no batch invariance, EXACT
     * arithmetic). seqLen and headDim have no default. Negative sizes and strides
     * and parameters outside their range (attn_param_bounds) are refused at once with
     * {@link IllegalArgumentException}; sizes the library refuses (0, headsQ not a multiple of
     * headsKv) and strides that do not fit make {@link #build()} throw
     * {@link IllegalArgumentException} with the library's message. A builder may build several
     * descriptors.
     */
    public static final class Builder {
        private int batch = 1;
        private int headsQ = 1;
        private int headsKv = 1;
        private int seqQ;
        private int seqK;
        private int headDim;
        /** Parameters set on this builder, by attn_param value; applied in that order. */
        private final boolean[] paramSet = new boolean[attn_param.values().length];
        private final double[] paramValue = new double[attn_param.values().length];
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

        /** Vector size of q and k (and of v and out unless {@link #headDimV(int)} is set). */
        public Builder headDim(int headDim) {
            this.headDim = nonNegative(headDim, "headDim");
            return this;
        }

        /** The causal rule (default NONE). */
        public Builder causal(Causal causal) {
            if (causal == null) {
                throw new NullPointerException("causal must not be null (use Causal.NONE)");
            }
            return param(attn_param.ATTN_PARAM_CAUSAL, causal.code());
        }

        /**
         * The score scale (any finite value, 0 included; default 1/sqrtf(headDim)).
         *
         * @throws IllegalArgumentException NaN or infinite
         */
        public Builder scale(float scale) {
            return param(attn_param.ATTN_PARAM_SCALE,
                    Params.checkFloat(attn_param.ATTN_PARAM_SCALE, scale, "scale"));
        }

        /**
         * Sliding window: key j is visible to query i only if
         * diag(i) - left &lt;= j &lt;= diag(i) + right, where diag(i) is the causal diagonal;
         * -1 = unbounded on that side (the default). FlashAttention's window_size, ONNX's
         * left/right window sizes.
         *
         * @throws IllegalArgumentException a bound below -1
         */
        public Builder window(int left, int right) {
            Params.checkInt(attn_param.ATTN_PARAM_WINDOW_LEFT, left, "window left");
            Params.checkInt(attn_param.ATTN_PARAM_WINDOW_RIGHT, right, "window right");
            // (both checked before either is stored)
            param(attn_param.ATTN_PARAM_WINDOW_LEFT, left);
            return param(attn_param.ATTN_PARAM_WINDOW_RIGHT, right);
        }

        /**
         * Logit softcap c: s = c * tanh(s / c) (Gemma 2); 0 = off (the default).
         *
         * @throws IllegalArgumentException negative, NaN or infinite
         */
        public Builder softcap(float c) {
            return param(attn_param.ATTN_PARAM_SOFTCAP,
                    Params.checkFloat(attn_param.ATTN_PARAM_SOFTCAP, c, "softcap"));
        }

        /**
         * ALiBi slopes: {@link Alibi#STANDARD} (computed for headsQ heads) or
         * {@link Alibi#OPERAND} (then {@link Operand#ALIBI_SLOPES} must be bound); default NONE.
         */
        public Builder alibi(Alibi mode) {
            if (mode == null) {
                throw new NullPointerException("alibi must not be null (use Alibi.NONE)");
            }
            return param(attn_param.ATTN_PARAM_ALIBI, mode.code());
        }

        /**
         * The diagonal diag(i) the sliding window and ALiBi measure from (default
         * {@link Diagonal#CAUSAL}, the causal rule's); {@link Diagonal#BOTTOM_RIGHT} is
         * FlashAttention's window_size / alibi_slopes alignment, causal or not. The causal rule
         * keeps its own diagonal.
         */
        public Builder diagonal(Diagonal d) {
            if (d == null) {
                throw new NullPointerException("diagonal must not be null (use Diagonal.CAUSAL)");
            }
            return param(attn_param.ATTN_PARAM_DIAGONAL, d.code());
        }

        /**
         * The ALiBi term: {@link AlibiForm#LINEAR} -slope (diag(i) - j) (default) or
         * {@link AlibiForm#SYMMETRIC} -slope |diag(i) - j| (FlashAttention's non-causal ALiBi).
         */
        public Builder alibiForm(AlibiForm f) {
            if (f == null) {
                throw new NullPointerException("alibiForm must not be null (use AlibiForm.LINEAR)");
            }
            return param(attn_param.ATTN_PARAM_ALIBI_FORM, f.code());
        }

        /** The "+1" quiet softmax: a sink logit of 0 for every head (not with Operand.SINKS). */
        public Builder softmaxPlusOne() {
            return softmaxPlusOne(true);
        }

        /** Turns the "+1" quiet softmax on or off (default off). */
        public Builder softmaxPlusOne(boolean on) {
            return param(attn_param.ATTN_PARAM_SOFTMAX_PLUS_ONE, on ? 1 : 0);
        }

        /**
         * The size of a V row and of an OUT row (DeepSeek MLA: headDim 192, headDimV 128);
         * default headDim. V and OUT keep contiguous strides unless set with
         * {@link #strides}.
         *
         * @throws IllegalArgumentException below 1
         */
        public Builder headDimV(int headDimV) {
            Params.checkInt(attn_param.ATTN_PARAM_HEAD_DIM_V, headDimV, "headDimV");
            return param(attn_param.ATTN_PARAM_HEAD_DIM_V, headDimV);
        }

        /** What {@link Op#WEIGHTS} writes (default {@link WeightsMode#SOFTMAX}). */
        public Builder weightsMode(WeightsMode mode) {
            if (mode == null) {
                throw new NullPointerException("weightsMode must not be null (use WeightsMode.SOFTMAX)");
            }
            return param(attn_param.ATTN_PARAM_WEIGHTS_MODE, mode.code());
        }

        /** Adds the bias before the softcap (ONNX's order: softcap(q.k * scale + bias)). */
        public Builder biasFirst() {
            return biasFirst(true);
        }

        /** Bias before (true) or after (false, the default) the softcap. */
        public Builder biasFirst(boolean on) {
            return param(attn_param.ATTN_PARAM_BIAS_FIRST, on ? 1 : 0);
        }

        /** A packed variable-length batch: {@code varlen(true)}. */
        public Builder varlen() {
            return varlen(true);
        }

        /**
         * Packed variable-length batch (FlashAttention's varlen layout; default off): seqLen's
         * seqQ and seqK become the maximum lengths of a sequence, {@link Operand#CU_SEQLENS_Q}
         * and {@link Operand#CU_SEQLENS_K} (prefix sums, [batch + 1]) give the real ones. Q
         * and OUT are token-major [totalQ][headsQ][headDim(V)], K and V
         * [totalK][headsKv][headDim(V)] (default strides; head and row strides through
         * {@link #strides}, whose batch stride is not used), LSE [headsQ][totalQ].
         */
        public Builder varlen(boolean on) {
            return param(attn_param.ATTN_PARAM_VARLEN, on ? 1 : 0);
        }

        /**
         * A paged K/V cache of {@code pageSize} tokens per page (the vLLM / FlashAttention
         * block table; 0 = contiguous K/V, the default): K and V are pools of pages, token t of
         * page p of KV head h at p * batchStride + h * headStride + t * rowStride. Default
         * strides are token-major pages [pages][pageSize][headsKv][headDim]; head-major pages
         * are {@code strides(Operand.K, headsKv * pageSize * D, pageSize * D, D)} (and the same
         * for V). Bind {@link Operand#BLOCK_TABLE} and {@link Operand#SEQ_LENS_K}.
         *
         * @throws IllegalArgumentException negative
         */
        public Builder pageSize(int pageSize) {
            return param(attn_param.ATTN_PARAM_PAGE_SIZE,
                    Params.checkInt(attn_param.ATTN_PARAM_PAGE_SIZE, pageSize, "pageSize"));
        }

        /**
         * Columns of the block table (default 0 = ceil(seqK / pageSize)).
         *
         * @throws IllegalArgumentException negative
         */
        public Builder maxPages(int maxPages) {
            return param(attn_param.ATTN_PARAM_MAX_PAGES,
                    Params.checkInt(attn_param.ATTN_PARAM_MAX_PAGES, maxPages, "maxPages"));
        }

        /** Batch invariance: {@code batchInvariant(true)}. */
        public Builder batchInvariant() {
            return batchInvariant(true);
        }

        /**
         * Batch invariance (default off): a query's output bits then depend only on its own
         * sequence, never on its batch-mates, the batch size, the layout (padded, varlen,
         * paged), the prefill chunk it is in or the thread count. Costs speed on decode-like
         * calls.
         */
        public Builder batchInvariant(boolean on) {
            return param(attn_param.ATTN_PARAM_BATCH_INVARIANT, on ? 1 : 0);
        }

        /**
         * The arithmetic of {@link Op#FORWARD} (default {@link Compute#EXACT}):
         * {@link Compute#FP16} is the fast path on CPUs with AVX512-FP16, outputs within about
         * 1e-2 max|v| of EXACT; calls it does not apply to (see {@link Compute#FP16}) and other
         * CPUs run exactly as EXACT.
         */
        public Builder compute(Compute mode) {
            if (mode == null) {
                throw new NullPointerException("compute must not be null (use Compute.EXACT)");
            }
            return param(attn_param.ATTN_PARAM_COMPUTE, mode.code());
        }

        /**
         * Sets any parameter from an integer, as attn_desc_set_int (a float parameter takes
         * the integer's value).
         *
         * @throws IllegalArgumentException the value is outside the parameter's range
         *                                  (attn_param_bounds)
         */
        public Builder param(Param p, long value) {
            if (p == null) {
                throw new NullPointerException("param must not be null");
            }
            if (p.isFloat()) {
                return param(p.raw, Params.checkDouble(p.raw, value, p.cname));
            }
            return param(p.raw, Params.checkInt(p.raw, value, p.cname));
        }

        /**
         * Sets any parameter from a double, as attn_desc_set_float (an integer parameter takes
         * only integral values).
         *
         * @throws IllegalArgumentException NaN, outside the parameter's range
         *                                  (attn_param_bounds), or not integral for an
         *                                  integer parameter
         */
        public Builder param(Param p, double value) {
            if (p == null) {
                throw new NullPointerException("param must not be null");
            }
            return param(p.raw, Params.checkDouble(p.raw, value, p.cname));
        }

        private Builder param(attn_param p, double value) {
            paramSet[p.swigValue()] = true;
            paramValue[p.swigValue()] = value;
            return this;
        }

        /**
         * Element strides of Q, K, V, OUT, BIAS or the int8 scales K_SCALE / V_SCALE: element
         * (b, h, s, d) is at b*batchStride + h*headStride + s*rowStride + d (for BIAS, element
         * (b, h, i, j) at b*batchStride + h*headStride + i*rowStride + j; for a scale, row
         * (b, h, s) at b*batchStride + h*headStride + s*rowStride). Strides count elements
         * whatever the storage type. The gradients DQ, DK, DV, DOUT and DBIAS take the layout
         * of Q, K, V, OUT and BIAS. For example, with H heads, S rows and
         * D = headDim: BHSD (default) = (H*S*D, S*D, D); BSHD = (S*H*D, D, H*D). Inputs may use
         * 0 to broadcast; OUT rows must not overlap. Applied after every parameter (so V and OUT
         * strides are checked against headDimV). ALIBI_SLOPES is [batch][headsQ] with no row
         * dimension: the slope of (b, h) at b*batchStride + h*headStride, rowStride 0; default
         * (0, 1, 0), one [headsQ] row for every batch entry; (headsQ, 1, 0) = per-batch slopes
         * [batch][headsQ] (b is the sequence of a varlen or paged call).
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
         * @throws IllegalArgumentException the library refused a size, a parameter or a
         *                                  stride; the message names it
         */
        public AttentionDesc build() {
            long[] out = new long[1];
            AttnNative.attn_desc_create(out, batch, headsQ, headsKv, seqQ, seqK, headDim);
            long h = out[0];
            try {
                for (attn_param p : attn_param.values()) {
                    int id = p.swigValue();
                    if (!paramSet[id]) {
                        continue;
                    }
                    if (Params.bounds(p).isFloat) {
                        AttnNative.attn_desc_set_float(h, p, paramValue[id]);
                    } else {
                        AttnNative.attn_desc_set_int(h, p, (long) paramValue[id]);
                    }
                }
                for (Operand op : Operand.values()) {
                    long[] s = strides[op.ordinal()];
                    if (s != null) {
                        AttnNative.attn_desc_set_strides(h, op.raw, s[0], s[1], s[2]);
                    }
                }
                return new AttentionDesc(h, this);
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
