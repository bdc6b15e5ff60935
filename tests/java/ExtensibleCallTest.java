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
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;

/**
 * The extensible call (0.2) through the Java face: every parameter and operand on the shared
 * vectors (tests/vectors/variants.txt, from the project's float64 reference), the binding rules
 * of docs/errors.md's "One rule in every language", the
 * Cleaner safety net and the raw layer's new typemaps.
 */
class ExtensibleCallTest {
    static final double TOL = 1e-5;

    // ------------------------------------------------------------------ helpers

    static void assertMentions(String message, String... words) {
        AttentionTest.assertMentions(message, words);
    }

    /** The operands of one attn_run (null = not bound). */
    static final class Inputs {
        float[] q, k, v, bias, alibiSlopes, sinks;
        boolean[] keyValid, allowed, queryValid;
        int[] seqLensK;
    }

    /** Random q, k, v (and nothing else) of the descriptor's required lengths. */
    static Inputs inputs(AttentionDesc d, long seed) {
        Inputs in = new Inputs();
        in.q = TestData.random(seed, (int) d.requiredLen(Operand.Q));
        in.k = TestData.random(seed + 1, (int) d.requiredLen(Operand.K));
        in.v = TestData.random(seed + 2, (int) d.requiredLen(Operand.V));
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
    static Got run(AttentionDesc desc, Inputs in) {
        Got g = new Got();
        g.out = new float[(int) desc.requiredLen(Operand.OUT)];
        g.lse = new float[(int) desc.requiredLen(Operand.LSE)];
        g.w = new float[(int) desc.requiredLen(Operand.WEIGHTS)];
        g.mass = new float[(int) desc.requiredLen(Operand.KEY_MASS)];
        try (AttentionArgs args = desc.args()) {
            bindInputs(args, in);
            args.set(Operand.OUT, g.out).set(Operand.LSE, g.lse).set(Operand.KEY_MASS, g.mass)
                    .set(Operand.WEIGHTS, g.w);
            args.run(Op.FORWARD);
            args.run(Op.WEIGHTS);
        }
        return g;
    }

    /** Binds every input of in as arrays (masks as boolean[]); a null one is unbound. */
    static AttentionArgs bindInputs(AttentionArgs args, Inputs in) {
        return args.set(Operand.Q, in.q).set(Operand.K, in.k).set(Operand.V, in.v)
                .set(Operand.KEY_VALID, in.keyValid).set(Operand.ALLOWED, in.allowed)
                .set(Operand.BIAS, in.bias).set(Operand.ALIBI_SLOPES, in.alibiSlopes)
                .set(Operand.SINKS, in.sinks).set(Operand.QUERY_VALID, in.queryValid)
                .set(Operand.SEQ_LENS_K, in.seqLensK);
    }

    // ------------------------------------------------------------------ shared vectors

    /** One variants.txt case run through {@link #run}: its line, its inputs and the results. */
    static final class Vector {
        final VariantsTest.Line line;
        final Inputs in;
        final Got got;

        Vector(VariantsTest.Line line, Inputs in, Got got) {
            this.line = line;
            this.in = in;
            this.got = got;
        }

        String name() {
            return line.get("name");
        }

        int i(String key) {
            return line.i(key);
        }

        /** A new descriptor of this case (close it). */
        AttentionDesc desc() {
            return VariantsTest.builder(line).build();
        }

        boolean has(String input) {
            return line.inputs().contains(input);
        }
    }

    /** A case's inputs as read by VariantsTest (masks as byte[]), with the masks as boolean[]. */
    static Inputs inputs(Map<Operand, Object> m) {
        Inputs in = new Inputs();
        in.q = (float[]) m.get(Operand.Q);
        in.k = (float[]) m.get(Operand.K);
        in.v = (float[]) m.get(Operand.V);
        in.bias = (float[]) m.get(Operand.BIAS);
        in.alibiSlopes = (float[]) m.get(Operand.ALIBI_SLOPES);
        in.sinks = (float[]) m.get(Operand.SINKS);
        in.keyValid = booleans((byte[]) m.get(Operand.KEY_VALID));
        in.allowed = booleans((byte[]) m.get(Operand.ALLOWED));
        in.queryValid = booleans((byte[]) m.get(Operand.QUERY_VALID));
        in.seqLensK = (int[]) m.get(Operand.SEQ_LENS_K);
        return in;
    }

    static boolean[] booleans(byte[] b) {
        if (b == null) {
            return null;
        }
        boolean[] a = new boolean[b.length];
        for (int i = 0; i < b.length; i++) {
            a[i] = b[i] != 0;
        }
        return a;
    }

    /**
     * The variants.txt lines {@code select} accepts (at least {@code atLeast} of them), each run
     * through {@link #run} (the typed builder, every operand as an array, masks as boolean[],
     * key mass always bound) and checked against its expected files by VARIANTS.md's rule:
     * within 1e-5 * max(1, |expected|), expected zeros exactly 0.0f, expected -inf exactly -inf
     * (key mass only on the lines with mass=1).
     */
    static List<Vector> checkVectors(String what, Predicate<VariantsTest.Line> select, int atLeast) {
        Path dir = VectorsTest.vectorsDir();
        List<Vector> done = new ArrayList<>();
        try {
            for (VariantsTest.Line c : VariantsTest.read(VariantsTest.vectorsFile("variants.txt"))) {
                if (!select.test(c)) {
                    continue;
                }
                try (AttentionDesc desc = VariantsTest.builder(c).build()) {
                    Inputs in = inputs(VariantsTest.readInputs(dir, c, desc));
                    Got g = run(desc, in);
                    VariantsTest.Got parts = new VariantsTest.Got().add("out", g.out, false)
                            .add("lse", g.lse, false).add("weights", g.w, false);
                    if (c.get("mass").equals("1")) {
                        parts.add("key_mass", g.mass, false);
                    }
                    assertNull(VariantsTest.check(dir, c, desc, parts), what + ": " + c.get("name"));
                    done.add(new Vector(c, in, g));
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        assertTrue(done.size() >= atLeast, what + ": " + done.size() + " variants.txt case(s), expected at least "
                + atLeast);
        return done;
    }

    /** The one variants.txt case of that name, checked as by {@link #checkVectors}. */
    static Vector vector(String name) {
        return checkVectors(name, c -> c.get("name").equals(name), 1).get(0);
    }

    static String opt(VariantsTest.Line c, String key, String absent) {
        String v = c.opt(key);
        return v == null ? absent : v;
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
            Refusal ae = Refusal.of(() -> AttnNative.attn_desc_set_int(dh[0], Param.COMPUTE, 2));
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
    void slidingWindowMatchesTheSharedVectors() {
        Set<String> causal = new HashSet<>();
        for (Vector v : checkVectors("window", c -> c.opt("window_left") != null
                || c.opt("window_right") != null, 7)) {
            causal.add(opt(v.line, "causal", "0"));
        }
        assertEquals(new HashSet<>(Arrays.asList("0", "1", "2")), causal, "causal rules with a window");
    }

    @Test
    void softcapWithBiasInBothOrders() {
        boolean first = false, after = false, alone = false;
        for (Vector v : checkVectors("softcap", c -> c.opt("softcap") != null, 3)) {
            boolean biasFirst = opt(v.line, "bias_first", "0").equals("1");
            first |= v.has("bias") && biasFirst;
            after |= v.has("bias") && !biasFirst;
            alone |= !v.has("bias");
        }
        assertTrue(first && after && alone, "softcap with the bias first, after, and without a bias");
    }

    @Test
    void minusInfinityBiasHidesItsKeyInBothOrders() {
        // attn.h: "a -INFINITY bias still hides its key in both orders" (softcap(-inf) is not
        // -softcap), on every kernel: the vectors with -inf bias entries (softcap and bias after
        // in all_combined), and in both orders a -inf bias entry gives the result of hiding that
        // key with the allowed mask (its weight exactly 0).
        try {
            for (String isa : Attention.isas()) {
                try {
                    Attention.setIsa(isa);
                } catch (AttentionException e) {
                    continue; // not on this CPU
                }
                boolean ninfWithSoftcap = false;
                for (Vector v : checkVectors(isa + ", bias", c -> c.inputs().contains("bias"), 5)) {
                    for (float x : v.in.bias) {
                        ninfWithSoftcap |= x == Float.NEGATIVE_INFINITY && v.line.opt("softcap") != null;
                    }
                }
                assertTrue(ninfWithSoftcap, "a vector with a -inf bias entry and a softcap");
                for (String name : new String[] {"softcap_bias_first", "softcap_bias_after"}) {
                    Vector v = vector(name);
                    String what = isa + ", " + name;
                    int b = v.i("batch"), hq = v.i("heads_q"), sq = v.i("seq_q"), sk = v.i("seq_k");
                    assertEquals(b * hq * sq * sk, v.in.bias.length, what + ": a dense bias");
                    int qi = 2, kj = 1;
                    Inputs ninf = inputs(v.in);
                    ninf.bias = v.in.bias.clone();
                    for (int bh = 0; bh < b * hq; bh++) {
                        ninf.bias[(bh * sq + qi) * sk + kj] = Float.NEGATIVE_INFINITY;
                    }
                    Inputs hidden = inputs(v.in);
                    hidden.allowed = new boolean[sq * sk];
                    Arrays.fill(hidden.allowed, true);
                    hidden.allowed[qi * sk + kj] = false;
                    try (AttentionDesc d = v.desc()) {
                        Got a = run(d, ninf), h = run(d, hidden);
                        assertNull(TestData.compare("out", a.out, TestData.widen(h.out), TOL), what);
                        assertNull(TestData.compare("lse", a.lse, TestData.widen(h.lse), TOL), what);
                        assertNull(TestData.compare("weights", a.w, TestData.widen(h.w), TOL), what);
                        for (int bh = 0; bh < b * hq; bh++) {
                            int at = (bh * sq + qi) * sk + kj;
                            assertEquals(0, Float.floatToRawIntBits(a.w[at]), what + ": the key is hidden");
                            assertTrue(Float.isFinite(a.lse[bh * sq + qi]), what);
                            assertNotEquals(0.0f, v.got.w[at], what + ": the key is visible without the -inf");
                        }
                    }
                }
            }
        } finally {
            Attention.setIsa(null);
        }
    }

    /** A copy of in's references (arrays shared): the fields may be replaced independently. */
    static Inputs inputs(Inputs in) {
        Inputs c = new Inputs();
        c.q = in.q;
        c.k = in.k;
        c.v = in.v;
        c.bias = in.bias;
        c.alibiSlopes = in.alibiSlopes;
        c.sinks = in.sinks;
        c.keyValid = in.keyValid;
        c.allowed = in.allowed;
        c.queryValid = in.queryValid;
        c.seqLensK = in.seqLensK;
        return c;
    }

    static long[] biasStrides(VariantsTest.Line c) {
        String[] p = opt(c, "strides.bias", "-1,-1,-1").split(",");
        return new long[] {Long.parseLong(p[0]), Long.parseLong(p[1]), Long.parseLong(p[2])};
    }

    @Test
    void biasStridesBroadcast() {
        // [batch][heads][seq_q][seq_k] with the batch and head strides 0 (one [seq_q][seq_k]
        // bias), and with the row stride 0 (one bias row per (batch, head)).
        boolean overBatchAndHeads = false, overRows = false;
        for (Vector v : checkVectors("bias strides", c -> c.opt("strides.bias") != null, 3)) {
            long[] st = biasStrides(v.line);
            overBatchAndHeads |= st[0] == 0 && st[1] == 0;
            overRows |= st[2] == 0;
        }
        assertTrue(overBatchAndHeads && overRows, "bias broadcast over batch and heads, and over rows");
    }

    @Test
    void alibiStandardAndOperandSlopes() {
        boolean standard = false, operand = false, standardBrLens = false;
        for (Vector v : checkVectors("alibi", c -> c.opt("alibi") != null, 4)) {
            standard |= v.i("alibi") == 2;
            operand |= v.i("alibi") == 1 && v.has("alibi_slopes");
            // diag(i) follows each batch entry's key length
            standardBrLens |= v.i("alibi") == 2 && v.has("seq_lens_k") && opt(v.line, "causal", "0").equals("2");
        }
        assertTrue(standard && operand && standardBrLens,
                "standard slopes (also bottom-right with key lengths) and operand slopes");
    }

    @Test
    void sinksAndPlusOne() {
        boolean plus = false;
        for (Vector v : checkVectors("sinks / +1", c -> c.inputs().contains("sinks")
                || opt(c, "softmax_plus_one", "0").equals("1"), 4)) {
            plus |= opt(v.line, "softmax_plus_one", "0").equals("1");
        }
        assertTrue(plus, "a softmax_plus_one case");
        // A query that sees no key gives a zero row even with a sink; elsewhere part of the
        // mass goes to the sink.
        Vector v = vector("sinks_masked_row");
        int b = v.i("batch"), hq = v.i("heads_q"), sq = v.i("seq_q"), sk = v.i("seq_k"),
                dv = v.i("head_dim");
        int empty = 0, sunk = 0;
        for (int i = 0; i < sq; i++) {
            boolean any = false;
            for (int j = 0; j < sk; j++) {
                any |= v.in.allowed[i * sk + j];
            }
            for (int bh = 0; bh < b * hq; bh++) {
                int row = bh * sq + i;
                if (!any) {
                    assertEquals(Float.NEGATIVE_INFINITY, v.got.lse[row], "row " + row + " sees no key");
                    for (int x = 0; x < dv; x++) {
                        assertEquals(0.0f, v.got.out[row * dv + x]);
                    }
                    empty++;
                } else {
                    double sum = 0;
                    for (int j = 0; j < sk; j++) {
                        sum += v.got.w[row * sk + j];
                    }
                    assertTrue(sum < 0.999, "part of row " + row + "'s mass went to the sink: " + sum);
                    sunk++;
                }
            }
        }
        assertTrue(empty > 0 && sunk > 0);

        // Sinks cannot be combined with the "+1" softmax: the library's error names them.
        Vector p = vector("plus_one_tl");
        try (AttentionDesc d = p.desc(); AttentionArgs a = d.args()) {
            a.set(Operand.Q, p.in.q).set(Operand.K, p.in.k).set(Operand.V, p.in.v)
                    .set(Operand.OUT, new float[(int) d.requiredLen(Operand.OUT)])
                    .set(Operand.SINKS, new float[p.i("heads_q")]);
            Refusal e = Refusal.of(() -> a.run(Op.FORWARD));
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertMentions(e.libraryMessage(), "sinks");
        }
    }

    @Test
    void queryPaddingAndPerBatchKeyLengths() {
        // Padding keys (j >= seq_lens_k[b], key_valid false) hold NaN in the vectors: never read.
        boolean noKeys = false, paddedQuery = false, decode = false;
        for (Vector v : checkVectors("query_valid / seq_lens_k", c -> c.inputs().contains("query_valid")
                || c.inputs().contains("seq_lens_k"), 5)) {
            int b = v.i("batch"), hq = v.i("heads_q"), sq = v.i("seq_q");
            for (int bi = 0; bi < b; bi++) {
                for (int h = 0; h < hq; h++) {
                    for (int i = 0; i < sq; i++) {
                        boolean noKey = v.in.seqLensK != null && v.in.seqLensK[bi] == 0;
                        boolean padded = v.in.queryValid != null && !v.in.queryValid[bi * sq + i];
                        if (noKey || padded) {
                            assertEquals(Float.NEGATIVE_INFINITY, v.got.lse[(bi * hq + h) * sq + i],
                                    v.name() + ": batch " + bi + " query " + i);
                        }
                        noKeys |= noKey;
                        paddedQuery |= padded;
                    }
                }
            }
            decode |= sq == 1 && v.in.seqLensK != null;
        }
        assertTrue(noKeys && paddedQuery && decode, "a batch entry with no key, a padded query, a decode");
    }

    @Test
    void headDimVWithStrides() {
        boolean strided = false;
        for (Vector v : checkVectors("head_dim_v", c -> c.opt("head_dim_v") != null, 2)) {
            strided |= v.line.opt("strides.v") != null && v.line.opt("strides.out") != null;
        }
        assertTrue(strided, "head_dim_v with V and OUT strides (BSHD)");
    }

    @Test
    void keyMassWithAndWithoutLse() {
        for (Vector v : checkVectors("key mass", c -> c.get("mass").equals("1"), 3)) {
            try (AttentionDesc d = v.desc(); AttentionArgs a = d.args()) {
                float[] out = new float[(int) d.requiredLen(Operand.OUT)];
                float[] mass = new float[(int) d.requiredLen(Operand.KEY_MASS)];
                Arrays.fill(mass, 5f); // written in full
                bindInputs(a, v.in).set(Operand.OUT, out).set(Operand.KEY_MASS, mass).run(Op.FORWARD);
                assertTrue(sameBits(v.got.mass, mass), v.name() + ": key mass without lse bound");
                assertTrue(sameBits(v.got.out, out), v.name());
            }
        }
    }

    static double cap(double c, double x) {
        return c * Math.tanh(x / c);
    }

    static float[] weights(AttentionDesc d, Inputs in) {
        float[] w = new float[(int) d.requiredLen(Operand.WEIGHTS)];
        try (AttentionArgs a = d.args()) {
            bindInputs(a, in).set(Operand.WEIGHTS, w).run(Op.WEIGHTS);
        }
        return w;
    }

    @Test
    void weightsModesWriteTheScoreStages() {
        // softcap_bias_first (every key visible, softcap 2.5 after a dense bias): CAPPED is the
        // final logit, ln(weight) + lse of the vector's expected files; MASKED = SCORES + bias;
        // CAPPED = softcap(MASKED); SOFTCAPPED = softcap(SCORES); SOFTMAX the expected weights.
        Vector v = vector("softcap_bias_first");
        Path dir = VectorsTest.vectorsDir();
        int b = v.i("batch"), hq = v.i("heads_q"), sq = v.i("seq_q"), sk = v.i("seq_k");
        double c = Double.parseDouble(v.line.get("softcap"));
        float[][] stage = new float[WeightsMode.values().length][];
        for (WeightsMode mode : WeightsMode.values()) {
            try (AttentionDesc d = VariantsTest.builder(v.line).weightsMode(mode).build()) {
                assertEquals(mode, d.weightsMode());
                stage[mode.ordinal()] = weights(d, v.in);
                // The 0.1 call follows the descriptor's mode too.
                float[] w01 = d.weights(v.in.q, v.in.k, null, null);
                if (mode == WeightsMode.SCORES) {
                    assertTrue(sameBits(stage[mode.ordinal()], w01), "SCORES ignores the bias");
                }
            }
        }
        float[] wantW, wantLse;
        try (AttentionDesc d = v.desc()) {
            wantW = VariantsTest.expected(dir, v.line, "weights", d.requiredLen(Operand.WEIGHTS));
            wantLse = VariantsTest.expected(dir, v.line, "lse", d.requiredLen(Operand.LSE));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        assertNull(VectorsTest.check("weights (SOFTMAX)", stage[WeightsMode.SOFTMAX.ordinal()], wantW));
        float[] scores = stage[WeightsMode.SCORES.ordinal()], masked = stage[WeightsMode.MASKED.ordinal()],
                capped = stage[WeightsMode.CAPPED.ordinal()], softcapped = stage[WeightsMode.SOFTCAPPED.ordinal()];
        int n = b * hq * sq * sk;
        double[] fromVector = new double[n], plusBias = new double[n], capMasked = new double[n],
                capScores = new double[n];
        for (int x = 0; x < n; x++) {
            assertTrue(wantW[x] > 0, "every key is visible in softcap_bias_first");
            fromVector[x] = wantLse[x / sk] + Math.log(wantW[x]);
            plusBias[x] = (double) scores[x] + v.in.bias[x];
            capMasked[x] = cap(c, masked[x]);
            capScores[x] = cap(c, scores[x]);
        }
        assertNull(TestData.compare("CAPPED vs ln(weights) + lse", capped, fromVector, TOL));
        assertNull(TestData.compare("MASKED vs SCORES + bias", masked, plusBias, TOL));
        assertNull(TestData.compare("CAPPED vs softcap(MASKED)", capped, capMasked, TOL));
        assertNull(TestData.compare("SOFTCAPPED vs softcap(SCORES)", softcapped, capScores, TOL));

        // Hidden and padded entries (window, top-left causal rule, a padded key): -inf where the
        // mode applies the masks, every padded key -inf, everything else the unmasked stage.
        try (AttentionDesc open = AttentionDesc.builder().batch(2).heads(2, 1).seqLen(5, 7).headDim(6)
                .scale(0.7f).softcap(1.5f).biasFirst().build()) {
            Inputs in = inputs(open, 900);
            in.bias = TestData.random(901, (int) open.requiredLen(Operand.BIAS));
            for (WeightsMode mode : WeightsMode.values()) {
                if (mode == WeightsMode.SOFTMAX) {
                    continue;
                }
                boolean masks = mode == WeightsMode.MASKED || mode == WeightsMode.CAPPED;
                float[] all;
                try (AttentionDesc d = AttentionDesc.builder().batch(2).heads(2, 1).seqLen(5, 7).headDim(6)
                        .scale(0.7f).softcap(1.5f).biasFirst().weightsMode(mode).build()) {
                    all = weights(d, in);
                }
                Inputs padded = inputs(in);
                padded.keyValid = new boolean[14];
                Arrays.fill(padded.keyValid, true);
                padded.keyValid[13] = false;
                float[] w;
                try (AttentionDesc d = AttentionDesc.builder().batch(2).heads(2, 1).seqLen(5, 7).headDim(6)
                        .causal(Causal.TOP_LEFT).window(3, -1).scale(0.7f).softcap(1.5f).biasFirst()
                        .weightsMode(mode).build()) {
                    w = weights(d, padded);
                }
                double[] want = new double[w.length];
                int hidden = 0;
                for (int x = 0; x < w.length; x++) {
                    int j = x % 7, i = x / 7 % 5, bi = x / (7 * 5 * 2);
                    boolean pad = bi == 1 && j == 6;
                    boolean hide = j > i || j < i - 3;
                    hidden += hide && !pad ? 1 : 0;
                    want[x] = pad || (masks && hide) ? Double.NEGATIVE_INFINITY : all[x];
                    assertTrue(Float.isFinite(all[x]), mode + ": every entry of the unmasked call is a score");
                }
                assertTrue(hidden > 0);
                assertNull(TestData.compare("weights (" + mode + ")", w, want, TOL));
            }
        }
    }

    // ------------------------------------------------------------------ binding

    @Test
    void arraysByteMasksAndDirectBuffersGiveTheSameBits() {
        // all_combined binds every input operand (masks, bias, ALiBi slopes, sinks, query
        // padding, key lengths) with window, softcap and BSHD strides: checked against its
        // vector as boolean[] masks, then byte[] masks and direct buffers give the same bits.
        Vector vec = vector("all_combined");
        Inputs in = vec.in;
        Got g = vec.got;
        for (String op : VariantsTest.INPUTS) {
            assertTrue(vec.has(op), "all_combined binds " + op);
        }
        try (AttentionDesc d = vec.desc(); AttentionArgs a = d.args()) {
            // byte[] masks with any nonzero byte for true.
            float[] out = new float[g.out.length], lse = new float[g.lse.length], w = new float[g.w.length],
                    mass = new float[g.mass.length];
            a.set(Operand.Q, in.q).set(Operand.K, in.k).set(Operand.V, in.v)
                    .set(Operand.KEY_VALID, bytes(in.keyValid, (byte) 7))
                    .set(Operand.ALLOWED, bytes(in.allowed, (byte) -1))
                    .set(Operand.QUERY_VALID, bytes(in.queryValid, (byte) 2))
                    .set(Operand.BIAS, in.bias).set(Operand.SINKS, in.sinks)
                    .set(Operand.ALIBI_SLOPES, in.alibiSlopes)
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
                    .set(Operand.ALIBI_SLOPES, floats(in.alibiSlopes, 4))
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
        // A case with q, k, v only (head_dim_v 16, top-left): checked against its vector with
        // exact lengths, then longer arrays (NaN tails) give the same bits.
        Vector vec = vector("hdv_24_16");
        assertEquals(Arrays.asList("q", "k", "v"), vec.line.inputs());
        Inputs in = vec.in;
        Got g = vec.got;
        int batch = vec.i("batch"), sq = vec.i("seq_q"), sk = vec.i("seq_k");
        try (AttentionDesc d = vec.desc(); AttentionArgs a = d.args()) {
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
            boolean[] qv = new boolean[batch * sq + 5];
            Arrays.fill(qv, true);
            int[] lens = new int[batch + 1];
            Arrays.fill(lens, sk);
            lens[batch] = -1;
            a.set(Operand.Q, q).set(Operand.K, k).set(Operand.V, v).set(Operand.QUERY_VALID, qv)
                    .set(Operand.SEQ_LENS_K, lens).set(Operand.OUT, out)
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
            assertMentions(e.getMessage(), "q", "float");
            e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.SEQ_LENS_K, new float[2]));
            assertMentions(e.getMessage(), "seq_lens_k", "int");
            e = assertThrows(IllegalArgumentException.class, () -> a.set(Operand.BIAS, new int[120]));
            assertMentions(e.getMessage(), "bias");
            // Lengths are the library's: a short or empty operand is refused by the call.
            a.set(Operand.Q, new float[96]).set(Operand.K, new float[80]).set(Operand.V, new float[0])
                    .set(Operand.OUT, new float[96]).set(Operand.ALIBI_SLOPES, new float[4]);
            e = assertThrows(IllegalArgumentException.class, () -> a.run(Op.FORWARD));
            assertMentions(e.getMessage(), "v", "0", "needs", "80");
            a.set(Operand.V, new float[80]).set(Operand.KEY_VALID, new boolean[9]);
            e = assertThrows(IllegalArgumentException.class, () -> a.run(Op.FORWARD));
            assertMentions(e.getMessage(), "key_valid", "9", "needs", "10");
            a.clear();
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
            assertMentions(npe.getMessage(), "q", "NULL");
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
            Refusal e = Refusal.of(() -> a.run(Op.FORWARD));
            assertEquals(Status.NULL_POINTER, e.status());
            assertMentions(e.libraryMessage(), "alibi_slopes");
            a.set(Operand.ALIBI_SLOPES, new float[4]);
            a.run(Op.FORWARD);
            a.run(Op.WEIGHTS);
            a.set(Operand.SEQ_LENS_K, new int[] {5, 6});
            e = Refusal.of(() -> a.run(Op.FORWARD));
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertMentions(e.libraryMessage(), "seq_lens_k", "6");
            a.set(Operand.SEQ_LENS_K, new int[] {-1, 0});
            e = Refusal.of(() -> a.run(Op.WEIGHTS));
            assertMentions(e.libraryMessage(), "seq_lens_k", "-1");
            a.unset(Operand.SEQ_LENS_K);
            // BACKWARD with a forward's operands only: the library asks for the gradient of out
            // (StorageTest covers the rest of the backward's rules).
            npe = assertThrows(NullPointerException.class, () -> a.run(Op.BACKWARD));
            assertMentions(npe.getMessage(), "dout", "NULL");
        }
        try (AttentionDesc d = AttentionDesc.builder().seqLen(2).headDim(2).build(); AttentionArgs a = d.args()) {
            float[] x = new float[4];
            a.set(Operand.Q, x).set(Operand.K, x).set(Operand.V, x).set(Operand.OUT, new float[4])
                    .set(Operand.ALIBI_SLOPES, new float[1]);
            Refusal e = Refusal.of(() -> a.run(Op.FORWARD));
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertMentions(e.libraryMessage(), "alibi_slopes");
        }
    }

    @Test
    void outputsOverlappingAnotherOperandAreTheLibrarysError() {
        try (AttentionDesc d = AttentionDesc.builder().batch(2).heads(4, 2).seqLen(3, 5).headDim(4)
                .build(); AttentionArgs a = d.args()) {
            float[] q = TestData.random(1, 96), k = TestData.random(2, 80), v = TestData.random(3, 80);
            float[] big = new float[120];
            a.set(Operand.Q, q).set(Operand.K, k).set(Operand.V, v).set(Operand.OUT, q);
            Refusal e = Refusal.of(() -> a.run(Op.FORWARD));
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertMentions(e.libraryMessage(), "out", "overlaps", "q");
            a.set(Operand.OUT, new float[96]).set(Operand.LSE, k);
            e = Refusal.of(() -> a.run(Op.FORWARD));
            assertMentions(e.libraryMessage(), "lse", "overlaps", "k");
            a.set(Operand.LSE, big).set(Operand.OUT, big);
            e = Refusal.of(() -> a.run(Op.FORWARD));
            assertMentions(e.libraryMessage(), "overlaps", "out");
            a.unset(Operand.LSE).set(Operand.OUT, new float[96]).set(Operand.KEY_MASS, v);
            e = Refusal.of(() -> a.run(Op.FORWARD));
            assertMentions(e.libraryMessage(), "key_mass", "overlaps", "v");
            a.set(Operand.KEY_MASS, (float[]) null).set(Operand.BIAS, big).set(Operand.WEIGHTS, big);
            e = Refusal.of(() -> a.run(Op.WEIGHTS));
            assertMentions(e.libraryMessage(), "weights", "overlaps", "bias");
            // Overlapping direct buffers (two views of one memory block).
            ByteBuffer block = ByteBuffer.allocateDirect(4 * 200).order(ByteOrder.nativeOrder());
            FloatBuffer all = block.asFloatBuffer();
            a.set(Operand.BIAS, (float[]) null).set(Operand.Q, all.duplicate().position(0).limit(96))
                    .set(Operand.OUT, all.duplicate().position(95));
            e = Refusal.of(() -> a.run(Op.FORWARD));
            assertMentions(e.libraryMessage(), "out", "overlaps", "q");
        }
        // Inputs may share memory: k and v as one array give the bits of k and a copy of it as v
        // (the dense call with separate arrays is checked on the shared vectors).
        try (AttentionDesc d = AttentionDesc.builder().heads(2, 2).seqLen(4, 4).headDim(4)
                .causal(Causal.TOP_LEFT).scale(0.5f).build()) {
            Inputs in = inputs(d, 1200);
            in.v = in.k.clone();
            Got separate = run(d, in);
            in.v = in.k;
            Got shared = run(d, in);
            assertTrue(sameBits(separate.out, shared.out) && sameBits(separate.lse, shared.lse)
                    && sameBits(separate.w, shared.w), "k and v are one array");
            in.v = inputs(d, 1300).v;
            assertFalse(sameBits(separate.out, run(d, in).out), "out depends on v");
        }
    }

    @Test
    void parameterErrorsNameTheParameter() {
        AttentionDesc.Builder b = AttentionDesc.builder();
        Object[][] cases = {
            // The library's messages (it checks each value as the builder sets it).
            {(Runnable) () -> b.window(-2, 0), "ATTN_PARAM_WINDOW_LEFT", "-2"},
            {(Runnable) () -> b.window(0, -5), "ATTN_PARAM_WINDOW_RIGHT", "-5"},
            {(Runnable) () -> b.softcap(-1f), "ATTN_PARAM_SOFTCAP", "-1"},
            {(Runnable) () -> b.softcap(Float.NaN), "ATTN_PARAM_SOFTCAP", "NaN"},
            {(Runnable) () -> b.softcap(Float.POSITIVE_INFINITY), "ATTN_PARAM_SOFTCAP", "outside"},
            {(Runnable) () -> b.headDimV(0), "ATTN_PARAM_HEAD_DIM_V", "0"},
            {(Runnable) () -> b.scale(Float.NEGATIVE_INFINITY), "ATTN_PARAM_SCALE", "outside"},
            {(Runnable) () -> b.param(Param.CAUSAL, 3), "ATTN_PARAM_CAUSAL", "3"},
            {(Runnable) () -> b.param(Param.ALIBI, 3), "ATTN_PARAM_ALIBI", "3"},
            {(Runnable) () -> b.param(Param.SOFTMAX_PLUS_ONE, 2), "ATTN_PARAM_SOFTMAX_PLUS_ONE", "2"},
            {(Runnable) () -> b.param(Param.WEIGHTS_MODE, WeightsMode.values().length), "ATTN_PARAM_WEIGHTS_MODE"},
            {(Runnable) () -> b.param(Param.BIAS_FIRST, -1), "ATTN_PARAM_BIAS_FIRST", "-1"},
            {(Runnable) () -> b.param(Param.HEAD_DIM_V, 1L << 31), "ATTN_PARAM_HEAD_DIM_V", "2147483648"},
            {(Runnable) () -> b.param(Param.WINDOW_LEFT, 1.5), "ATTN_PARAM_WINDOW_LEFT", "integer"},
            {(Runnable) () -> b.param(Param.SCALE, 1e39), "ATTN_PARAM_SCALE", "outside"},
            {(Runnable) () -> b.param(Param.SOFTCAP, Double.NaN), "ATTN_PARAM_SOFTCAP", "NaN"},
            // Raw integers for enums: no truncation to 32 bits (2^32 is not 0).
            {(Runnable) () -> Causal.fromCode(1L << 32), "causal", "4294967296"},
            {(Runnable) () -> Causal.fromCode(-1), "causal", "-1"},
            {(Runnable) () -> Alibi.fromCode(3), "alibi", "3"},
            {(Runnable) () -> WeightsMode.fromCode(-1), "weightsMode", "-1"},
            {(Runnable) () -> Op.fromCode(3), "op", "3"},
            {(Runnable) () -> Operand.fromCode(29), "operand", "29"},
            {(Runnable) () -> Operand.fromCode((1L << 32) + 1), "operand", "4294967297"},
            {(Runnable) () -> Compute.fromCode(2), "compute", "2"},
            {(Runnable) () -> Param.fromCode(17), "param", "17"},
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
        Refusal e = Refusal.of(() -> AttentionDesc.builder().seqLen(2).headDim(2).strides(Operand.SINKS, 1, 1, 1).build());
        assertEquals(Status.INVALID_ARGUMENT, e.status());
        assertMentions(e.libraryMessage(), "which");
        e = Refusal.of(() -> AttentionDesc.builder().seqLen(3).headDim(4)
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
            float[] q = TestData.random(i, 12);
            float[] out = new float[12];
            a.set(Operand.Q, q).set(Operand.K, q).set(Operand.V, q).set(Operand.OUT, out).run(Op.FORWARD);
            assertTrue(Float.isFinite(out[11]));
        }
    }

    @Test
    void isaNamesWithNulOrNonAsciiGetTheLibrarysWording() {
        for (String name : new String[] {"avx2\0", "scalar\0avx512", "\0", "sse2\u00e9", "avx\u20ac512"}) {
            Refusal e = Refusal.of(() -> Attention.setIsa(name),
                    name);
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertTrue(e.libraryMessage().contains("is not one of scalar, sse2, avx2, avx512"),
                    e.libraryMessage());
        }
        Attention.setIsa("");
        assertTrue(Attention.isas().contains(Attention.isa()));
    }

    // ------------------------------------------------------------------ raw layer

    @Test
    void rawArgsSettersTakeDirectBuffers() {
        long[] dh = new long[1], ah = new long[1];
        AttnNative.attn_desc_create(dh, 1, 1, 1, 2, 3, 2);
        AttnNative.attn_args_create(ah);
        try {
            FloatBuffer q = floats(new float[] {1, 0, 0, 1}, 0), k = floats(new float[] {1, 0, 0, 1, 1, 1}, 0),
                    v = floats(new float[] {1, 2, 3, 4, 5, 6}, 0), out = floats(4, 0);
            AttnNative.attn_args_set_f32(ah[0], Operand.Q, q, 4);
            AttnNative.attn_args_set_f32(ah[0], Operand.K, k, 6);
            AttnNative.attn_args_set_f32(ah[0], Operand.V, v, 6);
            AttnNative.attn_args_set_out_f32(ah[0], Operand.OUT, out, 4);
            ByteBuffer kv = ByteBuffer.allocateDirect(3).put(new byte[] {1, 1, 0}).flip();
            AttnNative.attn_args_set_u8(ah[0], Operand.KEY_VALID, kv, 3);
            AttnNative.attn_args_set_i32(ah[0], Operand.SEQ_LENS_K, ints(new int[] {3}, 0), 1);
            AttnNative.attn_run(dh[0], Op.FORWARD, ah[0]);
            // Query 0 = (1, 0) sees keys 0 and 1 (key 2 is padding): weights softmax(s/sqrt2 * (1, 0)).
            double w0 = 1 / (1 + Math.exp(-1 / Math.sqrt(2)));
            assertEquals(w0 * 1 + (1 - w0) * 3, out.get(0), 1e-5);
            // A heap buffer has no address: the library sees NULL data with a length.
            Refusal ae = Refusal.of(() -> AttnNative.attn_args_set_f32(ah[0], Operand.Q, FloatBuffer.allocate(4), 4));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            ae = Refusal.of(() -> AttnNative.attn_args_set_f32(ah[0], Operand.OUT, out, 4));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "out", "attn_args_set_out_f32");
            AttnNative.attn_args_set_f32(ah[0], Operand.Q, null, 0); // unbinds
            ae = Refusal.of(() -> AttnNative.attn_run(dh[0], Op.FORWARD, ah[0]));
            assertEquals(Status.NULL_POINTER, ae.status());
            assertMentions(ae.libraryMessage(), "q");
            AttnNative.attn_args_clear(ah[0]);
            long[] iv = new long[1];
            AttnNative.attn_desc_get_int(dh[0], Param.HEAD_DIM_V, iv);
            assertEquals(2, iv[0]);
            // A descriptor that ran is immutable.
            ae = Refusal.of(() -> AttnNative.attn_desc_set_int(dh[0], Param.WINDOW_LEFT, 1));
            assertEquals(Status.INVALID_ARGUMENT, ae.status());
            assertMentions(ae.libraryMessage(), "desc", "used");
            assertThrows(IllegalArgumentException.class, () -> AttnNative.attn_desc_create(iv, -1, 1, 1, 1, 1, 1));
        } finally {
            AttnNative.attn_args_destroy(ah[0]);
            AttnNative.attn_desc_destroy(dh[0]);
        }
        long[] dh2 = new long[1];
        AttnNative.attn_desc_create(dh2, 1, 1, 1, 2, 3, 2);
        try {
            Refusal ae = Refusal.of(() -> AttnNative.attn_desc_set_int(dh2[0], Param.WINDOW_LEFT, 1L << 40));
            assertMentions(ae.libraryMessage(), "ATTN_PARAM_WINDOW_LEFT");
            AttnNative.attn_desc_set_float(dh2[0], Param.SOFTCAP, 0.5);
            double[] dv = new double[1];
            AttnNative.attn_desc_get_float(dh2[0], Param.SOFTCAP, dv);
            assertEquals(0.5, dv[0]);
            ae = Refusal.of(() -> AttnNative.attn_desc_get_float(dh2[0], Param.SOFTCAP, null));
            assertEquals(Status.NULL_POINTER, ae.status());
            assertMentions(ae.libraryMessage(), "value");
            int[] isFloat = new int[1];
            AttnNative.attn_param_bounds(Param.SOFTCAP, isFloat, null, null);
            assertEquals(1, isFloat[0]);
            double[] max = new double[1];
            AttnNative.attn_param_bounds(Param.CAUSAL, null, null, max);
            assertEquals(2.0, max[0]);
        } finally {
            AttnNative.attn_desc_destroy(dh2[0]);
        }
    }

    @Test
    void rawCallLeavesTheChecksToTheLibrary() {
        final int F32 = AttentionArgs.F32, OUT = AttentionArgs.OUT, U8 = AttentionArgs.U8;
        int[] codes = {F32, F32, F32, F32 | OUT, F32 | OUT, F32 | OUT, U8, U8, F32};
        try (AttentionDesc d = AttentionDesc.builder().seqLen(2).headDim(2).build()) {
            long h = d.enter();
            try {
                float[] x = new float[4];
                // A mask bound as floats: the library's setter refuses it, naming it.
                Refusal ae = Refusal.of(() -> AttnNative.attn_jni_call(Op.FORWARD.code(), h, 0,
                        new Object[] {x, x, x, new float[4], null, null, new float[4]},
                        new int[] {F32, F32, F32, F32 | OUT, 0, 0, F32}, 0, null, null));
                assertEquals(Status.INVALID_ARGUMENT, ae.status());
                assertMentions(ae.libraryMessage(), "key_valid");
                // Lengths: the 0.1 calls run through attn_run, which checks them.
                ae = Refusal.of(() -> AttnNative.attn_jni_call(Op.FORWARD.code(), h, 0,
                        new Object[] {x, new float[3], x, new float[4]}, codes, 0, null, null));
                assertMentions(ae.libraryMessage(), "k", "3", "needs", "4");
                ae = Refusal.of(() -> AttnNative.attn_jni_call(Op.FORWARD.code(), h, 0,
                        new Object[] {x, new float[0], x, new float[4]}, codes, 0, null, null));
                assertMentions(ae.libraryMessage(), "attn_run", "k", "0", "needs", "4");
                // attn_simple takes no lengths: the glue checks them.
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_simple(new float[0], x, x, 2, 2, false, null, new float[4]));
                assertMentions(e.getMessage(), "q", "0", "4");
                e = assertThrows(IllegalArgumentException.class,
                        () -> AttnNative.attn_jni_simple(x, x, x, 2, 2, false, new boolean[1], new float[4]));
                assertMentions(e.getMessage(), "pad_mask", "1", "2");
                // An empty array is "given" (not NULL): n = 0 is the library's own refusal.
                ae = Refusal.of(() -> AttnNative.attn_jni_simple(new float[0], new float[0], new float[0], 0, 2,
                        false, null, new float[0]));
                assertMentions(ae.libraryMessage(), "n");
            } finally {
                d.leave();
            }
        }
    }
}
