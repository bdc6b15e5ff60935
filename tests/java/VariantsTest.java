package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The shared vectors of the extensible call (tests/vectors/variants.txt, VARIANTS.md): every line
 * runs through the Java face (AttentionDesc.Builder's typed parameters + AttentionArgs.run), is
 * checked within 1e-5 * max(1, |expected|) with expected zero weights exactly 0 and expected
 * -inf lse exactly -inf, through arrays and (bit for bit the same) direct buffers, then on every
 * kernel (ISA) the CPU supports on 1 and 2 threads (bit-identical across thread counts). Writes
 * $ATTN_XLANG_DIR/java.variants.bin. Then every line of tests/vectors/errors.txt must fail (or
 * pass) with its status: IllegalArgumentException = INVALID_ARGUMENT, NullPointerException =
 * NULL_POINTER, AttentionException = its own status; the message must contain the named word.
 */
class VariantsTest {
    static final double TOL = 1e-5;
    static final String[] INPUTS = {"q", "k", "v", "key_valid", "allowed", "bias", "alibi_slopes",
        "sinks", "query_valid", "seq_lens_k"};

    /** One line: its tokens in file order. */
    static final class Line {
        final Map<String, String> kv = new LinkedHashMap<>();
        final String text;

        Line(String text) {
            this.text = text;
        }

        String get(String key) {
            String v = kv.get(key);
            if (v == null) {
                throw new IllegalStateException("case " + kv.get("name") + " lacks " + key);
            }
            return v;
        }

        String opt(String key) {
            return kv.get(key);
        }

        int i(String key) {
            return Integer.parseInt(get(key));
        }

        List<String> inputs() {
            return Arrays.asList(get("in").split(","));
        }
    }

    /** Every key a line may hold (VARIANTS.md: a reader must reject the others). */
    static final java.util.Set<String> KEYS = new java.util.HashSet<>(Arrays.asList("name", "batch",
            "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim", "causal", "window_left",
            "window_right", "softcap", "alibi", "softmax_plus_one", "head_dim_v", "bias_first",
            "weights_mode", "scale", "strides.q", "strides.k", "strides.v", "strides.out",
            "strides.bias", "in", "mass"));
    static final java.util.Set<String> ERROR_KEYS = new java.util.HashSet<>(Arrays.asList("op",
            "break", "status", "names"));

    static List<Line> read(Path file) throws IOException {
        List<Line> lines = new ArrayList<>();
        for (String raw : Files.readAllLines(file)) {
            String t = raw.trim();
            if (t.isEmpty() || t.startsWith("#")) {
                continue;
            }
            Line l = new Line(t);
            for (String tok : t.split("\\s+")) {
                int eq = tok.indexOf('=');
                if (eq <= 0) {
                    throw new IllegalStateException(file + ": bad token '" + tok + "' in: " + t);
                }
                String key = tok.substring(0, eq);
                boolean errors = file.getFileName().toString().equals("errors.txt");
                if (!KEYS.contains(key) && !(errors && ERROR_KEYS.contains(key))) {
                    throw new IllegalStateException(file + ": unknown key '" + key + "' in: " + t);
                }
                l.kv.put(key, tok.substring(eq + 1));
            }
            for (String name : l.inputs()) {
                if (!Arrays.asList(INPUTS).contains(name)) {
                    throw new IllegalStateException(file + ": unknown input '" + name + "' in: " + t);
                }
            }
            lines.add(l);
        }
        return lines;
    }

    static Path vectorsFile(String name) {
        Path p = VectorsTest.vectorsDir().resolve(name);
        if (!Files.isRegularFile(p)) {
            fail("shared test vectors not found: " + p.toAbsolutePath());
        }
        return p;
    }

    // ------------------------------------------------------------------ descriptors

    /** The descriptor of a line through the builder's typed methods (VARIANTS.md's order). */
    static AttentionDesc.Builder builder(Line c) {
        AttentionDesc.Builder bl = AttentionDesc.builder().batch(c.i("batch"))
                .heads(c.i("heads_q"), c.i("heads_kv")).seqLen(c.i("seq_q"), c.i("seq_k"))
                .headDim(c.i("head_dim"));
        if (c.opt("causal") != null) {
            bl.causal(Causal.fromCode(Long.parseLong(c.get("causal"))));
        }
        if (c.opt("window_left") != null || c.opt("window_right") != null) {
            int l = c.opt("window_left") == null ? -1 : c.i("window_left");
            int r = c.opt("window_right") == null ? -1 : c.i("window_right");
            bl.window(l, r);
        }
        if (c.opt("softcap") != null) {
            bl.softcap(Float.parseFloat(c.get("softcap")));
        }
        if (c.opt("alibi") != null) {
            bl.alibi(Alibi.fromCode(Long.parseLong(c.get("alibi"))));
        }
        if (c.opt("softmax_plus_one") != null) {
            bl.softmaxPlusOne(flag(c, "softmax_plus_one"));
        }
        if (c.opt("head_dim_v") != null) {
            bl.headDimV(c.i("head_dim_v"));
        }
        if (c.opt("bias_first") != null) {
            bl.biasFirst(flag(c, "bias_first"));
        }
        if (c.opt("weights_mode") != null) {
            bl.weightsMode(WeightsMode.fromCode(Long.parseLong(c.get("weights_mode"))));
        }
        if (c.opt("scale") != null) {
            bl.scale(Float.parseFloat(c.get("scale")));
        }
        strides(c, bl);
        return bl;
    }

    static boolean flag(Line c, String key) {
        int v = c.i(key);
        if (v != 0 && v != 1) {
            throw new IllegalStateException(key + " must be 0 or 1 in a variants.txt case");
        }
        return v == 1;
    }

    static void strides(Line c, AttentionDesc.Builder bl) {
        String[] keys = {"strides.q", "strides.k", "strides.v", "strides.out", "strides.bias"};
        Operand[] ops = {Operand.Q, Operand.K, Operand.V, Operand.OUT, Operand.BIAS};
        for (int o = 0; o < keys.length; o++) {
            String s = c.opt(keys[o]);
            if (s != null) {
                String[] p = s.split(",");
                bl.strides(ops[o], Long.parseLong(p[0]), Long.parseLong(p[1]), Long.parseLong(p[2]));
            }
        }
    }

    // ------------------------------------------------------------------ data

    static Operand operand(String name) {
        return Operand.valueOf(name.toUpperCase(Locale.ROOT));
    }

    /** The inputs of a case, as the Java types the face takes (masks as byte[]). */
    static Map<Operand, Object> readInputs(Path dir, Line c, AttentionDesc desc) throws IOException {
        Map<Operand, Object> in = new LinkedHashMap<>();
        for (String name : c.inputs()) {
            Operand op = operand(name);
            long need = desc.requiredLen(op);
            String file = c.get("name") + "." + name + "." + ext(op);
            byte[] raw = Files.readAllBytes(dir.resolve(file));
            ByteBuffer le = ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN);
            switch (op.element) {
            case FLOAT: {
                float[] a = new float[raw.length / 4];
                le.asFloatBuffer().get(a);
                assertEquals(need, a.length, file + ": elements");
                in.put(op, a);
                break;
            }
            case INT: {
                int[] a = new int[raw.length / 4];
                le.asIntBuffer().get(a);
                assertEquals(need, a.length, file + ": elements");
                in.put(op, a);
                break;
            }
            default:
                assertEquals(need, raw.length, file + ": elements");
                in.put(op, raw);
            }
        }
        return in;
    }

    static String ext(Operand op) {
        return op.element == Operand.Element.FLOAT ? "f32" : op.element == Operand.Element.INT ? "i32" : "u8";
    }

    static void bind(AttentionArgs args, Operand op, Object data) {
        if (data instanceof float[]) {
            args.set(op, (float[]) data);
        } else if (data instanceof byte[]) {
            args.set(op, (byte[]) data);
        } else if (data instanceof boolean[]) {
            args.set(op, (boolean[]) data);
        } else if (data instanceof int[]) {
            args.set(op, (int[]) data);
        } else if (data instanceof FloatBuffer) {
            args.set(op, (FloatBuffer) data);
        } else if (data instanceof ByteBuffer) {
            args.set(op, (ByteBuffer) data);
        } else {
            args.set(op, (IntBuffer) data);
        }
    }

    /** The same data as a direct buffer in native order, at a nonzero position. */
    static Object direct(Object data) {
        if (data instanceof float[]) {
            float[] a = (float[]) data;
            FloatBuffer f = ByteBuffer.allocateDirect(4 * (a.length + 1)).order(ByteOrder.nativeOrder())
                    .asFloatBuffer();
            f.position(1);
            f.put(a).position(1);
            return f;
        }
        if (data instanceof int[]) {
            int[] a = (int[]) data;
            IntBuffer b = ByteBuffer.allocateDirect(4 * a.length).order(ByteOrder.nativeOrder())
                    .asIntBuffer();
            b.put(a).flip();
            return b;
        }
        byte[] a = (byte[]) data;
        ByteBuffer b = ByteBuffer.allocateDirect(a.length + 3);
        b.position(3);
        b.put(a).position(3);
        return b;
    }

    static float[] contents(FloatBuffer f) {
        float[] a = new float[f.remaining()];
        f.duplicate().get(a);
        return a;
    }

    // ------------------------------------------------------------------ variants

    /** out, lse, weights and key_mass (null unless mass=1) of one case. */
    static final class Got {
        float[] out;
        float[] lse;
        float[] w;
        float[] mass;

        boolean sameBits(Got o) {
            return VectorsTest.sameBits(out, o.out) && VectorsTest.sameBits(lse, o.lse)
                    && VectorsTest.sameBits(w, o.w)
                    && (mass == null ? o.mass == null : VectorsTest.sameBits(mass, o.mass));
        }
    }

    /** Runs one case through AttentionArgs (arrays, or direct buffers) and returns its results. */
    static Got run(AttentionDesc desc, Map<Operand, Object> in, boolean mass, boolean buffers) {
        Got g = new Got();
        g.out = new float[(int) desc.requiredLen(Operand.OUT)];
        g.lse = new float[(int) desc.requiredLen(Operand.LSE)];
        g.w = new float[(int) desc.requiredLen(Operand.WEIGHTS)];
        g.mass = mass ? new float[(int) desc.requiredLen(Operand.KEY_MASS)] : null;
        try (AttentionArgs args = desc.args()) {
            for (Map.Entry<Operand, Object> e : in.entrySet()) {
                bind(args, e.getKey(), buffers ? direct(e.getValue()) : e.getValue());
            }
            if (!buffers) {
                args.set(Operand.OUT, g.out).set(Operand.LSE, g.lse).set(Operand.WEIGHTS, g.w);
                if (mass) {
                    args.set(Operand.KEY_MASS, g.mass);
                }
                args.run(Op.FORWARD);
                args.run(Op.WEIGHTS);
                return g;
            }
            FloatBuffer out = (FloatBuffer) direct(g.out), lse = (FloatBuffer) direct(g.lse),
                    w = (FloatBuffer) direct(g.w);
            FloatBuffer m = mass ? (FloatBuffer) direct(g.mass) : null;
            args.set(Operand.OUT, out).set(Operand.LSE, lse).set(Operand.WEIGHTS, w)
                    .set(Operand.KEY_MASS, m);
            args.run(Op.FORWARD);
            args.unset(Operand.V).unset(Operand.OUT); // WEIGHTS needs neither
            args.run(Op.WEIGHTS);
            g.out = contents(out);
            g.lse = contents(lse);
            g.w = contents(w);
            g.mass = mass ? contents(m) : null;
            return g;
        }
    }

    static float[] expected(Path dir, Line c, String part, long len) throws IOException {
        return VectorsTest.readF32(dir, c.get("name"), part, len);
    }

    /** VARIANTS.md's checks; null when they pass. */
    static String check(Path dir, Line c, AttentionDesc desc, Got g) throws IOException {
        float[] out = expected(dir, c, "out", desc.requiredLen(Operand.OUT));
        float[] lse = expected(dir, c, "lse", desc.requiredLen(Operand.LSE));
        float[] w = expected(dir, c, "weights", desc.requiredLen(Operand.WEIGHTS));
        String m = Reference.compare("out", g.out, VectorsTest.widen(out), TOL);
        if (m == null) {
            m = Reference.compare("lse", g.lse, VectorsTest.widen(lse), TOL);
        }
        if (m == null) {
            m = Reference.compare("weights", g.w, VectorsTest.widen(w), TOL);
        }
        if (m == null && g.mass != null) {
            float[] mass = expected(dir, c, "key_mass", desc.requiredLen(Operand.KEY_MASS));
            m = Reference.compare("key_mass", g.mass, VectorsTest.widen(mass), TOL);
        }
        for (int i = 0; m == null && i < w.length; i++) {
            if (w[i] == 0.0f && Float.floatToRawIntBits(g.w[i]) != 0) {
                m = "weights[" + i + "] must be exactly 0.0f, got " + g.w[i];
            }
        }
        for (int i = 0; m == null && i < lse.length; i++) {
            if (lse[i] == Float.NEGATIVE_INFINITY && g.lse[i] != Float.NEGATIVE_INFINITY) {
                m = "lse[" + i + "] must be -inf, got " + g.lse[i];
            }
        }
        return m;
    }

    @Test
    void sharedVariantVectors() throws IOException {
        Path dir = VectorsTest.vectorsDir();
        List<Line> cases = read(vectorsFile("variants.txt"));
        assertTrue(cases.size() > 0, "variants.txt lists no case");
        ByteArrayOutputStream xlang = new ByteArrayOutputStream();
        List<String> failures = new ArrayList<>();
        List<AttentionDesc> descs = new ArrayList<>();
        List<Map<Operand, Object>> inputs = new ArrayList<>();
        List<Got> first = new ArrayList<>();
        try {
            for (Line c : cases) {
                String name = c.get("name");
                AttentionDesc desc = builder(c).build();
                descs.add(desc);
                Map<Operand, Object> in = readInputs(dir, c, desc);
                inputs.add(in);
                boolean mass = c.get("mass").equals("1");
                Got g = run(desc, in, mass, false);
                first.add(g);
                VectorsTest.putLE(xlang, g.out);
                VectorsTest.putLE(xlang, g.lse);
                VectorsTest.putLE(xlang, g.w);
                if (mass) {
                    VectorsTest.putLE(xlang, g.mass);
                }
                String m = check(dir, c, desc, g);
                if (m != null) {
                    failures.add(name + " (arrays): " + m);
                }
                if (!run(desc, in, mass, true).sameBits(g)) {
                    failures.add(name + ": direct-buffer results differ from the array results");
                }
            }
            String xdir = System.getenv("ATTN_XLANG_DIR");
            if (xdir != null && !xdir.isEmpty()) {
                Files.createDirectories(Paths.get(xdir));
                Files.write(Paths.get(xdir, "java.variants.bin"), xlang.toByteArray());
            }

            // Every kernel, 1 and 2 threads: within tolerance, bit-identical across threads.
            List<String> isas = new ArrayList<>();
            try {
                for (String isa : new String[] {"scalar", "sse2", "avx2", "avx512"}) {
                    try {
                        Attention.setIsa(isa);
                    } catch (AttentionException e) {
                        assertEquals(Status.UNSUPPORTED, e.status(), isa + ": " + e.getMessage());
                        continue;
                    }
                    isas.add(isa);
                    for (int i = 0; i < cases.size(); i++) {
                        Line c = cases.get(i);
                        boolean mass = c.get("mass").equals("1");
                        Attention.setNumThreads(1);
                        Got one = run(descs.get(i), inputs.get(i), mass, false);
                        Attention.setNumThreads(2);
                        Got two = run(descs.get(i), inputs.get(i), mass, false);
                        String m = check(dir, c, descs.get(i), one);
                        if (m != null) {
                            failures.add(c.get("name") + " (isa " + isa + "): " + m);
                        }
                        if (!one.sameBits(two)) {
                            failures.add(c.get("name") + " (isa " + isa + "): 2 threads differ from 1");
                        }
                    }
                }
            } finally {
                Attention.setIsa(null);
                Attention.setNumThreads(0);
            }
            assertTrue(isas.contains("scalar"), "the scalar kernel must always be available");
            System.out.println("variant vectors: " + cases.size() + " cases, ISAs " + isas + ", "
                    + failures.size() + " failure(s)");
        } finally {
            descs.forEach(AttentionDesc::close);
        }
        if (!failures.isEmpty()) {
            fail(failures.size() + " variant vector check(s) failed:\n" + String.join("\n", failures));
        }
    }

    // ------------------------------------------------------------------ errors

    /** Runs one errors.txt line; returns the status the Java face reported (0 = none). */
    static int runError(Line c, StringBuilder message) {
        try {
            runBrokenCase(c);
            return Status.OK.code();
        } catch (IllegalArgumentException e) {
            message.append(e.getMessage());
            return Status.INVALID_ARGUMENT.code();
        } catch (NullPointerException e) {
            message.append(e.getMessage());
            return Status.NULL_POINTER.code();
        } catch (AttentionException e) {
            message.append(e.getMessage());
            return e.code();
        }
    }

    static void runBrokenCase(Line c) {
        String brk = c.get("break");
        int colon = brk.indexOf(':');
        String kind = brk.substring(0, colon), what = brk.substring(colon + 1);
        AttentionDesc.Builder bl = builder(c);
        if (kind.equals("param")) { // through the generic, bounds-checked setter
            String[] p = what.split("=");
            Param param = Param.valueOf(p[0].toUpperCase(Locale.ROOT));
            double v = Double.parseDouble(p[1]);
            if (param.isFloat()) {
                bl.param(param, v);
            } else {
                bl.param(param, (long) v);
            }
        }
        if (kind.equals("strides")) {
            String[] p = what.split("=");
            String[] s = p[1].split(",");
            bl.strides(operand(p[0]), Long.parseLong(s[0]), Long.parseLong(s[1]), Long.parseLong(s[2]));
        }
        Op op = Op.valueOf(c.get("op").toUpperCase(Locale.ROOT));
        if (kind.equals("op")) {
            op = Op.valueOf(what.toUpperCase(Locale.ROOT));
        }
        try (AttentionDesc desc = bl.build(); AttentionArgs args = desc.args()) {
            // Zero-filled buffers of the required lengths: the inputs, then the outputs.
            Map<Operand, Object> data = new HashMap<>();
            List<Operand> bound = new ArrayList<>();
            for (String name : c.inputs()) {
                bound.add(operand(name));
            }
            if (op == Op.WEIGHTS) {
                bound.add(Operand.WEIGHTS);
            } else {
                bound.add(Operand.OUT);
                bound.add(Operand.LSE);
                if (c.get("mass").equals("1")) {
                    bound.add(Operand.KEY_MASS);
                }
            }
            String shortOf = kind.equals("short") ? what : null;
            String nullOf = kind.equals("null") ? what : null;
            String[] alias = kind.equals("alias") ? what.split("=") : null;
            for (Operand o : bound) {
                int len = (int) desc.requiredLen(o);
                if (o.cname.equals(shortOf)) {
                    len -= 1;
                }
                if (alias != null && (o.cname.equals(alias[0]) || o.cname.equals(alias[1]))) {
                    // Both operands share one buffer, long enough for either.
                    len = (int) Math.max(desc.requiredLen(operand(alias[0])),
                            desc.requiredLen(operand(alias[1])));
                }
                data.put(o, o.element == Operand.Element.FLOAT ? new float[len]
                        : o.element == Operand.Element.INT ? new int[len] : new byte[len]);
            }
            if (alias != null) {
                data.put(operand(alias[0]), data.get(operand(alias[1])));
            }
            if (kind.equals("set")) { // set:seq_lens_k[1]=6
                String name = what.substring(0, what.indexOf('['));
                int at = Integer.parseInt(what.substring(what.indexOf('[') + 1, what.indexOf(']')));
                int value = Integer.parseInt(what.substring(what.indexOf('=') + 1));
                ((int[]) data.get(operand(name)))[at] = value;
            }
            for (Operand o : bound) {
                if (!o.cname.equals(nullOf)) {
                    bind(args, o, data.get(o));
                }
            }
            args.run(op);
        }
    }

    @Test
    void sharedErrorCases() throws IOException {
        Path file = VectorsTest.vectorsDir().resolve("errors.txt");
        if (!Files.isRegularFile(file)) {
            fail("tests/vectors/errors.txt not found: " + file.toAbsolutePath());
        }
        List<Line> cases = read(file);
        assertTrue(cases.size() > 0, "errors.txt lists no case");
        List<String> failures = new ArrayList<>();
        for (Line c : cases) {
            StringBuilder msg = new StringBuilder();
            int got;
            try {
                got = runError(c, msg);
            } catch (RuntimeException e) {
                failures.add(c.get("name") + ": unexpected " + e);
                continue;
            }
            int want = c.i("status");
            if (got != want) {
                failures.add(c.get("name") + ": status " + got + " (" + msg + "), expected " + want);
                continue;
            }
            // The word, case-insensitively, with no letter or digit right before or after it.
            String word = c.opt("names");
            if (word != null && !java.util.regex.Pattern.compile("(?<![A-Za-z0-9])"
                    + java.util.regex.Pattern.quote(word) + "(?![A-Za-z0-9])",
                    java.util.regex.Pattern.CASE_INSENSITIVE).matcher(msg).find()) {
                failures.add(c.get("name") + ": the message does not name '" + word + "': " + msg);
            }
        }
        System.out.println("error cases: " + cases.size() + ", " + failures.size() + " failure(s)");
        if (!failures.isEmpty()) {
            fail(failures.size() + " error case(s) failed:\n" + String.join("\n", failures));
        }
    }
}
