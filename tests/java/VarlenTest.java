package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.libattn.ServingFixture.*;
import static org.libattn.TestData.direct;
import static org.libattn.TestData.rest;

import java.io.IOException;
import java.nio.FloatBuffer;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Varlen packs (capi/attn.h "Serving layouts") through the Java face: with batch invariance
 * bit-identical (out and LSE) to each sequence computed alone, also with the diagonal ALiBi
 * form and per-sequence slopes; the batch-invariant dense call on the shared vectors.
 */
class VarlenTest {
    @Test
    void aVarlenPackIsBitIdenticalToEachSequenceAlone() {
        Seq[] seqs = sequences(21);
        Pack p = new Pack(seqs);
        float[][][] alone = aloneAll(seqs);
        try (AttentionDesc d = packBuilder().build(); AttentionArgs a = d.args()) {
            assertTrue(d.varlen());
            assertTrue(d.batchInvariant());
            // requiredLen of the token operands is a full pack (an upper bound); the real pack
            // is shorter and is accepted: the library checks its own length.
            assertEquals((long) B * MAX_Q * HQ * D, d.requiredLen(Operand.Q));
            assertTrue(p.q.length < d.requiredLen(Operand.Q));
            assertTrue(p.k.length < d.requiredLen(Operand.K));
            assertEquals(B + 1, d.requiredLen(Operand.CU_SEQLENS_Q));
            int extra = 37;
            for (int threads : new int[] {1, 2}) {
                Attention.setNumThreads(threads);
                float[] out = filled(p.totalQ * HQ * D + extra, SENTINEL);
                float[] lse = filled(p.totalQ * HQ + extra, SENTINEL);
                a.set(Operand.Q, p.q).set(Operand.K, p.k).set(Operand.V, p.v).cuSeqlensQ(p.cuQ)
                        .cuSeqlensK(p.cuK).set(Operand.OUT, out).set(Operand.LSE, lse);
                a.run(Op.FORWARD);
                assertSameBits("arrays, " + threads + " thread(s)", p, out, lse, alone);
                // The same pack from direct buffers at nonzero positions.
                FloatBuffer ob = direct(filled(out.length, SENTINEL), 3), lb = direct(filled(lse.length, SENTINEL), 1);
                a.set(Operand.Q, direct(p.q, 5)).set(Operand.K, direct(p.k, 2)).set(Operand.V, direct(p.v, 7))
                        .cuSeqlensQ(direct(p.cuQ, 1)).cuSeqlensK(direct(p.cuK, 4)).set(Operand.OUT, ob)
                        .set(Operand.LSE, lb);
                a.run(Op.FORWARD);
                assertSameBits("buffers, " + threads + " thread(s)", p, rest(ob), rest(lb), alone);
            }
        } finally {
            Attention.setNumThreads(0);
        }
        // Every row was compared with its sequence alone; the alone values are real ones: not
        // the sentinel, finite, and out depends on the sequence (two sequences differ).
        for (int b = 0; b < B; b++) {
            if (seqs[b].lq == 0) {
                continue;
            }
            for (float[] part : alone[b]) {
                for (float x : part) {
                    assertTrue(Float.isFinite(x) && x != SENTINEL, "sequence " + b + " alone: " + x);
                }
            }
        }
        assertFalse(Arrays.equals(alone[0][0], Arrays.copyOf(alone[2][0], alone[0][0].length)));
    }

