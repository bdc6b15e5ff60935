package org.libattn;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Shared data of the serving layouts' tests (VarlenTest, PagedCacheTest, MergeTest,
 * ServingChecksTest): the sequences of tests/core/test_serving_merge.cpp's varlen merge case and of
 * the Go binding's helpers_test.go (q {5, 0, 9}, k {40, 7, 66}, GQA 4/2, head_dim 24), their
 * varlen pack and dense runs alone, and the bit comparison (direct buffers: TestData).
 */
final class ServingFixture {
    private ServingFixture() {}

    static final int HQ = 4, HKV = 2, D = 24;
    static final int[] LQ = {5, 0, 9};
    static final int[] LK = {40, 7, 66};
    static final int B = LQ.length, MAX_Q = 9, MAX_K = 66;
    /** The pools' and packs' filler: a quiet NaN with a payload, so "untouched" is a bit compare. */
    static final float NAN = Float.intBitsToFloat(0x7fc0beef);
    static final float SENTINEL = 777f;

    /** One sequence, dense per head: q [hq][lq][d], k and v [hkv][lk][d]. */
    static final class Seq {
        final int lq, lk;
        final float[] q, k, v;

        Seq(int lq, int lk, SplittableRandom g) {
            this.lq = lq;
            this.lk = lk;
            q = uniform(g, HQ * lq * D, -1, 1);
            k = uniform(g, HKV * lk * D, -1, 1);
            v = uniform(g, HKV * lk * D, -2, 2);
        }
    }

