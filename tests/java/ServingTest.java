package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The serving layouts (capi/attn.h "Serving layouts") through the Java face: a varlen pack with
 * batch invariance bit-identical (out and LSE) to each sequence computed alone; the same
 * sequences in paged caches (pages of 16 and 3, token- and head-major) filled by
 * {@link AttentionArgs#kvAppend} from a NaN pool; {@link AttentionDesc#merge} of a key split
 * against one call; bad tables, prefix sums and lengths (the library's message naming the
 * sequence and the slot, or the Java check before the call). The sequences are those of
 * tests/core/test_serving_merge.cpp's varlen merge case and of the Go binding's serving_test.go:
 * q {5, 0, 9}, k {40, 7, 66}, GQA 4/2, head_dim 24.
 */
class ServingTest {
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

    static FloatBuffer direct(float[] a, int position) {
        FloatBuffer f = ByteBuffer.allocateDirect(4 * (a.length + position)).order(ByteOrder.nativeOrder())
                .asFloatBuffer();
        f.position(position);
        f.put(a).position(position);
        return f;
    }

    static IntBuffer direct(int[] a, int position) {
        IntBuffer f = ByteBuffer.allocateDirect(4 * (a.length + position)).order(ByteOrder.nativeOrder())
                .asIntBuffer();
        f.position(position);
        f.put(a).position(position);
        return f;
    }

    static float[] rest(FloatBuffer f) {
        float[] a = new float[f.remaining()];
        f.duplicate().get(a);
        return a;
    }

    // ------------------------------------------------------------------ varlen

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

    // ------------------------------------------------------------------ paged + kvAppend

    /** A paged cache: shuffled page ids, -1 in unused slots, pools of NaN. */
    static final class Pages {
        final int page, maxPages, numPages;
        final boolean headMajor;
        final int[] table;

        Pages(int page, boolean headMajor, long seed) {
            this.page = page;
            this.headMajor = headMajor;
            maxPages = (MAX_K + page - 1) / page;
            int used = 0;
            for (int lk : LK) {
                used += (lk + page - 1) / page;
            }
            numPages = used + 3;
            List<Integer> ids = new ArrayList<>();
            for (int i = 0; i < numPages; i++) {
                ids.add(i);
            }
            Collections.shuffle(ids, new Random(seed));
            table = new int[B * maxPages];
            Arrays.fill(table, -1);
            int next = 0;
            for (int b = 0; b < B; b++) {
                for (int slot = 0; slot < (LK[b] + page - 1) / page; slot++) {
                    table[b * maxPages + slot] = ids.get(next++);
                }
            }
        }

        int poolLen() {
            return numPages * page * HKV * D;
        }

        /** Where key j (KV head h) of sequence b lives in a pool. */
        int at(int b, int h, int j) {
            int pg = table[b * maxPages + j / page], t = j % page;
            return headMajor ? pg * HKV * page * D + h * page * D + t * D
                    : pg * page * HKV * D + t * HKV * D + h * D;
        }

        AttentionDesc.Builder strides(AttentionDesc.Builder b) {
            b.pageSize(page);
            if (headMajor) {
                b.strides(Operand.K, (long) HKV * page * D, (long) page * D, D)
                        .strides(Operand.V, (long) HKV * page * D, (long) page * D, D);
            }
            return b;
        }
    }

    /** New rows [tokens][hkv][d] of keys [from[b], to[b]) of every sequence, in sequence order. */
    static float[] rows(Seq[] seqs, int[] from, int[] to, boolean values) {
        int n = 0;
        for (int b = 0; b < B; b++) {
            n += to[b] - from[b];
        }
        float[] r = new float[n * HKV * D];
        int at = 0;
        for (int b = 0; b < B; b++) {
            Seq s = seqs[b];
            for (int j = from[b]; j < to[b]; j++) {
                for (int h = 0; h < HKV; h++) {
                    System.arraycopy(values ? s.v : s.k, (h * s.lk + j) * D, r, at, D);
                    at += D;
                }
            }
        }
        return r;
    }

    @Test
    void pagedCachesFilledByKvAppendAreBitIdenticalToDense() {
        Seq[] seqs = sequences(21);
        Pack p = new Pack(seqs);
        float[][][] alone = aloneAll(seqs);
        Object[][] layouts = {{16, false, false}, {16, true, true}, {3, false, true}, {3, true, false}};
        int seed = 0;
        for (Object[] l : layouts) {
            Pages pg = new Pages((Integer) l[0], (Boolean) l[1], ++seed);
            boolean buffers = (Boolean) l[2];
            String label = "page " + pg.page + (pg.headMajor ? " head-major" : " token-major")
                    + (buffers ? ", direct buffers" : ", arrays");
            float[] kPool = filled(pg.poolLen(), NAN), vPool = filled(pg.poolLen(), NAN);
            FloatBuffer kBuf = buffers ? direct(kPool, 2) : null, vBuf = buffers ? direct(vPool, 9) : null;
            int[] zero = new int[B], prefix = new int[B];
            for (int b = 0; b < B; b++) {
                prefix[b] = LK[b] - LQ[b];
            }
            // 1. the prompt minus the last lq tokens, through a descriptor with room for it
            //    (seqQ = 66: a varlen append takes at most seqQ tokens per sequence)
            try (AttentionDesc prefill = pg.strides(AttentionDesc.builder().batch(B).heads(HQ, HKV)
                    .seqLen(MAX_K, MAX_K).headDim(D).causal(Causal.BOTTOM_RIGHT).varlen().batchInvariant())
                    .build(); AttentionArgs a = prefill.args()) {
                assertEquals(pg.page, prefill.pageSize());
                assertEquals((long) B * pg.maxPages, prefill.requiredLen(Operand.BLOCK_TABLE));
                a.cuSeqlensQ(cumulative(prefix)).seqLensK(prefix).blockTable(pg.table)
                        .newK(rows(seqs, zero, prefix, false)).newV(rows(seqs, zero, prefix, true));
                if (buffers) {
                    a.kvAppend(kBuf, vBuf);
                } else {
                    a.kvAppend(kPool, vPool);
                }
            }
            // 2. the last lq tokens (sequence 1: none) with the attention's own args, then the
            //    attention over the cache: chunked prefill / decode in one call
            try (AttentionDesc d = pg.strides(packBuilder()).build(); AttentionArgs a = d.args()) {
                a.cuSeqlensQ(p.cuQ).seqLensK(LK.clone()).blockTable(pg.table)
                        .newK(rows(seqs, prefix, LK, false)).newV(rows(seqs, prefix, LK, true));
                float[] out = filled(p.totalQ * HQ * D + 11, SENTINEL), lse = filled(p.totalQ * HQ + 11, SENTINEL);
                a.set(Operand.Q, p.q).set(Operand.OUT, out).set(Operand.LSE, lse);
                if (buffers) {
                    a.kvAppend(kBuf, vBuf);
                    a.set(Operand.K, kBuf).set(Operand.V, vBuf);
                } else {
                    a.kvAppend(kPool, vPool);
                    a.set(Operand.K, kPool).set(Operand.V, vPool);
                }
                a.run(Op.FORWARD);
                assertSameBits(label, p, out, lse, alone);
            }
            // Every used position holds exactly its key / value; every other float is untouched.
            float[] wantK = filled(pg.poolLen(), NAN), wantV = filled(pg.poolLen(), NAN);
            for (int b = 0; b < B; b++) {
                Seq s = seqs[b];
                for (int h = 0; h < HKV; h++) {
                    for (int j = 0; j < s.lk; j++) {
                        System.arraycopy(s.k, (h * s.lk + j) * D, wantK, pg.at(b, h, j), D);
                        System.arraycopy(s.v, (h * s.lk + j) * D, wantV, pg.at(b, h, j), D);
                    }
                }
            }
            assertTrue(VectorsTest.sameBits(wantK, buffers ? rest(kBuf) : kPool), label + ": k pool");
            assertTrue(VectorsTest.sameBits(wantV, buffers ? rest(vBuf) : vPool), label + ": v pool");
        }
    }

    // ------------------------------------------------------------------ merge

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

    // ------------------------------------------------------------------ errors

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

    // ------------------------------------------------------------------ parameters, enums, raw

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
                            null, null, null, null};
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
