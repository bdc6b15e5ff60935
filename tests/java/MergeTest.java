package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.libattn.ServingFixture.*;
import static org.libattn.TestData.direct;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link AttentionDesc#merge} of a key split against one call, dense and for a varlen pack.
 */
class MergeTest {
    static final int MB = 2, MQ = 37, MK = 300, MD = 32;

    /** Forward of [MB][HQ][MQ][MD] queries over keys [k0, k1) of k, v ([MB][HKV][MK][MD]). */
    static float[][] part(float[] q, float[] k, float[] v, int k0, int k1) {
        int n = k1 - k0;
        float[] kp = new float[MB * HKV * n * MD], vp = new float[kp.length];
        for (int bh = 0; bh < MB * HKV; bh++) {
            System.arraycopy(k, (bh * MK + k0) * MD, kp, bh * n * MD, n * MD);
            System.arraycopy(v, (bh * MK + k0) * MD, vp, bh * n * MD, n * MD);
        }
        try (AttentionDesc d = AttentionDesc.builder().batch(MB).heads(HQ, HKV).seqLen(MQ, n).headDim(MD)
                .build(); AttentionArgs a = d.args()) {
            float[] out = new float[(int) d.requiredLen(Operand.OUT)], lse = new float[(int) d.requiredLen(Operand.LSE)];
            a.set(Operand.Q, q).set(Operand.K, kp).set(Operand.V, vp).set(Operand.OUT, out)
                    .set(Operand.LSE, lse).run(Op.FORWARD);
            return new float[][] {out, lse};
        }
    }

    static double relErr(float got, float want) {
        if (Float.isInfinite(want)) {
            return got == want ? 0 : 1e30;
        }
        if (Float.isNaN(got)) {
            return 1e30;
        }
        return Math.abs((double) got - want) / Math.max(1.0, Math.abs(want));
    }

    @Test
    void mergeOfAKeySplitEqualsOneCall() {
        SplittableRandom g = new SplittableRandom(9);
        float[] q = uniform(g, MB * HQ * MQ * MD, -2, 2), k = uniform(g, MB * HKV * MK * MD, -2, 2),
                v = uniform(g, MB * HKV * MK * MD, -2, 2);
        float[][] full = part(q, k, v, 0, MK);
        try (AttentionDesc md = AttentionDesc.builder().batch(MB).heads(HQ, HKV).seqLen(MQ, MK).headDim(MD)
                .build(); AttentionArgs acc = md.args(); AttentionArgs pt = md.args()) {
            float[][] first = null;
            for (int rep = 0; rep < 2; rep++) {
                float[][] a = part(q, k, v, 0, 117), b = part(q, k, v, 117, MK);
                acc.set(Operand.OUT, a[0]).set(Operand.LSE, a[1]);
                if (rep == 0) {
                    pt.set(Operand.OUT, b[0]).set(Operand.LSE, b[1]);
                } else { // the part from direct buffers
                    pt.set(Operand.OUT, direct(b[0], 3)).set(Operand.LSE, direct(b[1], 1));
                }
                md.merge(acc, pt);
                double worst = 0;
                for (int x = 0; x < full[0].length; x++) {
                    worst = Math.max(worst, relErr(a[0][x], full[0][x]));
                }
                for (int x = 0; x < full[1].length; x++) {
                    worst = Math.max(worst, relErr(a[1][x], full[1][x]));
                }
                assertTrue(worst <= 1e-6, "merged vs one call: relative error " + worst);
                if (first == null) {
                    first = a;
                } else { // folding in a fixed order is bit-identical from run to run
                    assertTrue(VectorsTest.sameBits(first[0], a[0]) && VectorsTest.sameBits(first[1], a[1]));
                }
            }
            // A part that saw no key (lse -inf, any out) leaves acc as it was, bit for bit.
            float[] out = full[0].clone(), lse = full[1].clone();
            float[] pout = filled(out.length, NAN), plse = filled(lse.length, Float.NEGATIVE_INFINITY);
            acc.set(Operand.OUT, out).set(Operand.LSE, lse);
            pt.set(Operand.OUT, pout).set(Operand.LSE, plse);
            md.merge(acc, pt);
            assertTrue(VectorsTest.sameBits(full[0], out), "out unchanged by a -inf part");
            assertTrue(VectorsTest.sameBits(full[1], lse), "lse unchanged by a -inf part");
            // Both -inf: out 0, lse -inf.
            float[] z = filled(out.length, 5f), zl = filled(lse.length, Float.NEGATIVE_INFINITY);
            acc.set(Operand.OUT, z).set(Operand.LSE, zl);
            md.merge(acc, pt);
            for (float x : z) {
                assertTrue(x == 0f, "out of two empty parts: " + x);
            }
            for (float x : zl) {
                assertEquals(Float.NEGATIVE_INFINITY, x);
            }
            // Errors: the same object twice, a missing operand, one array in both, a part too
            // short for md (bound through a smaller descriptor: the library's check).
            IllegalArgumentException iae = assertThrows(IllegalArgumentException.class, () -> md.merge(acc, acc));
            assertMentions(iae.getMessage(), "acc", "part", "same");
            assertThrows(NullPointerException.class, () -> md.merge(acc, null));
            pt.unset(Operand.LSE);
            NullPointerException npe = assertThrows(NullPointerException.class, () -> md.merge(acc, pt));
            assertMentions(npe.getMessage(), "part's", "lse", "NULL");
            pt.set(Operand.LSE, zl);
            Refusal e = Refusal.of(() -> md.merge(acc, pt));
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertMentions(e.libraryMessage(), "attn_merge", "overlaps");
            try (AttentionDesc small = AttentionDesc.builder().batch(1).heads(HQ, HKV).seqLen(MQ, 5).headDim(MD)
                    .build(); AttentionArgs sp = small.args()) {
                sp.set(Operand.OUT, new float[(int) small.requiredLen(Operand.OUT)])
                        .set(Operand.LSE, new float[HQ * MQ]);
                e = Refusal.of(() -> md.merge(acc, sp));
                assertContains(e.libraryMessage(), "part's out has " + (HQ * MQ * MD) + " elements, needs at least "
                        + (MB * HQ * MQ * MD));
            }
        }
    }

