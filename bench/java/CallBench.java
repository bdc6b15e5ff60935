/*
 * libattn Java call benchmark: forward through org.libattn.AttentionDesc with float[] arrays
 * (zero copy), B=1, H=1, d=64, non-causal. Prints exactly two lines:
 *     lang=java shape=tiny ns_per_call=<float>     (n = 16: per-call overhead)
 *     lang=java shape=large ns_per_call=<float>    (n = 2048: throughput)
 * Each is the best mean over several timed loops after a warm-up, with the loop lengths of the
 * C reference (bench/c/call_bench.c): about 50 ms per loop for tiny, 200 ms for large.
 * Threads and ISA are the library defaults, as in every language's bench.
 *
 * Run: cmake --build build --target attn_java_bench
 *  or: java -Djava.library.path=build/java/lib -cp build/java/attn.jar:build/java/attn_java_bench.jar CallBench
 */
import java.util.SplittableRandom;
import org.libattn.AttentionDesc;
import org.libattn.Operand;

public final class CallBench {
    private CallBench() {}

    /**
     * Best ns per call of forward over {@code loops} timed loops, each calibrated (as the C bench
     * does) to last about {@code targetLoopNs}; the calibration doubles as the warm-up (JIT,
     * thread pool, caches).
     */
    static double bestNsPerCall(int n, int d, double targetLoopNs, int loops) {
        try (AttentionDesc desc = AttentionDesc.builder().seqLen(n).headDim(d).build()) {
            SplittableRandom rnd = new SplittableRandom(42);
            float[] q = new float[n * d], k = new float[n * d], v = new float[n * d];
            for (int i = 0; i < n * d; i++) {
                q[i] = (float) (rnd.nextDouble() * 2 - 1);
                k[i] = (float) (rnd.nextDouble() * 2 - 1);
                v[i] = (float) (rnd.nextDouble() * 2 - 1);
            }
            float[] out = new float[(int) desc.requiredLen(Operand.OUT)];
            long calls = 1;
            for (int warm = 0; warm < 3; warm++) { // three calibrations: the JIT settles
                calls = 1;
                while (true) {
                    long t0 = System.nanoTime();
                    for (long c = 0; c < calls; c++) {
                        desc.forward(q, k, v, out);
                    }
                    double dt = System.nanoTime() - t0;
                    if (dt >= targetLoopNs || calls >= (1L << 30)) {
                        break;
                    }
                    calls = dt > 0 && dt * 4 < targetLoopNs ? calls * 4 : calls * 2;
                }
            }
            double best = Double.MAX_VALUE;
            for (int l = 0; l < loops; l++) {
                long t0 = System.nanoTime();
                for (long c = 0; c < calls; c++) {
                    desc.forward(q, k, v, out);
                }
                best = Math.min(best, (double) (System.nanoTime() - t0) / calls);
            }
            if (Float.isNaN(out[out.length - 1])) {
                throw new AssertionError("NaN output");
            }
            return best;
        }
    }

    public static void main(String[] args) {
        double tiny = bestNsPerCall(16, 64, 50e6, 7);
        double large = bestNsPerCall(2048, 64, 200e6, 5);
        System.out.printf(java.util.Locale.ROOT, "lang=java shape=tiny ns_per_call=%.1f%n", tiny);
        System.out.printf(java.util.Locale.ROOT, "lang=java shape=large ns_per_call=%.1f%n", large);
    }
}
