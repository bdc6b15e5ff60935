package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.util.ArrayList;
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

    @Test
    void sixteenThreadsOnOneDescriptor() throws Exception {
        Reference ref = new Reference(2, 4, 2, 9, 11, 16, Causal.TOP_LEFT, 0.25);
        boolean[] keyValid = new boolean[2 * 11];
        for (int i = 0; i < keyValid.length; i++) {
            keyValid[i] = i % 11 < 9 || i < 11;
        }
        AtomicInteger calls = new AtomicInteger();
        try (AttentionDesc desc = ref.builder().build()) {
            onThreads(THREADS, t -> {
                float[] q = Reference.random(1000 + t, ref.requiredLen(0));
                float[] k = Reference.random(2000 + t, ref.requiredLen(1));
                float[] v = Reference.random(3000 + t, ref.requiredLen(2));
                Reference.Result r = ref.run(q, k, v, keyValid, null);
                FloatBuffer qb = AttentionTest.directFloats(q), kb = AttentionTest.directFloats(k),
                        vb = AttentionTest.directFloats(v);
                ByteBuffer kvb = ByteBuffer.allocateDirect(keyValid.length);
                for (boolean x : keyValid) {
                    kvb.put((byte) (x ? 1 : 0));
                }
                kvb.flip();
                for (int round = 0; round < ROUNDS; round++) {
                    float[] out = new float[ref.requiredLen(3)];
                    float[] lse = new float[2 * 4 * 9];
                    desc.forward(q, k, v, keyValid, null, out, lse);
                    check(t, round, Reference.compare("out", out, r.out, 1e-5));
                    check(t, round, Reference.compare("lse", lse, r.lse, 1e-5));
                    float[] w = desc.weights(q, k, keyValid, null);
                    check(t, round, Reference.compare("weights", w, r.weights, 1e-5));
                    FloatBuffer ob = AttentionTest.directFloats(out.length);
                    desc.forward(qb, kb, vb, kvb, null, ob, null);
                    float[] got = new float[out.length];
                    ob.get(0, got);
                    check(t, round, Reference.compare("buffer out", got, r.out, 1e-5));

                    // This thread's own library error: the message names its own numbers.
                    int hq = 2 * (t + 1) + 1;
                    try {
                        AttentionDesc.builder().heads(hq, 2).seqLen(3).headDim(4).build().close();
                        fail("heads " + hq + "/2 was accepted");
                    } catch (AttentionException e) {
                        assertEquals(Status.INVALID_ARGUMENT, e.status());
                        AttentionTest.assertMentions(e.libraryMessage(), "heads_q", String.valueOf(hq));
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

    @Test
    void threadsWithTheirOwnArgsOnOneDescriptor() throws Exception {
        // The extensible call: window, softcap, ALiBi, per-batch key lengths and key mass.
        Reference ref = new Reference(2, 4, 2, 9, 13, 16, Causal.BOTTOM_RIGHT, 0.25).window(6, 1)
                .softcap(4.0).alibi(Alibi.STANDARD);
        try (AttentionDesc desc = ref.builder().build()) {
            onThreads(8, t -> {
                Reference.Inputs in = ExtensibleCallTest.inputs(ref, 4000 + 10 * t);
                in.seqLensK = new int[] {13 - t, 5 + t};
                Reference.Result2 r = ref.run(in);
                try (AttentionArgs args = desc.args()) {
                    float[] out = new float[ref.requiredLen(3)];
                    float[] mass = new float[(int) desc.requiredLen(Operand.KEY_MASS)];
                    args.set(Operand.Q, in.q).set(Operand.K, in.k).set(Operand.V, in.v)
                            .set(Operand.SEQ_LENS_K, in.seqLensK).set(Operand.OUT, out)
                            .set(Operand.KEY_MASS, mass);
                    for (int round = 0; round < ROUNDS; round++) {
                        args.run(Op.FORWARD);
                        check(t, round, Reference.compare("out", out, r.out, 1e-5));
                        check(t, round, Reference.compare("key_mass", mass, r.keyMass, 1e-5));
                        // This thread's own library error.
                        args.set(Operand.SEQ_LENS_K, new int[] {14 + t, 0});
                        try {
                            args.run(Op.FORWARD);
                            fail("seq_lens_k " + (14 + t) + " was accepted");
                        } catch (AttentionException e) {
                            AttentionTest.assertMentions(e.libraryMessage(), "seq_lens_k",
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
        Reference ref = new Reference(1, 2, 2, 16, 16, 8, Causal.TOP_LEFT, 0.3).window(4, 0);
        Reference.Inputs in = ExtensibleCallTest.inputs(ref, 5000);
        double[] expected = ref.run(in).out;
        float[] out = new float[ref.requiredLen(3)];
        try (AttentionDesc desc = ref.builder().build(); AttentionArgs args = desc.args()) {
            args.set(Operand.Q, in.q).set(Operand.K, in.k).set(Operand.V, in.v).set(Operand.OUT, out);
            onThreads(8, t -> {
                for (int round = 0; round < ROUNDS; round++) {
                    args.run(Op.FORWARD);
                    args.set(Operand.Q, in.q); // rebinding meanwhile is safe: calls are serialized
                }
            });
        }
        check(0, 0, Reference.compare("out", out, expected, 1e-5));
    }

    static void check(int t, int round, String failure) {
        if (failure != null) {
            fail("thread " + t + " round " + round + ": " + failure);
        }
    }

    @Test
    void closeWaitsForCallsInFlight() throws Exception {
        Reference ref = new Reference(1, 2, 2, 64, 64, 32, Causal.NONE, 0.2);
        AttentionDesc desc = ref.builder().build();
        int n = 8;
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
            float[] q = Reference.random(50 + t, ref.requiredLen(0));
            float[] k = Reference.random(60 + t, ref.requiredLen(1));
            float[] v = Reference.random(70 + t, ref.requiredLen(2));
            double[] expected = ref.run(q, k, v, null, null).out;
            boolean counted = false;
            try {
                while (true) {
                    float[] out = new float[ref.requiredLen(3)];
                    try {
                        desc.forward(q, k, v, out);
                    } catch (IllegalStateException e) {
                        AttentionTest.assertMentions(e.getMessage(), "closed");
                        closedSeen.incrementAndGet();
                        return;
                    }
                    check(t, 0, Reference.compare("out", out, expected, 1e-5));
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
