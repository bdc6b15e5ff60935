package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.libattn.ServingFixture.*;
import static org.libattn.TestData.direct;
import static org.libattn.TestData.rest;

import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Paged KV caches (pages of 16 and 3, token- and head-major) filled by
 * {@link AttentionArgs#kvAppend} from a NaN pool: bit-identical to the dense call.
 */
class PagedCacheTest {
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
}
