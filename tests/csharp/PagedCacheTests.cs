// NUnit tests of paged K/V caches through the C# face (capi/attn.h "Serving layouts"):
// pools of token-major and head-major pages (Builder.PageSize, Operand.BlockTable) filled by
// AttentionDesc.KvAppend and read by a varlen pack, on every ISA and thread count.
// The reference of every layout is the same sequence computed alone by a dense call, bit for
// bit (the library's batch invariance; the dense call's values are checked by the shared
// vectors, SharedVectorTests); tests/core/test_serving_*.cpp cover the same calls in C.
using System;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class PagedCacheTests
    {
        // The paged pool of one layout: numPages pages of `page` tokens, every float NaN; a
        // shuffled block table with -1 in the unused slots.
        sealed class Pool
        {
            public int Page, MaxPages, NumPages;
            public bool HeadMajor;
            public float[] K, V;
            public int[] Table;

            public Pool(int page, bool headMajor, Random r)
            {
                Page = page;
                HeadMajor = headMajor;
                MaxPages = (Seqs.MaxK + page - 1) / page;
                int used = Seqs.LK.Sum(n => (n + page - 1) / page);
                NumPages = used + 2; // two pages no sequence uses
                int[] ids = Enumerable.Range(0, NumPages).OrderBy(x => r.Next()).ToArray();
                Table = Enumerable.Repeat(-1, Seqs.B * MaxPages).ToArray();
                int next = 0;
                for (int b = 0; b < Seqs.B; b++)
                    for (int slot = 0; slot < (Seqs.LK[b] + page - 1) / page; slot++)
                        Table[b * MaxPages + slot] = ids[next++];
                K = Seqs.Filled(NumPages * page * Seqs.HKV * Seqs.D, float.NaN);
                V = Seqs.Filled(K.Length, float.NaN);
            }

            public AttentionDesc.Builder Apply(AttentionDesc.Builder b)
            {
                b.PageSize(Page);
                if (HeadMajor)
                {
                    long d = Seqs.D;
                    b.Strides(Operand.K, Seqs.HKV * Page * d, Page * d, d)
                     .Strides(Operand.V, Seqs.HKV * Page * d, Page * d, d);
                }
                return b;
            }

            // Where element x of key j, KV head h, of sequence b lives in the pool.
            public int At(int b, int h, int j, int x)
            {
                int p = Table[b * MaxPages + j / Page], t = j % Page;
                return HeadMajor ? ((p * Seqs.HKV + h) * Page + t) * Seqs.D + x
                                 : ((p * Page + t) * Seqs.HKV + h) * Seqs.D + x;
            }
        }

        [Test]
        public void PagedCacheFilledByKvAppendIsBitIdenticalToTheDenseCalls()
        {
            var s = new Seqs(202);
            var r = new Random(7);
            float[] q = s.PackQ();
            int outLen = s.TotalQ * Seqs.HQ * Seqs.D, lseLen = Seqs.HQ * s.TotalQ;
            foreach (int page in new[] { 16, 3 })
                foreach (bool headMajor in new[] { false, true })
                {
                    string what = "page " + page + (headMajor ? " head-major" : " token-major");
                    var pool = new Pool(page, headMajor, r);
                    using (AttentionDesc desc = pool.Apply(Seqs.PackBuilder()).Build())
                    // The prefill appends up to 57 tokens per sequence: a varlen descriptor
                    // with room for them, the same pages, table and strides.
                    using (AttentionDesc prefill = pool.Apply(Seqs.PackBuilder().SeqLen(Seqs.MaxK, Seqs.MaxK)).Build())
                    {
                        Assert.AreEqual((ulong)(Seqs.B * pool.MaxPages), desc.RequiredLen(Operand.BlockTable), what);
                        Assert.AreEqual(desc.RequiredLen(Operand.BlockTable), prefill.RequiredLen(Operand.BlockTable));
                        // 1. prefill: every key but the last lq of each sequence
                        int[] head = new int[Seqs.B], cut = new int[Seqs.B];
                        for (int b = 0; b < Seqs.B; b++) cut[b] = Seqs.LK[b] - Seqs.LQ[b];
                        using (var args = new AttentionArgs())
                        {
                            args.Bind(Operand.NewK, Seqs.Rows(s.K, Seqs.HKV, Seqs.LK, head, cut))
                                .Bind(Operand.NewV, Seqs.Rows(s.V, Seqs.HKV, Seqs.LK, head, cut))
                                .Bind(Operand.CuSeqlensQ, Seqs.Cu(cut)).Bind(Operand.SeqLensK, cut)
                                .Bind(Operand.BlockTable, pool.Table);
                            if (headMajor)
                                prefill.KvAppend(args, new Memory<float>(pool.K), new Memory<float>(pool.V));
                            else
                                prefill.KvAppend(args, pool.K, pool.V);
                        }
                        // 2. the chunk the queries belong to, appended through the args that then
                        // serve the attention call (seq_lens_k counts the new tokens)
                        float[] output = Seqs.Filled(outLen, Seqs.Sentinel), lse = Seqs.Filled(lseLen, Seqs.Sentinel);
                        using (var args = new AttentionArgs())
                        {
                            args.Bind(Operand.Q, q).Bind(Operand.CuSeqlensQ, s.CuQ)
                                .Bind(Operand.SeqLensK, Seqs.LK).Bind(Operand.BlockTable, pool.Table)
                                .Bind(Operand.NewK, Seqs.Rows(s.K, Seqs.HKV, Seqs.LK, cut, Seqs.LK))
                                .Bind(Operand.NewV, Seqs.Rows(s.V, Seqs.HKV, Seqs.LK, cut, Seqs.LK));
                            desc.KvAppend(args, pool.K, pool.V);
                            args.Bind(Operand.K, pool.K).Bind(Operand.V, pool.V)
                                .Bind(Operand.Out, output).Bind(Operand.Lse, lse);
                            desc.Run(Op.Forward, args);
                            s.AssertPackIsAlone(output, lse, what);
                            Assert.IsTrue(output.All(x => !float.IsNaN(x) && x != Seqs.Sentinel), what);
                            // each kernel gives the paged pack its own dense answer, bit for bit
                            Util.OnEveryIsaAndThreadCount(how =>
                            {
                                float[] o2 = new float[outLen], l2 = new float[lseLen];
                                args.Bind(Operand.Out, o2).Bind(Operand.Lse, l2);
                                desc.Run(Op.Forward, args);
                                s.AssertPackIsAlone(o2, l2, what + ", " + how);
                            });
                        }
                        // Only the destination rows were written: every key where the table puts
                        // it, every other float of the pool still NaN.
                        var expectK = Seqs.Filled(pool.K.Length, float.NaN);
                        var expectV = Seqs.Filled(pool.V.Length, float.NaN);
                        for (int b = 0; b < Seqs.B; b++)
                            for (int h = 0; h < Seqs.HKV; h++)
                                for (int j = 0; j < Seqs.LK[b]; j++)
                                    for (int x = 0; x < Seqs.D; x++)
                                    {
                                        expectK[pool.At(b, h, j, x)] = s.K[b][(h * Seqs.LK[b] + j) * Seqs.D + x];
                                        expectV[pool.At(b, h, j, x)] = s.V[b][(h * Seqs.LK[b] + j) * Seqs.D + x];
                                    }
                        Bits.AssertAllSame(expectK, pool.K, what + ": K pool");
                        Bits.AssertAllSame(expectV, pool.V, what + ": V pool");
                    }
                }
        }
    }
}
