package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.libattn.ServingFixture.*;
import static org.libattn.TestData.direct;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * What the serving layouts refuse: bad page tables, prefix sums and lengths (the library's
 * message naming the sequence and the slot, or the Java check before the call), kvAppend
 * writes out of place; the serving parameters' round trips and checks; the raw serving calls.
 */
class ServingChecksTest {
    /**
     * A small paged pack: batch 2, heads 2/1, d 4, queries {2, 3} (max 3), keys {3, 9} (max 10),
     * pages of 4 (3 slots per sequence), a pool of exactly the 4 pages in use.
     */
    static final class Small {
        static final int SB = 2, SHQ = 2, SHKV = 1, SD = 4, SQ = 3, SK = 10, PAGE = 4, SLOTS = 3, POOL = 4;
        int[] cuQ = {0, 2, 5};
        int[] lens = {3, 9};
        int[] table = {2, -1, -1, 0, 3, 1};
        float[] q = uniform(new SplittableRandom(3), 5 * SHQ * SD, -1, 1);
        float[] k = uniform(new SplittableRandom(4), POOL * PAGE * SHKV * SD, -1, 1);
        float[] v = uniform(new SplittableRandom(5), k.length, -1, 1);
        float[] out = new float[5 * SHQ * SD];

        static AttentionDesc desc() {
            return AttentionDesc.builder().batch(SB).heads(SHQ, SHKV).seqLen(SQ, SK).headDim(SD)
                    .varlen().pageSize(PAGE).build();
        }

        void bind(AttentionArgs a) {
            a.set(Operand.Q, q).set(Operand.K, k).set(Operand.V, v).set(Operand.OUT, out)
                    .cuSeqlensQ(cuQ).seqLensK(lens).blockTable(table);
        }
    }

    /** The refusal of a FORWARD over Small after bend changed its operands. */
    static Refusal refused(java.util.function.Consumer<Small> bend) {
        Small s = new Small();
        try (AttentionDesc d = Small.desc(); AttentionArgs a = d.args()) {
            s.bind(a);
            a.run(Op.FORWARD); // the unbent pack runs
            bend.accept(s);
            s.bind(a);
            return Refusal.of(() -> a.run(Op.FORWARD));
        }
    }

