package org.libattn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The extensible call (0.2) through the Java face: every parameter and operand against the
 * float64 {@link Reference}, the binding rules of README's "One rule in every language", the
 * Cleaner safety net and the raw layer's new typemaps.
 */
class ExtensibleCallTest {
    static final double TOL = 1e-5;

    // ------------------------------------------------------------------ helpers

    static void assertMentions(String message, String... words) {
        AttentionTest.assertMentions(message, words);
    }

    /** Random q, k, v (and nothing else) of the reference's required lengths. */
    static Reference.Inputs inputs(Reference ref, long seed) {
        Reference.Inputs in = new Reference.Inputs();
        in.q = Reference.random(seed, ref.requiredLen(0));
        in.k = Reference.random(seed + 1, ref.requiredLen(1));
        in.v = Reference.random(seed + 2, ref.requiredLen(2));
        return in;
    }

    static boolean[] bools(long seed, int n, double pTrue) {
        SplittableRandom r = new SplittableRandom(seed);
        boolean[] a = new boolean[n];
        for (int i = 0; i < n; i++) {
            a[i] = r.nextDouble() < pTrue;
        }
        return a;
    }

    /** out, lse, weights, key mass of one face run. */
    static final class Got {
        float[] out, lse, w, mass;
    }

    /** Binds every operand of in as arrays (masks as boolean[]) and runs FORWARD and WEIGHTS. */
    static Got run(AttentionDesc desc, Reference.Inputs in) {
        Got g = new Got();
        g.out = new float[(int) desc.requiredLen(Operand.OUT)];
        g.lse = new float[(int) desc.requiredLen(Operand.LSE)];
        g.w = new float[(int) desc.requiredLen(Operand.WEIGHTS)];
        g.mass = new float[(int) desc.requiredLen(Operand.KEY_MASS)];
        try (AttentionArgs args = desc.args()) {
            args.set(Operand.Q, in.q).set(Operand.K, in.k).set(Operand.V, in.v)
                    .set(Operand.KEY_VALID, in.keyValid).set(Operand.ALLOWED, in.allowed)
                    .set(Operand.BIAS, in.bias).set(Operand.ALIBI_SLOPES, in.alibiSlopes)
                    .set(Operand.SINKS, in.sinks).set(Operand.QUERY_VALID, in.queryValid)
                    .set(Operand.SEQ_LENS_K, in.seqLensK)
                    .set(Operand.OUT, g.out).set(Operand.LSE, g.lse).set(Operand.KEY_MASS, g.mass)
                    .set(Operand.WEIGHTS, g.w);
            args.run(Op.FORWARD);
            args.run(Op.WEIGHTS);
        }
        return g;
    }

    /** The face's results for ref's problem must match the reference (weights of hidden keys 0). */
    static Got check(Reference ref, Reference.Inputs in, String what) {
        try (AttentionDesc desc = ref.builder().build()) {
            Got g = run(desc, in);
            Reference.Result2 r = ref.run(in);
            assertNull(Reference.compare("out", g.out, r.out, TOL), what);
            assertNull(Reference.compare("lse", g.lse, r.lse, TOL), what);
            assertNull(Reference.compare("weights", g.w, r.weights, TOL), what);
            assertNull(Reference.compare("key_mass", g.mass, r.keyMass, TOL), what);
            for (int i = 0; i < g.w.length; i++) {
                if (r.weights[i] == 0) {
                    assertEquals(0, Float.floatToRawIntBits(g.w[i]), what + ": weights[" + i + "] is hidden");
                }
            }
            return g;
        }
    }

    static boolean sameBits(float[] a, float[] b) {
        return VectorsTest.sameBits(a, b);
    }

    // ------------------------------------------------------------------ parameters

    @Test
    void parametersDefaultAndRoundTripThroughTheLibrary() {
        try (AttentionDesc d = AttentionDesc.builder().heads(4, 2).seqLen(3, 5).headDim(8).build()) {
            assertEquals(Causal.NONE, d.causal());
            assertEquals(-1, d.windowLeft());
            assertEquals(-1, d.windowRight());
            assertEquals(0.0f, d.softcap());
            assertEquals(Alibi.NONE, d.alibi());
            assertFalse(d.softmaxPlusOne());
            assertEquals(8, d.headDimV());
            assertEquals(WeightsMode.SOFTMAX, d.weightsMode());
            assertFalse(d.biasFirst());
            assertEquals(1.0f / (float) Math.sqrt(8), d.scale());
            assertEquals(-1.0, d.param(Param.WINDOW_LEFT));
            assertEquals(8.0, d.param(Param.HEAD_DIM_V));
        }
        try (AttentionDesc d = AttentionDesc.builder().batch(2).heads(4, 2).seqLen(3, 5).headDim(8)
                .causal(Causal.BOTTOM_RIGHT).scale(0.3f).window(3, 1).softcap(2.5f)
                .alibi(Alibi.STANDARD).softmaxPlusOne().headDimV(5).weightsMode(WeightsMode.CAPPED)
                .biasFirst().build()) {
            assertEquals(Causal.BOTTOM_RIGHT, d.causal());
            assertEquals(0.3f, d.scale());
            assertEquals(3, d.windowLeft());
            assertEquals(1, d.windowRight());
            assertEquals(2.5f, d.softcap());
            assertEquals(Alibi.STANDARD, d.alibi());
            assertTrue(d.softmaxPlusOne());
            assertEquals(5, d.headDimV());
            assertEquals(WeightsMode.CAPPED, d.weightsMode());
            assertTrue(d.biasFirst());
            assertEquals(2.0, d.param(Param.CAUSAL));
            assertEquals((double) 0.3f, d.param(Param.SCALE));
            assertEquals(2.5, d.param(Param.SOFTCAP));
            assertEquals(3.0, d.param(Param.WEIGHTS_MODE));
            // headDimV sizes V and OUT: [2][2][5][5] and [2][4][3][5].
            assertEquals(2 * 2 * 5 * 5, d.requiredLen(Operand.V));
            assertEquals(2 * 4 * 3 * 5, d.requiredLen(Operand.OUT));
            assertEquals(2 * 4 * 3 * 5, d.requiredLen(Operand.BIAS));
            assertEquals(4, d.requiredLen(Operand.ALIBI_SLOPES));
            assertEquals(4, d.requiredLen(Operand.SINKS));
            assertEquals(2 * 3, d.requiredLen(Operand.QUERY_VALID));
            assertEquals(2, d.requiredLen(Operand.SEQ_LENS_K));
            assertEquals(2 * 4 * 5, d.requiredLen(Operand.KEY_MASS));
            assertTrue(d.toString().contains("window=(3, 1)"), d.toString());
        }
        // The generic setter: integers and doubles, last one wins; the typed getters agree.
        try (AttentionDesc d = AttentionDesc.builder().seqLen(4).headDim(4).window(1, 1)
                .param(Param.WINDOW_LEFT, 7L).param(Param.SOFTCAP, 1.5).param(Param.SCALE, 2L)
                .param(Param.ALIBI, 2.0).param(Param.BIAS_FIRST, 1L).build()) {
            assertEquals(7, d.windowLeft());
            assertEquals(1, d.windowRight());
            assertEquals(1.5f, d.softcap());
            assertEquals(2.0f, d.scale());
            assertEquals(Alibi.STANDARD, d.alibi());
            assertTrue(d.biasFirst());
        }
        // Kinds and ranges come from attn_param_bounds.
        assertFalse(Param.WINDOW_LEFT.isFloat());
        assertEquals(-1.0, Param.WINDOW_LEFT.min());
        assertEquals(2147483647.0, Param.WINDOW_LEFT.max());
        assertTrue(Param.SCALE.isFloat());
        assertEquals(Float.MAX_VALUE, Param.SCALE.max());
        assertEquals(0.0, Param.SOFTCAP.min());
        assertEquals(WeightsMode.values().length - 1, Param.WEIGHTS_MODE.max());
        assertEquals(1.0, Param.HEAD_DIM_V.min());
    }