    @Test
    void mergeOfAVarlenPackSplitByKeys() {
        Seq[] seqs = sequences(13);
        // Each sequence's keys in two halves, each half a pack of its own.
        Seq[][] halves = new Seq[2][B];
        int[][] lk = new int[2][B];
        for (int b = 0; b < B; b++) {
            Seq s = seqs[b];
            int h = s.lk / 2;
            lk[0][b] = h;
            lk[1][b] = s.lk - h;
        }
        Causal none = Causal.NONE;
        float[][] full = varlenRun(seqs, LK, none);
        float[][] a = varlenRun(seqs, lk[0], none), b = varlenRun(tail(seqs, lk[0]), lk[1], none);
        try (AttentionDesc d = AttentionDesc.builder().batch(B).heads(HQ, HKV).seqLen(MAX_Q, MAX_K).headDim(D)
                .varlen().build(); AttentionArgs acc = d.args(); AttentionArgs pt = d.args()) {
            acc.set(Operand.OUT, a[0]).set(Operand.LSE, a[1]);
            pt.set(Operand.OUT, b[0]).set(Operand.LSE, b[1]);
            NullPointerException npe = assertThrows(NullPointerException.class, () -> d.merge(acc, pt));
            assertMentions(npe.getMessage(), "acc's", "cu_seqlens_q");
            acc.cuSeqlensQ(cumulative(LQ));
            d.merge(acc, pt);
        }
        double worst = 0;
        for (int x = 0; x < full[0].length; x++) {
            worst = Math.max(worst, relErr(a[0][x], full[0][x]));
        }
        for (int x = 0; x < full[1].length; x++) {
            worst = Math.max(worst, relErr(a[1][x], full[1][x]));
        }
        assertTrue(worst <= 1e-6, "merged varlen halves vs one call: " + worst);
    }

    /** The sequences with only their keys from first[b] on. */
    static Seq[] tail(Seq[] seqs, int[] first) {
        Seq[] t = new Seq[B];
        SplittableRandom g = new SplittableRandom(1);
        for (int b = 0; b < B; b++) {
            Seq s = seqs[b];
            int n = s.lk - first[b];
            Seq x = new Seq(s.lq, n, g);
            System.arraycopy(s.q, 0, x.q, 0, s.q.length);
            for (int h = 0; h < HKV; h++) {
                System.arraycopy(s.k, (h * s.lk + first[b]) * D, x.k, h * n * D, n * D);
                System.arraycopy(s.v, (h * s.lk + first[b]) * D, x.v, h * n * D, n * D);
            }
            t[b] = x;
        }
        return t;
    }

    /** A varlen pack of seqs over their first lk[b] keys: out [totalQ][hq][d], lse [hq][totalQ]. */
    static float[][] varlenRun(Seq[] seqs, int[] lk, Causal causal) {
        int[] cuQ = cumulative(LQ), cuK = cumulative(lk);
        int totalQ = cuQ[B], totalK = cuK[B];
        float[] q = new float[totalQ * HQ * D], k = new float[totalK * HKV * D], v = new float[k.length];
        for (int b = 0; b < B; b++) {
            Seq s = seqs[b];
            for (int h = 0; h < HQ; h++) {
                for (int i = 0; i < s.lq; i++) {
                    System.arraycopy(s.q, (h * s.lq + i) * D, q, ((cuQ[b] + i) * HQ + h) * D, D);
                }
            }
            for (int h = 0; h < HKV; h++) {
                for (int j = 0; j < lk[b]; j++) {
                    System.arraycopy(s.k, (h * s.lk + j) * D, k, ((cuK[b] + j) * HKV + h) * D, D);
                    System.arraycopy(s.v, (h * s.lk + j) * D, v, ((cuK[b] + j) * HKV + h) * D, D);
                }
            }
        }
        try (AttentionDesc d = AttentionDesc.builder().batch(B).heads(HQ, HKV).seqLen(MAX_Q, MAX_K).headDim(D)
                .causal(causal).varlen().build(); AttentionArgs a = d.args()) {
            float[] out = new float[totalQ * HQ * D], lse = new float[totalQ * HQ];
            a.set(Operand.Q, q).set(Operand.K, k).set(Operand.V, v).cuSeqlensQ(cuQ).cuSeqlensK(cuK)
                    .set(Operand.OUT, out).set(Operand.LSE, lse).run(Op.FORWARD);
            return new float[][] {out, lse};
        }
    }
}
