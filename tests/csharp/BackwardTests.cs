// NUnit tests of the backward (Op.Backward with Operand.DOut .. DSinks), including bad input
// naming the argument.
// The shared vectors (storage.txt, backward.txt) run in VariantVectorTests.cs.
using System;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class BackwardTests
    {
        // B=1, HQ=2, HKV=1, SQ=4, SK=6, D=8, causal bottom-right, bias and sinks.
        static AttentionDesc Desc()
        {
            return new AttentionDesc.Builder().Dims(1, 2, 1, 4, 6, 8).Causal(Causal.BottomRight).Build();
        }

        sealed class Case : IDisposable
        {
            public readonly AttentionDesc Desc = BackwardTests.Desc();
            public readonly AttentionArgs Args = new AttentionArgs();
            public readonly float[] Q = Util.Values(64, 1), K = Util.Values(48, 2), V = Util.Values(48, 3),
                                    Bias = Util.Values(48, 4), Sinks = { 0.5f, -1f }, Out = new float[64],
                                    Lse = new float[8], DOut = Util.Values(64, 5);

            public Case()
            {
                Args.Bind(Operand.Q, Q).Bind(Operand.K, K).Bind(Operand.V, V).Bind(Operand.Bias, Bias)
                    .Bind(Operand.Sinks, Sinks).Bind(Operand.Out, Out).Bind(Operand.Lse, Lse);
                Desc.Run(Op.Forward, Args);
            }

            public void Dispose()
            {
                Args.Dispose();
                Desc.Dispose();
            }
        }

        [Test]
        public void GradientsAreBitIdenticalBoundTogetherOrAlone()
        {
            // bw_bias_first_alibi_sinks of tests/vectors/backward.txt (bias broadcast over
            // batch and heads, softcap, standard ALiBi, sinks): every gradient bound together,
            // against the expected files within 1e-4 (VARIANTS.md), then each one alone, as a
            // Memory window of a bigger zeroed array: the same bits, nothing written around it.
            var c = Vectors.Line("backward.txt", "bw_bias_first_alibi_sinks");
            string[] grads = c["grads"].Split(',');
            CollectionAssert.AreEqual(Vectors.GradNames, grads, "every gradient");
            using (var desc = Vectors.Builder(c).Build())
            using (var args = new AttentionArgs())
            {
                Vectors.BindInputs(c, desc, args, false);
                var o = new float[desc.RequiredLen(Operand.Out)];
                var lse = new float[desc.RequiredLen(Operand.Lse)];
                args.Bind(Operand.Out, o).Bind(Operand.Lse, lse);
                desc.Run(Op.Forward, args);
                args.Bind(Operand.DOut, Vectors.Expected(desc, Operand.DOut, c, "dout"));
                var together = new float[grads.Length][];
                for (int g = 0; g < grads.Length; g++)
                {
                    together[g] = new float[desc.RequiredLen(Vectors.OperandOf(grads[g]))];
                    args.Bind(Vectors.OperandOf(grads[g]), together[g]);
                }
                desc.Run(Op.Backward, args);
                for (int g = 0; g < grads.Length; g++)
                {
                    Operand op = Vectors.OperandOf(grads[g]);
                    Vectors.Check(Vectors.Expected(desc, op, c, grads[g]), together[g], grads[g], 1e-4, false);
                    Assert.IsTrue(together[g].Any(x => x != 0), grads[g]);
                }

                // One gradient at a time, as a Memory window, gives the same bits.
                for (int g = 0; g < grads.Length; g++)
                {
                    foreach (string other in grads) args.Unbind(Vectors.OperandOf(other));
                    int n = together[g].Length;
                    var wide = new float[n + 12];
                    args.Bind(Vectors.OperandOf(grads[g]), new Memory<float>(wide, 5, n));
                    desc.Run(Op.Backward, args);
                    CollectionAssert.AreEqual(together[g], wide.Skip(5).Take(n).ToArray(), grads[g] + " alone");
                    Assert.IsTrue(wide.Take(5).Concat(wide.Skip(5 + n)).All(x => x == 0),
                                  grads[g] + ": nothing written around the window");
                }
            }
        }

        [Test]
        public void BadBackwardCallsNameTheOperand()
        {
            using (var c = new Case())
            {
                var dq = new float[64];
                // No dout: the library names it.
                c.Args.Bind(Operand.DQ, dq);
                var ne = Assert.Throws<ArgumentNullException>(() => c.Desc.Run(Op.Backward, c.Args));
                Assert.AreEqual("dout", ne.ParamName);
                StringAssert.Contains("dout is NULL", ne.Message);
                // No gradient bound.
                c.Args.Bind(Operand.DOut, c.DOut).Unbind(Operand.DQ);
                ne = Assert.Throws<ArgumentNullException>(() => c.Desc.Run(Op.Backward, c.Args));
                StringAssert.Contains("nothing to compute", ne.Message);
                // Short dout and dq: before the call.
                c.Args.Bind(Operand.DQ, dq).Bind(Operand.DOut, new ReadOnlyMemory<float>(c.DOut, 0, 63));
                var e = Assert.Throws<ArgumentException>(() => c.Desc.Run(Op.Backward, c.Args));
                Assert.AreEqual("dout", e.ParamName);
                StringAssert.Contains("dout has 63 elements, needs at least 64", e.Message);
                c.Args.Bind(Operand.DOut, c.DOut).Bind(Operand.DQ, new Memory<float>(dq, 1, 63));
                e = Assert.Throws<ArgumentException>(() => c.Desc.Run(Op.Backward, c.Args));
                StringAssert.Contains("dq has 63 elements, needs at least 64", e.Message);
                c.Args.Bind(Operand.DQ, dq);
                // A gradient operand is an output: a read-only buffer is refused at Bind.
                e = Assert.Throws<ArgumentException>(() => c.Args.Bind(Operand.DV, new ReadOnlyMemory<float>(new float[48])));
                StringAssert.Contains("Operand.DV (dv) cannot be bound with read-only Single data", e.Message);
                // dbias without bias.
                c.Args.Bind(Operand.DBias, new float[48]).Unbind(Operand.Bias);
                e = Assert.Throws<ArgumentException>(() => c.Desc.Run(Op.Backward, c.Args));
                StringAssert.Contains("dbias is bound but bias is not", e.Message);
                c.Args.Unbind(Operand.DBias).Bind(Operand.Bias, c.Bias);
                // A gradient overlapping an input.
                c.Args.Bind(Operand.DQ, new Memory<float>(c.Q));
                e = Assert.Throws<ArgumentException>(() => c.Desc.Run(Op.Backward, c.Args));
                StringAssert.Contains("overlap", e.Message);
                c.Args.Bind(Operand.DQ, dq);
                c.Desc.Run(Op.Backward, c.Args);
                // 16-bit K is widened; int8 K is refused.
                c.Args.BindF16(Operand.K, Attention.ConvertF32ToF16(c.K));
                c.Desc.Run(Op.Backward, c.Args);
                float[] kScales;
                c.Args.Bind(Operand.K, Attention.QuantizeI8(c.K, 8, out kScales))
                    .Bind(Operand.KScale, kScales);
                var ae = Assert.Throws<AttentionException>(() => c.Desc.Run(Op.Backward, c.Args));
                Assert.AreEqual(Status.Unsupported, ae.Status);
                StringAssert.Contains("needs fp32, f16 or bf16 k (it is int8)", ae.Message);
            }
        }
    }
}