    /** True when this CPU has AVX512-FP16 (Linux: the avx512_fp16 flag of /proc/cpuinfo). */
    static boolean cpuHasAvx512Fp16() {
        try {
            for (String line : java.nio.file.Files.readAllLines(java.nio.file.Paths.get("/proc/cpuinfo"))) {
                if (line.startsWith("flags") && Arrays.asList(line.split("\\s+")).contains("avx512_fp16")) {
                    return true;
                }
            }
        } catch (java.io.IOException e) {
            // not Linux: unknown, so the difference from EXACT is not asserted
        }
        return false;
    }

    @Test
    void computeDefaultsToExactAndRoundTrips() {
        assertEquals(14, Param.COMPUTE.code());
        assertEquals(0, Compute.EXACT.code());
        assertEquals(1, Compute.FP16.code());
        assertFalse(Param.COMPUTE.isFloat());
        assertEquals(0.0, Param.COMPUTE.min());
        assertEquals(Compute.values().length - 1, Param.COMPUTE.max());
        try (AttentionDesc d = AttentionDesc.builder().seqLen(4).headDim(8).build()) {
            assertEquals(Compute.EXACT, d.compute());
            assertEquals(0.0, d.param(Param.COMPUTE));
            assertFalse(d.toString().contains("compute"), d.toString());
        }
        try (AttentionDesc d = AttentionDesc.builder().seqLen(4).headDim(8).compute(Compute.FP16).build()) {
            assertEquals(Compute.FP16, d.compute());
            assertEquals(1.0, d.param(Param.COMPUTE));
            assertTrue(d.toString().contains("compute=FP16"), d.toString());
        }
        try (AttentionDesc d = AttentionDesc.builder().seqLen(4).headDim(8).param(Param.COMPUTE, 1L)
                .compute(Compute.EXACT).build()) {
            assertEquals(Compute.EXACT, d.compute(), "last one wins");
        }
        try (AttentionDesc d = AttentionDesc.builder().seqLen(4).headDim(8).param(Param.COMPUTE, 1.0).build()) {
            assertEquals(Compute.FP16, d.compute());
        }
    }

