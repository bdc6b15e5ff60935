package org.libattn;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.ShortBuffer;
import java.util.concurrent.atomic.AtomicLong;

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
 * <h2>Serving layouts</h2>
 * With a varlen or paged descriptor ({@link AttentionDesc.Builder#varlen()},
 * {@link AttentionDesc.Builder#pageSize(int)}) the same object binds the prefix sums, the block
 * table and the key lengths ({@link #cuSeqlensQ}, {@link #cuSeqlensK}, {@link #blockTable},
 * {@link #seqLensK}), writes new key/value rows into a cache ({@link #newK}, {@link #newV},
 * {@link #kvAppend}) and runs attention over it; {@link AttentionDesc#merge} folds two partial
 * results together.
 *
 * <pre>{@code
 * // chunked prefill / decode: varlen queries over a paged cache of 16-token pages
 * args.cuSeqlensQ(cuQ).seqLensK(lens).blockTable(table).newK(newK).newV(newV);
 * args.kvAppend(kPool, vPool);                       // the new rows into their pages
 * args.set(Operand.Q, q).set(Operand.K, kPool).set(Operand.V, vPool).set(Operand.OUT, out);
 * args.run(Op.FORWARD);
 * }</pre>
 *
 * <h2>Storage types</h2>
 * Q, K and V may be stored in 16 bits, K and V also as int8 ({@link StorageType}; the library
 * widens every value to fp32 on load, the result is fp32 attention over the widened values):
 * {@link #setF16} / {@link #setBf16} take {@code short[]} or a direct {@link ShortBuffer}
 * (native byte order) of bit patterns, {@link #setI8} {@code byte[]} or a direct ByteBuffer,
 * with the per-row fp32 scales bound as {@link Operand#K_SCALE} / {@link Operand#V_SCALE}.
 * Lengths count elements ({@code requiredLen(K)} shorts or bytes). Nothing is copied, as for
 * floats. {@link Convert} converts and quantizes into such buffers.
 *
 * <pre>{@code
 * short[] q16 = Convert.toF16(q);                       // or into a cache: Convert.toF16(src, 0, cache, pos, n)
 * Convert.Int8 k8 = Convert.quantizeI8(k, rows, headDim); // rows = batch * headsKv * seqK
 * args.setF16(Operand.Q, q16).setI8(Operand.K, k8.values).set(Operand.K_SCALE, k8.scales)
 *     .set(Operand.V, v).set(Operand.OUT, out).run(Op.FORWARD);
 * }</pre>
 *
 * <h2>Gradients</h2>
 * {@link Op#BACKWARD} (or {@link #backward()}) computes the gradients from the forward's OUT and
 * LSE (keep them bound) and {@link Operand#DOUT}, into whichever of {@link Operand#DQ},
 * {@link Operand#DK}, {@link Operand#DV}, {@link Operand#DBIAS} (with BIAS) and
 * {@link Operand#DSINKS} (with SINKS) are bound, each in the layout of its forward counterpart;
 * the forward's masks and variants apply. fp32 Q, K and V only.
 *
 * <pre>{@code
 * args.set(Operand.Q, q).set(Operand.K, k).set(Operand.V, v).set(Operand.OUT, out)
 *     .set(Operand.LSE, lse).run(Op.FORWARD);
 * args.set(Operand.DOUT, dout).set(Operand.DQ, dq).set(Operand.DK, dk).set(Operand.DV, dv)
 *     .backward();
 * }</pre>
 *
 * <h2>Operands</h2>
 * Each operand takes its element type: floats as {@code float[]} or a direct
 * {@link FloatBuffer} in native byte order; byte masks (KEY_VALID, ALLOWED, QUERY_VALID; nonzero
 * = true) as {@code boolean[]}, {@code byte[]} or a direct {@link ByteBuffer}; SEQ_LENS_K,
 * CU_SEQLENS_Q, CU_SEQLENS_K and BLOCK_TABLE as {@code int[]} or a direct {@link IntBuffer} in
 * native byte order. Nothing is copied: arrays
 * are pinned for the length of {@link #run(Op)} (JNI critical access), buffers are used from
 * their position on. The object keeps a reference to what it binds; the library reads and
 * writes the data only inside run(). {@code set(which, null)} (or {@link #unset}) means "not
 * given".
 *
 * <h2>Errors</h2>
 * <ul>
 * <li>{@code set}: {@link IllegalArgumentException} for the wrong element type, an array or
 * buffer shorter than {@code desc.requiredLen(which)} (empty included: "key_valid has 0
 * elements, needs at least 14"; not for the operands of a varlen pack, whose requiredLen is an
 * upper bound: the library checks each call's pack, which may be empty), a heap or wrongly
 * ordered buffer, a read-only output buffer;
 * <li>{@code setF16}, {@code setBf16}, {@code setI8}: {@link IllegalArgumentException} for an
 * operand that cannot be stored so (only q, k and v in 16 bits, only k and v as int8), and the
 * length and buffer rules of {@code set};
 * <li>{@code run}, {@code kvAppend}, {@code merge}: {@link NullPointerException} when a required
 * operand is not bound (q, k and v and out for FORWARD; q, k and weights for WEIGHTS; q, k, v,
 * out, lse, dout and at least one gradient for BACKWARD; k_scale / v_scale with an int8 k / v;
 * cu_seqlens_q (and cu_seqlens_k without pages) with varlen; block_table and seq_lens_k with
 * pages); what the library refuses with the kind of its status and the library's message
 * (INVALID_ARGUMENT an {@link IllegalArgumentException}, NULL_POINTER a
 * {@link NullPointerException}, any other status an {@link AttentionException}): an
 * {@link IllegalArgumentException} for an output overlapping another operand, a seq_lens_k value out of range, bad prefix sums or
 * block-table entries, naming the sequence and the slot: "block_table[1][2] (99) is not a page
 * of the K/V buffers, which hold 4 pages", ALiBi slopes missing or bound without
 * {@link Alibi#OPERAND}, sinks with softmaxPlusOne, a scale bound for an fp32 or 16-bit k / v,
 * BACKWARD with 16-bit or int8 operands: {@link Status#UNSUPPORTED}, dbias without bias);
 * {@link IllegalStateException} when this object or its descriptor is closed.
 * </ul>
 *
 * <h2>Threads and lifetime</h2>
 * An AttentionArgs is a mutable binding object: give each thread its own (calls on one object
 * are serialized, never interleaved). {@link #close()} frees the native attn_args; one never
 * closed is freed by a {@link Cleaner} once unreachable.
 */
public final class AttentionArgs implements AutoCloseable {
    private static final int OPERANDS = Operand.values().length;
    /** The gradient operands of BACKWARD (DOUT is its input). */
    private static final Operand[] GRADS = {Operand.DQ, Operand.DK, Operand.DV, Operand.DBIAS,
        Operand.DSINKS};
    /** The operands each call reads or writes (by ordinal); the others are not passed. */
    private static final boolean[] FORWARD_USES = uses(Operand.WEIGHTS, Operand.NEW_K, Operand.NEW_V,
            Operand.DOUT, Operand.DQ, Operand.DK, Operand.DV, Operand.DBIAS, Operand.DSINKS);
    private static final boolean[] WEIGHTS_USES = uses(Operand.V, Operand.OUT, Operand.LSE,
            Operand.KEY_MASS, Operand.NEW_K, Operand.NEW_V, Operand.V_SCALE, Operand.DOUT,
            Operand.DQ, Operand.DK, Operand.DV, Operand.DBIAS, Operand.DSINKS);
    private static final boolean[] BACKWARD_USES = uses(Operand.WEIGHTS, Operand.KEY_MASS,
            Operand.NEW_K, Operand.NEW_V);
    private static final Operand[] APPEND_USES = {Operand.NEW_K, Operand.NEW_V, Operand.SEQ_LENS_K,
        Operand.CU_SEQLENS_Q, Operand.CU_SEQLENS_K, Operand.BLOCK_TABLE};
    /** Gives every object a rank, so that merge locks two of them in one global order. */
    private static final AtomicLong RANKS = new AtomicLong();

    private final long rank = RANKS.incrementAndGet();
    private final AttentionDesc desc;
    private final long handle;
    private final Natives.Handle owner;
    private final Cleaner.Cleanable cleanable;
    /** What each operand (ordinal) is bound to: an array or a sliced direct buffer; null = not. */
    private final Object[] bound = new Object[Operand.values().length];
    /** How Q, K and V (by ordinal) are stored; F32 for every other operand and when unbound. */
    private final StorageType[] store = new StorageType[Operand.values().length];
    private boolean closed; // guarded by this

    AttentionArgs(AttentionDesc desc) {
        this.desc = desc;
        long[] h = new long[1];
        AttnNative.attn_args_create(h);
        this.handle = h[0];
        this.owner = new Natives.Handle(handle, true);
        this.cleanable = Natives.CLEANER.register(this, owner);
        java.util.Arrays.fill(store, StorageType.F32);
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
            Checks.length(data.length, which.cname, desc.least(which), why(which), "elements");
        }
        return bind(which, data);
    }

    /** Binds a float operand to a direct FloatBuffer in native byte order (null = unbind). */
    public AttentionArgs set(Operand which, FloatBuffer data) {
        check(which, Operand.Element.FLOAT, data, "FloatBuffer");
        return bind(which, Checks.floats(data, which.cname, desc.least(which), why(which), false,
                which.output));
    }

    /** Binds a byte-mask operand to a boolean[] (null = unbind). */
    public AttentionArgs set(Operand which, boolean[] data) {
        check(which, Operand.Element.BYTE, data, "boolean[]");
        if (data != null) {
            Checks.length(data.length, which.cname, desc.least(which), why(which), "elements");
        }
        return bind(which, data);
    }

    /** Binds a byte-mask operand to a byte[], nonzero = true (null = unbind). */
    public AttentionArgs set(Operand which, byte[] data) {
        check(which, Operand.Element.BYTE, data, "byte[]");
        if (data != null) {
            Checks.length(data.length, which.cname, desc.least(which), why(which), "elements");
        }
        return bind(which, data);
    }

    /** Binds a byte-mask operand to a direct ByteBuffer, nonzero = true (null = unbind). */
    public AttentionArgs set(Operand which, ByteBuffer data) {
        check(which, Operand.Element.BYTE, data, "ByteBuffer");
        return bind(which, Checks.bytes(data, which.cname, desc.least(which), why(which)));
    }

    /**
     * Binds an int operand (SEQ_LENS_K, CU_SEQLENS_Q, CU_SEQLENS_K, BLOCK_TABLE) to an int[]
     * (null = unbind). Its values are checked by the library in the call.
     */
    public AttentionArgs set(Operand which, int[] data) {
        check(which, Operand.Element.INT, data, "int[]");
        if (data != null) {
            Checks.length(data.length, which.cname, desc.least(which), why(which), "elements");
        }
        return bind(which, data);
    }

    /** Binds an int operand (as {@link #set(Operand, int[])}) to a direct IntBuffer in native byte order. */
    public AttentionArgs set(Operand which, IntBuffer data) {
        check(which, Operand.Element.INT, data, "IntBuffer");
        return bind(which, Checks.ints(data, which.cname, desc.least(which), why(which)));
    }

    // ------------------------------------------------------------------------ storage types

    /**
     * Binds Q, K or V to IEEE binary16 (f16) bit patterns in a short[] (null = unbind), pinned
     * for each run like a float[]. {@link Convert#toF16} fills one from floats.
     *
     * @throws IllegalArgumentException which is not Q, K or V, or data is shorter than
     *                                  {@code requiredLen(which)}
     */
    public AttentionArgs setF16(Operand which, short[] data) {
        return set16(which, data, StorageType.F16);
    }

    /** {@link #setF16(Operand, short[])} from a direct ShortBuffer in native byte order. */
    public AttentionArgs setF16(Operand which, ShortBuffer data) {
        return set16(which, data, StorageType.F16);
    }

    /**
     * Binds Q, K or V to bfloat16 bit patterns in a short[] (null = unbind). {@link Convert#toBf16}
     * fills one from floats.
     *
     * @throws IllegalArgumentException which is not Q, K or V, or data is too short
     */
    public AttentionArgs setBf16(Operand which, short[] data) {
        return set16(which, data, StorageType.BF16);
    }

    /** {@link #setBf16(Operand, short[])} from a direct ShortBuffer in native byte order. */
    public AttentionArgs setBf16(Operand which, ShortBuffer data) {
        return set16(which, data, StorageType.BF16);
    }

    /**
     * Binds K or V to symmetric int8 values (null = unbind): element x of a row is
     * {@code data[x] * scale} of its row, the scales bound as {@link Operand#K_SCALE} /
     * {@link Operand#V_SCALE} (required by run). {@link Convert#quantizeI8} makes both.
     *
     * @throws IllegalArgumentException which is not K or V, or data is too short
     */
    public AttentionArgs setI8(Operand which, byte[] data) {
        checkStore(which, StorageType.I8);
        if (data != null) {
            Checks.length(data.length, which.cname, desc.least(which), why(which), "elements");
        }
        return bind(which, data, StorageType.I8);
    }

    /** {@link #setI8(Operand, byte[])} from a direct ByteBuffer. */
    public AttentionArgs setI8(Operand which, ByteBuffer data) {
        checkStore(which, StorageType.I8);
        return bind(which, Checks.int8(data, which.cname, desc.least(which), why(which), false,
                false), StorageType.I8);
    }

    /**
     * How {@code which} is bound: {@link StorageType#F16}, {@link StorageType#BF16} or
     * {@link StorageType#I8} for Q, K and V bound through setF16 / setBf16 / setI8, otherwise
     * {@link StorageType#F32} (also when unbound).
     */
    public synchronized StorageType storage(Operand which) {
        if (which == null) {
            throw new NullPointerException("which must not be null");
        }
        return store[which.ordinal()];
    }

    private AttentionArgs set16(Operand which, short[] data, StorageType type) {
        checkStore(which, type);
        if (data != null) {
            Checks.length(data.length, which.cname, desc.least(which), why(which), "elements");
        }
        return bind(which, data, type);
    }

    private AttentionArgs set16(Operand which, ShortBuffer data, StorageType type) {
        checkStore(which, type);
        return bind(which, Checks.shorts(data, which.cname, desc.least(which), why(which), false,
                false), type);
    }

    private static void checkStore(Operand which, StorageType type) {
        if (which == null) {
            throw new NullPointerException("which must not be null");
        }
        boolean ok = type == StorageType.I8 ? which == Operand.K || which == Operand.V
                : which.storable();
        if (!ok) {
            throw new IllegalArgumentException(which.cname + " cannot be stored as " + type.cname
                    + " (" + (type == StorageType.I8 ? "int8 storage is for k and v"
                            : "16-bit storage is for q, k and v") + "; " + which.cname + " holds "
                    + which.element.what + ")");
        }
    }

    // ---------------------------------------------------------------- serving operands by name

    /**
     * {@link Operand#SEQ_LENS_K}: [batch] keys of each sequence (with a paged cache: the keys
     * in its cache, the new ones of a {@link #kvAppend} included).
     */
    public AttentionArgs seqLensK(int[] lens) {
        return set(Operand.SEQ_LENS_K, lens);
    }

    /** {@link Operand#SEQ_LENS_K} as a direct IntBuffer. */
    public AttentionArgs seqLensK(IntBuffer lens) {
        return set(Operand.SEQ_LENS_K, lens);
    }

    /** {@link Operand#CU_SEQLENS_Q}: [batch + 1] prefix sums of the query lengths (varlen). */
    public AttentionArgs cuSeqlensQ(int[] cu) {
        return set(Operand.CU_SEQLENS_Q, cu);
    }

    /** {@link Operand#CU_SEQLENS_Q} as a direct IntBuffer. */
    public AttentionArgs cuSeqlensQ(IntBuffer cu) {
        return set(Operand.CU_SEQLENS_Q, cu);
    }

    /** {@link Operand#CU_SEQLENS_K}: [batch + 1] prefix sums of the key lengths (varlen, no pages). */
    public AttentionArgs cuSeqlensK(int[] cu) {
        return set(Operand.CU_SEQLENS_K, cu);
    }

    /** {@link Operand#CU_SEQLENS_K} as a direct IntBuffer. */
    public AttentionArgs cuSeqlensK(IntBuffer cu) {
        return set(Operand.CU_SEQLENS_K, cu);
    }

    /** {@link Operand#BLOCK_TABLE}: [batch][maxPages] page ids, -1 = unused slot (paged K/V). */
    public AttentionArgs blockTable(int[] table) {
        return set(Operand.BLOCK_TABLE, table);
    }

    /** {@link Operand#BLOCK_TABLE} as a direct IntBuffer. */
    public AttentionArgs blockTable(IntBuffer table) {
        return set(Operand.BLOCK_TABLE, table);
    }

    /** {@link Operand#NEW_K}: the new key rows of {@link #kvAppend}, [tokens][headsKv][headDim]. */
    public AttentionArgs newK(float[] rows) {
        return set(Operand.NEW_K, rows);
    }

    /** {@link Operand#NEW_K} as a direct FloatBuffer. */
    public AttentionArgs newK(FloatBuffer rows) {
        return set(Operand.NEW_K, rows);
    }

    /** {@link Operand#NEW_V}: the new value rows of {@link #kvAppend}, [tokens][headsKv][headDimV]. */
    public AttentionArgs newV(float[] rows) {
        return set(Operand.NEW_V, rows);
    }

    /** {@link Operand#NEW_V} as a direct FloatBuffer. */
    public AttentionArgs newV(FloatBuffer rows) {
        return set(Operand.NEW_V, rows);
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
        java.util.Arrays.fill(store, StorageType.F32);
        return this;
    }

    /** True when {@code which} is bound. */
    public synchronized boolean isSet(Operand which) {
        if (which == null) {
            throw new NullPointerException("which must not be null");
        }
        return bound[which.ordinal()] != null;
    }

    /** Where the length demanded of an operand comes from, for the messages (by ordinal). */
    private static final String[] WHY = new String[OPERANDS], WHY_BOUNDED = new String[OPERANDS];

    static {
        for (Operand o : Operand.values()) {
            WHY[o.ordinal()] = Checks.required(o);
            WHY_BOUNDED[o.ordinal()] = "a varlen pack: requiredLen(" + o + ") is an upper bound, "
                    + "the library checks the pack's own length";
        }
    }

    private String why(Operand which) {
        return (desc.bounded(which) ? WHY_BOUNDED : WHY)[which.ordinal()];
    }

    private static boolean[] uses(Operand... except) {
        boolean[] u = new boolean[OPERANDS];
        java.util.Arrays.fill(u, true);
        for (Operand o : except) {
            u[o.ordinal()] = false;
        }
        return u;
    }

    /** The bound operands in uses, as an Object[] by operand value (the JNI helpers' form). */
    private Object[] pick(boolean[] uses) {
        Object[] ops = new Object[OPERANDS];
        for (int i = 0; i < OPERANDS; i++) {
            if (uses[i]) {
                ops[i] = bound[i];
            }
        }
        return ops;
    }

    private static void check(Operand which, Operand.Element element, Object data, String type) {
        if (which == null) {
            throw new NullPointerException("which must not be null");
        }
        if (which.element != element) {
            // byte[] / ByteBuffer for Q, K or V: say where the storage types are bound
            String hint = !which.storable() || !type.startsWith("Byte") && !type.startsWith("byte")
                    ? ""
                    : which == Operand.Q ? " (q cannot be int8; a 16-bit q: setF16 or setBf16)"
                    : " (an int8 " + which.cname + ": setI8)";
            throw new IllegalArgumentException(which.cname + " holds " + which.element.what
                    + ", not " + type + hint);
        }
    }

    private AttentionArgs bind(Operand which, Object data) {
        return bind(which, data, StorageType.F32);
    }

    private synchronized AttentionArgs bind(Operand which, Object data, StorageType type) {
        ensureOpen();
        bound[which.ordinal()] = data;
        store[which.ordinal()] = data == null ? StorageType.F32 : type;
        return this;
    }

    /** The storage codes of Q, K and V for attn_jni_run_typed (2 bits each). */
    private int stores() {
        return store[Operand.Q.ordinal()].code() | store[Operand.K.ordinal()].code() << 2
                | store[Operand.V.ordinal()].code() << 4;
    }

    // ------------------------------------------------------------------------------ running

    /**
     * Runs {@code op} on the descriptor with the bound operands (attn_run). FORWARD needs Q, K,
     * V and OUT and writes OUT, LSE and KEY_MASS when bound; WEIGHTS needs Q and K and writes
     * WEIGHTS; BACKWARD needs Q, K, V, the forward's OUT and LSE, DOUT and at least one of DQ,
     * DK, DV, DBIAS, DSINKS, which it writes; an int8 K or V needs its K_SCALE / V_SCALE. The
     * operands an operation does not read are ignored.
     *
     * @throws NullPointerException  op is null, or a required operand is not bound
     * @throws IllegalArgumentException the library refused an operand, a value or a combination
     * @throws AttentionException    the library refused the call otherwise (e.g. UNSUPPORTED)
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
                switch (op) {
                case FORWARD:
                    require(op, Operand.Q, Operand.K, Operand.V, Operand.OUT);
                    requireScales(true);
                    requireServing();
                    AttnNative.attn_jni_run_typed(d, op.raw, handle, pick(FORWARD_USES), stores());
                    break;
                case WEIGHTS:
                    require(op, Operand.Q, Operand.K, Operand.WEIGHTS);
                    requireScales(false);
                    if (!desc.varlen()) { // varlen weights: the library's UNSUPPORTED answer
                        requireServing();
                    }
                    AttnNative.attn_jni_run_typed(d, op.raw, handle, pick(WEIGHTS_USES), stores());
                    break;
                default: // BACKWARD
                    require(op, Operand.Q, Operand.K, Operand.V, Operand.OUT, Operand.LSE,
                            Operand.DOUT);
                    requireGradient();
                    requireScales(true);
                    if (desc.pageSize() == 0) { // paged: the library's UNSUPPORTED answer
                        requireServing();
                    }
                    AttnNative.attn_jni_run_typed(d, op.raw, handle, pick(BACKWARD_USES), stores());
                    break;
                }
            } finally {
                desc.leave();
                Reference.reachabilityFence(this);
            }
        }
    }

    /**
     * {@link #run(Op)}(BACKWARD): the gradients from the forward's OUT and LSE and DOUT into the
     * bound DQ, DK, DV, DBIAS and DSINKS.
     *
     * @throws NullPointerException  q, k, v, out, lse or dout is not bound, or no gradient is
     * @throws IllegalArgumentException the library refused an operand (e.g. dbias without bias)
     * @throws AttentionException    the library refused the call otherwise (e.g. 16-bit or int8
     *                               q, k or v: {@link Status#UNSUPPORTED})
     * @throws IllegalStateException this object or its descriptor is closed
     */
    public void backward() {
        run(Op.BACKWARD);
    }

    private void require(Op op, Operand... ops) {
        require("Op." + op + " needs " + (op == Op.FORWARD ? "q, k, v and out"
                : op == Op.WEIGHTS ? "q, k and weights"
                        : "q, k, v, the forward's out and lse, and dout"), ops);
    }

    /** An int8 K (and V, when the operation reads V) needs its scales. */
    private void requireScales(boolean withV) {
        if (store[Operand.K.ordinal()] == StorageType.I8) {
            require("k is int8: bind its per-row scales", Operand.K_SCALE);
        }
        if (withV && store[Operand.V.ordinal()] == StorageType.I8) {
            require("v is int8: bind its per-row scales", Operand.V_SCALE);
        }
    }

    private void requireGradient() {
        for (Operand o : GRADS) {
            if (bound[o.ordinal()] != null) {
                return;
            }
        }
        throw new NullPointerException("no gradient is bound (Op.BACKWARD has nothing to compute: "
                + "bind dq, dk, dv, dbias or dsinks)");
    }

    private void require(String why, Operand... ops) {
        for (Operand o : ops) {
            if (bound[o.ordinal()] == null) {
                throw new NullPointerException(o.cname + " is not bound (" + why + ")");
            }
        }
    }

    /** The operands the descriptor's serving layout needs in run and kvAppend. */
    private void requireServing() {
        if (desc.varlen()) {
            require("a varlen descriptor needs cu_seqlens_q", Operand.CU_SEQLENS_Q);
        }
        if (desc.pageSize() != 0) {
            require("a paged descriptor needs block_table and seq_lens_k", Operand.BLOCK_TABLE,
                    Operand.SEQ_LENS_K);
        } else if (desc.varlen()) {
            require("a varlen descriptor without pages needs cu_seqlens_k", Operand.CU_SEQLENS_K);
        }
    }

    // ------------------------------------------------------------------------ serving calls

    /**
     * Writes the bound {@link Operand#NEW_K} / {@link Operand#NEW_V} rows into their cache
     * positions (attn_kv_append, vLLM's reshape_and_cache), with this object's descriptor:
     * token t of the n_b new tokens of sequence b goes to key position
     * seqLensK[b] - n_b + t. {@link Operand#SEQ_LENS_K} already counts the new tokens, so the
     * same object then serves {@link #run(Op)} over the cache.
     *
     * <ul>
     * <li>n_b: cuSeqlensQ[b + 1] - cuSeqlensQ[b] with a varlen descriptor, else seqQ (the new
     * rows are then ordered [batch][seqQ]);
     * <li>kCache, vCache: the K and V buffers: the page pools with a paged descriptor
     * ({@link Operand#BLOCK_TABLE} bound), dense K/V in the descriptor's K/V layout otherwise;
     * written in place, only at the destination rows. Nothing is copied: arrays are pinned for
     * the call, direct buffers (native byte order, writable) are used from their position on.
     * </ul>
     * Reads only NEW_K, NEW_V, SEQ_LENS_K, CU_SEQLENS_Q, CU_SEQLENS_K and BLOCK_TABLE (NEW_K and
     * NEW_V may be unbound when there is nothing to append).
     *
     * @throws NullPointerException     a cache is null; seq_lens_k, or what the layout needs
     *                                  (cu_seqlens_q with varlen, block_table with pages,
     *                                  cu_seqlens_k with varlen and no pages), is not bound
     * @throws IllegalArgumentException a cache shorter than requiredLen(K) / requiredLen(V)
     *                                  (one page with pages; with varlen and no pages the
     *                                  library checks the pack), a heap, wrongly ordered or
     *                                  read-only buffer; or the library refused the call, e.g.
     *                                  "seq_lens_k[0] (1) is
     *                                  less than the 2 new tokens of sequence 0",
     *                                  "block_table[2][0] (1000) is not a page of the K/V
     *                                  buffers, which hold 9 pages", caches that overlap each
     *                                  other or the new rows
     * @throws IllegalStateException    this object or its descriptor is closed
     */
    public void kvAppend(float[] kCache, float[] vCache) {
        cacheLength(kCache, "kCache", Operand.K);
        cacheLength(vCache, "vCache", Operand.V);
        append(kCache, vCache);
    }

    /** {@link #kvAppend(float[], float[])} into direct FloatBuffers (native byte order, writable). */
    public void kvAppend(FloatBuffer kCache, FloatBuffer vCache) {
        FloatBuffer k = Checks.floats(kCache, "kCache", desc.least(Operand.K), why(Operand.K), true,
                true);
        FloatBuffer v = Checks.floats(vCache, "vCache", desc.least(Operand.V), why(Operand.V), true,
                true);
        append(k, v);
    }

    private void cacheLength(float[] cache, String name, Operand op) {
        if (cache == null) {
            throw Checks.missing(name);
        }
        Checks.length(cache.length, name, desc.least(op), why(op), "elements");
    }

    private void append(Object kCache, Object vCache) {
        synchronized (this) {
            ensureOpen();
            long d = desc.enter();
            try {
                require("kvAppend needs seq_lens_k, the keys in each cache after the append",
                        Operand.SEQ_LENS_K);
                requireServing();
                Object[] ops = new Object[OPERANDS];
                for (Operand o : APPEND_USES) {
                    ops[o.ordinal()] = bound[o.ordinal()];
                }
                AttnNative.attn_jni_kv_append(d, handle, ops, kCache, vCache);
            } finally {
                desc.leave();
                Reference.reachabilityFence(this);
            }
        }
    }

    /** AttentionDesc.merge: acc &lt;- merge(acc, part) in d's OUT and LSE layouts. */
    static void merge(AttentionDesc d, AttentionArgs acc, AttentionArgs part) {
        if (acc == null) {
            throw Checks.missing("acc");
        }
        if (part == null) {
            throw Checks.missing("part");
        }
        if (acc == part) {
            throw new IllegalArgumentException("acc and part are the same AttentionArgs (acc is "
                    + "updated in place from part: part must hold another result)");
        }
        AttentionArgs first = acc.rank < part.rank ? acc : part;
        AttentionArgs second = first == acc ? part : acc;
        synchronized (first) {
            synchronized (second) {
                acc.ensureOpen();
                part.ensureOpen();
                long h = d.enter();
                try {
                    String why = "merge needs out and lse in acc and part";
                    for (AttentionArgs a : new AttentionArgs[] {acc, part}) {
                        String who = a == acc ? "acc's " : "part's ";
                        for (Operand o : new Operand[] {Operand.OUT, Operand.LSE}) {
                            if (a.bound[o.ordinal()] == null) {
                                throw new NullPointerException(who + o.cname + " is not bound ("
                                        + why + ")");
                            }
                        }
                    }
                    if (d.varlen() && acc.bound[Operand.CU_SEQLENS_Q.ordinal()] == null) {
                        throw new NullPointerException("acc's cu_seqlens_q is not bound (merge "
                                + "with a varlen descriptor needs the pack's prefix sums)");
                    }
                    Object[] ia = new Object[OPERANDS], ip = new Object[OPERANDS];
                    for (Operand o : new Operand[] {Operand.OUT, Operand.LSE, Operand.CU_SEQLENS_Q}) {
                        ia[o.ordinal()] = acc.bound[o.ordinal()];
                    }
                    for (Operand o : new Operand[] {Operand.OUT, Operand.LSE}) {
                        ip[o.ordinal()] = part.bound[o.ordinal()];
                    }
                    AttnNative.attn_jni_merge(h, acc.handle, ia, part.handle, ip);
                } finally {
                    d.leave();
                    Reference.reachabilityFence(acc);
                    Reference.reachabilityFence(part);
                }
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
        java.util.Arrays.fill(store, StorageType.F32);
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
                if (store[o.ordinal()] != StorageType.F32) {
                    s.append(':').append(store[o.ordinal()].cname);
                }
                sep = ", ";
            }
        }
        return s.append(closed ? "; closed]" : "]").toString();
    }
}
