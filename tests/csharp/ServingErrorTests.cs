// NUnit tests of bad serving input through the C# face: block tables, sequence lengths and
// cu_seqlens that attn_run and attn_kv_append refuse naming the sequence, the slot or the
// argument (the cases of tests/core/test_serving_errors.cpp), and what KvAppend refuses before it could
// write out of place.
using System;
using System.Linq;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class ServingErrorTests
    {
        // The small pack of test_serving_errors.cpp's cases: 3 sequences, q lengths {2, 0, 3}, k
        // lengths {5, 9, 3}, heads 2/1, head_dim 4, max lengths 3 / 10, pages of 4 tokens (3
        // slots per sequence, 6 pages used, the pool holds exactly those 6).
        sealed class Small : IDisposable
        {
            public const int Page = 4, MaxPages = 3, NumPages = 6;
            public readonly AttentionDesc Desc = new AttentionDesc.Builder().Dims(3, 2, 1, 3, 10, 4)
                                                     .Varlen().PageSize(Page).Build();
            public readonly int[] CuQ = { 0, 2, 2, 5 }, Lens = { 5, 9, 3 };
            public readonly int[] Table = { 5, 0, -1, 3, 1, 4, 2, -1, -1 };
            public readonly float[] Q = Seqs.Uniform(new Random(1), 5 * 2 * 4, 1);
            public readonly float[] K = Seqs.Uniform(new Random(2), NumPages * Page * 4, 1);
            public readonly float[] V = Seqs.Uniform(new Random(3), NumPages * Page * 4, 1);
            public readonly float[] Out = new float[5 * 2 * 4], Lse = new float[2 * 5];

            public AttentionArgs Args()
            {
                return new AttentionArgs().Bind(Operand.Q, Q).Bind(Operand.K, K).Bind(Operand.V, V)
                    .Bind(Operand.CuSeqlensQ, (int[])CuQ.Clone()).Bind(Operand.SeqLensK, (int[])Lens.Clone())
                    .Bind(Operand.BlockTable, (int[])Table.Clone()).Bind(Operand.Out, Out)
                    .Bind(Operand.Lse, Lse);
            }

            public void Dispose() { Desc.Dispose(); }
        }

        static int[] With(int[] a, int at, int value)
        {
            var r = (int[])a.Clone();
            r[at] = value;
            return r;
        }

        [Test]
        public void BadTablesAndLengthsAreRefusedNamingTheSlot()
        {
            using (var c = new Small())
            {
                using (var args = c.Args()) c.Desc.Run(Op.Forward, args); // the pack itself is fine
                // The library's checks: ArgumentException with its message (sequence and slot).
                var lib = new[] {
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.BlockTable, With(c.Table, 1 * 3 + 2, 99)), "block_table",
                        "attn_run: block_table[1][2] (99) is not a page of the K/V buffers, which hold 6 pages"),
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.BlockTable, With(c.Table, 0 * 3 + 1, -1)), "block_table",
                        "attn_run: block_table[0][1] is -1 (unused) but sequence 0 has 5 keys"),
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.BlockTable, With(c.Table, 2 * 3 + 0, -7)), "block_table",
                        "attn_run: block_table[2][0] (-7) is not a page"),
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.SeqLensK, With(c.Lens, 1, 11)), "seq_lens_k",
                        "attn_run: seq_lens_k[1] (11) is outside [0, seq_k = 10]"),
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.CuSeqlensQ, With(c.CuQ, 0, 1)), "cu_seqlens_q",
                        "attn_run: cu_seqlens_q[0] (1) must be 0"),
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.CuSeqlensQ, With(c.CuQ, 3, 9)), "cu_seqlens_q",
                        "attn_run: cu_seqlens_q: sequence 2 has length 7, above seq_q = 3"),
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.CuSeqlensQ, With(c.CuQ, 2, 1)), "cu_seqlens_q",
                        "attn_run: cu_seqlens_q must not decrease: cu_seqlens_q[1] = 2 > cu_seqlens_q[2] = 1"),
                    // a pool of 5 whole pages: page 5 of sequence 0 is not in it
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.K, new ReadOnlyMemory<float>(c.K, 0, 5 * 16 + 3)), "block_table",
                        "attn_run: block_table[0][0] (5) is not a page of the K/V buffers, which hold 5 pages"),
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.CuSeqlensK, Seqs.Cu(c.Lens)), "cu_seqlens_k",
                        "attn_run: cu_seqlens_k is bound but a paged cache takes its key lengths from seq_lens_k"),
                };
                foreach (var t in lib)
                    using (var args = c.Args())
                    {
                        t.Item1(args);
                        var e = Assert.Throws<ArgumentException>(() => c.Desc.Run(Op.Forward, args), t.Item3);
                        Assert.IsNotInstanceOf<ArgumentNullException>(e, t.Item3);
                        StringAssert.Contains(t.Item3, e.Message);
                        Assert.AreEqual(t.Item2, e.ParamName, t.Item3);
                    }
                // Arrays shorter than the call needs: the library's refusal, lengths from
                // cu_seqlens_q (5 query tokens).
                var face = new[] {
                    Tuple.Create<Action<AttentionArgs>, string>(
                        a => a.Bind(Operand.BlockTable, new ReadOnlyMemory<int>(c.Table, 0, 8)),
                        "block_table has 8 elements, needs at least 9"),
                    Tuple.Create<Action<AttentionArgs>, string>(
                        a => a.Bind(Operand.Q, new ReadOnlyMemory<float>(c.Q, 0, 39)),
                        "q has 39 elements, needs at least 40"),
                    Tuple.Create<Action<AttentionArgs>, string>(
                        a => a.Bind(Operand.Out, new float[39]), "out has 39 elements, needs at least 40"),
                    Tuple.Create<Action<AttentionArgs>, string>(
                        a => a.Bind(Operand.Lse, new float[9]), "lse has 9 elements, needs at least 10"),
                    Tuple.Create<Action<AttentionArgs>, string>(
                        a => a.Bind(Operand.CuSeqlensQ, new[] { 0, 2, 2 }),
                        "cu_seqlens_q has 3 elements, needs at least 4"),
                    Tuple.Create<Action<AttentionArgs>, string>(
                        a => a.Bind(Operand.SeqLensK, new int[0]), "seq_lens_k has 0 elements, needs at least 3"),
                    Tuple.Create<Action<AttentionArgs>, string>(
                        a => a.Bind(Operand.K, new float[15]), "k has 15 elements, needs at least 16"),
                    Tuple.Create<Action<AttentionArgs>, string>(
                        a => a.Bind(Operand.V, new float[0]), "v has 0 elements, needs at least 16"),
                };
                foreach (var t in face)
                    using (var args = c.Args())
                    {
                        t.Item1(args);
                        var e = Assert.Throws<ArgumentException>(() => c.Desc.Run(Op.Forward, args), t.Item2);
                        StringAssert.StartsWith("attn_run: " + t.Item2, e.Message);
                        Assert.AreEqual(t.Item2.Substring(0, t.Item2.IndexOf(' ')), e.ParamName);
                    }
                // One token fewer in the pack: 32 floats of Q are then enough.
                using (var args = c.Args().Bind(Operand.CuSeqlensQ, new[] { 0, 2, 2, 4 })
                                          .Bind(Operand.Q, new ReadOnlyMemory<float>(c.Q, 0, 32)))
                    c.Desc.Run(Op.Forward, args);
                // Required serving operands not bound: the library's NullPointer.
                using (var args = c.Args().Unbind(Operand.BlockTable))
                {
                    var ne = Assert.Throws<ArgumentNullException>(() => c.Desc.Run(Op.Forward, args));
                    Assert.AreEqual("block_table", ne.ParamName);
                    StringAssert.Contains("block_table is NULL but ATTN_PARAM_PAGE_SIZE is set", ne.Message);
                }
                using (var args = c.Args().Unbind(Operand.CuSeqlensQ))
                {
                    var ne = Assert.Throws<ArgumentNullException>(() => c.Desc.Run(Op.Forward, args));
                    StringAssert.Contains("cu_seqlens_q is NULL but ATTN_PARAM_VARLEN is 1", ne.Message);
                }
                // cu_seqlens_q through a descriptor that is not varlen
                using (var dense = new AttentionDesc.Builder().Dims(1, 1, 1, 2, 2, 2).Build())
                using (var args = new AttentionArgs().Bind(Operand.Q, new float[4]).Bind(Operand.K, new float[4])
                                      .Bind(Operand.V, new float[4]).Bind(Operand.Out, new float[4])
                                      .Bind(Operand.CuSeqlensQ, new[] { 0, 2 }))
                    StringAssert.Contains("cu_seqlens_q is bound but ATTN_PARAM_VARLEN is 0",
                        Assert.Throws<ArgumentException>(() => dense.Run(Op.Forward, args)).Message);
            }
        }

        [Test]
        public void KvAppendRefusesWhatWouldWriteOutOfPlace()
        {
            using (var c = new Small())
            {
                float[] nk = Seqs.Filled(5 * 1 * 4, 1f), nv = Seqs.Filled(5 * 1 * 4, 2f);
                Func<AttentionArgs> args = () => new AttentionArgs().Bind(Operand.NewK, nk)
                    .Bind(Operand.NewV, nv).Bind(Operand.CuSeqlensQ, c.CuQ).Bind(Operand.BlockTable, c.Table)
                    .Bind(Operand.SeqLensK, c.Lens);
                float[] k = (float[])c.K.Clone(), v = (float[])c.V.Clone();
                using (var a = args())
                    c.Desc.KvAppend(a, k, v);
                // The 2 new tokens of sequence 0 are its keys 3 and 4: token 3 of page 5 (slot 0)
                // and token 0 of page 0 (slot 1); token-major pages [4][1][4].
                Assert.AreEqual(1f, k[(5 * Small.Page + 3) * 4]);
                Assert.AreEqual(1f, k[(0 * Small.Page + 0) * 4 + 3]);
                Assert.AreEqual(2f, v[(5 * Small.Page + 3) * 4 + 2]);
                Assert.AreEqual(c.K[(5 * Small.Page + 2) * 4], k[(5 * Small.Page + 2) * 4], "key 2 untouched");
                int changed = Enumerable.Range(0, k.Length).Count(i => k[i] != c.K[i]);
                Assert.AreEqual(5 * 4, changed, "exactly the 5 new rows");

                var lib = new[] {
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.SeqLensK, new[] { 1, 9, 3 }), "seq_lens_k",
                        "attn_kv_append: seq_lens_k[0] (1) is less than the 2 new tokens of sequence 0"),
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.SeqLensK, new[] { 5, 9, 30 }), "seq_lens_k",
                        "attn_kv_append: seq_lens_k[2] (30) is outside [0, seq_k = 10]"),
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.BlockTable, With(c.Table, 2 * 3, 1000)), "block_table",
                        "attn_kv_append: block_table[2][0] (1000) is not a page of the K/V buffers, which hold 6 pages"),
                    Tuple.Create<Action<AttentionArgs>, string, string>(
                        a => a.Bind(Operand.NewV, k), null, "overlaps"),
                };
                foreach (var t in lib)
                    using (var a = args())
                    {
                        t.Item1(a);
                        var e = Assert.Throws<ArgumentException>(() => c.Desc.KvAppend(a, k, v), t.Item3);
                        StringAssert.Contains(t.Item3, e.Message);
                        if (t.Item2 != null) Assert.AreEqual(t.Item2, e.ParamName, t.Item3);
                    }
                using (var a = args())
                {
                    var e = Assert.Throws<ArgumentException>(() => c.Desc.KvAppend(a, k, k));
                    StringAssert.Contains("attn_kv_append: ", e.Message);
                    StringAssert.Contains("overlaps", e.Message);
                    e = Assert.Throws<ArgumentException>(() => c.Desc.KvAppend(a, new float[15], v));
                    StringAssert.StartsWith("attn_kv_append: k_cache has 15 elements, needs at least 16", e.Message);
                    Assert.AreEqual("k_cache", e.ParamName);
                    e = Assert.Throws<ArgumentException>(
                        () => c.Desc.KvAppend(a, new Memory<float>(k), Memory<float>.Empty));
                    StringAssert.StartsWith("attn_kv_append: v_cache has 0 elements, needs at least 16", e.Message);
                    a.Bind(Operand.NewK, new float[19]);
                    e = Assert.Throws<ArgumentException>(() => c.Desc.KvAppend(a, k, v));
                    StringAssert.StartsWith("attn_kv_append: new_k has 19 elements, needs at least 20", e.Message);
                    Assert.AreEqual("new_k", e.ParamName);
                    Assert.AreEqual("k_cache", Assert.Throws<ArgumentNullException>(
                        () => c.Desc.KvAppend(a, null, v)).ParamName);
                    Assert.AreEqual("v_cache", Assert.Throws<ArgumentNullException>(
                        () => c.Desc.KvAppend(a, k, (float[])null)).ParamName);
                    Assert.AreEqual("args", Assert.Throws<ArgumentNullException>(
                        () => c.Desc.KvAppend(null, k, v)).ParamName);
                    a.Unbind(Operand.SeqLensK).Bind(Operand.NewK, nk);
                    var ne = Assert.Throws<ArgumentNullException>(() => c.Desc.KvAppend(a, k, v));
                    StringAssert.Contains("attn_kv_append: seq_lens_k is NULL", ne.Message);
                }
                // nothing to append: empty rows are fine (nothing is written)
                float[] k2 = (float[])k.Clone();
                using (var a = new AttentionArgs().Bind(Operand.NewK, new float[0]).Bind(Operand.NewV, new float[0])
                                   .Bind(Operand.CuSeqlensQ, new[] { 0, 0, 0, 0 }).Bind(Operand.BlockTable, c.Table)
                                   .Bind(Operand.SeqLensK, c.Lens))
                    c.Desc.KvAppend(a, k2, v);
                Bits.AssertAllSame(k, k2, "an empty append writes nothing");
            }
        }
    }
}
