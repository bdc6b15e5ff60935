package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.libattn.CallFixture.*;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The score options and extra operands of the extensible call on the shared vectors
 * (tests/vectors/variants.txt): window, softcap and bias in both orders, bias strides, ALiBi,
 * sinks and plus-one, query padding and per-batch key lengths, head_dim_v with strides, key
 * mass and the weights modes.
 */
class CallOptionsTest {
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

    static long[] biasStrides(VectorFile.Line c) {
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
            try (AttentionDesc d = VectorFile.builder(v.line).weightsMode(mode).build()) {
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
            wantW = VectorFile.expected(dir, v.line, "weights", d.requiredLen(Operand.WEIGHTS));
            wantLse = VectorFile.expected(dir, v.line, "lse", d.requiredLen(Operand.LSE));
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
}