    /**
     * A varlen pack with a window and ALiBi on each diagonal, both ALiBi forms, every causal rule
     * and one slope row per sequence ([batch][headsQ] slopes, strides (HQ, 1, 0)) equals each
     * sequence computed alone by a dense call with its [headsQ] slopes, bit for bit under batch
     * invariance (the dense calls match float64 in the shared vectors).
     */
    @Test
    void diagonalAlibiFormAndPerSequenceSlopesMatchEachSequenceAlone() {
        Seq[] seqs = sequences(31);
        Pack p = new Pack(seqs);
        float[] slopes = uniform(new SplittableRandom(32), B * HQ, 0.05, 0.55);
        for (Causal causal : Causal.values()) {
            for (Diagonal diag : Diagonal.values()) {
                for (AlibiForm form : AlibiForm.values()) {
                    String label = causal + ", " + diag + ", " + form;
                    float[][][] alone = new float[B][][];
                    for (int b = 0; b < B; b++) {
                        Seq s = seqs[b];
                        if (s.lq == 0) {
                            continue;
                        }
                        try (AttentionDesc d = AttentionDesc.builder().heads(HQ, HKV).seqLen(s.lq, s.lk)
                                .headDim(D).causal(causal).window(6, 3).alibi(Alibi.OPERAND).diagonal(diag)
                                .alibiForm(form).batchInvariant().build(); AttentionArgs a = d.args()) {
                            float[] out = filled((int) d.requiredLen(Operand.OUT), SENTINEL);
                            float[] lse = filled((int) d.requiredLen(Operand.LSE), SENTINEL);
                            a.set(Operand.Q, s.q).set(Operand.K, s.k).set(Operand.V, s.v)
                                    .set(Operand.ALIBI_SLOPES, Arrays.copyOfRange(slopes, b * HQ, (b + 1) * HQ))
                                    .set(Operand.OUT, out).set(Operand.LSE, lse).run(Op.FORWARD);
                            alone[b] = new float[][] {out, lse};
                        }
                    }
                    try (AttentionDesc d = packBuilder().causal(causal).window(6, 3).alibi(Alibi.OPERAND)
                            .diagonal(diag).alibiForm(form).strides(Operand.ALIBI_SLOPES, HQ, 1, 0).build();
                            AttentionArgs a = d.args()) {
                        assertEquals(diag, d.diagonal());
                        assertEquals(form, d.alibiForm());
                        assertEquals(B * HQ, d.requiredLen(Operand.ALIBI_SLOPES));
                        float[] out = filled(p.totalQ * HQ * D, SENTINEL);
                        float[] lse = filled(p.totalQ * HQ, SENTINEL);
                        a.set(Operand.Q, p.q).set(Operand.K, p.k).set(Operand.V, p.v).cuSeqlensQ(p.cuQ)
                                .cuSeqlensK(p.cuK).set(Operand.ALIBI_SLOPES, slopes).set(Operand.OUT, out)
                                .set(Operand.LSE, lse).run(Op.FORWARD);
                        assertSameBits(label, p, out, lse, alone);
                        // [headsQ] slopes are too short for [batch][headsQ]
                        RuntimeException e = assertThrows(RuntimeException.class,
                                () -> a.set(Operand.ALIBI_SLOPES, Arrays.copyOf(slopes, HQ)).run(Op.FORWARD));
                        assertMentions(e.getMessage(), "alibi_slopes");
                    }
                }
            }
        }
    }

    /**
     * The dense call the serving layouts are compared with (batch invariant, through
     * AttentionArgs) gives the shared vectors' values: every bottom-right index.txt case (GQA,
     * decode, seq_q above and below seq_k, strides, masks) on a batch-invariant descriptor.
     */
    @Test
    void theBatchInvariantDenseCallMatchesTheSharedVectors() throws java.io.IOException {
        java.nio.file.Path dir = VectorsTest.vectorsDir();
        int n = 0;
        boolean gqa = false;
        for (VectorsTest.Case c : VectorsTest.cases()) {
            if (c.i("causal") != 2) {
                continue;
            }
            try (AttentionDesc d = VectorsTest.builder(c).batchInvariant().build(); AttentionArgs a = d.args()) {
                assertTrue(d.batchInvariant());
                VectorsTest.Data x = VectorsTest.data(dir, c, d);
                float[] out = new float[(int) d.requiredLen(Operand.OUT)];
                float[] lse = new float[(int) d.requiredLen(Operand.LSE)];
                a.set(Operand.Q, x.q).set(Operand.K, x.k).set(Operand.V, x.v).set(Operand.KEY_VALID, x.keyValid)
                        .set(Operand.ALLOWED, x.allowed).set(Operand.OUT, out).set(Operand.LSE, lse)
                        .run(Op.FORWARD);
                assertNull(VectorsTest.check("out", out, x.expOut), c.get("name"));
                assertNull(VectorsTest.check("lse", lse, x.expLse), c.get("name"));
            }
            n++;
            gqa |= c.i("heads_q") > c.i("heads_kv");
        }
        assertTrue(n >= 3 && gqa, n + " bottom-right cases");
    }
}
