package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.libattn.CallFixture.*;
import static org.libattn.TestData.direct;
import static org.libattn.TestData.rest;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * Binding operands to the extensible call: arrays, byte masks and direct buffers give the same
 * bits, longer arrays are used by their prefix, and the binding, run and overlap errors name
 * the operand (docs/errors.md's "One rule in every language").
 */
class CallBindingTest {
    @Test
    void arraysByteMasksAndDirectBuffersGiveTheSameBits() {
        // all_combined binds every input operand (masks, bias, ALiBi slopes, sinks, query
        // padding, key lengths) with window, softcap and BSHD strides: checked against its
        // vector as boolean[] masks, then byte[] masks and direct buffers give the same bits.
        Vector vec = vector("all_combined");
        Inputs in = vec.in;
        Got g = vec.got;
        for (String op : new String[] {"q", "k", "v", "key_valid", "allowed", "bias", "alibi_slopes",
                "sinks", "query_valid", "seq_lens_k"}) {
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
            a.set(Operand.Q, direct(in.q, 1)).set(Operand.K, direct(in.k, 2)).set(Operand.V, direct(in.v, 0))
                    .set(Operand.KEY_VALID, byteBuffer(in.keyValid, 3))
                    .set(Operand.ALLOWED, byteBuffer(in.allowed, 0))
                    .set(Operand.QUERY_VALID, byteBuffer(in.queryValid, 1))
                    .set(Operand.BIAS, direct(in.bias, 5)).set(Operand.SINKS, direct(in.sinks, 1))
                    .set(Operand.ALIBI_SLOPES, direct(in.alibiSlopes, 4))
                    .set(Operand.SEQ_LENS_K, direct(in.seqLensK, 1))
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
}
