// bindings/csharp/README.md's example: the seed call, a masked call, an error.
using System;
using LibAttn;

static class Quickstart
{
    static int Main()
    {
        // Q = 0, so each query averages the values of the keys it may see (causal).
        float[] out1 = Attention.Simple(new float[] {0, 0, 0}, new float[] {1, 2, 3},
                                        new float[] {10, 20, 30}, n: 3, d: 1, causal: true);
        Console.WriteLine("out[1][0] = " + out1[1]); // 15

        // Two sequences in a cache of 4 keys (the second holds 3), 2 query heads sharing one KV
        // head, the last query aligned with the last key, a window of 1 key to the left.
        using (AttentionDesc desc = new AttentionDesc.Builder()
                   .Batch(2).Heads(2, 1).SeqLen(4, 4).HeadDim(1)
                   .Causal(Causal.BottomRight).Window(1, 0).Build())
        using (var args = new AttentionArgs())
        {
            var q = new float[desc.RequiredLen(Operand.Q)];
            var k = new float[] {1, 2, 3, 4, 1, 2, 3, 4};
            var v = new float[] {10, 20, 30, 40, 10, 20, 30, 40};
            var o = new float[desc.RequiredLen(Operand.Out)];
            args.Bind(Operand.Q, q).Bind(Operand.K, k).Bind(Operand.V, v)
                .Bind(Operand.SeqLensK, new int[] {4, 3}).Bind(Operand.Out, o);
            desc.Run(Op.Forward, args);
            Console.WriteLine("last query: " + o[3] + " and " + o[11]); // 35 and 25

            try
            {
                desc.Forward(new float[3], k, v, null, null, o, null);
            }
            catch (ArgumentException e)
            {
                Console.WriteLine(e.Message); // q has 3 elements, needs at least 16
            }
            return out1[1] == 15f && o[3] == 35f && o[11] == 25f ? 0 : 1;
        }
    }
}
