/*
 * libattn demo through the Java binding (org.libattn): the same program as examples/c/demo.c,
 * printing exactly the same text (ctest java_demo compares the two outputs).
 *
 * 1. The original 3-token example: Q all zero, so every visible key gets the same weight;
 *    causal, so query i sees keys 0..i. out[1][0] = (10 + 20) / 2 = 15.
 * 2. A batch of three sequences of lengths 5, 3 and 4, padded to 5: padding keys get weight 0
 *    from every query, on top of the causal rule.
 *
 * Run (one command, from a configured build dir `build`):
 *     cmake --build build --target attn_java_demo
 * which builds what is missing and runs
 *     java -Dorg.libattn.library.path=build/java/native/linux-x86_64 \
 *          -cp build/java/attn.jar:build/java/attn_java_demo.jar Demo
 * (that also works alone). With the Maven jar (natives inside, see bindings/java/README.md) no
 * property is needed:
 *     java -cp build/java/maven/attn-0.2.0.jar:build/java/attn_java_demo.jar Demo
 */
import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import org.libattn.Attention;
import org.libattn.AttentionDesc;
import org.libattn.Causal;

public final class Demo {
    private static final StringBuilder OUT = new StringBuilder();

    private Demo() {}

    /** Deterministic demo values in [-1, 1] (float arithmetic, as in the C demo). */
    static float value(int b, int i, int d, int salt) {
        return (float) ((b * 131 + i * 17 + d * 7 + salt) % 23) / 11.0f - 1.0f;
    }

    /** printf's %<width>.<prec>f: the float's exact value rounded half-even, as glibc does. */
    static String fixed(float x, int width, int prec) {
        String s = new BigDecimal(x).setScale(prec, RoundingMode.HALF_EVEN).toPlainString();
        if (!s.startsWith("-") && (x < 0 || (x == 0 && 1 / x < 0))) {
            s = "-" + s; // C keeps the sign of values that round to zero
        }
        return pad(s, width);
    }

    /** printf's %g (6 significant digits, trailing zeros removed). */
    static String g(float x) {
        if (x == 0) {
            return 1 / x < 0 ? "-0" : "0";
        }
        BigDecimal r = new BigDecimal(x).round(new MathContext(6, RoundingMode.HALF_EVEN));
        int exp = r.precision() - r.scale() - 1;
        if (exp < -4 || exp >= 6) {
            String m = r.movePointLeft(exp).stripTrailingZeros().toPlainString();
            return m + (exp < 0 ? "e-" : "e+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
        }
        return r.stripTrailingZeros().toPlainString();
    }

    static String pad(String s, int width) {
        StringBuilder b = new StringBuilder();
        for (int i = s.length(); i < width; i++) {
            b.append(' ');
        }
        return b.append(s).toString();
    }

    static String row(int i) {
        String n = Integer.toString(i);
        StringBuilder b = new StringBuilder("  q").append(n);
        for (int k = n.length(); k < 4; k++) {
            b.append(' ');
        }
        return b.toString();
    }

    /** Weight table: rows = queries, columns = keys; "." marks a hidden key (weight exactly 0). */
    static void printWeights(float[] w, int offset, int rows, int cols, boolean[] keyValid,
            int kvOffset) {
        OUT.append("        ");
        for (int j = 0; j < cols; j++) {
            OUT.append("  key").append(j)
                    .append(keyValid != null && !keyValid[kvOffset + j] ? "*" : " ");
        }
        OUT.append('\n');
        for (int i = 0; i < rows; i++) {
            OUT.append(row(i));
            for (int j = 0; j < cols; j++) {
                float x = w[offset + i * cols + j];
                OUT.append("  ").append(x == 0.0f ? pad(".", 6) : fixed(x, 6, 4));
            }
            OUT.append('\n');
        }
    }

    public static void main(String[] args) {
        OUT.append("libattn ").append(Attention.version()).append("  (kernel: ")
                .append(Attention.isa()).append(", threads: ").append(Attention.numThreads())
                .append(")\n\n");

        // ---- 1. The seed example: attention(Q, K, V, causal=True) ----
        float[] q = {0, 0, 0}, k = {1, 2, 3}, v = {10, 20, 30};
        float[] out = Attention.simple(q, k, v, 3, 1, true, null);
        float[] w;
        try (AttentionDesc seed = AttentionDesc.builder().seqLen(3).headDim(1)
                .causal(Causal.TOP_LEFT).build()) {
            w = seed.weights(q, k, null, null);
        }
        OUT.append("1. Three tokens, Q = 0, V = [10, 20, 30], causal\n");
        OUT.append("   weights (rows = queries, columns = keys, . = masked):\n");
        printWeights(w, 0, 3, 3, null, 0);
        OUT.append("   out = [").append(g(out[0])).append(", ").append(g(out[1])).append(", ")
                .append(g(out[2])).append("]   (out[1][0] = ").append(g(out[1]))
                .append(": the mean of V[0] and V[1])\n\n");
        if (out[1] != 15.0f) {
            System.out.print(OUT);
            System.err.println("error: out[1][0] is " + out[1] + ", not 15");
            System.exit(1);
        }

        // ---- 2. A padded batch: lengths 5, 3, 4 padded to 5, causal ----
        final int B = 3, S = 5, D = 4;
        int[] lengths = {5, 3, 4};
        float[] qs = new float[B * S * D], ks = new float[B * S * D], vs = new float[B * S * D];
        boolean[] keyValid = new boolean[B * S];
        for (int b = 0; b < B; b++) {
            for (int i = 0; i < S; i++) {
                keyValid[b * S + i] = i < lengths[b];
                for (int d = 0; d < D; d++) {
                    qs[(b * S + i) * D + d] = value(b, i, d, 0);
                    ks[(b * S + i) * D + d] = value(b, i, d, 5);
                    vs[(b * S + i) * D + d] = value(b, i, d, 11);
                }
            }
        }
        float[] outs, ws;
        try (AttentionDesc desc = AttentionDesc.builder().batch(B).heads(1).seqLen(S).headDim(D)
                .causal(Causal.TOP_LEFT).build()) {
            outs = desc.forward(qs, ks, vs, keyValid, null);
            ws = desc.weights(qs, ks, keyValid, null);
        }
        OUT.append("2. Batch of 3 sequences (lengths 5, 3, 4) padded to 5, causal; * = padding key\n");
        for (int b = 0; b < B; b++) {
            OUT.append("   sequence ").append(b).append(" (length ").append(lengths[b]).append("):\n");
            printWeights(ws, b * S * S, S, S, keyValid, b * S);
            OUT.append("   out:\n");
            for (int i = 0; i < S; i++) {
                OUT.append(row(i));
                for (int d = 0; d < D; d++) {
                    OUT.append("  ").append(fixed(outs[(b * S + i) * D + d], 8, 5));
                }
                OUT.append('\n');
            }
        }
        OUT.append("\nkernel: ").append(Attention.isa()).append(", threads: ")
                .append(Attention.numThreads()).append('\n');
        System.out.print(OUT);
        System.out.flush();
    }
}
