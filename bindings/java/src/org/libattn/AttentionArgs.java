package org.libattn;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;

/**
 * The per-call tensors of the extensible call (attn_args + attn_run): bind each
 * {@link Operand} to an array or a direct buffer, then {@link #run(Op)}. Created by
 * {@link AttentionDesc#args()} for one descriptor, whose required lengths every binding is
 * checked against at once.
 *
 * <pre>{@code
 * try (AttentionArgs args = desc.args()) {
 *     args.set(Operand.Q, q).set(Operand.K, k).set(Operand.V, v).set(Operand.OUT, out)
 *         .set(Operand.BIAS, bias)                 // floats
 *         .set(Operand.QUERY_VALID, queryValid)    // boolean[] (or byte[], a ByteBuffer)
 *         .set(Operand.SEQ_LENS_K, new int[] {7, 5});
 *     args.run(Op.FORWARD);                        // out written
 *     args.set(Operand.WEIGHTS, weights).run(Op.WEIGHTS);
 * }
 * }</pre>
 *
 * <h2>Operands</h2>
 * Each operand takes its element type: floats as {@code float[]} or a direct
 * {@link FloatBuffer} in native byte order; byte masks (KEY_VALID, ALLOWED, QUERY_VALID; nonzero
 * = true) as {@code boolean[]}, {@code byte[]} or a direct {@link ByteBuffer}; SEQ_LENS_K as
 * {@code int[]} or a direct {@link IntBuffer} in native byte order. Nothing is copied: arrays
 * are pinned for the length of {@link #run(Op)} (JNI critical access), buffers are used from
 * their position on. The object keeps a reference to what it binds; the library reads and
 * writes the data only inside run(). {@code set(which, null)} (or {@link #unset}) means "not
 * given".
 *
 * <h2>Errors</h2>
 * <ul>
 * <li>{@code set}: {@link IllegalArgumentException} for the wrong element type, an array or
 * buffer shorter than {@code desc.requiredLen(which)} (empty included: "key_valid has 0
 * elements, needs at least 14"), a heap or wrongly ordered buffer, a read-only output buffer;
 * <li>{@code run}: {@link NullPointerException} when a required operand is not bound (q, k and
 * v and out for FORWARD; q, k and weights for WEIGHTS); {@link AttentionException} for what the
 * library refuses, with its status and message (an output overlapping another operand, a
 * seq_lens_k value out of range, ALiBi slopes missing or bound without {@link Alibi#OPERAND},
 * sinks with softmaxPlusOne, {@link Op#BACKWARD}); {@link IllegalStateException} when this
 * object or its descriptor is closed.
 * </ul>
 *
 * <h2>Threads and lifetime</h2>
 * An AttentionArgs is a mutable binding object: give each thread its own (calls on one object
 * are serialized, never interleaved). {@link #close()} frees the native attn_args; one never
 * closed is freed by a {@link Cleaner} once unreachable.
 */
public final class AttentionArgs implements AutoCloseable {
    private final AttentionDesc desc;
    private final long handle;
    private final Natives.Handle owner;
    private final Cleaner.Cleanable cleanable;
    /** What each operand (ordinal) is bound to: an array or a sliced direct buffer; null = not. */
    private final Object[] bound = new Object[Operand.values().length];
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

    // ------------------------------------------------------------------------------ binding

    /** Binds a float operand to an array (null = unbind). */
    public AttentionArgs set(Operand which, float[] data) {
        check(which, Operand.Element.FLOAT, data, "float[]");
        if (data != null) {
            Checks.length(data.length, which.cname, desc.need(which), Checks.required(which),
                    "elements");
        }
        return bind(which, data);
    }

    /** Binds a float operand to a direct FloatBuffer in native byte order (null = unbind). */
    public AttentionArgs set(Operand which, FloatBuffer data) {
        check(which, Operand.Element.FLOAT, data, "FloatBuffer");
        return bind(which, Checks.floats(data, which.cname, desc.need(which), which, false,
                which.output));
    }

    /** Binds a byte-mask operand to a boolean[] (null = unbind). */
    public AttentionArgs set(Operand which, boolean[] data) {
        check(which, Operand.Element.BYTE, data, "boolean[]");
        if (data != null) {
            Checks.length(data.length, which.cname, desc.need(which), Checks.required(which),
                    "elements");
        }
        return bind(which, data);
    }

    /** Binds a byte-mask operand to a byte[], nonzero = true (null = unbind). */
    public AttentionArgs set(Operand which, byte[] data) {
        check(which, Operand.Element.BYTE, data, "byte[]");
        if (data != null) {
            Checks.length(data.length, which.cname, desc.need(which), Checks.required(which),
                    "elements");
        }
        return bind(which, data);
    }

