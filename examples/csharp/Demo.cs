// libattn demo through the C# binding (LibAttn): the same program as examples/c/demo.c, printing
// exactly the same text (ctest csharp_demo compares the two outputs).
//
// 1. The original 3-token example: Q all zero, so every visible key gets the same weight;
//    causal, so query i sees keys 0..i. out[1][0] = (10 + 20) / 2 = 15.
// 2. A batch of three sequences of lengths 5, 3 and 4, padded to 5: padding keys get weight 0
//    from every query, on top of the causal rule.
//
// Run (one command, from a configured build dir `build`):
//   cmake --build build --target attn_csharp_demo
// which builds what is missing and runs `mono build/csharp/AttnDemo.exe` (that also works alone).
// Against the NuGet package instead (bindings/csharp/README.md, "Install"):
//   nuget install LibAttn -Version 0.2.0 -Source <feed> -OutputDirectory packages
//   mcs -r:packages/LibAttn.0.2.0/lib/net45/LibAttn.dll Demo.cs
//   MONO_PATH=packages/LibAttn.0.2.0/lib/net45 mono Demo.exe
using System;
using System.Globalization;
using System.Text;
using LibAttn;

static class Demo
{
    static readonly CultureInfo Inv = CultureInfo.InvariantCulture;

    // Deterministic demo values in [-1, 1] (float arithmetic, as in the C demo).
    static float Value(int b, int i, int d, int salt)
    {
        return (float)((b * 131 + i * 17 + d * 7 + salt) % 23) / 11.0f - 1.0f;
    }

    // printf's %<width>.<prec>f and %g for the values this demo prints.
    static string Fixed(float x, int width, int prec)
    {
        return ((double)x).ToString("F" + prec, Inv).PadLeft(width);
    }

    static string G(float x)
    {
        return ((double)x).ToString("G6", Inv);
    }

    // Weight table: rows = queries, columns = keys; "." marks a hidden key (weight exactly 0).
    static void PrintWeights(float[] w, int offset, int rows, int cols, bool[] keyValid,
                             int kvOffset)
    {
        var sb = new StringBuilder("        ");
        for (int j = 0; j < cols; j++)
            sb.Append("  key").Append(j)
              .Append(keyValid != null && !keyValid[kvOffset + j] ? "*" : " ");
        Console.WriteLine(sb);
        for (int i = 0; i < rows; i++)
        {
            sb.Clear().Append("  q").Append(i.ToString(Inv).PadRight(4));
            for (int j = 0; j < cols; j++)
            {
                float x = w[offset + i * cols + j];
                sb.Append("  ").Append(x == 0.0f ? ".".PadLeft(6) : Fixed(x, 6, 4));
            }
            Console.WriteLine(sb);
        }
    }

    static int Main()
    {
        Console.Write("libattn {0}  (kernel: {1}, threads: {2})\n\n", Attention.Version,
                      Attention.Isa, Attention.NumThreads);

        // ---- 1. The seed example: attention(Q, K, V, causal=True) ----
        float[] q = { 0, 0, 0 }, k = { 1, 2, 3 }, v = { 10, 20, 30 };
        float[] output = Attention.Simple(q, k, v, 3, 1, true);
        float[] weights;
        using (AttentionDesc seed = new AttentionDesc.Builder().SeqLen(3).HeadDim(1)
                                        .Causal(Causal.TopLeft).Build())
            weights = seed.Weights(q, k);
        Console.Write("1. Three tokens, Q = 0, V = [10, 20, 30], causal\n");
        Console.Write("   weights (rows = queries, columns = keys, . = masked):\n");
        PrintWeights(weights, 0, 3, 3, null, 0);
        Console.Write("   out = [{0}, {1}, {2}]   (out[1][0] = {3}: the mean of V[0] and V[1])\n\n",
                      G(output[0]), G(output[1]), G(output[2]), G(output[1]));
        if (output[1] != 15.0f)
        {
            Console.Error.WriteLine("error: out[1][0] is {0}, not 15", output[1]);
            return 1;
        }

        // ---- 2. A padded batch: lengths 5, 3, 4 padded to 5, causal ----
        const int B = 3, S = 5, D = 4;
        int[] lengths = { 5, 3, 4 };
        float[] qs = new float[B * S * D], ks = new float[B * S * D], vs = new float[B * S * D];
        var keyValid = new bool[B * S];
        for (int b = 0; b < B; b++)
            for (int i = 0; i < S; i++)
            {
                keyValid[b * S + i] = i < lengths[b];
                for (int d = 0; d < D; d++)
                {
                    qs[(b * S + i) * D + d] = Value(b, i, d, 0);
                    ks[(b * S + i) * D + d] = Value(b, i, d, 5);
                    vs[(b * S + i) * D + d] = Value(b, i, d, 11);
                }
            }
        float[] outs, ws;
        using (AttentionDesc desc = new AttentionDesc.Builder().Batch(B).Heads(1).SeqLen(S)
                                        .HeadDim(D).Causal(Causal.TopLeft).Build())
        {
            outs = desc.Forward(qs, ks, vs, keyValid, null);
            ws = desc.Weights(qs, ks, keyValid, null);
        }
        Console.Write("2. Batch of 3 sequences (lengths 5, 3, 4) padded to 5, causal; "
                      + "* = padding key\n");
        for (int b = 0; b < B; b++)
        {
            Console.Write("   sequence {0} (length {1}):\n", b, lengths[b]);
            PrintWeights(ws, b * S * S, S, S, keyValid, b * S);
            Console.Write("   out:\n");
            for (int i = 0; i < S; i++)
            {
                var sb = new StringBuilder("  q").Append(i.ToString(Inv).PadRight(4));
                for (int d = 0; d < D; d++) sb.Append("  ").Append(Fixed(outs[(b * S + i) * D + d], 8, 5));
                Console.WriteLine(sb);
            }
        }
        Console.Write("\nkernel: {0}, threads: {1}\n", Attention.Isa, Attention.NumThreads);
        return 0;
    }
}