    static float[] uniform(SplittableRandom g, int n, double lo, double hi) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = (float) (lo + (hi - lo) * g.nextDouble());
        }
        return a;
    }

    static float[] filled(int n, float x) {
        float[] a = new float[n];
        Arrays.fill(a, x);
        return a;
    }

    static Seq[] sequences(long seed) {
        SplittableRandom g = new SplittableRandom(seed);
        Seq[] s = new Seq[B];
        for (int b = 0; b < B; b++) {
            s[b] = new Seq(LQ[b], LK[b], g);
        }
        return s;
    }

    static int[] cumulative(int[] n) {
        int[] cu = new int[n.length + 1];
        for (int b = 0; b < n.length; b++) {
            cu[b + 1] = cu[b] + n[b];
        }
        return cu;
    }

    static void assertMentions(String message, String... words) {
        AttentionTest.assertMentions(message, words);
    }

    static void assertContains(String message, String part) {
        assertTrue(message.contains(part), "message should contain '" + part + "': " + message);
    }

    // ------------------------------------------------------------------ layouts

    /** A varlen pack of seqs: Q and OUT [totalQ][hq][d], K/V [totalK][hkv][d], LSE [hq][totalQ]. */
    static final class Pack {
        final Seq[] seqs;
        final int[] cuQ, cuK;
        final int totalQ, totalK;
        final float[] q, k, v;

        Pack(Seq[] seqs) {
            this.seqs = seqs;
            cuQ = cumulative(LQ);
            cuK = cumulative(LK);
            totalQ = cuQ[B];
            totalK = cuK[B];
            q = filled(totalQ * HQ * D, NAN);
            k = filled(totalK * HKV * D, NAN);
            v = filled(totalK * HKV * D, NAN);
            for (int b = 0; b < B; b++) {
                Seq s = seqs[b];
                for (int h = 0; h < HQ; h++) {
                    for (int i = 0; i < s.lq; i++) {
                        System.arraycopy(s.q, (h * s.lq + i) * D, q, outAt(b, h, i), D);
                    }
                }
                if (s.lq == 0) {
                    continue; // its keys stay NaN: a query of another sequence reading one would be NaN
                }
                for (int h = 0; h < HKV; h++) {
                    for (int j = 0; j < s.lk; j++) {
                        int at = ((cuK[b] + j) * HKV + h) * D;
                        System.arraycopy(s.k, (h * s.lk + j) * D, k, at, D);
                        System.arraycopy(s.v, (h * s.lk + j) * D, v, at, D);
                    }
                }
            }
        }

        int outAt(int b, int h, int i) {
            return ((cuQ[b] + i) * HQ + h) * D;
        }

        int lseAt(int b, int h, int i) {
            return h * totalQ + cuQ[b] + i;
        }
    }

    /** The sequence alone, dense (batch 1): out [hq][lq][d] and lse [hq][lq]. */
    static float[][] denseAlone(Seq s, boolean invariant, Causal causal) {
        try (AttentionDesc d = AttentionDesc.builder().heads(HQ, HKV).seqLen(s.lq, s.lk).headDim(D)
                .causal(causal).batchInvariant(invariant).build(); AttentionArgs a = d.args()) {
            float[] out = filled((int) d.requiredLen(Operand.OUT), SENTINEL);
            float[] lse = filled((int) d.requiredLen(Operand.LSE), SENTINEL);
            a.set(Operand.Q, s.q).set(Operand.K, s.k).set(Operand.V, s.v).set(Operand.OUT, out)
                    .set(Operand.LSE, lse).run(Op.FORWARD);
            return new float[][] {out, lse};
        }
    }

    static float[][][] aloneAll(Seq[] seqs) {
        float[][][] alone = new float[B][][];
        for (int b = 0; b < B; b++) {
            alone[b] = seqs[b].lq == 0 ? null : denseAlone(seqs[b], true, Causal.BOTTOM_RIGHT);
        }
        return alone;
    }

    /** The pack's descriptor builder: varlen, batch invariant, BOTTOM_RIGHT, maxima 9 / 66. */
    static AttentionDesc.Builder packBuilder() {
        return AttentionDesc.builder().batch(B).heads(HQ, HKV).seqLen(MAX_Q, MAX_K).headDim(D)
                .causal(Causal.BOTTOM_RIGHT).varlen().batchInvariant();
    }

    /**
     * The pack's rows of every sequence equal that sequence's own result bit for bit (out and
     * lse), and nothing past the pack's rows was written (the 0-length sequence produces none).
     */
    static void assertSameBits(String label, Pack p, float[] out, float[] lse, float[][][] alone) {
        List<String> bad = new ArrayList<>();
        for (int b = 0; b < B; b++) {
            Seq s = p.seqs[b];
            for (int h = 0; h < HQ; h++) {
                for (int i = 0; i < s.lq; i++) {
                    for (int x = 0; x < D; x++) {
                        float got = out[p.outAt(b, h, i) + x], want = alone[b][0][(h * s.lq + i) * D + x];
                        if (Float.floatToRawIntBits(got) != Float.floatToRawIntBits(want) && bad.size() < 5) {
                            bad.add("out seq " + b + " head " + h + " row " + i + " [" + x + "] = " + got
                                    + ", alone " + want);
                        }
                    }
                    float got = lse[p.lseAt(b, h, i)], want = alone[b][1][h * s.lq + i];
                    if (Float.floatToRawIntBits(got) != Float.floatToRawIntBits(want) && bad.size() < 5) {
                        bad.add("lse seq " + b + " head " + h + " row " + i + " = " + got + ", alone " + want);
                    }
                }
            }
        }
        for (int x = p.totalQ * HQ * D; x < out.length; x++) {
            if (out[x] != SENTINEL && bad.size() < 5) {
                bad.add("out[" + x + "] past the pack's " + p.totalQ + " rows was written (" + out[x] + ")");
            }
        }
        for (int x = p.totalQ * HQ; x < lse.length; x++) {
            if (lse[x] != SENTINEL && bad.size() < 5) {
                bad.add("lse[" + x + "] past heads_q x total_q was written (" + lse[x] + ")");
            }
        }
        assertTrue(bad.isEmpty(), label + ": " + bad);
    }

}
