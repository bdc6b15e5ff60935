// NUnit tests of AttentionDesc.Merge (attn_merge, capi/attn.h "Serving layouts"): the merge of
// the two halves of a key split equals one call (dense and varlen), an empty part leaves the
// accumulator as it is, and missing, short or overlapping operands are refused naming them.
using System;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class MergeTests
    {
        // One dense forward over keys [k0, k1) of a [B][HQ][SK][D] problem: the K/V views start
        // at key k0 of the full arrays (strides of the full problem, a Memory window).
        static void PartCall(int B, int hq, int hkv, int sq, int sk, int d, int k0, int k1,
                             float[] q, float[] k, float[] v, out float[] output, out float[] lse)
        {
            using (AttentionDesc desc = new AttentionDesc.Builder().Dims(B, hq, hkv, sq, k1 - k0, d)
                       .Scale(0.125f).Strides(Operand.K, hkv * sk * d, sk * d, d)
                       .Strides(Operand.V, hkv * sk * d, sk * d, d).Build())
            using (var args = new AttentionArgs())
            {
                output = Seqs.Filled((int)desc.RequiredLen(Operand.Out), Seqs.Sentinel);
                lse = Seqs.Filled((int)desc.RequiredLen(Operand.Lse), Seqs.Sentinel);
                args.Bind(Operand.Q, q)
                    .Bind(Operand.K, new ReadOnlyMemory<float>(k, k0 * d, k.Length - k0 * d))
                    .Bind(Operand.V, new ReadOnlyMemory<float>(v, k0 * d, v.Length - k0 * d))
                    .Bind(Operand.Out, output).Bind(Operand.Lse, lse);
                desc.Run(Op.Forward, args);
            }
        }

        static void Merge(AttentionDesc desc, float[] accOut, float[] accLse, float[] partOut,
                          float[] partLse, int[] cuQ = null)
        {
            using (var acc = new AttentionArgs())
            using (var part = new AttentionArgs())
            {
                acc.Bind(Operand.Out, accOut).Bind(Operand.Lse, accLse).Bind(Operand.CuSeqlensQ, cuQ);
                part.Bind(Operand.Out, partOut).Bind(Operand.Lse, partLse);
                desc.Merge(acc, part);
            }
        }

        [Test]
        public void MergeOfAKeySplitEqualsOneCall()
        {
            const int B = 2, HQ = 4, HKV = 2, SQ = 7, SK = 50, D = 16, Cut = 19;
            var r = new Random(9);
            float[] q = Seqs.Uniform(r, B * HQ * SQ * D, 2), k = Seqs.Uniform(r, B * HKV * SK * D, 2),
                    v = Seqs.Uniform(r, B * HKV * SK * D, 2);
            float[] full, fullLse, acc, accLse, part, partLse;
            PartCall(B, HQ, HKV, SQ, SK, D, 0, SK, q, k, v, out full, out fullLse);
            PartCall(B, HQ, HKV, SQ, SK, D, 0, Cut, q, k, v, out acc, out accLse);
            PartCall(B, HQ, HKV, SQ, SK, D, Cut, SK, q, k, v, out part, out partLse);
            float[] part0 = (float[])part.Clone(), partLse0 = (float[])partLse.Clone();
            using (AttentionDesc md = new AttentionDesc.Builder().Dims(B, HQ, HKV, SQ, SK, D).Build())
            {
                // the halves really differ from the whole
                Assert.Greater(Enumerable.Range(0, full.Length).Max(i => Bits.RelErr(acc[i], full[i])), 1e-3);
                Merge(md, acc, accLse, part, partLse);
                double worst = 0;
                for (int i = 0; i < full.Length; i++) worst = Math.Max(worst, Bits.RelErr(acc[i], full[i]));
                for (int i = 0; i < fullLse.Length; i++) worst = Math.Max(worst, Bits.RelErr(accLse[i], fullLse[i]));
                Assert.LessOrEqual(worst, 1e-6, "merged vs one call");
                Bits.AssertAllSame(part0, part, "part is only read: out");
                Bits.AssertAllSame(partLse0, partLse, "part is only read: lse");

                // A part that saw no key (lse -inf, any out) leaves acc as it is, bit for bit.
                float[] o = (float[])full.Clone(), l = (float[])fullLse.Clone();
                Merge(md, o, l, Seqs.Filled(full.Length, float.NaN),
                      Seqs.Filled(fullLse.Length, float.NegativeInfinity));
                Bits.AssertAllSame(full, o, "empty part: out");
                Bits.AssertAllSame(fullLse, l, "empty part: lse");
                // Both empty: out 0, lse -inf.
                o = Seqs.Filled(full.Length, 5f);
                l = Seqs.Filled(fullLse.Length, float.NegativeInfinity);
                Merge(md, o, l, Seqs.Filled(full.Length, float.NaN),
                      Seqs.Filled(fullLse.Length, float.NegativeInfinity));
                Assert.IsTrue(o.All(x => x == 0f) && l.All(float.IsNegativeInfinity), "both empty");
            }
        }

        [Test]
        public void MergeOfAVarlenPackSplitByKeys()
        {
            var s = new Seqs(303);
            // each sequence's keys in two halves, each half a varlen pack of its own
            int[] half = Seqs.LK.Select(n => n / 2).ToArray();
            int[] rest = Seqs.LK.Select(n => n - n / 2).ToArray();
            Func<int[], int[], float[][], float[]> rows = (from, to, src) =>
                Seqs.Rows(src, Seqs.HKV, Seqs.LK, from, to);
            int outLen = s.TotalQ * Seqs.HQ * Seqs.D, lseLen = Seqs.HQ * s.TotalQ;
            using (AttentionDesc desc = new AttentionDesc.Builder()
                       .Dims(Seqs.B, Seqs.HQ, Seqs.HKV, Seqs.MaxQ, Seqs.MaxK, Seqs.D).Varlen()
                       .BatchInvariant().Build())
            {
                Func<int[], int[], float[][]> call = (from, to) =>
                {
                    var o = new float[outLen];
                    var l = new float[lseLen];
                    var lens = Enumerable.Range(0, Seqs.B).Select(b => to[b] - from[b]).ToArray();
                    using (var args = new AttentionArgs())
                    {
                        args.Bind(Operand.Q, s.PackQ()).Bind(Operand.K, rows(from, to, s.K))
                            .Bind(Operand.V, rows(from, to, s.V)).Bind(Operand.CuSeqlensQ, s.CuQ)
                            .Bind(Operand.CuSeqlensK, Seqs.Cu(lens)).Bind(Operand.Out, o)
                            .Bind(Operand.Lse, l);
                        desc.Run(Op.Forward, args);
                    }
                    return new[] { o, l };
                };
                float[][] full = call(new int[Seqs.B], Seqs.LK), a = call(new int[Seqs.B], half),
                          b2 = call(half, Seqs.LK);
                // the whole pack is each sequence alone (no causal rule), bit for bit
                s.AssertPackIsAlone(full[0], full[1], "full pack", Causal.None);
                Merge(desc, a[0], a[1], b2[0], b2[1], s.CuQ);
                double worst = 0;
                for (int i = 0; i < outLen; i++) worst = Math.Max(worst, Bits.RelErr(a[0][i], full[0][i]));
                for (int i = 0; i < lseLen; i++) worst = Math.Max(worst, Bits.RelErr(a[1][i], full[1][i]));
                Assert.LessOrEqual(worst, 1e-6);
                Assert.AreEqual(rest.Sum(), s.TotalK - half.Sum());

                // errors: acc's cu_seqlens_q sizes both sides; the library names what is missing
                using (var acc = new AttentionArgs())
                using (var part = new AttentionArgs())
                {
                    acc.Bind(Operand.Out, a[0]).Bind(Operand.Lse, a[1]);
                    part.Bind(Operand.Out, b2[0]);
                    var ne = Assert.Throws<ArgumentNullException>(() => desc.Merge(acc, part));
                    StringAssert.Contains("attn_merge: part's lse is NULL", ne.Message);
                    part.Bind(Operand.Lse, b2[1]);
                    ne = Assert.Throws<ArgumentNullException>(() => desc.Merge(acc, part));
                    StringAssert.Contains("attn_merge: acc's cu_seqlens_q is NULL but ATTN_PARAM_VARLEN is 1", ne.Message);
                    acc.Bind(Operand.CuSeqlensQ, s.CuQ);
                    part.Bind(Operand.Lse, new Memory<float>(b2[1], 0, 3));
                    var e = Assert.Throws<ArgumentException>(() => desc.Merge(acc, part));
                    Assert.AreEqual("attn_merge: part's lse has 3 elements, needs at least 56", e.Message.Split('\n')[0].Trim());
                    Assert.AreEqual("part", e.ParamName);
                    part.Bind(Operand.Lse, a[1]);
                    e = Assert.Throws<ArgumentException>(() => desc.Merge(acc, part));
                    StringAssert.Contains("attn_merge: ", e.Message);
                    StringAssert.Contains("overlaps", e.Message);
                    e = Assert.Throws<ArgumentException>(() => desc.Merge(acc, acc));
                    StringAssert.Contains("overlaps", e.Message);
                    Assert.AreEqual("acc", Assert.Throws<ArgumentNullException>(() => desc.Merge(null, part)).ParamName);
                    Assert.AreEqual("part", Assert.Throws<ArgumentNullException>(() => desc.Merge(acc, null)).ParamName);
                }
            }
        }
    }
}
