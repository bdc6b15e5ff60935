package org.libattn;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.Predicate;

/**
 * Shared helpers of the extensible call's tests (Call*Test, LifecycleTest, RawLayerTest,
 * ConcurrencyTest): the operands of one attn_run, a face run of them, the variants.txt cases run
 * through it (tests/vectors/variants.txt, from the project's float64 reference), and direct
 * buffers at a nonzero position.
 */
final class CallFixture {
    private CallFixture() {}

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
        /** The inputs without a field of their own (e.g. q_scale), bound as their array type. */
        final Map<Operand, Object> other = new LinkedHashMap<>();
    }

    /** Random q, k, v (and nothing else) of the descriptor's required lengths. */
    static Inputs inputs(AttentionDesc d, long seed) {
        Inputs in = new Inputs();
        in.q = TestData.random(seed, (int) d.requiredLen(Operand.Q));
        in.k = TestData.random(seed + 1, (int) d.requiredLen(Operand.K));
        in.v = TestData.random(seed + 2, (int) d.requiredLen(Operand.V));
        return in;
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
        c.other.putAll(in.other);
        return c;
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
        args.set(Operand.Q, in.q).set(Operand.K, in.k).set(Operand.V, in.v)
                .set(Operand.KEY_VALID, in.keyValid).set(Operand.ALLOWED, in.allowed)
                .set(Operand.BIAS, in.bias).set(Operand.ALIBI_SLOPES, in.alibiSlopes)
                .set(Operand.SINKS, in.sinks).set(Operand.QUERY_VALID, in.queryValid)
                .set(Operand.SEQ_LENS_K, in.seqLensK);
        for (Map.Entry<Operand, Object> e : in.other.entrySet()) {
            VectorFile.bind(args, e.getKey(), e.getValue());
        }
        return args;
    }

    // ------------------------------------------------------------------ shared vectors

    /** One variants.txt case run through {@link #run}: its line, its inputs and the results. */
    static final class Vector {
        final VectorFile.Line line;
        final Inputs in;
        final Got got;

        Vector(VectorFile.Line line, Inputs in, Got got) {
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
            return VectorFile.builder(line).build();
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
        for (Map.Entry<Operand, Object> e : m.entrySet()) {
            switch (e.getKey()) {
            case Q: case K: case V: case BIAS: case ALIBI_SLOPES: case SINKS: case KEY_VALID:
            case ALLOWED: case QUERY_VALID: case SEQ_LENS_K:
                break;
            default:
                in.other.put(e.getKey(), e.getValue());
            }
        }
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
    static List<Vector> checkVectors(String what, Predicate<VectorFile.Line> select, int atLeast) {
        Path dir = VectorsTest.vectorsDir();
        List<Vector> done = new ArrayList<>();
        try {
            for (VectorFile.Line c : VectorFile.read(VectorFile.vectorsFile("variants.txt"))) {
                if (!select.test(c)) {
                    continue;
                }
                try (AttentionDesc desc = VectorFile.builder(c).build()) {
                    Inputs in = inputs(VectorFile.readInputs(dir, c, desc));
                    Got g = run(desc, in);
                    VectorFile.Got parts = new VectorFile.Got().add("out", g.out, false)
                            .add("lse", g.lse, false).add("weights", g.w, false);
                    if (c.get("mass").equals("1")) {
                        parts.add("key_mass", g.mass, false);
                    }
                    assertNull(VectorFile.check(dir, c, desc, parts), what + ": " + c.get("name"));
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

    static String opt(VectorFile.Line c, String key, String absent) {
        String v = c.opt(key);
        return v == null ? absent : v;
    }

    static boolean sameBits(float[] a, float[] b) {
        return VectorsTest.sameBits(a, b);
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

    static ByteBuffer byteBuffer(boolean[] a, int position) {
        ByteBuffer b = ByteBuffer.allocateDirect(a.length + position);
        b.position(position);
        for (boolean x : a) {
            b.put((byte) (x ? 1 : 0));
        }
        return b.position(position);
    }

}
