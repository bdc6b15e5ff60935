// libattn C# call benchmark: the same calls, inputs and timing as bench/c/call_bench.c, through
// the LibAttn binding (pinned float[] arrays, no copies). Prints exactly two lines:
//   lang=csharp shape=tiny ns_per_call=<x>    Forward, B=1, H=1, n=16,   d=64, non-causal
//   lang=csharp shape=large ns_per_call=<x>   Forward, B=1, H=1, n=2048, d=64, non-causal
// Each figure is the best (lowest) mean over several timed loops, after a warm-up that also
// sizes the loops. Threads and ISA are the library defaults, as in the C bench.
// Run: cmake --build <build> --target attn_csharp_bench   (bench/bindings.sh runs it with C's)
using System;
using System.Diagnostics;
using System.Globalization;
using LibAttn;

static class CallBench
{
    // Deterministic values in [-1, 1): the C bench's generator.
    static void Fill(float[] x, uint seed)
    {
        uint s = unchecked(seed * 2654435761u + 12345u);
        for (int i = 0; i < x.Length; i++)
        {
            s = unchecked(s * 1664525u + 1013904223u);
            x[i] = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
        }
    }

    static double NowNs(Stopwatch clock)
    {
        return clock.ElapsedTicks * (1e9 / Stopwatch.Frequency);
    }

    // Best ns per call of Forward over `loops` timed loops of `calls` calls each.
    static double BenchShape(int n, int d, double targetLoopNs, int loops)
    {
        using (AttentionDesc desc = new AttentionDesc.Builder().SeqLen(n).HeadDim(d).Build())
        {
            int len = n * d;
            float[] q = new float[len], k = new float[len], v = new float[len],
                    output = new float[len];
            Fill(q, 1);
            Fill(k, 2);
            Fill(v, 3);
            Stopwatch clock = Stopwatch.StartNew();

            // Warm-up (JIT, thread pool start, scratch allocation, caches) and calibration.
            long calls = 1;
            for (;;)
            {
                double t0 = NowNs(clock);
                for (long c = 0; c < calls; c++) desc.Forward(q, k, v, null, null, output);
                double dt = NowNs(clock) - t0;
                if (dt >= targetLoopNs || calls >= (1L << 30)) break;
                calls = dt > 0.0 && dt * 4.0 < targetLoopNs ? calls * 4 : calls * 2;
            }

            double best = -1.0;
            for (int l = 0; l < loops; l++)
            {
                double t0 = NowNs(clock);
                for (long c = 0; c < calls; c++) desc.Forward(q, k, v, null, null, output);
                double perCall = (NowNs(clock) - t0) / calls;
                if (best < 0.0 || perCall < best) best = perCall;
            }
            GC.KeepAlive(output[len - 1]);
            return best;
        }
    }

    static int Main()
    {
        double tiny = BenchShape(16, 64, 50e6, 7);
        double large = BenchShape(2048, 64, 200e6, 5);
        CultureInfo inv = CultureInfo.InvariantCulture;
        Console.WriteLine("lang=csharp shape=tiny ns_per_call=" + tiny.ToString("F1", inv));
        Console.WriteLine("lang=csharp shape=large ns_per_call=" + large.ToString("F1", inv));
        return 0;
    }
}
