package org.libattn;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.ShortBuffer;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The per-call tensors of the extensible call (attn_args + attn_run; semantics and errors:
 * attn.h "Extensible call"): bind each {@link Operand} to an array (pinned for the call) or a
 * direct native-order buffer (position to limit), then {@link #run(Op)}. Library errors arrive
 * as in {@link AttentionException}; one object per thread; {@link #close()} or a Cleaner frees it.
 */
public final class AttentionArgs implements AutoCloseable {
    private static final int OPERANDS = Operand.values().length;
    /** attn_dtype values, and attn_jni.h's output bit and calls. */
    static final int F32 = 0, F16 = 1, BF16 = 2, I8 = 3, U8 = 4, I32 = 5, OUT = 8;
    static final int FP8_E4M3 = 6, FP8_E5M2 = 7;
    static final int KV_APPEND = 16, KV_APPEND_ARGS = 17, MERGE = 18;
    private static final String[] TYPES = {"float[] / FloatBuffer (set)", "16-bit f16 (setF16)",
        "16-bit bf16 (setBf16)", "int8 (setI8)", "a byte mask (boolean[], byte[], ByteBuffer: set)",
        "int[] / IntBuffer (set)", "fp8 E4M3 (setFp8)", "fp8 E5M2 (setFp8)"};
    /** Gives every object a rank, so that merge locks two of them in one global order. */
    private static final AtomicLong RANKS = new AtomicLong();

    private final long rank = RANKS.incrementAndGet();
    private final AttentionDesc desc;
    private final long handle;
    private final Natives.Handle owner;
    private final Cleaner.Cleanable cleanable;
    /** What each operand (by value) is bound to, and how (attn_dtype | OUT); null = not bound. */
    private final Object[] bound = new Object[OPERANDS];
    private final int[] codes = new int[OPERANDS];
    private boolean closed; // guarded by this

    AttentionArgs(AttentionDesc desc) {
        this.desc = desc;
        long[] h = new long[1];
        AttnNative.attn_args_create(h);
        this.handle = h[0];
        this.owner = new Natives.Handle(handle, true);
        this.cleanable = Natives.CLEANER.register(this, owner);
    }

    /** The descriptor this object binds operands for. */
    public AttentionDesc desc() {
        return desc;
    }

    /** Binds a float operand (null = unbind). */
    public AttentionArgs set(Operand which, float[] data) {
        return bind(which, data, F32);
    }

    /** Binds a float operand to a direct FloatBuffer (null = unbind). */
    public AttentionArgs set(Operand which, FloatBuffer data) {
        return bind(which, data, F32);
    }

    /** Binds a byte-mask operand (null = unbind). */
    public AttentionArgs set(Operand which, boolean[] data) {
        return bind(which, data, U8);
    }

    /** Binds a byte-mask operand, nonzero = true (null = unbind). */
    public AttentionArgs set(Operand which, byte[] data) {
        return bind(which, data, U8);
    }

    /** Binds a byte-mask operand to a direct ByteBuffer, nonzero = true (null = unbind). */
    public AttentionArgs set(Operand which, ByteBuffer data) {
        return bind(which, data, U8);
    }

    /** Binds an int operand (SEQ_LENS_K, CU_SEQLENS_Q, CU_SEQLENS_K, BLOCK_TABLE; null = unbind). */
    public AttentionArgs set(Operand which, int[] data) {
        return bind(which, data, I32);
    }

    /** Binds an int operand to a direct IntBuffer (null = unbind). */
    public AttentionArgs set(Operand which, IntBuffer data) {
        return bind(which, data, I32);
    }

    /** Binds an operand to f16 bit patterns (attn_args_set_f16; {@link Convert#toF16}). */
    public AttentionArgs setF16(Operand which, short[] data) {
        return bind(which, data, F16);
    }

    /** {@link #setF16(Operand, short[])} from a direct ShortBuffer. */
    public AttentionArgs setF16(Operand which, ShortBuffer data) {
        return bind(which, data, F16);
    }

    /** Binds an operand to bf16 bit patterns (attn_args_set_bf16; {@link Convert#toBf16}). */
    public AttentionArgs setBf16(Operand which, short[] data) {
        return bind(which, data, BF16);
    }

    /** {@link #setBf16(Operand, short[])} from a direct ShortBuffer. */
    public AttentionArgs setBf16(Operand which, ShortBuffer data) {
        return bind(which, data, BF16);
    }

    /** Binds an operand to int8 values (attn_args_set_i8; scales: K_SCALE / V_SCALE). */
    public AttentionArgs setI8(Operand which, byte[] data) {
        return bind(which, data, I8);
    }

    /** {@link #setI8(Operand, byte[])} from a direct ByteBuffer. */
    public AttentionArgs setI8(Operand which, ByteBuffer data) {
        return bind(which, data, I8);
    }

    /**
     * Binds K or V (or NEW_K / NEW_V for {@link #kvAppendArgs()}) to fp8 codes of {@code format}
     * ({@link Dtype#FP8_E4M3} or {@link Dtype#FP8_E5M2}; attn_args_set_fp8), one byte per value;
     * the optional scale is K_SCALE / V_SCALE (one per tensor with strides (0, 0, 0), per KV head
     * with (0, 1, 0), per row by default; none bound = 1). kvAppendArgs writes such a K / V.
     */
    public AttentionArgs setFp8(Operand which, Dtype format, byte[] data) {
        return bind(which, data, fp8(which, format));
    }

    /** {@link #setFp8(Operand, Dtype, byte[])} from a direct ByteBuffer. */
    public AttentionArgs setFp8(Operand which, Dtype format, ByteBuffer data) {
        return bind(which, data, fp8(which, format));
    }

    /** The library's verdict on (which, format) (attn_args_set_fp8 with no data binds nothing). */
    private synchronized int fp8(Operand which, Dtype format) {
        ensureOpen();
        AttnNative.attn_args_set_fp8(handle, Checks.given(which, "which"),
                attn_dtype.swigToEnum(Checks.given(format, "format").code()), null, 0);
        return format.code();
    }

    /** How {@code which} is bound: F16, BF16, I8 or FP8_* through those setters, otherwise F32. */
    public synchronized StorageType storage(Operand which) {
        int t = codes[Checks.given(which, "which").code()] & 7;
        if (bound[which.code()] == null) {
            return StorageType.F32;
        }
        return t <= I8 ? StorageType.values()[t] : t == FP8_E4M3 ? StorageType.FP8_E4M3
                : t == FP8_E5M2 ? StorageType.FP8_E5M2 : StorageType.F32;
    }

    /** {@link Operand#SEQ_LENS_K}. */
    public AttentionArgs seqLensK(int[] lens) {
        return set(Operand.SEQ_LENS_K, lens);
    }

    /** {@link Operand#SEQ_LENS_K}. */
    public AttentionArgs seqLensK(IntBuffer lens) {
        return set(Operand.SEQ_LENS_K, lens);
    }

    /** {@link Operand#CU_SEQLENS_Q}. */
    public AttentionArgs cuSeqlensQ(int[] cu) {
        return set(Operand.CU_SEQLENS_Q, cu);
    }

    /** {@link Operand#CU_SEQLENS_Q}. */
    public AttentionArgs cuSeqlensQ(IntBuffer cu) {
        return set(Operand.CU_SEQLENS_Q, cu);
    }

    /** {@link Operand#CU_SEQLENS_K}. */
    public AttentionArgs cuSeqlensK(int[] cu) {
        return set(Operand.CU_SEQLENS_K, cu);
    }

    /** {@link Operand#CU_SEQLENS_K}. */
    public AttentionArgs cuSeqlensK(IntBuffer cu) {
        return set(Operand.CU_SEQLENS_K, cu);
    }

    /** {@link Operand#BLOCK_TABLE}. */
    public AttentionArgs blockTable(int[] table) {
        return set(Operand.BLOCK_TABLE, table);
    }

    /** {@link Operand#BLOCK_TABLE}. */
    public AttentionArgs blockTable(IntBuffer table) {
        return set(Operand.BLOCK_TABLE, table);
    }

    /** {@link Operand#NEW_K}. */
    public AttentionArgs newK(float[] rows) {
        return set(Operand.NEW_K, rows);
    }

    /** {@link Operand#NEW_K}. */
    public AttentionArgs newK(FloatBuffer rows) {
        return set(Operand.NEW_K, rows);
    }

    /** {@link Operand#NEW_V}. */
    public AttentionArgs newV(float[] rows) {
        return set(Operand.NEW_V, rows);
    }

    /** {@link Operand#NEW_V}. */
    public AttentionArgs newV(FloatBuffer rows) {
        return set(Operand.NEW_V, rows);
    }

    /** Forgets the operand (as C's NULL data). */
    public AttentionArgs unset(Operand which) {
        return bind(which, null, F32);
    }

    /** Forgets every operand. */
    public synchronized AttentionArgs clear() {
        ensureOpen();
        Arrays.fill(bound, null);
        return this;
    }

    /** True when {@code which} is bound. */
    public synchronized boolean isSet(Operand which) {
        return bound[Checks.given(which, "which").code()] != null;
    }

    /** The one bind path: the element type the operand takes (attn_operand_info), the buffer. */
    private synchronized AttentionArgs bind(Operand which, Object data, int type) {
        OperandInfo info = Checks.given(which, "which").info();
        ensureOpen();
        boolean output = (info.inBits >> type & 1) == 0;
        if (data != null && ((info.inBits | info.outBits) >> type & 1) == 0) {
            StringBuilder takes = new StringBuilder();
            for (int t = 0; t < TYPES.length; t++) {
                if (((info.inBits | info.outBits) >> t & 1) != 0) {
                    takes.append(takes.length() == 0 ? "" : ", ").append(TYPES[t]);
                }
            }
            throw new IllegalArgumentException(which.cname() + " cannot be bound as " + TYPES[type]
                    + "; it takes " + takes);
        }
        if (data instanceof Buffer) {
            data = Checks.buffer((Buffer) data, which.cname(), output);
        }
        bound[which.code()] = data;
        codes[which.code()] = type | (output ? OUT : 0);
        return this;
    }

    /** Runs {@code op} with the bound operands (attn_run; what each op reads: attn.h). */
    public void run(Op op) {
        call(Checks.given(op, "op").code(), bound, codes);
    }

    /** {@link #run(Op)}(BACKWARD): the gradients into the bound DQ, DK, DV, DBIAS, DSINKS. */
    public void backward() {
        run(Op.BACKWARD);
    }

    /** Writes the bound NEW_K / NEW_V rows into fp32 caches in place (attn_kv_append). */
    public void kvAppend(float[] kCache, float[] vCache) {
        append(kCache, vCache);
    }

    /** {@link #kvAppend(float[], float[])} into direct FloatBuffers. */
    public void kvAppend(FloatBuffer kCache, FloatBuffer vCache) {
        append(Checks.buffer(kCache, "kCache", true), Checks.buffer(vCache, "vCache", true));
    }

    private synchronized void append(Object kCache, Object vCache) {
        Object[] objs = bound.clone();
        int[] c = codes.clone();
        objs[Operand.K.code()] = kCache;
        objs[Operand.V.code()] = vCache;
        c[Operand.K.code()] = c[Operand.V.code()] = F32 | OUT;
        call(KV_APPEND, objs, c);
    }

    /** Writes the bound NEW_K / NEW_V rows into the bound K / V caches (attn_kv_append_args). */
    public synchronized void kvAppendArgs() {
        int[] c = codes.clone();
        for (Operand o : new Operand[] {Operand.K, Operand.V, Operand.K_SCALE, Operand.V_SCALE}) {
            Object x = bound[o.code()];
            if (x instanceof Buffer && ((Buffer) x).isReadOnly()) {
                throw new IllegalArgumentException(o.cname() + " is a read-only buffer: "
                        + "kvAppendArgs writes into it");
            }
            c[o.code()] |= (o.info().outBits >> (c[o.code()] & 7) & 1) != 0 ? OUT : 0;
        }
        call(KV_APPEND_ARGS, bound, c);
    }

    private synchronized void call(int call, Object[] objs, int[] c) {
        ensureOpen();
        invoke(desc, call, this, objs, c, null);
    }

    /** One native call on d with a's objects (and b's, for merge); keeps all three alive. */
    private static void invoke(AttentionDesc d, int call, AttentionArgs a, Object[] objs, int[] c,
            AttentionArgs b) {
        long h = d.enter();
        try {
            AttnNative.attn_jni_call(call, h, a.handle, objs, c, b == null ? 0 : b.handle,
                    b == null ? null : b.bound, b == null ? null : b.codes);
        } finally {
            d.leave();
            Reference.reachabilityFence(a);
            Reference.reachabilityFence(b);
        }
    }

    /** AttentionDesc.merge: acc &lt;- merge(acc, part) in d's OUT and LSE layouts. */
    static void merge(AttentionDesc d, AttentionArgs acc, AttentionArgs part) {
        if (Checks.given(acc, "acc") == Checks.given(part, "part")) {
            throw new IllegalArgumentException("acc and part are the same AttentionArgs (acc is "
                    + "updated in place from part: part must hold another result)");
        }
        AttentionArgs first = acc.rank < part.rank ? acc : part;
        synchronized (first) {
            synchronized (first == acc ? part : acc) {
                acc.ensureOpen();
                part.ensureOpen();
                invoke(d, MERGE, acc, acc.bound, acc.codes, part);
            }
        }
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("AttentionArgs is closed");
        }
    }

    /** True once {@link #close()} has run. */
    public synchronized boolean isClosed() {
        return closed;
    }

    /** Frees the native binding object (not the buffers). Idempotent. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        Arrays.fill(bound, null);
        owner.closing = true;
        cleanable.clean(); // attn_args_destroy, exactly once
    }

    @Override
    public synchronized String toString() {
        StringBuilder s = new StringBuilder("AttentionArgs[");
        for (Operand o : Operand.values()) {
            if (bound[o.code()] != null) {
                s.append(s.length() > 14 ? ", " : "").append(o.cname());
                StorageType t = storage(o);
                s.append(t == StorageType.F32 ? "" : ":" + t.cname);
            }
        }
        return s.append(closed ? "; closed]" : "]").toString();
    }
}