    @Test
    void computeRefusesAnInvalidValue() {
        AttentionDesc.Builder b = AttentionDesc.builder().seqLen(4).headDim(8);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> b.param(Param.COMPUTE, 2));
        assertMentions(e.getMessage(), "ATTN_PARAM_COMPUTE", "2");
        e = assertThrows(IllegalArgumentException.class, () -> b.param(Param.COMPUTE, 2.0));
        assertMentions(e.getMessage(), "ATTN_PARAM_COMPUTE", "2");
        // The library's own check (past the Java one): its message names the parameter too.
        long[] dh = new long[1];
        AttnNative.attn_desc_create(dh, 1, 1, 1, 4, 4, 8);
        try {
            AttentionException ae = assertThrows(AttentionException.class,
                    () -> AttnNative.attn_desc_set_int(dh[0], attn_param.ATTN_PARAM_COMPUTE, 2));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "ATTN_PARAM_COMPUTE", "2");
        } finally {
            AttnNative.attn_desc_destroy(dh[0]);
        }
        // The refused value left the builder as it was.
        try (AttentionDesc d = b.build()) {
            assertEquals(Compute.EXACT, d.compute());
        }
    }

    @Test
    void computeFp16StaysCloseToExactOnAPrefill() {
        SplittableRandom g = new SplittableRandom(1400);
        int n = 1 * 2 * 64 * 32;
        float[] q = new float[n], k = new float[n], v = new float[n];
        for (float[] a : new float[][] {q, k, v}) {
            for (int i = 0; i < n; i++) {
                a[i] = (float) (2 * g.nextDouble() - 1);
            }
        }
        float[] exact, fp16;
        AttentionDesc.Builder b = AttentionDesc.builder().batch(1).heads(2).seqLen(64, 64).headDim(32);
        try (AttentionDesc d = b.build()) {
            exact = d.forward(q, k, v, null, null);
        }
        try (AttentionDesc d = b.compute(Compute.FP16).build()) {
            fp16 = d.forward(q, k, v, null, null);
        }
        double worst = 0;
        int differ = 0;
        for (int i = 0; i < n; i++) {
            worst = Math.max(worst, Math.abs(fp16[i] - exact[i]));
            if (Float.floatToRawIntBits(fp16[i]) != Float.floatToRawIntBits(exact[i])) {
                differ++;
            }
        }
        assertTrue(worst <= 1e-2, "max |fp16 - exact| = " + worst);
        // With AVX512-FP16 (and the kernels not capped below avx512: attn_isa() "avx512", or
        // "avx512fp16" where the library names that level) the fast path runs: its rounding shows.
        if (cpuHasAvx512Fp16() && Attention.isa().startsWith("avx512")) {
            assertTrue(differ > 0, "FP16 gave EXACT's bits: the fast path did not run");
        }
    }

    @Test
    void defaultScaleIsExactlyTheLibrarysFloat() {
        // 1/sqrtf(d) in float arithmetic, as the library computes it; (float)(1/sqrt((double)d))
        // differs from it by an ulp for these (and many other) head dims.
        for (int hd : new int[] {6, 7, 17, 96}) {
            float lib = 1.0f / (float) Math.sqrt(hd);
            assertNotEquals(lib, (float) (1.0 / Math.sqrt(hd)), "head_dim " + hd);
            try (AttentionDesc d = AttentionDesc.builder().seqLen(1).headDim(hd)
                    .weightsMode(WeightsMode.SCORES).build()) {
                assertEquals(Float.floatToRawIntBits(lib), Float.floatToRawIntBits(d.scale()), "head_dim " + hd);
                assertEquals((double) lib, d.param(Param.SCALE));
                // The kernels multiply by this very float: q = k = e0 gives the score scale * 1.
                float[] e0 = new float[hd];
                e0[0] = 1;
                float[] w = d.weights(e0, e0, null, null);
                assertEquals(Float.floatToRawIntBits(d.scale()), Float.floatToRawIntBits(w[0]), "head_dim " + hd);
            }
        }
        for (int hd = 1; hd <= 1024; hd++) {
            try (AttentionDesc d = AttentionDesc.builder().seqLen(1).headDim(hd).build()) {
                assertEquals(1.0f / (float) Math.sqrt(hd), d.scale(), "head_dim " + hd);
            }
        }
    }

    @Test
    void slidingWindowMatchesTheReference() {
        int[][] windows = {{2, 1}, {0, 0}, {3, -1}, {-1, 2}};
        for (Causal causal : Causal.values()) {
            for (int[] win : windows) {
                for (int[] sizes : new int[][] {{6, 11}, {9, 5}}) {
                    Reference ref = new Reference(2, 4, 2, sizes[0], sizes[1], 8, causal, 0.4)
                            .window(win[0], win[1]);
                    Reference.Inputs in = inputs(ref, 100);
                    in.keyValid = bools(7, 2 * sizes[1], 0.8);
                    check(ref, in, causal + " window " + Arrays.toString(win) + " " + Arrays.toString(sizes));
                }
            }
        }
    }

    @Test
    void softcapWithBiasInBothOrders() {
        for (boolean first : new boolean[] {false, true}) {
            Reference ref = new Reference(2, 2, 1, 5, 7, 8, Causal.TOP_LEFT, 1.5).softcap(2.5);
            if (first) {
                ref.biasFirst();
            }
            Reference.Inputs in = inputs(ref, 200);
            in.bias = Reference.random(201, ref.requiredLen(4));
            for (int i = 0; i < in.bias.length; i++) {
                in.bias[i] *= 3;
            }
            check(ref, in, "biasFirst " + first);
        }
        // Softcap alone, with a large scale so the cap bites.
        Reference ref = new Reference(1, 2, 2, 6, 9, 16, Causal.NONE, 2.0).softcap(5.0);
        check(ref, inputs(ref, 210), "softcap only");
    }

    @Test
    void minusInfinityBiasHidesItsKeyInBothOrders() {
        // attn.h: "a -INFINITY bias still hides its key in both orders" (softcap(-inf) is not
        // -softcap), on every kernel.
        try {
            for (String isa : new String[] {"scalar", "sse2", "avx2", "avx512", "avx512fp16"}) {
                try {
                    Attention.setIsa(isa);
                } catch (AttentionException e) {
                    continue; // not on this CPU
                }
                for (boolean first : new boolean[] {false, true}) {
                    Reference ref = new Reference(2, 2, 1, 5, 7, 8, Causal.TOP_LEFT, 1.5).softcap(2.5);
                    if (first) {
                        ref.biasFirst();
                    }
                    Reference.Inputs in = inputs(ref, 220);
                    in.bias = Reference.random(221, ref.requiredLen(4));
                    in.bias[15] = Float.NEGATIVE_INFINITY; // (b0, h0, i2, j1), visible by causality
                    Got g = check(ref, in, isa + ", biasFirst " + first);
                    assertEquals(0.0f, g.w[15], isa + ", biasFirst " + first + ": the key is hidden");
                }
            }
        } finally {
            Attention.setIsa(null);
        }
    }

    @Test
    void biasStridesBroadcast() {
        // [batch][heads][seq_q][seq_k] with the batch and head strides 0: one [seq_q][seq_k] bias.
        Reference ref = new Reference(2, 4, 2, 4, 6, 8, Causal.TOP_LEFT, 0.35).strides(4, 0, 0, 6);
        Reference.Inputs in = inputs(ref, 300);
        in.bias = Reference.random(301, ref.requiredLen(4));
        assertEquals(24, in.bias.length);
        check(ref, in, "bias broadcast over batch and heads");
        // Rows broadcast (row stride 0): one bias row per (batch, head).
        Reference rows = new Reference(2, 2, 2, 5, 6, 8, Causal.NONE, 0.35).strides(4, 12, 6, 0);
        Reference.Inputs in2 = inputs(rows, 310);
        in2.bias = Reference.random(311, rows.requiredLen(4));
        check(rows, in2, "bias broadcast over rows");
    }

    @Test
    void alibiStandardAndOperandSlopes() {
        for (int heads : new int[] {1, 3, 5, 8, 12}) {
            Reference ref = new Reference(1, heads, 1, 3, 9, 4, Causal.TOP_LEFT, 0.5)
                    .alibi(Alibi.STANDARD);
            check(ref, inputs(ref, 400 + heads), "standard slopes, " + heads + " heads");
        }
        Reference br = new Reference(3, 5, 1, 3, 10, 8, Causal.BOTTOM_RIGHT, 0.35).alibi(Alibi.STANDARD);
        Reference.Inputs in = inputs(br, 420);
        in.seqLensK = new int[] {10, 4, 7}; // diag(i) follows each batch entry's key length
        check(br, in, "standard slopes, bottom-right with key lengths");
        Reference op = new Reference(2, 3, 3, 6, 6, 8, Causal.TOP_LEFT, 0.35).alibi(Alibi.OPERAND);
        Reference.Inputs in2 = inputs(op, 430);
        in2.alibiSlopes = new float[] {0.5f, 0.25f, 0.0625f};
        check(op, in2, "operand slopes");
    }

    @Test
    void sinksAndPlusOne() {
        Reference ref = new Reference(2, 4, 2, 5, 6, 8, Causal.NONE, 0.35);
        Reference.Inputs in = inputs(ref, 500);
        in.sinks = new float[] {1.5f, -2f, 0f, 3f};
        in.allowed = new boolean[5 * 6];
        Arrays.fill(in.allowed, true);
        Arrays.fill(in.allowed, 6, 12, false); // query 1 sees no key: zero row even with a sink
        Got g = check(ref, in, "sinks");
        assertEquals(Float.NEGATIVE_INFINITY, g.lse[1]);
        for (int x = 0; x < 8; x++) {
            assertEquals(0.0f, g.out[8 + x]);
        }
        double sum = 0;
        for (int j = 0; j < 6; j++) {
            sum += g.w[j];
        }
        assertTrue(sum < 0.999, "part of the mass went to the sink: " + sum);

        Reference plus = new Reference(3, 2, 2, 4, 5, 8, Causal.TOP_LEFT, 0.35).plusOne();
        Reference.Inputs in2 = inputs(plus, 510);
        in2.keyValid = bools(511, 15, 0.7);
        check(plus, in2, "softmax plus one");

        // Sinks cannot be combined with the "+1" softmax: the library's error names them.
        try (AttentionDesc d = plus.builder().build(); AttentionArgs a = d.args()) {
            a.set(Operand.Q, in2.q).set(Operand.K, in2.k).set(Operand.V, in2.v)
                    .set(Operand.OUT, new float[(int) d.requiredLen(Operand.OUT)])
                    .set(Operand.SINKS, new float[2]);
            AttentionException e = assertThrows(AttentionException.class, () -> a.run(Op.FORWARD));
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertMentions(e.libraryMessage(), "sinks");
        }
    }

    @Test
    void queryPaddingAndPerBatchKeyLengths() {
        Reference ref = new Reference(3, 4, 2, 6, 10, 8, Causal.BOTTOM_RIGHT, 0.35);
        Reference.Inputs in = inputs(ref, 600);
        in.queryValid = bools(601, 18, 0.7);
        in.queryValid[0] = false;
        in.seqLensK = new int[] {10, 0, 7};
        // Padding keys (j >= seqLensK[b]) are never read: NaN there reaches nothing.
        for (int kh = 0; kh < 2; kh++) {
            for (int j = 7; j < 10; j++) {
                in.k[ref.at(1, 2, kh, j) + 3] = Float.NaN;
                in.v[ref.at(2, 2, kh, j) + 1] = Float.NaN;
            }
        }
        Got g = check(ref, in, "query_valid + seq_lens_k");
        for (int h = 0; h < 4; h++) {
            for (int i = 0; i < 6; i++) {
                assertEquals(Float.NEGATIVE_INFINITY, g.lse[(1 * 4 + h) * 6 + i], "batch 1 has no key");
            }
            assertEquals(Float.NEGATIVE_INFINITY, g.lse[h * 6], "padded query 0");
        }
        // Without causal: plain per-batch lengths; seq_q = 1 decode.
        Reference dec = new Reference(4, 4, 2, 1, 30, 16, Causal.BOTTOM_RIGHT, 0.25);
        Reference.Inputs in2 = inputs(dec, 610);
        in2.seqLensK = new int[] {30, 1, 17, 29};
        check(dec, in2, "decode with key lengths");
    }

    @Test
    void headDimVWithStrides() {
        Reference ref = new Reference(2, 2, 1, 6, 8, 24, Causal.TOP_LEFT, 0.2).headDimV(16);
        check(ref, inputs(ref, 700), "head_dim 24, head_dim_v 16");
        // BSHD V and OUT rows of head_dim_v 20 (after headDimV, as the builder applies it).
        Reference bshd = new Reference(2, 4, 2, 5, 7, 8, Causal.NONE, 0.3).headDimV(20)
                .strides(0, 160, 8, 32).strides(1, 112, 8, 16).strides(2, 280, 20, 40)
                .strides(3, 400, 20, 80);
        check(bshd, inputs(bshd, 710), "head_dim_v 20, BSHD");
    }

    @Test
    void keyMassWithAndWithoutLse() {
        Reference ref = new Reference(2, 4, 1, 6, 12, 8, Causal.BOTTOM_RIGHT, 0.35).window(5, -1);
        Reference.Inputs in = inputs(ref, 800);
        in.keyValid = bools(801, 24, 0.75);
        Got g = check(ref, in, "key mass");
        try (AttentionDesc d = ref.builder().build(); AttentionArgs a = d.args()) {
            float[] out = new float[(int) d.requiredLen(Operand.OUT)];
            float[] mass = new float[(int) d.requiredLen(Operand.KEY_MASS)];
            Arrays.fill(mass, 5f); // written in full
            a.set(Operand.Q, in.q).set(Operand.K, in.k).set(Operand.V, in.v)
                    .set(Operand.KEY_VALID, in.keyValid).set(Operand.OUT, out)
                    .set(Operand.KEY_MASS, mass).run(Op.FORWARD);
            assertTrue(sameBits(g.mass, mass), "key mass without lse bound");
            assertTrue(sameBits(g.out, out));
        }
    }

    @Test
    void weightsModesWriteTheScoreStages() {
        for (WeightsMode mode : WeightsMode.values()) {
            Reference ref = new Reference(2, 2, 1, 5, 7, 6, Causal.TOP_LEFT, 0.7).window(3, -1)
                    .softcap(1.5).biasFirst().weightsMode(mode);
            Reference.Inputs in = inputs(ref, 900);
            in.keyValid = new boolean[14];
            Arrays.fill(in.keyValid, true);
            in.keyValid[13] = false;
            in.bias = Reference.random(901, ref.requiredLen(4));
            double[] want = ref.run(in).stages[mode.ordinal()];
            try (AttentionDesc d = ref.builder().build()) {
                assertEquals(mode, d.weightsMode());
                float[] w = new float[(int) d.requiredLen(Operand.WEIGHTS)];
                try (AttentionArgs a = d.args()) {
                    a.set(Operand.Q, in.q).set(Operand.K, in.k).set(Operand.KEY_VALID, in.keyValid)
                            .set(Operand.BIAS, in.bias).set(Operand.WEIGHTS, w).run(Op.WEIGHTS);
                }
                assertNull(Reference.compare("weights (" + mode + ")", w, want, TOL));
                // The 0.1 call follows the descriptor's mode too.
                float[] w01 = d.weights(in.q, in.k, in.keyValid, null);
                if (mode == WeightsMode.SCORES) {
                    assertTrue(sameBits(w, w01), "SCORES ignores the bias");
                }
            }
        }
    }

    // ------------------------------------------------------------------ binding

    @Test
    void arraysByteMasksAndDirectBuffersGiveTheSameBits() {
        Reference ref = new Reference(2, 4, 2, 7, 9, 8, Causal.BOTTOM_RIGHT, 0.35).window(4, 1)
                .softcap(3.0).alibi(Alibi.STANDARD);
        Reference.Inputs in = inputs(ref, 1000);
        in.keyValid = bools(1001, 18, 0.8);
        in.allowed = bools(1002, 63, 0.9);
        in.queryValid = bools(1003, 14, 0.85);
        in.bias = Reference.random(1004, ref.requiredLen(4));
        in.sinks = new float[] {0.5f, -1f, 2f, 0f};
        in.seqLensK = new int[] {9, 6};
        Got g = check(ref, in, "all operands");
        try (AttentionDesc d = ref.builder().build(); AttentionArgs a = d.args()) {
            // byte[] masks with any nonzero byte for true.
            float[] out = new float[g.out.length], lse = new float[g.lse.length], w = new float[g.w.length],
                    mass = new float[g.mass.length];
            a.set(Operand.Q, in.q).set(Operand.K, in.k).set(Operand.V, in.v)
                    .set(Operand.KEY_VALID, bytes(in.keyValid, (byte) 7))
                    .set(Operand.ALLOWED, bytes(in.allowed, (byte) -1))
                    .set(Operand.QUERY_VALID, bytes(in.queryValid, (byte) 2))
                    .set(Operand.BIAS, in.bias).set(Operand.SINKS, in.sinks)
                    .set(Operand.SEQ_LENS_K, in.seqLensK).set(Operand.OUT, out).set(Operand.LSE, lse)
                    .set(Operand.KEY_MASS, mass).set(Operand.WEIGHTS, w);
            a.run(Op.FORWARD);
            a.run(Op.WEIGHTS);
            assertTrue(sameBits(g.out, out) && sameBits(g.lse, lse) && sameBits(g.w, w)
                    && sameBits(g.mass, mass), "byte[] masks");

            // Direct buffers, at nonzero positions.
            FloatBuffer bo = floats(out.length, 2), bl = floats(lse.length, 1), bw = floats(w.length, 3),
                    bm = floats(mass.length, 0);
            a.clear();
            assertFalse(a.isSet(Operand.Q));
            a.set(Operand.Q, floats(in.q, 1)).set(Operand.K, floats(in.k, 2)).set(Operand.V, floats(in.v, 0))
                    .set(Operand.KEY_VALID, byteBuffer(in.keyValid, 3))
                    .set(Operand.ALLOWED, byteBuffer(in.allowed, 0))
                    .set(Operand.QUERY_VALID, byteBuffer(in.queryValid, 1))
                    .set(Operand.BIAS, floats(in.bias, 5)).set(Operand.SINKS, floats(in.sinks, 1))
                    .set(Operand.SEQ_LENS_K, ints(in.seqLensK, 1))
                    .set(Operand.OUT, bo).set(Operand.LSE, bl).set(Operand.KEY_MASS, bm)
                    .set(Operand.WEIGHTS, bw);
            assertTrue(a.isSet(Operand.SEQ_LENS_K));
            a.run(Op.FORWARD);
            a.run(Op.WEIGHTS);
            assertEquals(2, bo.position(), "positions are not moved");
            assertTrue(sameBits(g.out, rest(bo)) && sameBits(g.lse, rest(bl)) && sameBits(g.w, rest(bw))
                    && sameBits(g.mass, rest(bm)), "direct buffers");
        }
    }

    static byte[] bytes(boolean[] a, byte truth) {
        byte[] b = new byte[a.length];
        for (int i = 0; i < a.length; i++) {
            b[i] = a[i] ? truth : 0;
        }
        return b;
    }

    static FloatBuffer floats(int n, int position) {
        FloatBuffer f = ByteBuffer.allocateDirect(4 * (n + position)).order(ByteOrder.nativeOrder())
                .asFloatBuffer();
        f.position(position);
        return f;
    }

    static FloatBuffer floats(float[] a, int position) {
        FloatBuffer f = floats(a.length, position);
        f.put(a).position(position);
        return f;
    }

    static ByteBuffer byteBuffer(boolean[] a, int position) {
        ByteBuffer b = ByteBuffer.allocateDirect(a.length + position);
        b.position(position);
        for (boolean x : a) {
            b.put((byte) (x ? 1 : 0));
        }
        return b.position(position);
    }

    static IntBuffer ints(int[] a, int position) {
        IntBuffer b = ByteBuffer.allocateDirect(4 * (a.length + position)).order(ByteOrder.nativeOrder())
                .asIntBuffer();
        b.position(position);
        b.put(a).position(position);
        return b;
    }

    static float[] rest(FloatBuffer f) {
        float[] a = new float[f.remaining()];
        f.duplicate().get(a);
        return a;
    }

    @Test
    void longerArraysAreAcceptedAndOnlyTheirPrefixIsUsed() {
        Reference ref = new Reference(2, 2, 1, 4, 6, 8, Causal.TOP_LEFT, 0.35);
        Reference.Inputs in = inputs(ref, 1100);
        Got g = check(ref, in, "exact lengths");
        try (AttentionDesc d = ref.builder().build(); AttentionArgs a = d.args()) {
            float[] q = Arrays.copyOf(in.q, in.q.length + 3), k = Arrays.copyOf(in.k, in.k.length + 1),
                    v = Arrays.copyOf(in.v, in.v.length + 9);
            q[q.length - 1] = Float.NaN;
            k[k.length - 1] = Float.NaN;
            v[v.length - 1] = Float.NaN;
            float[] out = new float[g.out.length + 4], lse = new float[g.lse.length + 2],
                    w = new float[g.w.length + 1];
            Arrays.fill(out, 9f);
            Arrays.fill(lse, 9f);
            Arrays.fill(w, 9f);
            boolean[] qv = new boolean[2 * 4 + 5];
            Arrays.fill(qv, true);
            a.set(Operand.Q, q).set(Operand.K, k).set(Operand.V, v).set(Operand.QUERY_VALID, qv)
                    .set(Operand.SEQ_LENS_K, new int[] {6, 6, -1}).set(Operand.OUT, out)
                    .set(Operand.LSE, lse).set(Operand.WEIGHTS, w);
            a.run(Op.FORWARD);
            a.run(Op.WEIGHTS);
            assertTrue(sameBits(g.out, Arrays.copyOf(out, g.out.length)));
            assertTrue(sameBits(g.lse, Arrays.copyOf(lse, g.lse.length)));
            assertTrue(sameBits(g.w, Arrays.copyOf(w, g.w.length)));
            for (int i = g.out.length; i < out.length; i++) {
                assertEquals(9f, out[i], "out tail is not written");
            }
            assertEquals(9f, lse[lse.length - 1]);
            assertEquals(9f, w[w.length - 1]);
        }
    }

    @Test
    void bindingErrorsNameTheOperand() {
        try (AttentionDesc d = AttentionDesc.builder().batch(2).heads(4, 2).seqLen(3, 5).headDim(4)
                .build(); AttentionArgs a = d.args()) {
            // Element types.
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> a.set(Operand.KEY_VALID, new float[10]));
            assertMentions(e.getMessage(), "key_valid", "mask", "float");
            e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.Q, new boolean[96]));
            assertMentions(e.getMessage(), "q", "floats");
            e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.SEQ_LENS_K, new float[2]));
            assertMentions(e.getMessage(), "seq_lens_k", "ints");
            e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.BIAS, new int[120]));
            assertMentions(e.getMessage(), "bias");
            // Lengths: shorter by one, and empty (an optional operand too).
            Object[][] shortOnes = {{Operand.Q, new float[95], "96"}, {Operand.K, new float[79], "80"},
                {Operand.V, new float[0], "80"}, {Operand.OUT, new float[95], "96"},
                {Operand.LSE, new float[0], "24"}, {Operand.WEIGHTS, new float[119], "120"},
                {Operand.KEY_VALID, new boolean[9], "10"}, {Operand.ALLOWED, new byte[0], "15"},
                {Operand.BIAS, new float[119], "120"}, {Operand.ALIBI_SLOPES, new float[3], "4"},
                {Operand.SINKS, new float[0], "4"}, {Operand.QUERY_VALID, new boolean[5], "6"},
                {Operand.SEQ_LENS_K, new int[1], "2"}, {Operand.KEY_MASS, new float[39], "40"}};
            for (Object[] c : shortOnes) {
                Operand op = (Operand) c[0];
                Object data = c[1];
                e = assertThrows(IllegalArgumentException.class, () -> VariantsTest.bind(a, op, data), op.toString());
                assertMentions(e.getMessage(), op.toString().toLowerCase(), "needs", (String) c[2]);
                assertFalse(a.isSet(op), op + " stays unbound");
            }
            // Buffers: heap, byte order, read-only output, alignment, remaining.
            e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.Q, FloatBuffer.allocate(96)));
            assertMentions(e.getMessage(), "q", "direct");
            ByteOrder other = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN ? ByteOrder.BIG_ENDIAN
                    : ByteOrder.LITTLE_ENDIAN;
            e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.SEQ_LENS_K,
                    ByteBuffer.allocateDirect(8).order(other).asIntBuffer()));
            assertMentions(e.getMessage(), "seq_lens_k", "byte", "order");
            e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.SEQ_LENS_K, IntBuffer.allocate(2)));
            assertMentions(e.getMessage(), "seq_lens_k", "direct");
            e = assertThrows(IllegalArgumentException.class,
                    () -> a.set(Operand.OUT, floats(96, 0).asReadOnlyBuffer()));
            assertMentions(e.getMessage(), "out", "read");
            e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.ALLOWED, ByteBuffer.allocate(15)));
            assertMentions(e.getMessage(), "allowed", "direct");
            e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.BIAS, floats(120, 1).limit(120)));
            assertMentions(e.getMessage(), "bias", "119", "120");
            a.set(Operand.Q, floats(96, 0).asReadOnlyBuffer()); // read-only inputs are fine
            a.unset(Operand.Q);
            // null which / op.
            assertThrows(NullPointerException.class, () -> a.set(null, new float[1]));
            assertThrows(NullPointerException.class, () -> a.unset(null));
            assertThrows(NullPointerException.class, () -> a.run(null));
            assertThrows(NullPointerException.class, () -> a.isSet(null));
            assertTrue(a.toString().startsWith("AttentionArgs["), a.toString());
        }
    }

    @Test
    void runErrorsNameTheOperand() {
        try (AttentionDesc d = AttentionDesc.builder().batch(2).heads(4, 2).seqLen(3, 5).headDim(4)
                .alibi(Alibi.OPERAND).build(); AttentionArgs a = d.args()) {
            float[] q = new float[96], kv = new float[80], out = new float[96], w = new float[120];
            NullPointerException npe = assertThrows(NullPointerException.class, () -> a.run(Op.FORWARD));
            assertMentions(npe.getMessage(), "q", "bound");
            a.set(Operand.Q, q).set(Operand.K, kv);
            npe = assertThrows(NullPointerException.class, () -> a.run(Op.FORWARD));
            assertMentions(npe.getMessage(), "v");
            npe = assertThrows(NullPointerException.class, () -> a.run(Op.WEIGHTS));
            assertMentions(npe.getMessage(), "weights");
            a.set(Operand.V, kv);
            npe = assertThrows(NullPointerException.class, () -> a.run(Op.FORWARD));
            assertMentions(npe.getMessage(), "out");
            a.set(Operand.OUT, out).set(Operand.WEIGHTS, w);
            // The library's checks: ALiBi slopes missing, seq_lens_k out of range, BACKWARD.
            AttentionException e = assertThrows(AttentionException.class, () -> a.run(Op.FORWARD));
            assertEquals(Status.NULL_POINTER, e.status());
            assertMentions(e.libraryMessage(), "alibi_slopes");
            a.set(Operand.ALIBI_SLOPES, new float[4]);
            a.run(Op.FORWARD);
            a.run(Op.WEIGHTS);
            a.set(Operand.SEQ_LENS_K, new int[] {5, 6});
            e = assertThrows(AttentionException.class, () -> a.run(Op.FORWARD));
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertMentions(e.libraryMessage(), "seq_lens_k", "6");
            a.set(Operand.SEQ_LENS_K, new int[] {-1, 0});
            e = assertThrows(AttentionException.class, () -> a.run(Op.WEIGHTS));
            assertMentions(e.libraryMessage(), "seq_lens_k", "-1");
            a.unset(Operand.SEQ_LENS_K);
            // BACKWARD with a forward's operands only: the face asks for lse, then the gradient of
            // out (StorageTest covers the rest of the backward's rules).
            npe = assertThrows(NullPointerException.class, () -> a.run(Op.BACKWARD));
            assertMentions(npe.getMessage(), "lse", "BACKWARD");
            a.set(Operand.LSE, new float[(int) d.requiredLen(Operand.LSE)]);
            npe = assertThrows(NullPointerException.class, () -> a.run(Op.BACKWARD));
            assertMentions(npe.getMessage(), "dout", "bound");
        }
        try (AttentionDesc d = AttentionDesc.builder().seqLen(2).headDim(2).build(); AttentionArgs a = d.args()) {
            float[] x = new float[4];
            a.set(Operand.Q, x).set(Operand.K, x).set(Operand.V, x).set(Operand.OUT, new float[4])
                    .set(Operand.ALIBI_SLOPES, new float[1]);
            AttentionException e = assertThrows(AttentionException.class, () -> a.run(Op.FORWARD));
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertMentions(e.libraryMessage(), "alibi_slopes");
        }
    }

    @Test
    void outputsOverlappingAnotherOperandAreTheLibrarysError() {
        try (AttentionDesc d = AttentionDesc.builder().batch(2).heads(4, 2).seqLen(3, 5).headDim(4)
                .build(); AttentionArgs a = d.args()) {
            float[] q = Reference.random(1, 96), k = Reference.random(2, 80), v = Reference.random(3, 80);
            float[] big = new float[120];
            a.set(Operand.Q, q).set(Operand.K, k).set(Operand.V, v).set(Operand.OUT, q);
            AttentionException e = assertThrows(AttentionException.class, () -> a.run(Op.FORWARD));
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertMentions(e.libraryMessage(), "out", "overlaps", "q");
            a.set(Operand.OUT, new float[96]).set(Operand.LSE, k);
            e = assertThrows(AttentionException.class, () -> a.run(Op.FORWARD));
            assertMentions(e.libraryMessage(), "lse", "overlaps", "k");
            a.set(Operand.LSE, big).set(Operand.OUT, big);
            e = assertThrows(AttentionException.class, () -> a.run(Op.FORWARD));
            assertMentions(e.libraryMessage(), "overlaps", "out");
            a.unset(Operand.LSE).set(Operand.OUT, new float[96]).set(Operand.KEY_MASS, v);
            e = assertThrows(AttentionException.class, () -> a.run(Op.FORWARD));
            assertMentions(e.libraryMessage(), "key_mass", "overlaps", "v");
            a.set(Operand.KEY_MASS, (float[]) null).set(Operand.BIAS, big).set(Operand.WEIGHTS, big);
            e = assertThrows(AttentionException.class, () -> a.run(Op.WEIGHTS));
            assertMentions(e.libraryMessage(), "weights", "overlaps", "bias");
            // Overlapping direct buffers (two views of one memory block).
            ByteBuffer block = ByteBuffer.allocateDirect(4 * 200).order(ByteOrder.nativeOrder());
            FloatBuffer all = block.asFloatBuffer();
            a.set(Operand.BIAS, (float[]) null).set(Operand.Q, all.duplicate().position(0).limit(96))
                    .set(Operand.OUT, all.duplicate().position(95));
            e = assertThrows(AttentionException.class, () -> a.run(Op.FORWARD));
            assertMentions(e.libraryMessage(), "out", "overlaps", "q");
        }
        // Inputs may share memory: k and v as one array give the reference's answer.
        Reference ref = new Reference(1, 2, 2, 4, 4, 4, Causal.TOP_LEFT, 0.5);
        Reference.Inputs in = inputs(ref, 1200);
        in.v = in.k;
        check(ref, in, "k and v are one array");
    }

    @Test
    void parameterErrorsNameTheParameter() {
        AttentionDesc.Builder b = AttentionDesc.builder();
        Object[][] cases = {
            {(Runnable) () -> b.window(-2, 0), "window", "left", "-2", "ATTN_PARAM_WINDOW_LEFT"},
            {(Runnable) () -> b.window(0, -5), "window", "right", "-5", "ATTN_PARAM_WINDOW_RIGHT"},
            {(Runnable) () -> b.softcap(-1f), "softcap", "ATTN_PARAM_SOFTCAP"},
            {(Runnable) () -> b.softcap(Float.NaN), "softcap", "NaN"},
            {(Runnable) () -> b.softcap(Float.POSITIVE_INFINITY), "softcap", "Infinity"},
            {(Runnable) () -> b.headDimV(0), "headDimV", "0", "ATTN_PARAM_HEAD_DIM_V"},
            {(Runnable) () -> b.scale(Float.NEGATIVE_INFINITY), "scale", "ATTN_PARAM_SCALE"},
            {(Runnable) () -> b.param(Param.CAUSAL, 3), "causal", "3"},
            {(Runnable) () -> b.param(Param.ALIBI, 3), "alibi", "3"},
            {(Runnable) () -> b.param(Param.SOFTMAX_PLUS_ONE, 2), "softmax_plus_one", "2"},
            {(Runnable) () -> b.param(Param.WEIGHTS_MODE, WeightsMode.values().length), "weights_mode"},
            {(Runnable) () -> b.param(Param.BIAS_FIRST, -1), "bias_first", "-1"},
            {(Runnable) () -> b.param(Param.HEAD_DIM_V, 1L << 31), "head_dim_v", "2147483648"},
            {(Runnable) () -> b.param(Param.WINDOW_LEFT, 1.5), "window_left", "integer"},
            {(Runnable) () -> b.param(Param.SCALE, 1e39), "scale", "ATTN_PARAM_SCALE"},
            {(Runnable) () -> b.param(Param.SOFTCAP, Double.NaN), "softcap", "NaN"},
            // Raw integers for enums: no truncation to 32 bits (2^32 is not 0).
            {(Runnable) () -> Causal.fromCode(1L << 32), "causal", "4294967296"},
            {(Runnable) () -> Causal.fromCode(-1), "causal", "-1"},
            {(Runnable) () -> Alibi.fromCode(3), "alibi", "3"},
            {(Runnable) () -> WeightsMode.fromCode(-1), "weightsMode", "-1"},
            {(Runnable) () -> Op.fromCode(3), "op", "3"},
            {(Runnable) () -> Operand.fromCode(27), "operand", "27"},
            {(Runnable) () -> Operand.fromCode((1L << 32) + 1), "operand", "4294967297"},
            {(Runnable) () -> Compute.fromCode(2), "compute", "2"},
            {(Runnable) () -> Param.fromCode(15), "param", "15"},
        };
        for (Object[] c : cases) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, ((Runnable) c[0])::run,
                    String.valueOf(c[1]));
            String[] words = new String[c.length - 1];
            for (int i = 1; i < c.length; i++) {
                words[i - 1] = (String) c[i];
            }
            assertMentions(e.getMessage(), words);
        }
        assertThrows(NullPointerException.class, () -> b.alibi(null));
        assertThrows(NullPointerException.class, () -> b.weightsMode(null));
        assertThrows(NullPointerException.class, () -> b.compute(null));
        assertThrows(NullPointerException.class, () -> b.param(null, 1L));
        // A refused value leaves the builder as it was.
        try (AttentionDesc d = b.seqLen(2).headDim(2).build()) {
            assertEquals(-1, d.windowLeft());
            assertEquals(-1, d.windowRight());
            assertEquals(2, d.headDimV());
        }
        // What only the library can judge: strides of an operand without strides, OUT strides
        // that do not nest rows of head_dim_v.
        AttentionException e = assertThrows(AttentionException.class,
                () -> AttentionDesc.builder().seqLen(2).headDim(2).strides(Operand.SINKS, 1, 1, 1).build());
        assertEquals(Status.INVALID_ARGUMENT, e.status());
        assertMentions(e.libraryMessage(), "which");
        e = assertThrows(AttentionException.class, () -> AttentionDesc.builder().seqLen(3).headDim(4)
                .headDimV(8).strides(Operand.OUT, 24, 24, 4).build());
        assertMentions(e.libraryMessage(), "out");
        try (AttentionDesc d = AttentionDesc.builder().batch(2).seqLen(3, 4).headDim(4)
                .strides(Operand.BIAS, 0, 0, 0).build()) {
            assertEquals(4, d.requiredLen(Operand.BIAS));
        }
    }

    @Test
    void closedObjects() {
        AttentionDesc d = AttentionDesc.builder().seqLen(2).headDim(2).build();
        AttentionArgs a = d.args();
        float[] x = new float[4];
        a.set(Operand.Q, x).set(Operand.K, x).set(Operand.V, x).set(Operand.OUT, new float[4]);
        a.run(Op.FORWARD);
        assertFalse(a.isClosed());
        a.close();
        assertTrue(a.isClosed());
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> a.run(Op.FORWARD));
        assertMentions(e.getMessage(), "AttentionArgs", "closed");
        assertThrows(IllegalStateException.class, () -> a.set(Operand.Q, x));
        assertThrows(IllegalStateException.class, a::clear);
        a.close(); // idempotent
        AttentionArgs b = d.args();
        b.set(Operand.Q, x).set(Operand.K, x).set(Operand.V, x).set(Operand.OUT, new float[4]);
        d.close();
        e = assertThrows(IllegalStateException.class, () -> b.run(Op.FORWARD));
        assertMentions(e.getMessage(), "AttentionDesc", "closed");
        e = assertThrows(IllegalStateException.class, d::args);
        assertMentions(e.getMessage(), "closed");
        assertThrows(IllegalStateException.class, () -> d.param(Param.SCALE));
        b.close();
        assertEquals(1.0f / (float) Math.sqrt(2), d.scale(), "the getters keep working after close");
    }

    @Test
    void theCleanerFreesObjectsThatAreNeverClosed() throws InterruptedException {
        long descBefore = Natives.DESC_FREED_BY_GC.get(), argsBefore = Natives.ARGS_FREED_BY_GC.get();
        long descTotal = Natives.DESC_FREED.get(), argsTotal = Natives.ARGS_FREED.get();
        // Explicit closes free once, not through the safety net, and never twice.
        AttentionDesc closed = AttentionDesc.builder().seqLen(2).headDim(2).build();
        AttentionArgs closedArgs = closed.args();
        closedArgs.close();
        closedArgs.close();
        closed.close();
        closed.close();
        assertEquals(descTotal + 1, Natives.DESC_FREED.get());
        assertEquals(argsTotal + 1, Natives.ARGS_FREED.get());
        assertEquals(descBefore, Natives.DESC_FREED_BY_GC.get());
        assertEquals(argsBefore, Natives.ARGS_FREED_BY_GC.get());

        int n = 64;
        abandon(n);
        long deadline = System.nanoTime() + 30_000_000_000L;
        while ((Natives.DESC_FREED_BY_GC.get() < descBefore + n
                || Natives.ARGS_FREED_BY_GC.get() < argsBefore + n) && System.nanoTime() < deadline) {
            System.gc();
            Thread.sleep(20);
        }
        assertTrue(Natives.DESC_FREED_BY_GC.get() >= descBefore + n,
                "descriptors freed by the Cleaner: " + (Natives.DESC_FREED_BY_GC.get() - descBefore));
        assertTrue(Natives.ARGS_FREED_BY_GC.get() >= argsBefore + n,
                "args freed by the Cleaner: " + (Natives.ARGS_FREED_BY_GC.get() - argsBefore));
    }

    /** Creates and uses n descriptors and n args objects, and drops them without closing. */
    private static void abandon(int n) {
        for (int i = 0; i < n; i++) {
            AttentionDesc d = AttentionDesc.builder().seqLen(3).headDim(4).window(1, 0).build();
            AttentionArgs a = d.args();
            float[] q = Reference.random(i, 12);
            float[] out = new float[12];
            a.set(Operand.Q, q).set(Operand.K, q).set(Operand.V, q).set(Operand.OUT, out).run(Op.FORWARD);
            assertTrue(Float.isFinite(out[11]));
        }
    }

    @Test
    void isaNamesWithNulOrNonAsciiGetTheLibrarysWording() {
        for (String name : new String[] {"avx2\0", "scalar\0avx512", "\0", "sse2\u00e9", "avx\u20ac512"}) {
            AttentionException e = assertThrows(AttentionException.class, () -> Attention.setIsa(name),
                    name);
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertTrue(e.libraryMessage().contains("is not one of scalar, sse2, avx2, avx512"),
                    e.libraryMessage());
        }
        Attention.setIsa("");
        assertTrue(Arrays.asList("scalar", "sse2", "avx2", "avx512", "avx512fp16").contains(Attention.isa()));
    }

    // ------------------------------------------------------------------ raw layer

    @Test
    void rawArgsSettersTakeDirectBuffersOnly() {
        long[] dh = new long[1], ah = new long[1];
        AttnNative.attn_desc_create(dh, 1, 1, 1, 2, 3, 2);
        AttnNative.attn_args_create(ah);
        try {
            FloatBuffer q = floats(new float[] {1, 0, 0, 1}, 0), k = floats(new float[] {1, 0, 0, 1, 1, 1}, 0),
                    v = floats(new float[] {1, 2, 3, 4, 5, 6}, 0), out = floats(4, 0);
            AttnNative.attn_args_set_f32(ah[0], attn_operand.ATTN_Q, q);
            AttnNative.attn_args_set_f32(ah[0], attn_operand.ATTN_K, k);
            AttnNative.attn_args_set_f32(ah[0], attn_operand.ATTN_V, v);
            AttnNative.attn_args_set_out_f32(ah[0], attn_operand.ATTN_OUT, out);
            ByteBuffer kv = ByteBuffer.allocateDirect(3).put(new byte[] {1, 1, 0}).flip();
            AttnNative.attn_args_set_u8(ah[0], attn_operand.ATTN_KEY_VALID, kv);
            IntBuffer lens = ints(new int[] {3}, 0);
            AttnNative.attn_args_set_i32(ah[0], attn_operand.ATTN_SEQ_LENS_K, lens);
            AttnNative.attn_run(dh[0], attn_op.ATTN_OP_FORWARD, ah[0]);
            // Query 0 = (1, 0) sees keys 0 and 1 (key 2 is padding): weights softmax(s/sqrt2 * (1, 0)).
            double w0 = 1 / (1 + Math.exp(-1 / Math.sqrt(2)));
            assertEquals(w0 * 1 + (1 - w0) * 3, out.get(0), 1e-5);
            // Arrays cannot stay bound after the call; the library's own checks still apply.
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> AttnNative.attn_args_set_f32(ah[0], attn_operand.ATTN_Q, new float[4]));
            assertMentions(e.getMessage(), "data", "direct");
            e = assertThrows(IllegalArgumentException.class,
                    () -> AttnNative.attn_args_set_f32(ah[0], attn_operand.ATTN_Q, FloatBuffer.allocate(4)));
            assertMentions(e.getMessage(), "data", "direct");
            AttentionException ae = assertThrows(AttentionException.class,
                    () -> AttnNative.attn_args_set_f32(ah[0], attn_operand.ATTN_OUT, out));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "out", "attn_args_set_out_f32");
            AttnNative.attn_args_set_f32(ah[0], attn_operand.ATTN_Q, null); // unbinds
            ae = assertThrows(AttentionException.class,
                    () -> AttnNative.attn_run(dh[0], attn_op.ATTN_OP_FORWARD, ah[0]));
            assertEquals(Status.NULL_POINTER, ae.status());
            assertMentions(ae.libraryMessage(), "q");
            AttnNative.attn_args_clear(ah[0]);
            // Getters and bounds through the out-parameter typemaps.
            long[] iv = new long[1];
            AttnNative.attn_desc_get_int(dh[0], attn_param.ATTN_PARAM_HEAD_DIM_V, iv);
            assertEquals(2, iv[0]);
            // A descriptor that ran is immutable.
            ae = assertThrows(AttentionException.class,
                    () -> AttnNative.attn_desc_set_int(dh[0], attn_param.ATTN_PARAM_WINDOW_LEFT, 1));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "desc", "used");
        } finally {
            AttnNative.attn_args_destroy(ah[0]);
            AttnNative.attn_desc_destroy(dh[0]);
        }
        long[] dh2 = new long[1];
        AttnNative.attn_desc_create(dh2, 1, 1, 1, 2, 3, 2);
        try {
            AttentionException ae = assertThrows(AttentionException.class,
                    () -> AttnNative.attn_desc_set_int(dh2[0], attn_param.ATTN_PARAM_WINDOW_LEFT, 1L << 40));
            assertMentions(ae.libraryMessage(), "ATTN_PARAM_WINDOW_LEFT");
            AttnNative.attn_desc_set_float(dh2[0], attn_param.ATTN_PARAM_SOFTCAP, 0.5);
            double[] dv = new double[1];
            AttnNative.attn_desc_get_float(dh2[0], attn_param.ATTN_PARAM_SOFTCAP, dv);
            assertEquals(0.5, dv[0]);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> AttnNative.attn_desc_get_float(dh2[0], attn_param.ATTN_PARAM_SOFTCAP, null));
            assertMentions(e.getMessage(), "value");
            int[] isFloat = new int[1];
            AttnNative.attn_param_bounds(attn_param.ATTN_PARAM_SOFTCAP, isFloat, null, null);
            assertEquals(1, isFloat[0]);
            double[] max = new double[1];
            AttnNative.attn_param_bounds(attn_param.ATTN_PARAM_CAUSAL, null, null, max);
            assertEquals(2.0, max[0]);
        } finally {
            AttnNative.attn_desc_destroy(dh2[0]);
        }
    }

    @Test
    void rawPinnedRunRefusesWrongKinds() {
        try (AttentionDesc d = AttentionDesc.builder().seqLen(2).headDim(2).build()) {
            long h = d.enter();
            try {
                float[] x = new float[4];
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_run(h, attn_op.ATTN_OP_FORWARD, 0,
                                new Object[] {x, x, x, x, null, null, new float[4]}));
                assertMentions(e.getMessage(), "key_valid", "boolean", "byte");
                e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_run(h, attn_op.ATTN_OP_FORWARD, 0,
                                new Object[] {x, "no", x, x}));
                assertMentions(e.getMessage(), "k", "float");
                long[] args = new long[1];
                AttnNative.attn_args_create(args);
                try {
                    e = assertThrows(IllegalArgumentException.class,
                            () -> AttnNative.attn_jni_run(h, attn_op.ATTN_OP_FORWARD, args[0],
                                    new Object[] {x, x, x, x, null, null, null, null, null, null, null,
                                        null, new boolean[1]}));
                    assertMentions(e.getMessage(), "seq_lens_k", "int");
                } finally {
                    AttnNative.attn_args_destroy(args[0]);
                }
                // Lengths behind the face's checks (second line of defence): the 0.1 calls take
                // none, so the wrapper checks them; attn_run checks its own.
                e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_run(h, attn_op.ATTN_OP_FORWARD, 0,
                                new Object[] {x, new float[3], x, x}));
                assertMentions(e.getMessage(), "k", "has", "3", "needs", "4");
                e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_run(h, attn_op.ATTN_OP_WEIGHTS, 0,
                                new Object[] {x, x, null, null, null, new float[3]}));
                assertMentions(e.getMessage(), "weights", "3", "4");
                e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_run(h, attn_op.ATTN_OP_FORWARD, 0,
                                new Object[] {x, x, x, x, null, null, null, null, new float[4]}));
                assertMentions(e.getMessage(), "bias", "attn_forward");
                long[] ah = new long[1];
                AttnNative.attn_args_create(ah);
                try {
                    AttentionException ae = assertThrows(AttentionException.class,
                            () -> AttnNative.attn_jni_run(h, attn_op.ATTN_OP_FORWARD, ah[0],
                                    new Object[] {x, new float[0], x, x}));
                    assertEquals(Status.INVALID_ARGUMENT, ae.status());
                    assertMentions(ae.libraryMessage(), "attn_run", "k", "0", "needs", "4");
                    // attn_simple takes no lengths either: the wrapper checks them.
                    e = assertThrows(IllegalArgumentException.class,
                            () -> AttnNative.attn_jni_simple(new float[0], x, x, 2, 2, false, null, x));
                    assertMentions(e.getMessage(), "q", "0", "4");
                    e = assertThrows(IllegalArgumentException.class,
                            () -> AttnNative.attn_jni_simple(x, x, x, 2, 2, false, new boolean[1], new float[4]));
                    assertMentions(e.getMessage(), "pad_mask", "1", "2");
                    // An empty array is "given" (not NULL): n = 0 is the library's own refusal.
                    ae = assertThrows(AttentionException.class,
                            () -> AttnNative.attn_jni_simple(new float[0], new float[0], new float[0], 0, 2,
                                    false, null, new float[0]));
                    assertMentions(ae.libraryMessage(), "n");
                } finally {
                    AttnNative.attn_args_destroy(ah[0]);
                }
            } finally {
                d.leave();
            }
        }
    }
}
