package org.libattn;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * An attention problem (attn_desc: sizes, parameters, strides; semantics and errors in attn.h),
 * fixed by {@link Builder#build()}. Arrays are pinned for a call, buffers direct and native-order
 * (position to limit); library errors arrive as in {@link AttentionException}. Thread-safe;
 * {@link #close()} waits for calls in flight, and a Cleaner frees one never closed.
 */
public final class AttentionDesc implements AutoCloseable {
    private static final int F32 = AttentionArgs.F32, OUT = AttentionArgs.OUT, U8 = AttentionArgs.U8;
    /** The operands of the 0.1 calls, by attn_operand value (Q .. ALLOWED). */
    private static final int[] FORWARD = {F32, F32, F32, F32 | OUT, F32 | OUT, 0, U8, U8};
    private static final int[] WEIGHTS = {F32, F32, 0, 0, 0, F32 | OUT, U8, U8};

    /** The native attn_desc*; freed once no call is in flight (close) or by the Cleaner. */
    private final long handle;
    private final Natives.Handle owner;
    private final Cleaner.Cleanable cleanable;
    /** Calls in flight; a call counts itself then reads closed, close() the reverse. */
    private final AtomicInteger inFlight = new AtomicInteger();
    private volatile boolean closed;
    private final Object closeLock = new Object();
    private boolean destroyed; // guarded by closeLock
    private final int batch, headsQ, headsKv, seqQ, seqK, headDim;
    /** Every parameter's value by attn_param value, read once (the descriptor is immutable). */
    private final double[] params = new double[Param.values().length];

    private AttentionDesc(long handle, Builder b) {
        this.handle = handle;
        this.batch = b.batch;
        this.headsQ = b.headsQ;
        this.headsKv = b.headsKv;
        this.seqQ = b.seqQ;
        this.seqK = b.seqK;
        this.headDim = b.headDim;
        for (Param p : Param.values()) {
            double[] v = new double[1];
            AttnNative.attn_desc_get_float(handle, p, v);
            params[p.code()] = v[0];
        }
        this.owner = new Natives.Handle(handle, false);
        this.cleanable = Natives.CLEANER.register(this, owner);
    }

    /** A builder with batch 1, 1 head and the library's defaults for everything else. */
    public static Builder builder() {
        return new Builder();
    }

    /** A new, empty binding object for {@link AttentionArgs#run(Op)} on this descriptor. */
    public AttentionArgs args() {
        enter();
        try {
            return new AttentionArgs(this);
        } finally {
            leave();
        }
    }

    /** Folds {@code part}'s OUT and LSE into {@code acc}'s, in place (attn_merge). */
    public void merge(AttentionArgs acc, AttentionArgs part) {
        AttentionArgs.merge(this, acc, part);
    }

    /** Forward pass (attn_forward): out = softmax(scale q k^T | visible) v; masks, lse optional. */
    public void forward(float[] q, float[] k, float[] v, boolean[] keyValid, boolean[] allowed,
            float[] out, float[] lse) {
        call(Op.FORWARD, FORWARD, q, k, v, out, lse, null, keyValid, allowed);
    }

    /** {@link #forward(float[], float[], float[], boolean[], boolean[], float[], float[])} without masks or lse. */
    public void forward(float[] q, float[] k, float[] v, float[] out) {
        call(Op.FORWARD, FORWARD, q, k, v, out, null, null, null, null);
    }

    /** Forward pass into a new array of {@code requiredLen(Operand.OUT)} floats. */
    public float[] forward(float[] q, float[] k, float[] v, boolean[] keyValid, boolean[] allowed) {
        float[] out = allocate(Operand.OUT, new Object[] {q, k, v, keyValid, allowed}, Operand.Q,
                Operand.K, Operand.V, Operand.KEY_VALID, Operand.ALLOWED);
        forward(q, k, v, keyValid, allowed, out, null);
        return out;
    }

    /** Forward pass on direct buffers. */
    public void forward(FloatBuffer q, FloatBuffer k, FloatBuffer v, ByteBuffer keyValid,
            ByteBuffer allowed, FloatBuffer out, FloatBuffer lse) {
        call(Op.FORWARD, FORWARD, in(q, "q"), in(k, "k"), in(v, "v"), out(out, "out"),
                out(lse, "lse"), null, in(keyValid, "keyValid"), in(allowed, "allowed"));
    }

    /** The attention weights (attn_weights; what is written: {@link WeightsMode}). */
    public void weights(float[] q, float[] k, boolean[] keyValid, boolean[] allowed,
            float[] weights) {
        call(Op.WEIGHTS, WEIGHTS, q, k, null, null, null, weights, keyValid, allowed);
    }

    /** The weights into a new array of {@code requiredLen(Operand.WEIGHTS)} floats. */
    public float[] weights(float[] q, float[] k, boolean[] keyValid, boolean[] allowed) {
        float[] w = allocate(Operand.WEIGHTS, new Object[] {q, k, keyValid, allowed}, Operand.Q,
                Operand.K, Operand.KEY_VALID, Operand.ALLOWED);
        weights(q, k, keyValid, allowed, w);
        return w;
    }

    /** The weights on direct buffers. */
    public void weights(FloatBuffer q, FloatBuffer k, ByteBuffer keyValid, ByteBuffer allowed,
            FloatBuffer weights) {
        call(Op.WEIGHTS, WEIGHTS, in(q, "q"), in(k, "k"), null, null, null, out(weights, "weights"),
                in(keyValid, "keyValid"), in(allowed, "allowed"));
    }

    private static Buffer in(Buffer b, String name) {
        return Checks.buffer(b, name, false);
    }

    private static Buffer out(Buffer b, String name) {
        return Checks.buffer(b, name, true);
    }

    private void call(Op op, int[] codes, Object... operands) {
        long h = enter();
        try {
            AttnNative.attn_jni_call(op.code(), h, 0, operands, codes, 0, null, null);
        } finally {
            leave();
        }
    }

    /** The elements the buffer for {@code which} must hold (attn_desc_required_len). */
    public long requiredLen(Operand which) {
        Checks.given(which, "which");
        long h = enter();
        try {
            return AttnNative.attn_desc_required_len(h, which);
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

    /** {@link Param#CAUSAL}. */
    public Causal causal() {
        return Causal.fromCode((long) get(Param.CAUSAL));
    }

    /** {@link Param#SCALE}: exactly the float the kernels multiply by. */
    public float scale() {
        return (float) get(Param.SCALE);
    }

    /** {@link Param#WINDOW_LEFT}. */
    public int windowLeft() {
        return (int) get(Param.WINDOW_LEFT);
    }

    /** {@link Param#WINDOW_RIGHT}. */
    public int windowRight() {
        return (int) get(Param.WINDOW_RIGHT);
    }

    /** {@link Param#SOFTCAP}. */
    public float softcap() {
        return (float) get(Param.SOFTCAP);
    }

    /** {@link Param#ALIBI}. */
    public Alibi alibi() {
        return Alibi.fromCode((long) get(Param.ALIBI));
    }

    /** {@link Param#SOFTMAX_PLUS_ONE}. */
    public boolean softmaxPlusOne() {
        return get(Param.SOFTMAX_PLUS_ONE) != 0;
    }

    /** {@link Param#HEAD_DIM_V}. */
    public int headDimV() {
        return (int) get(Param.HEAD_DIM_V);
    }

    /** {@link Param#WEIGHTS_MODE}. */
    public WeightsMode weightsMode() {
        return WeightsMode.fromCode((long) get(Param.WEIGHTS_MODE));
    }

    /** {@link Param#BIAS_FIRST}. */
    public boolean biasFirst() {
        return get(Param.BIAS_FIRST) != 0;
    }

    /** {@link Param#VARLEN}. */
    public boolean varlen() {
        return get(Param.VARLEN) != 0;
    }

    /** {@link Param#PAGE_SIZE}. */
    public int pageSize() {
        return (int) get(Param.PAGE_SIZE);
    }

    /** {@link Param#MAX_PAGES} as set (0 = ceil(seqK / pageSize)). */
    public int maxPages() {
        return (int) get(Param.MAX_PAGES);
    }

    /** {@link Param#BATCH_INVARIANT}. */
    public boolean batchInvariant() {
        return get(Param.BATCH_INVARIANT) != 0;
    }

    /** {@link Param#COMPUTE}. */
    public Compute compute() {
        return Compute.fromCode((long) get(Param.COMPUTE));
    }

    /** {@link Param#DIAGONAL}. */
    public Diagonal diagonal() {
        return Diagonal.fromCode((long) get(Param.DIAGONAL));
    }

    /** {@link Param#ALIBI_FORM}. */
    public AlibiForm alibiForm() {
        return AlibiForm.fromCode((long) get(Param.ALIBI_FORM));
    }

    /** Any parameter's value (attn_desc_get_float: exact for every parameter; read at build). */
    public double param(Param p) {
        Checks.given(p, "param");
        enter();
        leave();
        return get(p);
    }

    private double get(Param p) {
        return params[p.code()];
    }

    /** True once {@link #close()} has run. */
    public boolean isClosed() {
        return closed;
    }

    /** Frees the native descriptor once calls in flight end; idempotent. */
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
                + headDimV() + ", causal=" + causal() + ", scale=" + scale() + ", window=("
                + windowLeft() + ", " + windowRight() + "), softcap=" + softcap() + ", alibi="
                + alibi() + ", softmaxPlusOne=" + softmaxPlusOne() + ", weightsMode="
                + weightsMode() + ", biasFirst=" + biasFirst() + (varlen() ? ", varlen" : "")
                + (pageSize() != 0 ? ", pageSize=" + pageSize() + ", maxPages=" + maxPages() : "")
                + (batchInvariant() ? ", batchInvariant" : "")
                + (compute() != Compute.EXACT ? ", compute=" + compute() : "")
                + (closed ? ", closed]" : "]");
    }

    /** Registers a call in flight and returns the handle; the caller calls {@link #leave()}. */
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

    /** A new array for {@code result}, allocated only once the inputs are long enough. */
    private float[] allocate(Operand result, Object[] in, Operand... ops) {
        for (int i = 0; i < ops.length; i++) {
            Attention.atLeast(in[i], requiredLen(ops[i]), ops[i].cname());
        }
        long n = requiredLen(result);
        if (n > Checks.MAX_ARRAY) {
            throw new IllegalArgumentException("requiredLen(" + result + ") = " + n
                    + " exceeds the largest Java array; use direct buffers");
        }
        return new float[(int) n];
    }

    /** Configures an {@link AttentionDesc}; the library checks each parameter as it is set. */
    public static final class Builder {
        private int batch = 1;
        private int headsQ = 1;
        private int headsKv = 1;
        private int seqQ;
        private int seqK;
        private int headDim;
        /** Parameters set, by attn_param value (applied in that order): null or {value, isInt}. */
        private final double[][] params = new double[Param.values().length][];
        /** Strides per Operand value; null = the library's default. */
        private final long[][] strides = new long[Operand.values().length][];

        private Builder() {}

        /** Number of sequences (default 1). */
        public Builder batch(int batch) {
            this.batch = (int) nonNegative(batch, "batch");
            return this;
        }

        /** The same number of query and key/value heads. */
        public Builder heads(int heads) {
            return heads(heads, heads);
        }

        /** headsQ query heads reading headsKv key/value heads (MHA, GQA, MQA). */
        public Builder heads(int headsQ, int headsKv) {
            this.headsQ = (int) nonNegative(headsQ, "headsQ");
            this.headsKv = (int) nonNegative(headsKv, "headsKv");
            return this;
        }

        /** The same number of queries and keys. */
        public Builder seqLen(int seqLen) {
            return seqLen(seqLen, seqLen);
        }

        /** seqQ queries and seqK keys per sequence (the maximum lengths with varlen). */
        public Builder seqLen(int seqQ, int seqK) {
            this.seqQ = (int) nonNegative(seqQ, "seqQ");
            this.seqK = (int) nonNegative(seqK, "seqK");
            return this;
        }

        /** Vector size of q and k (and of v and out unless {@link #headDimV(int)} is set). */
        public Builder headDim(int headDim) {
            this.headDim = (int) nonNegative(headDim, "headDim");
            return this;
        }

        /** {@link Param#CAUSAL}. */
        public Builder causal(Causal causal) {
            return param(Param.CAUSAL, Checks.given(causal, "causal").code());
        }

        /** {@link Param#SCALE}. */
        public Builder scale(float scale) {
            return param(Param.SCALE, (double) scale);
        }

        /** {@link Param#WINDOW_LEFT} and {@link Param#WINDOW_RIGHT} (neither set if one is refused). */
        public Builder window(int left, int right) {
            double[] before = params[Param.WINDOW_LEFT.code()];
            try {
                return param(Param.WINDOW_LEFT, left).param(Param.WINDOW_RIGHT, right);
            } catch (RuntimeException e) {
                params[Param.WINDOW_LEFT.code()] = before;
                throw e;
            }
        }

        /** {@link Param#SOFTCAP}. */
        public Builder softcap(float c) {
            return param(Param.SOFTCAP, (double) c);
        }

        /** {@link Param#ALIBI}. */
        public Builder alibi(Alibi mode) {
            return param(Param.ALIBI, Checks.given(mode, "alibi").code());
        }

        /** {@link Param#DIAGONAL}. */
        public Builder diagonal(Diagonal d) {
            return param(Param.DIAGONAL, Checks.given(d, "diagonal").code());
        }

        /** {@link Param#ALIBI_FORM}. */
        public Builder alibiForm(AlibiForm f) {
            return param(Param.ALIBI_FORM, Checks.given(f, "alibiForm").code());
        }

        /** {@link Param#SOFTMAX_PLUS_ONE} on. */
        public Builder softmaxPlusOne() {
            return softmaxPlusOne(true);
        }

        /** {@link Param#SOFTMAX_PLUS_ONE}. */
        public Builder softmaxPlusOne(boolean on) {
            return param(Param.SOFTMAX_PLUS_ONE, on ? 1 : 0);
        }

        /** {@link Param#HEAD_DIM_V}. */
        public Builder headDimV(int headDimV) {
            return param(Param.HEAD_DIM_V, headDimV);
        }

        /** {@link Param#WEIGHTS_MODE}. */
        public Builder weightsMode(WeightsMode mode) {
            return param(Param.WEIGHTS_MODE, Checks.given(mode, "weightsMode").code());
        }

        /** {@link Param#BIAS_FIRST} on. */
        public Builder biasFirst() {
            return biasFirst(true);
        }

        /** {@link Param#BIAS_FIRST}. */
        public Builder biasFirst(boolean on) {
            return param(Param.BIAS_FIRST, on ? 1 : 0);
        }

        /** {@link Param#VARLEN} on. */
        public Builder varlen() {
            return varlen(true);
        }

        /** {@link Param#VARLEN}. */
        public Builder varlen(boolean on) {
            return param(Param.VARLEN, on ? 1 : 0);
        }

        /** {@link Param#PAGE_SIZE}. */
        public Builder pageSize(int pageSize) {
            return param(Param.PAGE_SIZE, pageSize);
        }

        /** {@link Param#MAX_PAGES}. */
        public Builder maxPages(int maxPages) {
            return param(Param.MAX_PAGES, maxPages);
        }

        /** {@link Param#BATCH_INVARIANT} on. */
        public Builder batchInvariant() {
            return batchInvariant(true);
        }

        /** {@link Param#BATCH_INVARIANT}. */
        public Builder batchInvariant(boolean on) {
            return param(Param.BATCH_INVARIANT, on ? 1 : 0);
        }

        /** {@link Param#COMPUTE}. */
        public Builder compute(Compute mode) {
            return param(Param.COMPUTE, Checks.given(mode, "compute").code());
        }

        /** Sets any parameter from an integer, as attn_desc_set_int. */
        public Builder param(Param p, long value) {
            return set(p, value, true);
        }

        /** Sets any parameter from a double, as attn_desc_set_float. */
        public Builder param(Param p, double value) {
            return set(p, value, false);
        }

        /** The one parameter path: the library checks the value now, on a scratch descriptor. */
        private Builder set(Param p, double value, boolean isInt) {
            Checks.given(p, "param");
            long[] scratch = new long[1];
            AttnNative.attn_desc_create(scratch, 1, 1, 1, 1, 1, 1);
            try {
                apply(scratch[0], p, new double[] {value, isInt ? 1 : 0});
            } finally {
                AttnNative.attn_desc_destroy(scratch[0]);
            }
            params[p.code()] = new double[] {value, isInt ? 1 : 0};
            return this;
        }

        private static void apply(long h, Param p, double[] v) {
            if (v[1] != 0) {
                AttnNative.attn_desc_set_int(h, p, (long) v[0]);
            } else {
                AttnNative.attn_desc_set_float(h, p, v[0]);
            }
        }

        /** Element strides of a strided operand (attn_desc_set_strides), applied last. */
        public Builder strides(Operand which, long batchStride, long headStride, long rowStride) {
            strides[Checks.given(which, "which").code()] = new long[] {
                nonNegative(batchStride, "batchStride"), nonNegative(headStride, "headStride"),
                nonNegative(rowStride, "rowStride")};
            return this;
        }

        /** Creates the descriptor (the library checks sizes and strides). */
        public AttentionDesc build() {
            long[] out = new long[1];
            AttnNative.attn_desc_create(out, batch, headsQ, headsKv, seqQ, seqK, headDim);
            long h = out[0];
            try {
                for (Param p : Param.values()) {
                    if (params[p.code()] != null) {
                        apply(h, p, params[p.code()]);
                    }
                }
                for (Operand op : Operand.values()) {
                    long[] s = strides[op.code()];
                    if (s != null) {
                        AttnNative.attn_desc_set_strides(h, op, s[0], s[1], s[2]);
                    }
                }
                return new AttentionDesc(h, this);
            } catch (RuntimeException | Error e) {
                AttnNative.attn_desc_destroy(h);
                throw e;
            }
        }

        private static long nonNegative(long value, String name) {
            if (value < 0) {
                throw new IllegalArgumentException(name + " (" + value + ") is negative");
            }
            return value;
        }
    }
}