    /** Binds a byte-mask operand to a direct ByteBuffer, nonzero = true (null = unbind). */
    public AttentionArgs set(Operand which, ByteBuffer data) {
        check(which, Operand.Element.BYTE, data, "ByteBuffer");
        return bind(which, Checks.bytes(data, which.cname, desc.need(which), which));
    }

    /** Binds an int operand (SEQ_LENS_K) to an int[] (null = unbind). */
    public AttentionArgs set(Operand which, int[] data) {
        check(which, Operand.Element.INT, data, "int[]");
        if (data != null) {
            Checks.length(data.length, which.cname, desc.need(which), Checks.required(which),
                    "elements");
        }
        return bind(which, data);
    }

    /** Binds an int operand (SEQ_LENS_K) to a direct IntBuffer in native byte order. */
    public AttentionArgs set(Operand which, IntBuffer data) {
        check(which, Operand.Element.INT, data, "IntBuffer");
        return bind(which, Checks.ints(data, which.cname, desc.need(which), which));
    }

    /** Forgets the operand (as C's NULL data). */
    public AttentionArgs unset(Operand which) {
        if (which == null) {
            throw new NullPointerException("which must not be null");
        }
        return bind(which, null);
    }

    /** Forgets every operand. */
    public synchronized AttentionArgs clear() {
        ensureOpen();
        java.util.Arrays.fill(bound, null);
        return this;
    }

    /** True when {@code which} is bound. */
    public synchronized boolean isSet(Operand which) {
        if (which == null) {
            throw new NullPointerException("which must not be null");
        }
        return bound[which.ordinal()] != null;
    }

    private static void check(Operand which, Operand.Element element, Object data, String type) {
        if (which == null) {
            throw new NullPointerException("which must not be null");
        }
        if (which.element != element) {
            throw new IllegalArgumentException(which.cname + " holds " + which.element.what
                    + ", not " + type);
        }
    }

    private synchronized AttentionArgs bind(Operand which, Object data) {
        ensureOpen();
        bound[which.ordinal()] = data;
        return this;
    }

    // ------------------------------------------------------------------------------ running

    /**
     * Runs {@code op} on the descriptor with the bound operands (attn_run). FORWARD needs Q, K,
     * V and OUT and writes OUT, LSE and KEY_MASS when bound; WEIGHTS needs Q and K and writes
     * WEIGHTS; the operands an operation does not read are ignored.
     *
     * @throws NullPointerException  op is null, or a required operand is not bound
     * @throws AttentionException    the library refused the call
     * @throws IllegalStateException this object or its descriptor is closed
     */
    public void run(Op op) {
        if (op == null) {
            throw new NullPointerException("op must not be null");
        }
        synchronized (this) {
            ensureOpen();
            long d = desc.enter();
            try {
                Object[] b = bound;
                switch (op) {
                case FORWARD:
                    require(op, Operand.Q, Operand.K, Operand.V, Operand.OUT);
                    AttnNative.attn_jni_run(d, op.raw, handle, b[0], b[1], b[2], b[3], b[4],
                            null, b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13]);
                    break;
                case WEIGHTS:
                    require(op, Operand.Q, Operand.K, Operand.WEIGHTS);
                    AttnNative.attn_jni_run(d, op.raw, handle, b[0], b[1], null, null, null,
                            b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], null);
                    break;
                default: // reserved operations: the library's own answer
                    AttnNative.attn_jni_run(d, op.raw, handle, null, null, null, null, null, null,
                            null, null, null, null, null, null, null, null);
                    break;
                }
            } finally {
                desc.leave();
                Reference.reachabilityFence(this);
            }
        }
    }

    private void require(Op op, Operand... ops) {
        for (Operand o : ops) {
            if (bound[o.ordinal()] == null) {
                throw new NullPointerException(o.cname + " is not bound (Op." + op + " needs "
                        + (op == Op.FORWARD ? "q, k, v and out" : "q, k and weights") + ")");
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
        java.util.Arrays.fill(bound, null);
        owner.closing = true;
        cleanable.clean(); // attn_args_destroy, exactly once
    }

    @Override
    public synchronized String toString() {
        StringBuilder s = new StringBuilder("AttentionArgs[");
        String sep = "";
        for (Operand o : Operand.values()) {
            if (bound[o.ordinal()] != null) {
                s.append(sep).append(o.cname);
                sep = ", ";
            }
        }
        return s.append(closed ? "; closed]" : "]").toString();
    }
}