    @Test
    void badTablesAndLengthsAreRefusedNamingTheSlot() {
        Object[][] cases = {
            {(java.util.function.Consumer<Small>) s -> s.table[1 * Small.SLOTS + 2] = 99,
                "attn_run: block_table[1][2] (99) is not a page of the K/V buffers, which hold 4 pages"},
            {(java.util.function.Consumer<Small>) s -> s.table[1 * Small.SLOTS + 1] = -1,
                "attn_run: block_table[1][1] is -1 (unused) but sequence 1 has 9 keys"},
            {(java.util.function.Consumer<Small>) s -> s.table[0] = -7,
                "block_table[0][0] (-7) is not a page"},
            {(java.util.function.Consumer<Small>) s -> s.lens = new int[] {3, 11},
                "attn_run: seq_lens_k[1] (11) is outside [0, seq_k = 10]"},
            {(java.util.function.Consumer<Small>) s -> s.cuQ = new int[] {1, 2, 5},
                "attn_run: cu_seqlens_q[0] (1) must be 0"},
            {(java.util.function.Consumer<Small>) s -> s.cuQ = new int[] {0, 4, 5},
                "cu_seqlens_q: sequence 0 has length 4, above seq_q = 3"},
            {(java.util.function.Consumer<Small>) s -> s.cuQ = new int[] {0, 3, 2},
                "cu_seqlens_q must not decrease: cu_seqlens_q[1] = 3 > cu_seqlens_q[2] = 2"},
            {(java.util.function.Consumer<Small>) s -> s.k = Arrays.copyOf(s.k, 3 * Small.PAGE * Small.SD),
                "block_table[1][1] (3) is not a page of the K/V buffers, which hold 3 pages"},
            {(java.util.function.Consumer<Small>) s -> s.q = Arrays.copyOf(s.q, 19),
                "attn_run: q has 19 elements, needs at least 40"},
        };
        for (Object[] c : cases) {
            @SuppressWarnings("unchecked")
            java.util.function.Consumer<Small> bend = (java.util.function.Consumer<Small>) c[0];
            Refusal e = refused(bend);
            assertEquals(Status.INVALID_ARGUMENT, e.status(), e.getMessage());
            assertContains(e.libraryMessage(), (String) c[1]);
            assertContains(e.getMessage(), (String) c[1]);
        }
        // Lengths are the library's (tests/vectors/errors.txt); an empty array is bound.
        try (AttentionDesc d = Small.desc(); AttentionArgs a = d.args()) {
            a.set(Operand.Q, new float[0]);
            a.set(Operand.NEW_K, new float[0]);
            assertTrue(a.isSet(Operand.Q) && a.isSet(Operand.NEW_K), "empty q / new_k are bound");
            a.unset(Operand.Q);
            a.unset(Operand.NEW_K);
            // Kinds, heap and wrongly ordered buffers for the new operands.
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> a.set(Operand.CU_SEQLENS_Q, new float[3]));
            assertMentions(e.getMessage(), "cu_seqlens_q", "int");
            e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.NEW_V, new int[32]));
            assertMentions(e.getMessage(), "new_v", "float");
            e = assertThrows(IllegalArgumentException.class, () -> a.blockTable(IntBuffer.allocate(6)));
            assertMentions(e.getMessage(), "block_table", "direct");
            ByteOrder other = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN ? ByteOrder.BIG_ENDIAN
                    : ByteOrder.LITTLE_ENDIAN;
            e = assertThrows(IllegalArgumentException.class,
                    () -> a.cuSeqlensQ(ByteBuffer.allocateDirect(12).order(other).asIntBuffer()));
            assertMentions(e.getMessage(), "cu_seqlens_q", "byte", "order");
            e = assertThrows(IllegalArgumentException.class,
                    () -> a.newK(ByteBuffer.allocateDirect(64).order(other).asFloatBuffer()));
            assertMentions(e.getMessage(), "new_k", "byte", "order");
            // What the layout needs and is not bound: NullPointerException naming it.
            Small s = new Small();
            a.set(Operand.Q, s.q).set(Operand.K, s.k).set(Operand.V, s.v).set(Operand.OUT, s.out);
            NullPointerException npe = assertThrows(NullPointerException.class, () -> a.run(Op.FORWARD));
            assertMentions(npe.getMessage(), "cu_seqlens_q", "NULL", "ATTN_PARAM_VARLEN");
            a.cuSeqlensQ(s.cuQ);
            npe = assertThrows(NullPointerException.class, () -> a.run(Op.FORWARD));
            assertMentions(npe.getMessage(), "block_table", "NULL");
            a.blockTable(s.table);
            npe = assertThrows(NullPointerException.class, () -> a.run(Op.FORWARD));
            assertMentions(npe.getMessage(), "seq_lens_k", "NULL");
            a.seqLensK(s.lens);
            a.run(Op.FORWARD);
            // The library's checks of the layout's operands.
            a.cuSeqlensK(new int[] {0, 3, 12});
            Refusal ae = Refusal.of(() -> a.run(Op.FORWARD));
            assertContains(ae.libraryMessage(), "cu_seqlens_k is bound but a paged cache takes its key lengths from seq_lens_k");
            a.unset(Operand.CU_SEQLENS_K).set(Operand.KEY_MASS, new float[Small.SB * Small.SHQ * Small.SK]);
            ae = Refusal.of(() -> a.run(Op.FORWARD));
            assertEquals(Status.UNSUPPORTED, ae.status());
            assertMentions(ae.libraryMessage(), "key_mass", "ATTN_PARAM_VARLEN");
            a.unset(Operand.KEY_MASS).set(Operand.WEIGHTS, new float[Small.SB * Small.SHQ * Small.SQ * Small.SK]);
            ae = Refusal.of(() -> a.run(Op.WEIGHTS));
            assertEquals(Status.UNSUPPORTED, ae.status());
            assertMentions(ae.libraryMessage(), "ATTN_OP_WEIGHTS", "ATTN_PARAM_VARLEN");
        }
        // cu_seqlens_q on a dense descriptor is the library's refusal.
        try (AttentionDesc d = AttentionDesc.builder().seqLen(2).headDim(2).build(); AttentionArgs a = d.args()) {
            float[] x = new float[4];
            a.set(Operand.Q, x).set(Operand.K, x).set(Operand.V, x).set(Operand.OUT, new float[4])
                    .cuSeqlensQ(new int[] {0, 2});
            Refusal e = Refusal.of(() -> a.run(Op.FORWARD));
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertContains(e.libraryMessage(), "cu_seqlens_q is bound but ATTN_PARAM_VARLEN is 0");
        }
    }

    @Test
    void kvAppendRefusesWhatWouldWriteOutOfPlace() {
        Small s = new Small();
        try (AttentionDesc d = Small.desc(); AttentionArgs a = d.args()) {
            float[] nk = filled(5 * Small.SHKV * Small.SD, 1f), nv = nk.clone();
            float[] kPool = new float[s.k.length], vPool = new float[s.v.length];
            // Caches required (the library's), writable direct buffers (Java's).
            NullPointerException npe = assertThrows(NullPointerException.class, () -> a.kvAppend(kPool, null));
            assertMentions(npe.getMessage(), "v_cache");
            npe = assertThrows(NullPointerException.class, () -> a.kvAppend((FloatBuffer) null, direct(vPool, 0)));
            assertMentions(npe.getMessage(), "k_cache");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> a.kvAppend(direct(kPool, 0).asReadOnlyBuffer(), direct(vPool, 0)));
            assertMentions(e.getMessage(), "kCache", "read");
            e = assertThrows(IllegalArgumentException.class, () -> a.kvAppend(FloatBuffer.allocate(64), direct(vPool, 0)));
            assertMentions(e.getMessage(), "kCache", "direct");
            npe = assertThrows(NullPointerException.class, () -> a.kvAppend(kPool, vPool));
            assertMentions(npe.getMessage(), "seq_lens_k");
            a.newK(nk).newV(nv).seqLensK(new int[] {1, 9});
            npe = assertThrows(NullPointerException.class, () -> a.kvAppend(kPool, vPool));
            assertMentions(npe.getMessage(), "cu_seqlens_q");
            a.cuSeqlensQ(s.cuQ);
            npe = assertThrows(NullPointerException.class, () -> a.kvAppend(kPool, vPool));
            assertMentions(npe.getMessage(), "block_table");
            a.blockTable(s.table);
            // The library's: sequence 0 adds 2 tokens but would hold 1 key; one array for both
            // caches; a page id outside the pool.
            Refusal ae = Refusal.of(() -> a.kvAppend(kPool, vPool));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertContains(ae.libraryMessage(), "attn_kv_append: seq_lens_k[0] (1) is less than the 2 new tokens of sequence 0");
            a.seqLensK(s.lens);
            ae = Refusal.of(() -> a.kvAppend(kPool, kPool));
            assertMentions(ae.libraryMessage(), "k_cache", "overlaps", "v_cache");
            ae = Refusal.of(() -> a.kvAppend(kPool, nk)); // nk is also new_k
            assertMentions(ae.libraryMessage(), "overlaps", "new_k");
            int[] bad = s.table.clone();
            bad[Small.SLOTS] = 1000;
            a.blockTable(bad);
            ae = Refusal.of(() -> a.kvAppend(kPool, vPool));
            assertContains(ae.libraryMessage(), "block_table[1][0] (1000) is not a page of the K/V buffers, which hold 4 pages");
            assertTrue(VectorsTest.sameBits(new float[kPool.length], kPool), "nothing written by a refused append");
            a.blockTable(s.table);
            a.kvAppend(kPool, vPool);
            // Sequence 1's 3 new rows are its keys 6, 7, 8: slot 1 (page 3), tokens 2, 3, then
            // slot 2 (page 1), token 0. Sequence 0's 2 rows are keys 1, 2 of page 2.
            float[] want = new float[kPool.length];
            for (int at : new int[] {2 * 16 + 4, 2 * 16 + 8, 3 * 16 + 8, 3 * 16 + 12, 1 * 16}) {
                Arrays.fill(want, at, at + 4, 1f);
            }
            assertTrue(VectorsTest.sameBits(want, kPool), Arrays.toString(kPool));
        }
        // A dense (not varlen) paged descriptor: NEW_K has a fixed length, checked in Java.
        try (AttentionDesc d = AttentionDesc.builder().batch(2).heads(2, 1).seqLen(3, 10).headDim(4)
                .pageSize(4).build(); AttentionArgs a = d.args()) {
            assertEquals(2 * 3 * 4, d.requiredLen(Operand.NEW_K));
            a.newK(new float[24]);
        }
    }

    @Test
    void servingParametersRoundTripAndAreChecked() {
        try (AttentionDesc d = AttentionDesc.builder().batch(3).heads(4, 2).seqLen(9, 66).headDim(24).build()) {
            assertFalse(d.varlen());
            assertEquals(0, d.pageSize());
            assertEquals(0, d.maxPages());
            assertFalse(d.batchInvariant());
            assertEquals(0, d.requiredLen(Operand.BLOCK_TABLE));
            assertEquals(4, d.requiredLen(Operand.CU_SEQLENS_K));
            assertEquals(3 * 9 * 2 * 24, d.requiredLen(Operand.NEW_V));
        }
        try (AttentionDesc d = AttentionDesc.builder().batch(3).heads(4, 2).seqLen(9, 66).headDim(24)
                .varlen(true).pageSize(16).maxPages(7).batchInvariant(true).build()) {
            assertTrue(d.varlen());
            assertEquals(16, d.pageSize());
            assertEquals(7, d.maxPages());
            assertTrue(d.batchInvariant());
            assertEquals(16.0, d.param(Param.PAGE_SIZE));
            assertEquals(1.0, d.param(Param.BATCH_INVARIANT));
            assertEquals(3 * 7, d.requiredLen(Operand.BLOCK_TABLE));
            assertEquals(16 * 2 * 24, d.requiredLen(Operand.K), "one token-major page");
            assertTrue(d.toString().contains("varlen"), d.toString());
        }
        try (AttentionDesc d = AttentionDesc.builder().seqLen(2, 33).headDim(2).param(Param.PAGE_SIZE, 8)
                .param(Param.VARLEN, 1L).build()) {
            assertEquals(5, d.requiredLen(Operand.BLOCK_TABLE), "ceil(33 / 8) slots");
        }
        AttentionDesc.Builder b = AttentionDesc.builder();
        Object[][] cases = {
            {(Runnable) () -> b.pageSize(-1), "-1", "ATTN_PARAM_PAGE_SIZE"},
            {(Runnable) () -> b.maxPages(-3), "-3", "ATTN_PARAM_MAX_PAGES"},
            {(Runnable) () -> b.param(Param.VARLEN, 2), "2", "ATTN_PARAM_VARLEN"},
            {(Runnable) () -> b.param(Param.BATCH_INVARIANT, -1), "ATTN_PARAM_BATCH_INVARIANT", "-1"},
            {(Runnable) () -> b.param(Param.PAGE_SIZE, 1L << 31), "ATTN_PARAM_PAGE_SIZE", "2147483648"},
        };
        for (Object[] c : cases) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, ((Runnable) c[0])::run);
            for (int i = 1; i < c.length; i++) {
                assertMentions(e.getMessage(), (String) c[i]);
            }
        }
        // What only the library judges: head-major strides that do not fit the page.
        Refusal e = Refusal.of(() -> AttentionDesc.builder().seqLen(2).headDim(4)
                .varlen().strides(Operand.OUT, 0, 4, 2).build());
        assertMentions(e.libraryMessage(), "out");
        // The new enumerators are the C values.
        assertEquals(14, Operand.CU_SEQLENS_Q.code());
        assertEquals(15, Operand.CU_SEQLENS_K.code());
        assertEquals(16, Operand.BLOCK_TABLE.code());
        assertEquals(17, Operand.NEW_K.code());
        assertEquals(18, Operand.NEW_V.code());
        assertEquals(10, Param.VARLEN.code());
        assertEquals(11, Param.PAGE_SIZE.code());
        assertEquals(12, Param.MAX_PAGES.code());
        assertEquals(13, Param.BATCH_INVARIANT.code());
        assertFalse(Operand.NEW_K.isOutput());
        assertFalse(Param.PAGE_SIZE.isFloat());
        assertEquals(2147483647.0, Param.MAX_PAGES.max());
    }

    @Test
    void rawServingCalls() {
        final int F32 = AttentionArgs.F32, OUT = AttentionArgs.OUT, U8 = AttentionArgs.U8, I32 = AttentionArgs.I32;
        try (AttentionDesc d = Small.desc()) {
            long h = d.enter();
            long[] ah = new long[1];
            AttnNative.attn_args_create(ah);
            try {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_call(Op.FORWARD.code(), h, ah[0], new Object[65], new int[65], 0,
                                null, null));
                assertMentions(e.getMessage(), "operands");
                // Every operand at once (local references held while pinned), and twice in one
                // merge: the glue reserves room, so -Xcheck:jni (ctest java_tests) has nothing to
                // report. The library then refuses the serving operands of a dense descriptor,
                // and one array as both acc's and part's out.
                try (AttentionDesc dense = AttentionDesc.builder().seqLen(2).headDim(2).build()) {
                    long dh = dense.enter();
                    try {
                        float[] x = new float[4];
                        Object[] all = {x, new float[4], new float[4], new float[4], new float[2], new float[4],
                            new boolean[2], new boolean[4], new float[4], new float[1], new float[1],
                            new boolean[2], new int[] {2}, new float[2], new int[] {0, 2}, new int[] {0, 2},
                            new int[1], new float[4], new float[4],
                            new float[4], new float[4], new float[4], new float[4], new float[4], new float[1],
                            null, null, null, null, null};
                        assertEquals(Operand.values().length, all.length);
                        int[] codes = new int[all.length];
                        for (Operand o : Operand.values()) {
                            int t = all[o.code()] instanceof int[] ? I32 : all[o.code()] instanceof boolean[] ? U8 : F32;
                            codes[o.code()] = t | (o.isOutput() ? OUT : 0);
                        }
                        Refusal ae = Refusal.of(() -> AttnNative.attn_jni_call(Op.FORWARD.code(), dh, ah[0], all,
                                codes, 0, null, null));
                        assertEquals(Status.INVALID_ARGUMENT, ae.status());
                        assertMentions(ae.libraryMessage(), "attn_run", "cu_seqlens_q", "bound");
                        long[] ph = new long[1];
                        AttnNative.attn_args_create(ph);
                        try {
                            ae = Refusal.of(() -> AttnNative.attn_jni_call(AttentionArgs.MERGE, dh, ah[0], all,
                                    codes, ph[0], all, codes));
                            assertEquals(Status.INVALID_ARGUMENT, ae.status());
                            assertMentions(ae.libraryMessage(), "attn_merge", "overlaps");
                        } finally {
                            AttnNative.attn_args_destroy(ph[0]);
                        }
                    } finally {
                        dense.leave();
                    }
                }
                // The library answers, naming what is missing.
                int[] caches = {0, F32 | OUT, F32 | OUT};
                Refusal ae = Refusal.of(() -> AttnNative.attn_jni_call(AttentionArgs.KV_APPEND, h, ah[0],
                        new Object[] {null, new float[64], new float[64]}, caches, 0, null, null));
                assertEquals(Status.NULL_POINTER, ae.status());
                assertMentions(ae.libraryMessage(), "attn_kv_append", "seq_lens_k");
                ae = Refusal.of(() -> AttnNative.attn_jni_call(AttentionArgs.KV_APPEND, h, ah[0],
                        new Object[] {null, new float[64], null}, caches, 0, null, null));
                assertMentions(ae.libraryMessage(), "v_cache");
                long[] ph = new long[1];
                AttnNative.attn_args_create(ph);
                try {
                    int[] c = {0, 0, 0, F32 | OUT, F32 | OUT};
                    ae = Refusal.of(() -> AttnNative.attn_jni_call(AttentionArgs.MERGE, h, ah[0],
                            new Object[] {null, null, null, new float[40], new float[20]}, c, ph[0],
                            new Object[] {null, null, null, new float[40]}, c));
                    assertEquals(Status.NULL_POINTER, ae.status());
                    assertMentions(ae.libraryMessage(), "attn_merge", "part's", "lse");
                } finally {
                    AttnNative.attn_args_destroy(ph[0]);
                }
            } finally {
                AttnNative.attn_args_destroy(ah[0]);
                d.leave();
            }
        }
    }
}
