/*
 * libattn Java call benchmark: forward through org.libattn.AttentionDesc with float[] arrays
 * (zero copy), B=1, H=1, d=64, non-causal. Prints exactly two lines:
 *     lang=java shape=tiny ns_per_call=<float>     (n = 16: per-call overhead)
 *     lang=java shape=large ns_per_call=<float>    (n = 2048: throughput)
 * Each is the best of several timed loops after a warm-up (the JIT compiles the call path).
 *
 * Run: cmake --build build --target attn_java_bench
 *  or: java -Djava.library.path=build/java/lib -cp build/java/attn.jar:build/java/attn_java_bench.jar CallBench
 */
import java.util.SplittableRandom;
import org.libattn.AttentionDesc;
import org.libattn.Operand;

public final class CallBench {
    private CallBench() {}

    static double bestNsPerCall(int n, int d, int callsPerLoop, int loops, int warmupCalls) {
        try (AttentionDesc desc = AttentionDesc.builder().seqLen(n).headDim(d).build()) {
            SplittableRandom rnd = new SplittableRandom(42);
            float[] q = new float[n * d], k = new float[n * d], v = new float[n * d];
            for (int i = 0; i < n * d; i++) {
                q[i] = (float) (rnd.nextDouble() * 2 - 1);
                k[i] = (float) (rnd.nextDouble() * 2 - 1);
                v[i] = (float) (rnd.nextDouble() * 2 - 1);
            }
            float[] out = new float[(int) desc.requiredLen(Operand.OUT)];
            for (int i = 0; i < warmupCalls; i++) {
                desc.forward(q, k, v, out);
            }
            double best = Double.MAX_VALUE;
            for (int l = 0; l < loops; l++) {
                long t0 = System.nanoTime();
                for (int i = 0; i < callsPerLoop; i++) {
                    desc.forward(q, k, v, out);
                }
                long t1 = System.nanoTime();
                best = Math.min(best, (double) (t1 - t0) / callsPerLoop);
            }
            if (!Float.isFinite(out[0])) {
                throw new AssertionError("non-finite output");
            }
            return best;
        }
    }

    public static void main(String[] args) {
        double tiny = bestNsPerCall(16, 64, 20000, 9, 50000);
        System.out.printf("lang=java shape=tiny ns_per_call=%.1f%n", tiny);
        double large = bestNsPerCall(2048, 64, 3, 5, 2);
        System.out.printf("lang=java shape=large ns_per_call=%.1f%n", large);
    }
}
