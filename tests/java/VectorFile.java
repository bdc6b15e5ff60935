package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.ShortBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Reader of the shared vectors (tests/vectors/*.txt, VARIANTS.md) and the face runs of their
 * lines, used by VariantsTest, ErrorVectorsTest and the tests that pick single cases: a line's
 * tokens, its descriptor through AttentionDesc.Builder's typed methods, its inputs (arrays or
 * direct buffers) and a forward or backward run through AttentionArgs.
 */
final class VectorFile {
    private VectorFile() {}

    static final double TOL = 1e-5;
    /** backward.txt's tolerance for the gradients (VARIANTS.md "Backward"). */
    static final double GRAD_TOL = 1e-4;
    static final String[] GRADS = {"dq", "dk", "dv", "dbias", "dsinks"};

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

        /** backward.txt's gradients (empty for the other files). */
        List<String> grads() {
            String g = opt("grads");
            return g == null ? java.util.Collections.emptyList() : Arrays.asList(g.split(","));
        }

        /** How q, k or v is stored (store.q / store.k / store.v; F32 when absent). */
        StorageType store(String operand) {
            String st = opt("store." + operand);
            return st == null ? StorageType.F32 : st.equals("f16") ? StorageType.F16
                    : st.equals("bf16") ? StorageType.BF16 : StorageType.I8;
        }
    }

    /** Every key a line may hold (VARIANTS.md: a reader must reject the others). */
    static final java.util.Set<String> KEYS = new java.util.HashSet<>(Arrays.asList("name", "batch",
            "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim", "causal", "window_left",
            "window_right", "softcap", "alibi", "softmax_plus_one", "head_dim_v", "bias_first",
            "weights_mode", "scale", "varlen", "diagonal", "alibi_form", "strides.q", "strides.k",
            "strides.v", "strides.out", "strides.bias", "strides.alibi_slopes", "in", "mass", "compute",
            "tol"));
    static final java.util.Set<String> ERROR_KEYS = new java.util.HashSet<>(Arrays.asList("op",
            "break", "status", "names"));
    /** storage.txt's extra keys (VARIANTS.md "Storage types"). */
    static final java.util.Set<String> STORAGE_KEYS = new java.util.HashSet<>(Arrays.asList(
            "store.q", "store.k", "store.v", "strides.k_scale", "strides.v_scale"));
    /** backward.txt's extra key (VARIANTS.md "Backward"). */
    static final java.util.Set<String> BACKWARD_KEYS = new java.util.HashSet<>(Arrays.asList("grads"));

    /** The keys a file may add to variants.txt's. */
    static java.util.Set<String> extraKeys(Path file) {
        switch (file.getFileName().toString()) {
        case "errors.txt":
            return ERROR_KEYS;
        case "storage.txt":
            return STORAGE_KEYS;
        case "backward.txt":
            return BACKWARD_KEYS;
        default:
            return java.util.Collections.emptySet();
        }
    }

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
                if (!KEYS.contains(key) && !extraKeys(file).contains(key)) {
                    throw new IllegalStateException(file + ": unknown key '" + key + "' in: " + t);
                }
                l.kv.put(key, tok.substring(eq + 1));
            }
            for (String name : l.inputs()) {
                if (!isInput(name)) {
                    throw new IllegalStateException(file + ": '" + name
                            + "' is not an input operand of the library, in: " + t);
                }
            }
            for (String name : new String[] {"q", "k", "v"}) {
                String st = l.opt("store." + name);
                if (st != null && !(st.equals("f16") || st.equals("bf16")
                        || st.equals("i8") && !name.equals("q"))) {
                    throw new IllegalStateException(file + ": bad store." + name + "=" + st + " in: " + t);
                }
            }
            for (String g : l.grads()) {
                if (!Arrays.asList(GRADS).contains(g)) {
                    throw new IllegalStateException(file + ": unknown gradient '" + g + "' in: " + t);
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
        if (c.opt("varlen") != null) {
            bl.varlen(flag(c, "varlen"));
        }
        if (c.opt("diagonal") != null) {
            bl.diagonal(Diagonal.fromCode(Long.parseLong(c.get("diagonal"))));
        }
        if (c.opt("alibi_form") != null) {
            bl.alibiForm(AlibiForm.fromCode(Long.parseLong(c.get("alibi_form"))));
        }
        if (c.opt("compute") != null) {
            bl.compute(Compute.fromCode(Long.parseLong(c.get("compute"))));
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
        // storage.txt's scale strides come after the others (VARIANTS.md)
        String[] keys = {"strides.q", "strides.k", "strides.v", "strides.out", "strides.bias",
            "strides.k_scale", "strides.v_scale", "strides.alibi_slopes"};
        Operand[] ops = {Operand.Q, Operand.K, Operand.V, Operand.OUT, Operand.BIAS,
            Operand.K_SCALE, Operand.V_SCALE, Operand.ALIBI_SLOPES};
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

    /**
     * True if the library's operand table (Operand.info(), attn_operand_info) lists an operand of
     * this name (as the files spell it) that may be bound as an input: what an in= list may name.
     */
    static boolean isInput(String name) {
        for (Operand op : Operand.values()) {
            if (op.info().name().equals(name)) {
                return !op.info().inputTypes().isEmpty();
            }
        }
        return false;
    }

    /** A q, k or v input stored in 16 bits or int8: its type and its short[] / byte[] (or buffer). */
    static final class Stored {
        final StorageType type;
        final Object data;

        Stored(StorageType type, Object data) {
            this.type = type;
            this.data = data;
        }
    }

    /**
     * The inputs of a case, as the Java types the face takes (masks as byte[]; a stored q, k or v
     * as a {@link Stored} short[] / byte[], an int8 one with its k_scale / v_scale; backward.txt's
     * dout as DOUT).
     */
    static Map<Operand, Object> readInputs(Path dir, Line c, AttentionDesc desc) throws IOException {
        Map<Operand, Object> in = new LinkedHashMap<>();
        List<String> names = new ArrayList<>(c.inputs());
        for (String name : c.inputs()) {
            if (c.store(name) == StorageType.I8) {
                names.add(name + "_scale");
            }
        }
        if (!c.grads().isEmpty()) {
            names.add("dout");
        }
        for (String name : names) {
            Operand op = operand(name);
            long need = desc.requiredLen(op);
            StorageType st = takes(op, Dtype.F16) ? c.store(name) : StorageType.F32;
            String file = c.get("name") + "." + name + "."
                    + (st == StorageType.F32 ? ext(op) : st == StorageType.I8 ? "i8" : st.name().toLowerCase(Locale.ROOT));
            byte[] raw = Files.readAllBytes(dir.resolve(file));
            ByteBuffer le = ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN);
            if (st == StorageType.I8) {
                assertEquals(need, raw.length, file + ": elements");
                in.put(op, new Stored(st, raw));
                continue;
            }
            if (st != StorageType.F32) {
                short[] a = new short[raw.length / 2];
                le.asShortBuffer().get(a);
                assertEquals(need, a.length, file + ": elements");
                in.put(op, new Stored(st, a));
                continue;
            }
            switch (ext(op)) {
            case "f32": {
                float[] a = new float[raw.length / 4];
                le.asFloatBuffer().get(a);
                assertEquals(need, a.length, file + ": elements");
                in.put(op, a);
                break;
            }
            case "i32": {
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

    /** True if op may be bound with type t, as an input or as an output (attn_operand_info). */
    static boolean takes(Operand op, Dtype t) {
        return op.info().inputTypes().contains(t) || op.info().outputTypes().contains(t);
    }

    /** The element type of the operand's file, from its types (attn_operand_info): f32, i32 or u8. */
    static String ext(Operand op) {
        return takes(op, Dtype.F32) ? "f32" : takes(op, Dtype.I32) ? "i32" : "u8";
    }

    static void bind(AttentionArgs args, Operand op, Object data) {
        if (data instanceof Stored) {
            Stored st = (Stored) data;
            if (st.type == StorageType.I8) {
                if (st.data instanceof byte[]) {
                    args.setI8(op, (byte[]) st.data);
                } else {
                    args.setI8(op, (ByteBuffer) st.data);
                }
            } else if (st.data instanceof short[]) {
                if (st.type == StorageType.F16) {
                    args.setF16(op, (short[]) st.data);
                } else {
                    args.setBf16(op, (short[]) st.data);
                }
            } else if (st.type == StorageType.F16) {
                args.setF16(op, (ShortBuffer) st.data);
            } else {
                args.setBf16(op, (ShortBuffer) st.data);
            }
            assertEquals(st.type, args.storage(op), op + ": storage");
        } else if (data instanceof float[]) {
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
        if (data instanceof Stored) {
            Stored st = (Stored) data;
            return new Stored(st.type, direct(st.data));
        }
        if (data instanceof short[]) {
            short[] a = (short[]) data;
            ShortBuffer b = ByteBuffer.allocateDirect(2 * (a.length + 2)).order(ByteOrder.nativeOrder())
                    .asShortBuffer();
            b.position(2);
            b.put(a).position(2);
            return b;
        }
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

    /**
     * The results of one case: named float32 buffers (out, lse, weights, key_mass; for a backward
     * line out, lse and the gradients), those with {@code written} set appended to the xlang file
     * in order.
     */
    static final class Got {
        final List<String> names = new ArrayList<>();
        final List<float[]> parts = new ArrayList<>();
        final List<Boolean> written = new ArrayList<>();

        Got add(String name, float[] a, boolean write) {
            names.add(name);
            parts.add(a);
            written.add(write);
            return this;
        }

        float[] get(String name) {
            return parts.get(names.indexOf(name));
        }

        void write(ByteArrayOutputStream xlang) {
            for (int i = 0; i < parts.size(); i++) {
                if (written.get(i)) {
                    VectorsTest.putLE(xlang, parts.get(i));
                }
            }
        }

        boolean sameBits(Got o) {
            if (!names.equals(o.names)) {
                return false;
            }
            for (int i = 0; i < parts.size(); i++) {
                if (!VectorsTest.sameBits(parts.get(i), o.parts.get(i))) {
                    return false;
                }
            }
            return true;
        }
    }

    /** Binds every input of a case (as direct buffers when {@code buffers}). */
    static void bindInputs(AttentionArgs args, Map<Operand, Object> in, boolean buffers) {
        for (Map.Entry<Operand, Object> e : in.entrySet()) {
            bind(args, e.getKey(), buffers ? direct(e.getValue()) : e.getValue());
        }
    }

    /** Runs one case through AttentionArgs (arrays, or direct buffers) and returns its results. */
    static Got run(AttentionDesc desc, Map<Operand, Object> in, boolean mass, boolean buffers) {
        float[] out = new float[(int) desc.requiredLen(Operand.OUT)];
        float[] lse = new float[(int) desc.requiredLen(Operand.LSE)];
        float[] w = new float[(int) desc.requiredLen(Operand.WEIGHTS)];
        float[] m = mass ? new float[(int) desc.requiredLen(Operand.KEY_MASS)] : null;
        try (AttentionArgs args = desc.args()) {
            bindInputs(args, in, buffers);
            if (!buffers) {
                args.set(Operand.OUT, out).set(Operand.LSE, lse).set(Operand.WEIGHTS, w);
                if (mass) {
                    args.set(Operand.KEY_MASS, m);
                }
                args.run(Op.FORWARD);
                args.run(Op.WEIGHTS);
            } else {
                FloatBuffer bo = (FloatBuffer) direct(out), bl = (FloatBuffer) direct(lse),
                        bw = (FloatBuffer) direct(w);
                FloatBuffer bm = mass ? (FloatBuffer) direct(m) : null;
                args.set(Operand.OUT, bo).set(Operand.LSE, bl).set(Operand.WEIGHTS, bw)
                        .set(Operand.KEY_MASS, bm);
                args.run(Op.FORWARD);
                args.unset(Operand.V).unset(Operand.OUT); // WEIGHTS needs neither
                args.run(Op.WEIGHTS);
                out = contents(bo);
                lse = contents(bl);
                w = contents(bw);
                m = mass ? contents(bm) : null;
            }
        }
        Got g = new Got().add("out", out, true).add("lse", lse, true).add("weights", w, true);
        return mass ? g.add("key_mass", m, true) : g;
    }

    /**
     * backward.txt's procedure: FORWARD with out and lse (zero-filled), then BACKWARD with the same
     * inputs, that out and lse, dout (in {@code in}) and the listed gradients (zero-filled).
     */
    static Got runBackward(AttentionDesc desc, Map<Operand, Object> in, List<String> grads,
            boolean buffers) {
        Got g = new Got();
        g.add("out", new float[(int) desc.requiredLen(Operand.OUT)], false);
        g.add("lse", new float[(int) desc.requiredLen(Operand.LSE)], false);
        for (String name : grads) {
            g.add(name, new float[(int) desc.requiredLen(operand(name))], true);
        }
        List<FloatBuffer> bufs = new ArrayList<>();
        try (AttentionArgs args = desc.args()) {
            bindInputs(args, in, buffers);
            for (int i = 0; i < g.parts.size(); i++) {
                Operand op = operand(g.names.get(i));
                if (buffers) {
                    FloatBuffer b = (FloatBuffer) direct(g.parts.get(i));
                    bufs.add(b);
                    args.set(op, b);
                } else {
                    args.set(op, g.parts.get(i));
                }
                if (i == 1) {
                    args.run(Op.FORWARD); // out and lse bound, no gradient yet
                }
            }
            args.backward();
        }
        for (int i = 0; buffers && i < bufs.size(); i++) {
            g.parts.set(i, contents(bufs.get(i)));
        }
        return g;
    }

    static float[] expected(Path dir, Line c, String part, long len) throws IOException {
        return VectorsTest.readF32(dir, c.get("name"), part, len);
    }

    /**
     * VARIANTS.md's checks of every part against its expected file: within 1e-5 (the gradients
     * 1e-4; out and lse within the line's tol when it gives one, a fast mode's), expected zeros
     * exactly 0.0f, expected -inf exactly -inf; null when they pass. As in
     * the C test (tests/c/test_variants.c), a gradient's expected zeros are only held to the
     * tolerance: a gradient may cancel to 0 in exact arithmetic and not quite in float32 (e.g.
     * dq of a query that sees one key, on the AVX-512 kernel).
     */
    static String check(Path dir, Line c, AttentionDesc desc, Got g) throws IOException {
        for (int p = 0; p < g.parts.size(); p++) {
            String name = g.names.get(p);
            float[] got = g.parts.get(p);
            float[] want = expected(dir, c, name, desc.requiredLen(operand(name)));
            boolean grad = Arrays.asList(GRADS).contains(name);
            boolean forward = name.equals("out") || name.equals("lse");
            double tol = grad ? GRAD_TOL
                    : forward && c.opt("tol") != null ? Double.parseDouble(c.get("tol")) : TOL;
            String m = TestData.compare(name, got, want, tol);
            if (m != null) {
                return m;
            }
            for (int i = 0; i < want.length; i++) {
                if (!grad && want[i] == 0.0f && Float.floatToRawIntBits(got[i]) != 0) {
                    return name + "[" + i + "] must be exactly 0.0f, got " + got[i];
                }
                if (want[i] == Float.NEGATIVE_INFINITY && got[i] != Float.NEGATIVE_INFINITY) {
                    return name + "[" + i + "] must be -inf, got " + got[i];
                }
            }
        }
        return null;
    }
}
