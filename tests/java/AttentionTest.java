package org.libattn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.EnumSet;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Values (seed example, the shared vectors through simple(), forward/weights and strides, buffers)
 * and every documented error path.
 */
class AttentionTest {
    // ------------------------------------------------------------------ helpers

    static FloatBuffer directFloats(int n) {
        return ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder()).asFloatBuffer();
    }

    static FloatBuffer directFloats(float[] a) {
        FloatBuffer f = directFloats(a.length);
        f.put(a).flip();
        return f;
    }

    static void assertMentions(String message, String... words) {
        for (String w : words) {
            // w as a whole token: not preceded or followed by a letter, digit or underscore
            assertTrue(Pattern.compile("(?<![A-Za-z0-9_])" + Pattern.quote(w) + "(?![A-Za-z0-9_])")
                    .matcher(message).find(),
                    "message should name '" + w + "': " + message);
        }
    }

    /** A small GQA descriptor: b=2, hq=4, hkv=2, sq=5, sk=7, d=8, scale 0.35. */
    static AttentionDesc.Builder gqa(Causal causal) {
        return AttentionDesc.builder().batch(2).heads(4, 2).seqLen(5, 7).headDim(8).causal(causal)
                .scale(0.35f);
    }

    static boolean defaultStrides(VectorsTest.Case c) {
        for (String key : new String[] {"q_strides", "k_strides", "v_strides", "out_strides"}) {
            if (!c.get(key).equals("default")) {
                return false;
            }
        }
        return true;
    }

    // ------------------------------------------------------------------ values

    @Test
    void seedExample() {
        float[] q = {0, 0, 0};
        float[] k = {1, 2, 3};
        float[] v = {10, 20, 30};
        float[] out = Attention.simple(q, k, v, 3, 1, true, null);
        assertEquals(15.0f, out[1 * 1 + 0]); // out[1][0], exactly
        assertArrayEquals(new float[] {10f, 15f, 20f}, out, 1e-5f);

        try (AttentionDesc desc = AttentionDesc.builder().seqLen(3).headDim(1)
                .causal(Causal.TOP_LEFT).build()) {
            float[] w = desc.weights(q, k, null, null);
            assertArrayEquals(new float[] {1, 0, 0, 0.5f, 0.5f, 0, 1 / 3f, 1 / 3f, 1 / 3f}, w, 1e-6f);
            assertEquals(0.0f, w[1]); // masked: exactly 0
            assertEquals(15.0f, desc.forward(q, k, v, null, null)[1]);
        }
    }

    /**
     * Attention.simple is one (batch, head) slice of a contiguous BHSD problem with seq_q ==
     * seq_k, the default scale, no or the top-left causal rule and optional key padding: every
     * such slice of the shared vectors (index.txt) must give the vector's expected rows (their
     * padded K/V rows are NaN: never read).
     */
    @Test
    void simpleWithPadMaskMatchesTheSharedVectors() throws java.io.IOException {
        java.nio.file.Path dir = VectorsTest.vectorsDir();
        boolean causalSeen = false, plainSeen = false, padSeen = false;
        int slices = 0;
        for (VectorsTest.Case c : VectorsTest.cases()) {
            int b = c.i("batch"), hq = c.i("heads_q"), n = c.i("seq_q"), d = c.i("head_dim");
            if (n != c.i("seq_k") || hq != c.i("heads_kv") || c.i("causal") == 2
                    || !c.get("scale").equals("default") || !defaultStrides(c) || c.get("allowed").equals("1")) {
                continue;
            }
            boolean causal = c.i("causal") == 1;
            try (AttentionDesc desc = VectorsTest.builder(c).build()) {
                VectorsTest.Data x = VectorsTest.data(dir, c, desc);
                for (int bi = 0; bi < b; bi++) {
                    boolean[] pad = x.keyValid == null ? null
                            : java.util.Arrays.copyOfRange(x.keyValid, bi * n, bi * n + n);
                    for (int h = 0; h < hq; h++) {
                        int from = (bi * hq + h) * n * d, to = from + n * d;
                        float[] out = Attention.simple(java.util.Arrays.copyOfRange(x.q, from, to),
                                java.util.Arrays.copyOfRange(x.k, from, to),
                                java.util.Arrays.copyOfRange(x.v, from, to), n, d, causal, pad);
                        assertNull(VectorsTest.check("out", out, java.util.Arrays.copyOfRange(x.expOut, from, to)),
                                c.get("name") + " batch " + bi + " head " + h);
                        slices++;
                    }
                }
            }
            causalSeen |= causal;
            plainSeen |= !causal;
            padSeen |= c.get("key_valid").equals("1");
        }
        assertTrue(causalSeen && plainSeen && padSeen && slices > 0,
                "index.txt has slices for simple() with and without the causal rule and with padding");
    }

    /**
     * desc.forward (out and lse) and desc.weights with key_valid and allowed masks, GQA, every
     * causal rule: the index.txt cases with masks or GQA must give their expected values.
     */
    @Test
    void descriptorMatchesTheSharedVectorsForEveryCausalRule() throws java.io.IOException {
        java.nio.file.Path dir = VectorsTest.vectorsDir();
        EnumSet<Causal> seen = EnumSet.noneOf(Causal.class);
        boolean gqaWithBothMasks = false;
        for (VectorsTest.Case c : VectorsTest.cases()) {
            boolean gqa = c.i("heads_q") != c.i("heads_kv");
            boolean kv = c.get("key_valid").equals("1"), al = c.get("allowed").equals("1");
            if (!gqa && !kv && !al) {
                continue;
            }
            VectorsTest.runCase(dir, c, false); // AssertionError naming the element on a mismatch
            seen.add(Causal.fromCode(c.i("causal")));
            gqaWithBothMasks |= gqa && kv && al;
        }
        assertEquals(EnumSet.allOf(Causal.class), seen, "causal rules covered by the masked / GQA cases");
        assertTrue(gqaWithBothMasks, "a GQA case with key_valid and allowed");
    }

    @Test
    void fullyMaskedRowGivesZeroOutputAndMinusInfinityLse() {
        try (AttentionDesc desc = AttentionDesc.builder().seqLen(2, 3).headDim(2).build()) {
            float[] q = {1, 2, 3, 4}, k = {1, 0, 0, 1, 1, 1}, v = {5, 6, 7, 8, 9, 10};
            boolean[] allowed = {false, false, false, true, false, true};
            float[] out = {9, 9, 9, 9};
            float[] lse = new float[2];
            desc.forward(q, k, v, null, allowed, out, lse);
            assertEquals(0.0f, out[0]);
            assertEquals(0.0f, out[1]);
            assertEquals(Float.NEGATIVE_INFINITY, lse[0]);
            assertTrue(Float.isFinite(lse[1]));
        }
    }

    static long[] strides(VectorsTest.Case c, String key, int heads, int seq, int dim) {
        String s = c.get(key);
        if (s.equals("default")) {
            return new long[] {(long) heads * seq * dim, (long) seq * dim, dim};
        }
        String[] p = s.split(",");
        return new long[] {Long.parseLong(p[0]), Long.parseLong(p[1]), Long.parseLong(p[2])};
    }

    @Test
    void stridedLayoutsAndLongerArrays() throws java.io.IOException {
        // The index.txt cases with strides (BSHD, K/V broadcast over the batch, gaps in Q/K/V and
        // OUT rows) through desc.forward with longer arrays: the addressed OUT elements get the
        // expected values, the gaps and the tail stay untouched, the inputs' tails are not read.
        java.nio.file.Path dir = VectorsTest.vectorsDir();
        boolean bshd = false, broadcast = false, outGaps = false;
        for (VectorsTest.Case c : VectorsTest.cases()) {
            if (defaultStrides(c) || c.get("key_valid").equals("1") || c.get("allowed").equals("1")) {
                continue;
            }
            String name = c.get("name");
            int b = c.i("batch"), hq = c.i("heads_q"), hkv = c.i("heads_kv"), sq = c.i("seq_q"),
                    sk = c.i("seq_k"), d = c.i("head_dim");
            long[] os = strides(c, "out_strides", hq, sq, d);
            long[] ks = strides(c, "k_strides", hkv, sk, d), vs = strides(c, "v_strides", hkv, sk, d);
            int outLen = (int) ((b - 1) * os[0] + (hq - 1) * os[1] + (sq - 1) * os[2] + d);
            try (AttentionDesc desc = VectorsTest.builder(c).build()) {
                assertEquals(outLen, desc.requiredLen(Operand.OUT), name);
                assertEquals(b * hq * sq, desc.requiredLen(Operand.LSE), name);
                assertEquals(b * hq * sq * sk, desc.requiredLen(Operand.WEIGHTS), name);
                assertEquals(b * sk, desc.requiredLen(Operand.KEY_VALID), name);
                assertEquals(sq * sk, desc.requiredLen(Operand.ALLOWED), name);
                VectorsTest.Data x = VectorsTest.data(dir, c, desc);
                float[] q = tail(x.q, 3), k = tail(x.k, 1), v = tail(x.v, 5);
                float[] out = new float[outLen + 4];
                java.util.Arrays.fill(out, 7.5f);
                desc.forward(q, k, v, null, null, out, null);
                boolean[] addressed = new boolean[outLen];
                for (int bi = 0; bi < b; bi++) {
                    for (int h = 0; h < hq; h++) {
                        for (int i = 0; i < sq; i++) {
                            for (int e = 0; e < d; e++) {
                                addressed[(int) (bi * os[0] + h * os[1] + i * os[2] + e)] = true;
                            }
                        }
                    }
                }
                int gaps = 0;
                for (int i = 0; i < out.length; i++) {
                    if (i < outLen && addressed[i]) {
                        assertNull(VectorsTest.check("out[" + i + "]", new float[] {out[i]},
                                new float[] {x.expOut[i]}), name);
                    } else {
                        gaps++;
                        assertEquals(7.5f, out[i], name + ": out[" + i + "] is not addressed and must stay untouched");
                    }
                }
                outGaps |= gaps > 4;
            }
            bshd |= os[1] < os[2];
            broadcast |= ks[0] == 0 || vs[0] == 0;
        }
        assertTrue(bshd && broadcast && outGaps, "index.txt has BSHD, batch-broadcast K/V and OUT gap cases");
    }

    /** a followed by n NaN: the tail of a longer array is never read. */
    static float[] tail(float[] a, int n) {
        float[] t = java.util.Arrays.copyOf(a, a.length + n);
        java.util.Arrays.fill(t, a.length, t.length, Float.NaN);
        return t;
    }

    @Test
    void directBuffersWithPositionsGiveTheArrayResults() {
        boolean[] keyValid = new boolean[14];
        java.util.Arrays.fill(keyValid, true);
        keyValid[5] = false;
        try (AttentionDesc desc = gqa(Causal.TOP_LEFT).build()) {
            float[] q = TestData.random(30, (int) desc.requiredLen(Operand.Q)),
                    k = TestData.random(31, (int) desc.requiredLen(Operand.K)),
                    v = TestData.random(32, (int) desc.requiredLen(Operand.V));
            float[] out = new float[(int) desc.requiredLen(Operand.OUT)], lse = new float[40];
            desc.forward(q, k, v, keyValid, null, out, lse);
            float[] w = desc.weights(q, k, keyValid, null);

            // q sits at position 3 of a larger buffer; the mask at position 2; out at position 1.
            FloatBuffer qb = directFloats(q.length + 3);
            qb.position(3);
            qb.put(q).position(3);
            ByteBuffer kvb = ByteBuffer.allocateDirect(16);
            kvb.position(2);
            for (boolean x : keyValid) {
                kvb.put((byte) (x ? 7 : 0)); // any nonzero byte is true
            }
            kvb.position(2);
            FloatBuffer ob = directFloats(out.length + 1);
            ob.position(1);
            FloatBuffer lb = directFloats(lse.length);
            desc.forward(qb, directFloats(k), directFloats(v), kvb, null, ob, lb);
            assertEquals(3, qb.position(), "positions are not moved");
            float[] got = new float[out.length];
            ob.get(1, got);
            assertArrayEquals(out, got);
            float[] gotLse = new float[lse.length];
            lb.get(0, gotLse);
            assertArrayEquals(lse, gotLse);
            FloatBuffer wb = directFloats(w.length);
            desc.weights(qb, directFloats(k), kvb, null, wb);
            float[] gotW = new float[w.length];
            wb.get(0, gotW);
            assertArrayEquals(w, gotW);
        }
    }

    @Test
    void enumsMirrorTheCEnums() {
        assertEquals(attn_status.values().length, Status.values().length);
        assertEquals(attn_causal.values().length, Causal.values().length);
        assertEquals(attn_operand.values().length, Operand.values().length);
        assertEquals(attn_param.values().length, Param.values().length);
        assertEquals(attn_alibi.values().length, Alibi.values().length);
        assertEquals(attn_weights_mode.values().length, WeightsMode.values().length);
        assertEquals(attn_compute.values().length, Compute.values().length);
        assertEquals(attn_op.values().length, Op.values().length);
        for (Operand x : Operand.values()) {
            assertEquals(x.ordinal(), x.code(), x + ": AttentionArgs indexes operands by ordinal");
            assertSame(x, Operand.fromCode(x.code()));
        }
        for (Param x : Param.values()) {
            assertEquals(x.ordinal(), x.code(), x.toString());
            assertSame(x, Param.fromCode(x.code()));
        }
        for (Alibi x : Alibi.values()) {
            assertSame(x, Alibi.fromCode(x.code()));
        }
        for (WeightsMode x : WeightsMode.values()) {
            assertSame(x, WeightsMode.fromCode(x.code()));
        }
        for (Compute x : Compute.values()) {
            assertSame(x, Compute.fromCode(x.code()));
        }
        for (Op x : Op.values()) {
            assertSame(x, Op.fromCode(x.code()));
        }
        assertEquals(13, Operand.KEY_MASS.code());
        assertEquals(9, Param.BIAS_FIRST.code());
        assertEquals(2, Alibi.STANDARD.code());
        assertEquals(3, WeightsMode.CAPPED.code());
        assertEquals(4, WeightsMode.SOFTCAPPED.code());
        assertEquals(2, Op.BACKWARD.code());
        EnumSet<attn_status> s = EnumSet.noneOf(attn_status.class);
        for (Status x : Status.values()) {
            assertTrue(s.add(attn_status.swigToEnum(x.code())));
            assertSame(x, Status.fromCode(x.code()));
        }
        for (Causal x : Causal.values()) {
            assertSame(x, Causal.fromCode(x.code()));
        }
        assertEquals(0, Status.OK.code());
        assertEquals(2, Status.INVALID_ARGUMENT.code());
        assertEquals(2, Causal.BOTTOM_RIGHT.code());
        assertEquals(7, Operand.ALLOWED.code());
        assertEquals("ok", Status.OK.description());
    }

    @Test
    void versionThreadsIsa() {
        assertTrue(Attention.version().matches("\\d+\\.\\d+\\.\\d+"), Attention.version());
        String[] p = Attention.version().split("\\.");
        assertEquals(Integer.parseInt(p[0]) * 10000 + Integer.parseInt(p[1]) * 100
                + Integer.parseInt(p[2]), Attention.versionNumber());
        assertEquals(java.util.List.of("scalar", "sse2", "avx2", "avx512", "avx512fp16"), Attention.isas());
        assertTrue(Attention.isas().contains(Attention.isa()));
        assertTrue(Attention.numThreads() >= 1);
    }

    // ------------------------------------------------------------------ errors: simple

    @Test
    void simpleNullArrays() {
        float[] a = new float[6];
        NullPointerException e = assertThrows(NullPointerException.class,
                () -> Attention.simple(null, a, a, 3, 2, false, null));
        assertMentions(e.getMessage(), "q");
        e = assertThrows(NullPointerException.class, () -> Attention.simple(a, a, null, 3, 2, false, null));
        assertMentions(e.getMessage(), "v");
        e = assertThrows(NullPointerException.class,
                () -> Attention.simple(a, a, a, 3, 2, false, null, null));
        assertMentions(e.getMessage(), "out");
    }

    @Test
    void simpleShortArrays() {
        float[] six = new float[6], five = new float[5];
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Attention.simple(six, five, six, 3, 2, true, null));
        assertMentions(e.getMessage(), "k", "5", "6");
        e = assertThrows(IllegalArgumentException.class,
                () -> Attention.simple(six, six, six, 3, 2, true, new boolean[2]));
        assertMentions(e.getMessage(), "pad_mask", "2", "3");
        e = assertThrows(IllegalArgumentException.class,
                () -> Attention.simple(six, six, six, 3, 2, true, null, five));
        assertMentions(e.getMessage(), "out");
        // Longer arrays are accepted, as everywhere: only the n*d prefix is read or written.
        float[] q7 = {0, 0, 0, 0, 0, 0, Float.NaN}, k7 = {1, 0, 2, 0, 3, 0, Float.NaN},
                v7 = {10, 1, 20, 2, 30, 3, Float.NaN}, out7 = new float[7];
        out7[6] = 42;
        Attention.simple(q7, k7, v7, 3, 2, true, new boolean[] {true, true, true, false}, out7);
        assertArrayEquals(new float[] {10, 1, 15, 1.5f, 20, 2, 42}, out7, 1e-5f);
        assertArrayEquals(new float[] {10, 1, 15, 1.5f, 20, 2}, Attention.simple(q7, k7, v7, 3, 2,
                true, null), 1e-5f);
        // Empty arrays are a length error (not "not given").
        e = assertThrows(IllegalArgumentException.class,
                () -> Attention.simple(six, six, six, 3, 2, true, new boolean[0]));
        assertMentions(e.getMessage(), "pad_mask", "0", "3");
        e = assertThrows(IllegalArgumentException.class,
                () -> Attention.simple(six, six, new float[0], 3, 2, true, null));
        assertMentions(e.getMessage(), "v", "0", "6");
    }

    @Test
    void simpleImpossibleSizesAreRefusedBeforeAllocating() {
        // n*d = 1.6e9 floats (6.4 GB) would fit a Java array; the tiny inputs are refused first.
        float[] one = new float[1];
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Attention.simple(one, one, one, 40000, 40000, true, null));
        assertMentions(e.getMessage(), "q", "1", "1600000000");
        e = assertThrows(IllegalArgumentException.class,
                () -> Attention.simple(one, one, one, 40000, 40000, true, null, one));
        assertMentions(e.getMessage(), "q");
        e = assertThrows(IllegalArgumentException.class,
                () -> Attention.simple(one, one, one, Integer.MAX_VALUE, Integer.MAX_VALUE, false, null));
        assertMentions(e.getMessage(), "q", "n*d");
        // The descriptor's allocating overloads check every input before allocating the output.
        try (AttentionDesc huge = AttentionDesc.builder().seqLen(40000).headDim(40000).build()) {
            assertEquals(1_600_000_000L, huge.requiredLen(Operand.WEIGHTS));
            e = assertThrows(IllegalArgumentException.class, () -> huge.weights(one, one, null, null));
            assertMentions(e.getMessage(), "q", "1", "1600000000");
            e = assertThrows(IllegalArgumentException.class,
                    () -> huge.forward(one, one, one, null, null));
            assertMentions(e.getMessage(), "q");
        }
    }

    @Test
    void simpleBadDims() {
        float[] empty = new float[0];
        Refusal e = Refusal.of(() -> Attention.simple(empty, empty, empty, 0, 4, false, null));
        assertEquals(Status.INVALID_ARGUMENT, e.status());
        assertEquals(2, e.code());
        assertMentions(e.libraryMessage(), "n");
        assertTrue(e.exception instanceof IllegalArgumentException, e.exception.toString());
        assertEquals("attn_simple: n must be > 0", e.getMessage()); // the library's message
        e = Refusal.of(() -> Attention.simple(empty, empty, empty, 4, 0, false, null));
        assertMentions(e.libraryMessage(), "d");
        IllegalArgumentException ie = assertThrows(IllegalArgumentException.class,
                () -> Attention.simple(empty, empty, empty, -1, 4, false, null));
        assertMentions(ie.getMessage(), "n", "negative");
        ie = assertThrows(IllegalArgumentException.class,
                () -> Attention.simple(empty, empty, empty, 1 << 20, 1 << 20, false, null));
        assertMentions(ie.getMessage(), "n*d");
    }

    @Test
    void simpleOutputSameAsInput() {
        // The library's own rule and message, also for the very same array (pinned once, so
        // the library sees one address even when -Xcheck:jni pins copies).
        float[] a = new float[6], b = new float[6];
        Refusal e = Refusal.of(() -> Attention.simple(a, b, b, 3, 2, false, null, a));
        assertEquals(Status.INVALID_ARGUMENT, e.status());
        assertMentions(e.libraryMessage(), "out", "overlaps", "q");
        e = Refusal.of(() -> Attention.simple(b, b, a, 3, 2, false, null, a));
        assertMentions(e.libraryMessage(), "out", "overlaps", "v");
        Attention.simple(b, b, b, 3, 2, false, null, a); // inputs may share memory
    }

    // ------------------------------------------------------------------ errors: descriptor

    @Test
    void badDims() {
        Refusal e = Refusal.of(() -> AttentionDesc.builder().heads(6, 4).seqLen(3).headDim(2).build());
        assertEquals(Status.INVALID_ARGUMENT, e.status());
        assertMentions(e.libraryMessage(), "heads_q", "heads_kv", "6", "4");
        e = Refusal.of(() -> AttentionDesc.builder().seqLen(0, 3).headDim(2).build());
        assertMentions(e.libraryMessage(), "seq_q");
        e = Refusal.of(() -> AttentionDesc.builder().seqLen(3).build());
        assertMentions(e.libraryMessage(), "head_dim");
        e = Refusal.of(() -> AttentionDesc.builder().batch(0).seqLen(3).headDim(2).build());
        assertMentions(e.libraryMessage(), "batch");
        IllegalArgumentException ie = assertThrows(IllegalArgumentException.class,
                () -> AttentionDesc.builder().batch(-2));
        assertMentions(ie.getMessage(), "batch", "-2");
        ie = assertThrows(IllegalArgumentException.class,
                () -> AttentionDesc.builder().strides(Operand.Q, 1, -1, 1));
        assertMentions(ie.getMessage(), "headStride");
    }

    @Test
    void badCausalScaleAndStrides() {
        NullPointerException npe = assertThrows(NullPointerException.class,
                () -> AttentionDesc.builder().causal(null));
        assertMentions(npe.getMessage(), "causal");
        IllegalArgumentException ie = assertThrows(IllegalArgumentException.class, () -> Causal.fromCode(3));
        assertMentions(ie.getMessage(), "causal", "3");
        // The library checks each parameter as the builder sets it.
        ie = assertThrows(IllegalArgumentException.class,
                () -> AttentionDesc.builder().seqLen(2).headDim(2).scale(Float.NaN));
        assertMentions(ie.getMessage(), "attn_desc_set_float", "NaN");
        ie = assertThrows(IllegalArgumentException.class,
                () -> AttentionDesc.builder().scale(Float.POSITIVE_INFINITY));
        assertMentions(ie.getMessage(), "attn_desc_set_float", "outside");
        Refusal e = Refusal.of(() -> AttentionDesc.builder().seqLen(2).headDim(2).strides(Operand.LSE, 4, 4, 2).build());
        assertEquals(Status.INVALID_ARGUMENT, e.status());
        assertMentions(e.libraryMessage(), "which");
    }

    @Test
    void rawLayerNullPointerBecomesNullPointerException() {
        // The face never passes null for q; the raw layer still maps the C status and message.
        long[] h = new long[1];
        AttnNative.attn_desc_create(h, 1, 1, 1, 2, 2, 2);
        assertTrue(h[0] != 0);
        try {
            FloatBuffer a = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder()).asFloatBuffer();
            Refusal e = Refusal.of(() -> AttnNative.attn_forward(h[0], null, a, a, null, null, a, null));
            assertEquals(Status.NULL_POINTER, e.status());
            assertMentions(e.libraryMessage(), "q");
            e = Refusal.of(() -> AttnNative.attn_weights(h[0], a, a, null, null, null));
            assertEquals(Status.NULL_POINTER, e.status());
            assertMentions(e.libraryMessage(), "weights");
            // A heap buffer has no address: the library sees NULL.
            e = Refusal.of(() -> AttnNative.attn_forward(h[0], FloatBuffer.allocate(4), a, a, null, null, a, null));
            assertEquals(Status.NULL_POINTER, e.status());
            assertMentions(e.libraryMessage(), "q");
        } finally {
            AttnNative.attn_desc_destroy(h[0]);
        }
    }

    @Test
    void forwardNullAndShortArrays() {
        try (AttentionDesc desc = gqa(Causal.NONE).build()) {
            float[] q = new float[(int) desc.requiredLen(Operand.Q)];
            float[] kv = new float[(int) desc.requiredLen(Operand.K)];
            float[] out = new float[(int) desc.requiredLen(Operand.OUT)];
            NullPointerException npe = assertThrows(NullPointerException.class,
                    () -> desc.forward(q, null, kv, out));
            assertMentions(npe.getMessage(), "k");
            npe = assertThrows(NullPointerException.class, () -> desc.forward(q, kv, kv, null));
            assertMentions(npe.getMessage(), "out");
            npe = assertThrows(NullPointerException.class, () -> desc.weights(q, kv, null, null, null));
            assertMentions(npe.getMessage(), "weights");

            float[] shortK = new float[kv.length - 1];
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(q, shortK, kv, out));
            assertMentions(e.getMessage(), "k", String.valueOf(shortK.length), String.valueOf(kv.length));
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(q, kv, kv, new boolean[13], null, out, null));
            assertMentions(e.getMessage(), "key_valid", "13", "14");
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(q, kv, kv, null, new boolean[34], out, null));
            assertMentions(e.getMessage(), "allowed");
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(q, kv, kv, null, null, out, new float[39]));
            assertMentions(e.getMessage(), "lse", "39", "40");
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.weights(q, kv, null, null, new float[10]));
            assertMentions(e.getMessage(), "weights", "10");
            Refusal ae = Refusal.of(() -> desc.forward(q, kv, kv, q));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "out", "overlaps", "q");
            float[] lse = new float[40];
            ae = Refusal.of(() -> desc.forward(q, kv, kv, null, null, out, kv));
            assertMentions(ae.libraryMessage(), "lse", "overlaps", "k");
            ae = Refusal.of(() -> desc.weights(q, kv, null, null, q));
            assertMentions(ae.libraryMessage(), "weights", "overlaps", "q");
            // Empty optional arrays are length errors; only null means "not given".
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(q, kv, kv, new boolean[0], null, out, lse));
            assertMentions(e.getMessage(), "key_valid", "0", "14");
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(q, kv, kv, null, null, out, new float[0]));
            assertMentions(e.getMessage(), "lse", "0", "40");
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(new float[0], kv, kv, out));
            assertMentions(e.getMessage(), "q", "0");
        }
    }

    @Test
    void badBuffers() {
        try (AttentionDesc desc = AttentionDesc.builder().seqLen(4).headDim(2).build()) {
            FloatBuffer good = directFloats(8);
            FloatBuffer out = directFloats(8);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(FloatBuffer.allocate(8), good, good, null, null, out, null));
            assertMentions(e.getMessage(), "q", "direct");
            FloatBuffer bigEndian = ByteBuffer.allocateDirect(32).order(ByteOrder.BIG_ENDIAN).asFloatBuffer();
            if (ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN) {
                bigEndian = ByteBuffer.allocateDirect(32).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
            }
            FloatBuffer wrongOrder = bigEndian;
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(good, wrongOrder, good, null, null, out, null));
            assertMentions(e.getMessage(), "k", "byte", "order");
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(good, good, good, null, null, out.asReadOnlyBuffer(), null));
            assertMentions(e.getMessage(), "out", "read");
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(good, good, good, ByteBuffer.allocate(4), null, out, null));
            assertMentions(e.getMessage(), "keyValid", "direct");
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(good, directFloats(7), good, null, null, out, null));
            assertMentions(e.getMessage(), "k", "7", "8");
            FloatBuffer shifted = directFloats(8);
            shifted.position(1);
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(good, good, shifted, null, null, out, null));
            assertMentions(e.getMessage(), "v", "7", "8");
            FloatBuffer misaligned = ByteBuffer.allocateDirect(33).position(1).slice()
                    .order(ByteOrder.nativeOrder()).asFloatBuffer();
            e = assertThrows(IllegalArgumentException.class,
                    () -> desc.forward(good, good, misaligned, null, null, out, null));
            assertMentions(e.getMessage(), "v", "aligned");
            NullPointerException npe = assertThrows(NullPointerException.class,
                    () -> desc.weights(good, null, null, null, directFloats(16)));
            assertMentions(npe.getMessage(), "k");
        }
    }

    @Test
    void overlappingBuffersAreRefusedByTheLibrary() {
        try (AttentionDesc desc = AttentionDesc.builder().seqLen(4).headDim(2).build()) {
            ByteBuffer all = ByteBuffer.allocateDirect(4 * 20).order(ByteOrder.nativeOrder());
            FloatBuffer f = all.asFloatBuffer();
            FloatBuffer q = f.duplicate().position(0).slice();
            FloatBuffer out = f.duplicate().position(4).slice(); // overlaps q's last 4 floats
            FloatBuffer kv = directFloats(8);
            Refusal e = Refusal.of(() -> desc.forward(q, kv, kv, null, null, out, null));
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertMentions(e.libraryMessage(), "out");
        }
    }

    @Test
    void useAfterClose() {
        AttentionDesc desc = AttentionDesc.builder().seqLen(2).headDim(2).build();
        float[] a = new float[4];
        desc.forward(a, a, a, new float[4]);
        assertFalse(desc.isClosed());
        desc.close();
        assertTrue(desc.isClosed());
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> desc.forward(a, a, a, new float[4]));
        assertMentions(e.getMessage(), "closed");
        e = assertThrows(IllegalStateException.class, () -> desc.weights(a, a, null, null));
        assertMentions(e.getMessage(), "closed");
        e = assertThrows(IllegalStateException.class,
                () -> desc.forward(directFloats(4), directFloats(4), directFloats(4), null, null, directFloats(4), null));
        assertMentions(e.getMessage(), "closed");
        e = assertThrows(IllegalStateException.class, () -> desc.requiredLen(Operand.Q));
        assertMentions(e.getMessage(), "closed");
        desc.close(); // idempotent
        assertTrue(desc.toString().contains("closed"));
    }

    @Test
    void isaAndThreadErrors() {
        Refusal e = Refusal.of(() -> Attention.setIsa("no-such-isa"));
        assertEquals(Status.INVALID_ARGUMENT, e.status());
        assertTrue(e.libraryMessage().contains("no-such-isa") || e.libraryMessage().contains("name"),
                e.libraryMessage());
        Attention.setIsa(null); // restores the default
        e = Refusal.of(() -> Attention.setNumThreads(257));
        assertEquals(Status.INVALID_ARGUMENT, e.status());
        assertMentions(e.libraryMessage(), "n");
        assertThrows(IllegalArgumentException.class, () -> Attention.setNumThreads(-1));
        int before = Attention.numThreads();
        Attention.setNumThreads(1);
        assertEquals(1, Attention.numThreads());
        Attention.setNumThreads(0);
        assertEquals(before, Attention.numThreads());
    }
}
