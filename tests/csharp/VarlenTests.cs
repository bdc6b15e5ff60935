// NUnit tests of packed variable-length batches through the C# face (capi/attn.h "Serving
// layouts"): the serving parameters read back and checked (Builder.Varlen, PageSize, MaxPages,
// BatchInvariant), and varlen packs (Operand.CuSeqlensQ/K) with windows, ALiBi on each diagonal
// and per-sequence slopes, through arrays, slices and native memory.
// The reference of every layout is the same sequence computed alone by a dense call, bit for
// bit (the library's batch invariance; the dense call's values are checked by the shared
// vectors, SharedVectorTests); tests/core/test_serving_*.cpp cover the same calls in C.
using System;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class VarlenTests
    {
        [Test]
        public void ServingParametersAreReadBackAndChecked()
        {
            using (var desc = new AttentionDesc.Builder().Dims(3, 4, 2, 9, 66, 24).Build())
            {
                Assert.IsFalse(desc.Varlen);
                Assert.AreEqual(0, desc.PageSize);
                Assert.AreEqual(0, desc.MaxPages);
                Assert.IsFalse(desc.BatchInvariant);
                Assert.AreEqual(0UL, desc.RequiredLen(Operand.BlockTable), "no pages, no table");
                Assert.AreEqual(4UL, desc.RequiredLen(Operand.CuSeqlensQ));
                Assert.AreEqual(4UL, desc.RequiredLen(Operand.CuSeqlensK));
                Assert.AreEqual(3UL * 9 * 2 * 24, desc.RequiredLen(Operand.NewK));
            }
            using (var desc = new AttentionDesc.Builder().Dims(3, 4, 2, 9, 66, 24).HeadDimV(8)
                                  .Varlen().PageSize(16).MaxPages(7).BatchInvariant().Build())
            {
                Assert.IsTrue(desc.Varlen);
                Assert.AreEqual(16, desc.PageSize);
                Assert.AreEqual(7, desc.MaxPages);
                Assert.IsTrue(desc.BatchInvariant);
                Assert.AreEqual(1, desc.GetInt(Param.Varlen));
                Assert.AreEqual(16.0, desc.GetDouble(Param.PageSize));
                Assert.AreEqual(1, desc.GetInt(Param.BatchInvariant));
                Assert.AreEqual(3UL * 7, desc.RequiredLen(Operand.BlockTable));
                // one token-major page of K: [16][2][24]; of V: [16][2][8]
                Assert.AreEqual(16UL * 2 * 24, desc.RequiredLen(Operand.K));
                Assert.AreEqual(16UL * 2 * 8, desc.RequiredLen(Operand.V));
                Assert.AreEqual(3UL * 9 * 2 * 8, desc.RequiredLen(Operand.NewV));
            }
            using (var desc = new AttentionDesc.Builder().Dims(3, 4, 2, 9, 66, 24).PageSize(16).Build())
                Assert.AreEqual(3UL * 5, desc.RequiredLen(Operand.BlockTable), "ceil(66 / 16) pages");

            var cases = new[] {
                Tuple.Create<TestDelegate, string, string>(
                    () => new AttentionDesc.Builder().PageSize(-1), "pageSize",
                    "(-1) is outside [0, "),
                Tuple.Create<TestDelegate, string, string>(
                    () => new AttentionDesc.Builder().MaxPages(1L << 31), "maxPages",
                    "(2147483648) is outside [0, "),
                Tuple.Create<TestDelegate, string, string>(
                    () => new AttentionDesc.Builder().Set(Param.Varlen, 2L), "value",
                    "(2) is outside [0, 1]"),
                Tuple.Create<TestDelegate, string, string>(
                    () => new AttentionDesc.Builder().Set(Param.BatchInvariant, 0.5), "value",
                    "(0.5) must be an integer"),
            };
            foreach (var c in cases)
            {
                var e = Assert.Throws<ArgumentOutOfRangeException>(c.Item1, c.Item3);
                Assert.AreEqual(c.Item2, e.ParamName, c.Item3);
                StringAssert.Contains(c.Item3, e.Message);
            }
            using (var args = new AttentionArgs())
            {
                var e = Assert.Throws<ArgumentException>(() => args.Bind(Operand.BlockTable, new float[3]));
                StringAssert.Contains("Operand.BlockTable (block_table) cannot be bound with Single data",
                                      e.Message);
                e = Assert.Throws<ArgumentException>(() => args.Bind(Operand.NewK, new int[3]));
                StringAssert.Contains("Operand.NewK (new_k) cannot be bound with Int32 data",
                                      e.Message);
                e = Assert.Throws<ArgumentException>(() => args.Bind(Operand.CuSeqlensQ, new bool[4]));
                StringAssert.Contains("(cu_seqlens_q) cannot be bound with Boolean data", e.Message);
                args.Bind(Operand.CuSeqlensQ, new int[4]).Bind(Operand.NewV, new float[1]);
                Assert.IsTrue(args.IsBound(Operand.CuSeqlensQ));
                Assert.IsTrue(args.IsBound(Operand.NewV));
                args.Unbind(Operand.NewV);
                Assert.IsFalse(args.IsBound(Operand.NewV));
            }
        }

        // A varlen pack with a window and ALiBi on each diagonal, both ALiBi forms, every causal
        // rule and one slope row per sequence ([batch][heads_q] slopes, strides (HQ, 1, 0))
        // equals each sequence computed alone by a dense call with its [heads_q] slopes, bit for
        // bit under batch invariance (the dense calls match float64 in the shared vectors).
        [Test]
        public void DiagonalAlibiFormAndPerSequenceSlopesMatchEachSequenceAlone()
        {
            var s = new Seqs(131);
            float[] q = s.PackQ(), k = s.PackK(), v = s.PackV();
            float[] slopes = Seqs.Uniform(new Random(132), Seqs.B * Seqs.HQ, 0.5)
                                 .Select(x => Math.Abs(x) + 0.05f).ToArray();
            int outLen = s.TotalQ * Seqs.HQ * Seqs.D, lseLen = Seqs.HQ * s.TotalQ;
            foreach (Causal causal in Enum.GetValues(typeof(Causal)))
                foreach (Diagonal diag in Enum.GetValues(typeof(Diagonal)))
                    foreach (AlibiForm form in Enum.GetValues(typeof(AlibiForm)))
                    {
                        string what = causal + ", " + diag + ", " + form;
                        var alone = new float[Seqs.B][][];
                        for (int b = 0; b < Seqs.B; b++)
                        {
                            if (Seqs.LQ[b] == 0) continue;
                            using (AttentionDesc one = new AttentionDesc.Builder()
                                       .Dims(1, Seqs.HQ, Seqs.HKV, Seqs.LQ[b], Seqs.LK[b], Seqs.D)
                                       .Causal(causal).Window(6, 3).Alibi(Alibi.Operand)
                                       .Diagonal(diag).AlibiForm(form).BatchInvariant().Build())
                            using (var args = new AttentionArgs())
                            {
                                var o = new float[one.RequiredLen(Operand.Out)];
                                var l = new float[one.RequiredLen(Operand.Lse)];
                                args.Bind(Operand.Q, s.Q[b]).Bind(Operand.K, s.K[b]).Bind(Operand.V, s.V[b])
                                    .Bind(Operand.AlibiSlopes,
                                          slopes.Skip(b * Seqs.HQ).Take(Seqs.HQ).ToArray())
                                    .Bind(Operand.Out, o).Bind(Operand.Lse, l);
                                one.Run(Op.Forward, args);
                                alone[b] = new[] { o, l };
                            }
                        }
                        using (AttentionDesc desc = Seqs.PackBuilder().Causal(causal).Window(6, 3)
                                   .Alibi(Alibi.Operand).Diagonal(diag).AlibiForm(form)
                                   .Strides(Operand.AlibiSlopes, Seqs.HQ, 1, 0).Build())
                        using (var args = new AttentionArgs())
                        {
                            Assert.AreEqual(diag, desc.Diagonal, what);
                            Assert.AreEqual(form, desc.AlibiForm, what);
                            Assert.AreEqual((ulong)slopes.Length, desc.RequiredLen(Operand.AlibiSlopes));
                            float[] output = Seqs.Filled(outLen, Seqs.Sentinel), lse = Seqs.Filled(lseLen, Seqs.Sentinel);
                            args.Bind(Operand.Q, q).Bind(Operand.K, k).Bind(Operand.V, v)
                                .Bind(Operand.CuSeqlensQ, s.CuQ).Bind(Operand.CuSeqlensK, s.CuK)
                                .Bind(Operand.AlibiSlopes, slopes).Bind(Operand.Out, output)
                                .Bind(Operand.Lse, lse);
                            desc.Run(Op.Forward, args);
                            for (int b = 0; b < Seqs.B; b++)
                                for (int h = 0; h < Seqs.HQ; h++)
                                    for (int i = 0; i < Seqs.LQ[b]; i++)
                                    {
                                        for (int x = 0; x < Seqs.D; x++)
                                            Bits.AssertSame(alone[b][0][(h * Seqs.LQ[b] + i) * Seqs.D + x],
                                                            output[((s.CuQ[b] + i) * Seqs.HQ + h) * Seqs.D + x],
                                                            what + ": out of sequence " + b);
                                        Bits.AssertSame(alone[b][1][h * Seqs.LQ[b] + i],
                                                        lse[h * s.TotalQ + s.CuQ[b] + i],
                                                        what + ": lse of sequence " + b);
                                    }
                            // [heads_q] slopes are too short for [batch][heads_q]
                            args.Bind(Operand.AlibiSlopes, slopes.Take(Seqs.HQ).ToArray());
                            var e = Assert.Catch<Exception>(() => desc.Run(Op.Forward, args), what);
                            StringAssert.Contains("alibi_slopes", e.Message, what);
                        }
                    }
        }

        [Test]
        public void VarlenPackIsBitIdenticalToEachSequenceAlone()
        {
            var s = new Seqs(101);
            float[] q = s.PackQ(), k = s.PackK(), v = s.PackV();
            using (AttentionDesc desc = Seqs.PackBuilder().Build())
            {
                // The descriptor's lengths are upper bounds (batch x max length tokens): the
                // call's come from cu_seqlens, so arrays as long as the pack are enough.
                Assert.AreEqual((ulong)(Seqs.B * Seqs.MaxQ * Seqs.HQ * Seqs.D), desc.RequiredLen(Operand.Out));
                Assert.AreEqual(14, s.TotalQ);
                Assert.AreEqual(113, s.TotalK);
                int outLen = s.TotalQ * Seqs.HQ * Seqs.D, lseLen = Seqs.HQ * s.TotalQ;
                Assert.Less((ulong)outLen, desc.RequiredLen(Operand.Out));
                Util.OnEveryIsaAndThreadCount(what =>
                {
                    // 11 / 5 floats past the pack: the empty sequence and the padding to max_q
                    // produce nothing, nothing is written past the pack.
                    float[] output = Seqs.Filled(outLen + 11, Seqs.Sentinel), lse = Seqs.Filled(lseLen + 5, Seqs.Sentinel);
                    using (var args = new AttentionArgs())
                    {
                        args.Bind(Operand.Q, q).Bind(Operand.K, k).Bind(Operand.V, v)
                            .Bind(Operand.CuSeqlensQ, s.CuQ).Bind(Operand.CuSeqlensK, s.CuK)
                            .Bind(Operand.Out, output).Bind(Operand.Lse, lse);
                        desc.Run(Op.Forward, args);
                    }
                    s.AssertPackIsAlone(output, lse, what);
                    for (int i = outLen; i < output.Length; i++) Assert.AreEqual(Seqs.Sentinel, output[i], what + " out[" + i + "]");
                    for (int i = lseLen; i < lse.Length; i++) Assert.AreEqual(Seqs.Sentinel, lse[i], what + " lse[" + i + "]");
                    Assert.IsTrue(output.Take(outLen).All(x => !float.IsNaN(x) && x != Seqs.Sentinel), what);
                });

                // The same through slices and memory that is not an array: cu_seqlens read from
                // native memory, Q/K/V/Out as windows of larger arrays.
                float[] qq = Seqs.Filled(7, float.NaN).Concat(q).ToArray();
                float[] big = Seqs.Filled(outLen + 20, Seqs.Sentinel);
                float[] lse2 = new float[lseLen];
                using (var cuQ = new NativeMemory<int>(s.CuQ))
                using (var cuK = new NativeMemory<int>(s.CuK))
                using (var args = new AttentionArgs())
                {
                    args.Bind(Operand.Q, new ReadOnlyMemory<float>(qq, 7, q.Length))
                        .Bind(Operand.K, new ReadOnlyMemory<float>(k)).Bind(Operand.V, v)
                        .Bind(Operand.CuSeqlensQ, (ReadOnlyMemory<int>)cuQ.Memory)
                        .Bind(Operand.CuSeqlensK, (ReadOnlyMemory<int>)cuK.Memory)
                        .Bind(Operand.Out, new Memory<float>(big, 10, outLen))
                        .Bind(Operand.Lse, lse2);
                    desc.Run(Op.Forward, args);
                    s.AssertPackIsAlone(big.Skip(10).ToArray(), lse2, "memory windows");
                    Assert.IsTrue(big.Take(10).Concat(big.Skip(10 + outLen)).All(x => x == Seqs.Sentinel));

                    // Not with varlen: the weights matrix (the library's Unsupported).
                    args.Bind(Operand.Weights, new float[desc.RequiredLen(Operand.Weights)]);
                    var ae = Assert.Throws<AttentionException>(() => desc.Run(Op.Weights, args));
                    Assert.AreEqual(Status.Unsupported, ae.Status);
                    StringAssert.Contains("ATTN_OP_WEIGHTS is not supported with ATTN_PARAM_VARLEN", ae.Message);
                }
            }
        }
    }
}
