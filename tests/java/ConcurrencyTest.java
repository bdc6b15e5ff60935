package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** Many threads on one descriptor: each checks its own results and its own error messages. */
class ConcurrencyTest {
    static final int THREADS = 16;
    static final int ROUNDS = 40;

    interface Body {
        void run(int t) throws Exception;
    }

    /** Runs body(t) on THREADS threads started together; rethrows every thread's failure. */
    static void onThreads(int n, Body body) throws InterruptedException {
        CyclicBarrier start = new CyclicBarrier(n);
        List<Throwable> errors = java.util.Collections.synchronizedList(new ArrayList<>());
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < n; t++) {
            final int id = t;
            Thread th = new Thread(() -> {
                try {
                    start.await();
                    body.run(id);
                } catch (Throwable e) {
                    errors.add(new AssertionError("thread " + id + ": " + e, e));
                }
            }, "attn-test-" + t);
            threads.add(th);
            th.start();
        }
        for (Thread th : threads) {
            th.join(TimeUnit.MINUTES.toMillis(5));
            assertTrue(!th.isAlive(), th.getName() + " did not finish");
        }
        if (!errors.isEmpty()) {
            AssertionError all = new AssertionError(errors.size() + " thread(s) failed: " + errors.get(0));
            errors.forEach(all::addSuppressed);
            throw all;
        }
    }

    /*
     * The expected values are the library's own results for each thread's data, computed before
     * the threads start (one call at a time, on this thread): results are bit-identical whatever
     * the thread count and concurrency, so every thread must reproduce its own bits exactly
     * (another thread's data or a torn binding would show). The values of these calls are
     * checked on the shared vectors (VectorsTest, VariantsTest).
     */

    @Test
    void sixteenThreadsOnOneDescriptor() throws Exception {
        boolean[] keyValid = new boolean[2 * 11];
        for (int i = 0; i < keyValid.length; i++) {
            keyValid[i] = i % 11 < 9 || i < 11;
        }
        AtomicInteger calls = new AtomicInteger();
        try (AttentionDesc desc = AttentionDesc.builder().batch(2).heads(4, 2).seqLen(9, 11).headDim(16)
                .causal(Causal.TOP_LEFT).scale(0.25f).build()) {
            int outLen = (int) desc.requiredLen(Operand.OUT);
            float[][][] in = new float[THREADS][][], want = new float[THREADS][][];
            for (int t = 0; t < THREADS; t++) {
                float[] q = TestData.random(1000 + t, (int) desc.requiredLen(Operand.Q));
                float[] k = TestData.random(2000 + t, (int) desc.requiredLen(Operand.K));
                float[] v = TestData.random(3000 + t, (int) desc.requiredLen(Operand.V));
                in[t] = new float[][] {q, k, v};
                float[] out = new float[outLen], lse = new float[2 * 4 * 9];
                desc.forward(q, k, v, keyValid, null, out, lse);
                want[t] = new float[][] {out, lse, desc.weights(q, k, keyValid, null)};
                if (t > 0) {
                    assertTrue(TestData.sameBits("out", out, want[0][0]) != null, "threads have their own data");
                }
            }
            onThreads(THREADS, t -> {
                float[] q = in[t][0], k = in[t][1], v = in[t][2];
                FloatBuffer qb = AttentionTest.directFloats(q), kb = AttentionTest.directFloats(k),
                        vb = AttentionTest.directFloats(v);
                ByteBuffer kvb = ByteBuffer.allocateDirect(keyValid.length);
                for (boolean x : keyValid) {
                    kvb.put((byte) (x ? 1 : 0));
                }
                kvb.flip();
                for (int round = 0; round < ROUNDS; round++) {
                    float[] out = new float[outLen];
                    float[] lse = new float[2 * 4 * 9];
                    desc.forward(q, k, v, keyValid, null, out, lse);
                    check(t, round, TestData.sameBits("out", out, want[t][0]));
                    check(t, round, TestData.sameBits("lse", lse, want[t][1]));
                    float[] w = desc.weights(q, k, keyValid, null);
                    check(t, round, TestData.sameBits("weights", w, want[t][2]));
                    FloatBuffer ob = AttentionTest.directFloats(out.length);
                    desc.forward(qb, kb, vb, kvb, null, ob, null);
                    float[] got = new float[out.length];
                    ob.get(0, got);
                    check(t, round, TestData.sameBits("buffer out", got, want[t][0]));

                    // This thread's own library error: the message names its own numbers.
                    int hq = 2 * (t + 1) + 1;
                    try {
                        AttentionDesc.builder().heads(hq, 2).seqLen(3).headDim(4).build().close();
                        fail("heads " + hq + "/2 was accepted");
                    } catch (IllegalArgumentException e) {
                        AttentionTest.assertMentions(e.getMessage(), "heads_q", String.valueOf(hq));
                    }
                    // ... and its own Java-side error.
                    float[] shortQ = new float[q.length - 1 - t];
                    try {
                        desc.forward(shortQ, k, v, out);
                        fail("short q was accepted");
                    } catch (IllegalArgumentException e) {
                        AttentionTest.assertMentions(e.getMessage(), "q", String.valueOf(shortQ.length));
                    }
                    calls.addAndGet(3);
                }
            });
        }
        assertEquals(THREADS * ROUNDS * 3, calls.get());
    }

    /** One forward over in (key lengths included) with out and key mass bound: {out, mass}. */
    static float[][] outAndMass(AttentionDesc desc, CallFixture.Inputs in) {
        float[] out = new float[(int) desc.requiredLen(Operand.OUT)];
        float[] mass = new float[(int) desc.requiredLen(Operand.KEY_MASS)];
        try (AttentionArgs args = desc.args()) {
            CallFixture.bindInputs(args, in).set(Operand.OUT, out).set(Operand.KEY_MASS, mass)
                    .run(Op.FORWARD);
        }
        return new float[][] {out, mass};
    }

    @Test
    void threadsWithTheirOwnArgsOnOneDescriptor() throws Exception {
        // The extensible call: window, softcap, ALiBi, per-batch key lengths and key mass.
        int n = 8;
        try (AttentionDesc desc = AttentionDesc.builder().batch(2).heads(4, 2).seqLen(9, 13).headDim(16)
                .causal(Causal.BOTTOM_RIGHT).scale(0.25f).window(6, 1).softcap(4.0f).alibi(Alibi.STANDARD)
                .build()) {
            CallFixture.Inputs[] ins = new CallFixture.Inputs[n];
            float[][][] want = new float[n][][];
            for (int t = 0; t < n; t++) {
                ins[t] = CallFixture.inputs(desc, 4000 + 10 * t);
                ins[t].seqLensK = new int[] {13 - t, 5 + t};
                want[t] = outAndMass(desc, ins[t]);
            }
            onThreads(n, t -> {
                CallFixture.Inputs in = ins[t];
                try (AttentionArgs args = desc.args()) {
                    float[] out = new float[(int) desc.requiredLen(Operand.OUT)];
                    float[] mass = new float[(int) desc.requiredLen(Operand.KEY_MASS)];
                    args.set(Operand.Q, in.q).set(Operand.K, in.k).set(Operand.V, in.v)
                            .set(Operand.SEQ_LENS_K, in.seqLensK).set(Operand.OUT, out)
                            .set(Operand.KEY_MASS, mass);
                    for (int round = 0; round < ROUNDS; round++) {
                        Arrays.fill(out, Float.NaN);
                        args.run(Op.FORWARD);
                        check(t, round, TestData.sameBits("out", out, want[t][0]));
                        check(t, round, TestData.sameBits("key_mass", mass, want[t][1]));
                        // This thread's own library error.
                        args.set(Operand.SEQ_LENS_K, new int[] {14 + t, 0});
                        try {
                            args.run(Op.FORWARD);
                            fail("seq_lens_k " + (14 + t) + " was accepted");
                        } catch (IllegalArgumentException e) {
                            AttentionTest.assertMentions(e.getMessage(), "seq_lens_k",
                                    String.valueOf(14 + t));
                        }
                        args.set(Operand.SEQ_LENS_K, in.seqLensK);
                    }
                }
            });
        }
    }

    @Test
    void oneArgsObjectSharedByThreadsRunsOneCallAtATime() throws Exception {
        try (AttentionDesc desc = AttentionDesc.builder().heads(2, 2).seqLen(16, 16).headDim(8)
                .causal(Causal.TOP_LEFT).scale(0.3f).window(4, 0).build(); AttentionArgs args = desc.args()) {
            CallFixture.Inputs in = CallFixture.inputs(desc, 5000);
            float[] expected = new float[(int) desc.requiredLen(Operand.OUT)];
            try (AttentionArgs once = desc.args()) {
                once.set(Operand.Q, in.q).set(Operand.K, in.k).set(Operand.V, in.v).set(Operand.OUT, expected)
                        .run(Op.FORWARD);
            }
            float[] out = new float[(int) desc.requiredLen(Operand.OUT)];
            args.set(Operand.Q, in.q).set(Operand.K, in.k).set(Operand.V, in.v).set(Operand.OUT, out);
            onThreads(8, t -> {
                for (int round = 0; round < ROUNDS; round++) {
                    args.run(Op.FORWARD);
                    args.set(Operand.Q, in.q); // rebinding meanwhile is safe: calls are serialized
                }
            });
            check(0, 0, TestData.sameBits("out", out, expected));
        }
    }

    static void check(int t, int round, String failure) {
        if (failure != null) {
            fail("thread " + t + " round " + round + ": " + failure);
        }
    }

    @Test
    void closeWaitsForCallsInFlight() throws Exception {
        AttentionDesc desc = AttentionDesc.builder().heads(2, 2).seqLen(64, 64).headDim(32).scale(0.2f)
                .build();
        int n = 8;
        int outLen = (int) desc.requiredLen(Operand.OUT);
        float[][][] in = new float[n][][];
        float[][] expected = new float[n][];
        for (int t = 0; t < n; t++) {
            in[t] = new float[][] {TestData.random(50 + t, (int) desc.requiredLen(Operand.Q)),
                TestData.random(60 + t, (int) desc.requiredLen(Operand.K)),
                TestData.random(70 + t, (int) desc.requiredLen(Operand.V))};
            expected[t] = desc.forward(in[t][0], in[t][1], in[t][2], null, null);
        }
        CountDownLatch everyoneCalled = new CountDownLatch(n);
        AtomicInteger closedSeen = new AtomicInteger();
        Thread closer = new Thread(() -> {
            try {
                everyoneCalled.await();
                desc.close();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        closer.setDaemon(true);
        closer.start();
        onThreads(n, t -> {
            float[] q = in[t][0], k = in[t][1], v = in[t][2];
            boolean counted = false;
            try {
                while (true) {
                    float[] out = new float[outLen];
                    try {
                        desc.forward(q, k, v, out);
                    } catch (IllegalStateException e) {
                        AttentionTest.assertMentions(e.getMessage(), "closed");
                        closedSeen.incrementAndGet();
                        return;
                    }
                    check(t, 0, TestData.sameBits("out", out, expected[t]));
                    if (!counted) {
                        counted = true;
                        everyoneCalled.countDown(); // close only once every thread has computed
                    }
                }
            } finally {
                if (!counted) {
                    everyoneCalled.countDown(); // never leave the closer waiting
                }
            }
        });
        closer.join(TimeUnit.MINUTES.toMillis(5));
        assertEquals(n, closedSeen.get());
        assertTrue(desc.isClosed());
    }
}
