// NUnit tests of the serving layouts through the C# face (capi/attn.h "Serving layouts"): packed
// variable-length batches (Builder.Varlen, Operand.CuSeqlensQ/K), paged K/V caches
// (Builder.PageSize, Operand.BlockTable) filled by AttentionDesc.KvAppend, AttentionDesc.Merge,
// batch invariance, and bad tables and lengths naming the sequence, the slot or the argument.
// The reference of every layout is the same sequence computed alone by a dense call, bit for
// bit (the library's batch invariance; the dense call's values are checked by the shared
// vectors, SharedVectorTests); tests/core/test_serving_*.cpp cover the same calls in C.
using System;
using System.Buffers;
using System.Linq;
using System.Runtime.InteropServices;
using NUnit.Framework;

namespace LibAttn.Tests
{
    // Three sequences of one layer: q lengths {5, 0, 9}, k lengths {40, 7, 66}, GQA 4/2,
    // head_dim 24. Per sequence dense [heads][len][D]; the varlen pack token-major.
    sealed class Seqs
    {
        public const int B = 3, HQ = 4, HKV = 2, D = 24, MaxQ = 9, MaxK = 66;
        public static readonly int[] LQ = { 5, 0, 9 }, LK = { 40, 7, 66 };
        public readonly float[][] Q = new float[B][], K = new float[B][], V = new float[B][];
        public readonly int[] CuQ = Cu(LQ), CuK = Cu(LK);

        public Seqs(int seed)
        {
            var r = new Random(seed);
            for (int b = 0; b < B; b++)
            {
                Q[b] = Uniform(r, HQ * LQ[b] * D, 1);
                K[b] = Uniform(r, HKV * LK[b] * D, 1);
                V[b] = Uniform(r, HKV * LK[b] * D, 2);
            }
        }

        public int TotalQ { get { return CuQ[B]; } }
        public int TotalK { get { return CuK[B]; } }

        public static int[] Cu(int[] lens)
        {
            var cu = new int[lens.Length + 1];
            for (int b = 0; b < lens.Length; b++) cu[b + 1] = cu[b] + lens[b];
            return cu;
        }

        public static float[] Uniform(Random r, int n, double scale)
        {
            var x = new float[n];
            for (int i = 0; i < n; i++) x[i] = (float)((r.NextDouble() * 2 - 1) * scale);
            return x;
        }

        public static float[] Filled(int n, float value)
        {
            return Enumerable.Repeat(value, n).ToArray();
        }

        // Token-major [sum of (to - from)][heads][D] rows of tokens [from[b], to[b]) of each
        // sequence (src[b] is [heads][len[b]][D]).
        public static float[] Rows(float[][] src, int heads, int[] len, int[] from, int[] to)
        {
            int n = 0;
            for (int b = 0; b < B; b++) n += to[b] - from[b];
            var rows = new float[n * heads * D];
            int t = 0;
            for (int b = 0; b < B; b++)
                for (int j = from[b]; j < to[b]; j++, t++)
                    for (int h = 0; h < heads; h++)
                        Array.Copy(src[b], (h * len[b] + j) * D, rows, (t * heads + h) * D, D);
            return rows;
        }

        public float[] PackQ() { return Rows(Q, HQ, LQ, new int[B], LQ); }
        public float[] PackK() { return Rows(K, HKV, LK, new int[B], LK); }
        public float[] PackV() { return Rows(V, HKV, LK, new int[B], LK); }

        // Sequence b alone, dense BHSD, BOTTOM_RIGHT (or causal), batch invariant: out [HQ][lq][D], lse
        // [HQ][lq], through the 0.1 call whose values the shared vectors check (without
        // BatchInvariant, which changes the tiling, not the values: the two agree within 1e-5).
        public void Alone(int b, out float[] output, out float[] lse,
                          Causal causal = Causal.BottomRight)
        {
            var bl = new AttentionDesc.Builder().Dims(1, HQ, HKV, LQ[b], LK[b], D).Causal(causal);
            float[] plain = new float[HQ * LQ[b] * D], plainLse = new float[HQ * LQ[b]];
            using (AttentionDesc desc = bl.Build())
                desc.Forward(Q[b], K[b], V[b], null, null, plain, plainLse);
            using (AttentionDesc desc = bl.BatchInvariant().Build())
            {
                output = new float[desc.RequiredLen(Operand.Out)];
                lse = new float[desc.RequiredLen(Operand.Lse)];
                desc.Forward(Q[b], K[b], V[b], null, null, output, lse);
            }
            for (int i = 0; i < plain.Length; i++)
                Util.AssertClose(plain[i], output[i], "sequence " + b + " alone out[" + i + "]");
            for (int i = 0; i < plainLse.Length; i++)
                Util.AssertClose(plainLse[i], lse[i], "sequence " + b + " alone lse[" + i + "]");
        }

        // The rows of every sequence in a varlen result (out [total_q][HQ][D], lse
        // [HQ][total_q]) bit for bit against the sequence alone.
        public void AssertPackIsAlone(float[] output, float[] lse, string what,
                                      Causal causal = Causal.BottomRight)
        {
            for (int b = 0; b < B; b++)
            {
                if (LQ[b] == 0) continue;
                float[] o, l;
                Alone(b, out o, out l, causal);
                for (int h = 0; h < HQ; h++)
                    for (int i = 0; i < LQ[b]; i++)
                    {
                        for (int x = 0; x < D; x++)
                            Bits.AssertSame(o[(h * LQ[b] + i) * D + x],
                                            output[((CuQ[b] + i) * HQ + h) * D + x],
                                            what + ": out of sequence " + b + " (h " + h + ", i " + i
                                                + ", d " + x + ")");
                        Bits.AssertSame(l[h * LQ[b] + i], lse[h * TotalQ + CuQ[b] + i],
                                        what + ": lse of sequence " + b + " (h " + h + ", i " + i + ")");
                    }
            }
        }
    }

    static class Bits
    {
        public static unsafe int Of(float x) { return *(int*)&x; }

        public static void AssertSame(float expected, float got, string what)
        {
            if (Of(expected) != Of(got))
                Assert.Fail("{0}: got {1:R} (0x{2:x8}), expected {3:R} (0x{4:x8})", what, got,
                            Of(got), expected, Of(expected));
        }

        public static void AssertAllSame(float[] expected, float[] got, string what)
        {
            Assert.AreEqual(expected.Length, got.Length, what + ": length");
            for (int i = 0; i < expected.Length; i++)
                AssertSame(expected[i], got[i], what + "[" + i + "]");
        }

        // tests/reference/reference.hpp's rel_err: |got - want| / max(1, |want|); infinities exact.
        public static double RelErr(double got, double want)
        {
            if (double.IsInfinity(want)) return got == want ? 0.0 : 1e30;
            if (double.IsNaN(got)) return 1e30;
            return Math.Abs(got - want) / Math.Max(1.0, Math.Abs(want));
        }
    }

    // int memory that is not a managed array (exercises the MemoryHandle path of the int
    // operands, whose cu_seqlens values the face reads to size the pack).
    sealed unsafe class NativeInts : MemoryManager<int>
    {
        readonly IntPtr ptr;
        readonly int length;

        public NativeInts(int[] values)
        {
            length = values.Length;
            ptr = Marshal.AllocHGlobal(Math.Max(1, length) * sizeof(int));
            new Span<int>(values).CopyTo(GetSpan());
        }

        public override Span<int> GetSpan() { return new Span<int>((void*)ptr, length); }

        public override MemoryHandle Pin(int elementIndex = 0)
        {
            return new MemoryHandle((int*)ptr + elementIndex);
        }

        public override void Unpin() { }

        protected override void Dispose(bool disposing) { Marshal.FreeHGlobal(ptr); }
    }

    [TestFixture]
    public class ServingTests
    {
        const float Sentinel = 777f;

        // Runs body on every ISA this CPU has, on 1 and 2 threads; restores the defaults.
        static void OnEveryIsaAndThreadCount(Action<string> body)
        {
            var ran = 0;
            try
            {
                foreach (string isa in new[] { "scalar", "sse2", "avx2", "avx512", "avx512fp16" })
                {
                    try
                    {
                        Attention.SetIsa(isa);
                    }
                    catch (AttentionException e) when (e.Status == Status.Unsupported)
                    {
                        continue;
                    }
                    foreach (int threads in new[] { 1, 2 })
                    {
                        Attention.NumThreads = threads;
                        body(isa + ", " + threads + " thread(s)");
                        ran++;
                    }
                }
            }
            finally
            {
                Attention.SetIsa(null);
                Attention.NumThreads = 0;
            }
            Assert.GreaterOrEqual(ran, 2, "at least the scalar kernel ran");
        }

        static AttentionDesc.Builder PackBuilder()
        {
            return new AttentionDesc.Builder()
                .Dims(Seqs.B, Seqs.HQ, Seqs.HKV, Seqs.MaxQ, Seqs.MaxK, Seqs.D)
                .Causal(Causal.BottomRight).BatchInvariant().Varlen();
        }

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
                        using (AttentionDesc desc = PackBuilder().Causal(causal).Window(6, 3)
                                   .Alibi(Alibi.Operand).Diagonal(diag).AlibiForm(form)
                                   .Strides(Operand.AlibiSlopes, Seqs.HQ, 1, 0).Build())
                        using (var args = new AttentionArgs())
                        {
                            Assert.AreEqual(diag, desc.Diagonal, what);
                            Assert.AreEqual(form, desc.AlibiForm, what);
                            Assert.AreEqual((ulong)slopes.Length, desc.RequiredLen(Operand.AlibiSlopes));
                            float[] output = Seqs.Filled(outLen, Sentinel), lse = Seqs.Filled(lseLen, Sentinel);
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
            using (AttentionDesc desc = PackBuilder().Build())
            {
                // The descriptor's lengths are upper bounds (batch x max length tokens): the
                // call's come from cu_seqlens, so arrays as long as the pack are enough.
                Assert.AreEqual((ulong)(Seqs.B * Seqs.MaxQ * Seqs.HQ * Seqs.D), desc.RequiredLen(Operand.Out));
                Assert.AreEqual(14, s.TotalQ);
                Assert.AreEqual(113, s.TotalK);
                int outLen = s.TotalQ * Seqs.HQ * Seqs.D, lseLen = Seqs.HQ * s.TotalQ;
                Assert.Less((ulong)outLen, desc.RequiredLen(Operand.Out));
                OnEveryIsaAndThreadCount(what =>
                {
                    // 11 / 5 floats past the pack: the empty sequence and the padding to max_q
                    // produce nothing, nothing is written past the pack.
                    float[] output = Seqs.Filled(outLen + 11, Sentinel), lse = Seqs.Filled(lseLen + 5, Sentinel);
                    using (var args = new AttentionArgs())
                    {
                        args.Bind(Operand.Q, q).Bind(Operand.K, k).Bind(Operand.V, v)
                            .Bind(Operand.CuSeqlensQ, s.CuQ).Bind(Operand.CuSeqlensK, s.CuK)
                            .Bind(Operand.Out, output).Bind(Operand.Lse, lse);
                        desc.Run(Op.Forward, args);
                    }
                    s.AssertPackIsAlone(output, lse, what);
                    for (int i = outLen; i < output.Length; i++) Assert.AreEqual(Sentinel, output[i], what + " out[" + i + "]");
                    for (int i = lseLen; i < lse.Length; i++) Assert.AreEqual(Sentinel, lse[i], what + " lse[" + i + "]");
                    Assert.IsTrue(output.Take(outLen).All(x => !float.IsNaN(x) && x != Sentinel), what);
                });

                // The same through slices and memory that is not an array: cu_seqlens read from
                // native memory, Q/K/V/Out as windows of larger arrays.
                float[] qq = Seqs.Filled(7, float.NaN).Concat(q).ToArray();
                float[] big = Seqs.Filled(outLen + 20, Sentinel);
                float[] lse2 = new float[lseLen];
                using (var cuQ = new NativeInts(s.CuQ))
                using (var cuK = new NativeInts(s.CuK))
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
                    Assert.IsTrue(big.Take(10).Concat(big.Skip(10 + outLen)).All(x => x == Sentinel));

                    // Not with varlen: the weights matrix (the library's Unsupported).
                    args.Bind(Operand.Weights, new float[desc.RequiredLen(Operand.Weights)]);
                    var ae = Assert.Throws<AttentionException>(() => desc.Run(Op.Weights, args));
                    Assert.AreEqual(Status.Unsupported, ae.Status);
                    StringAssert.Contains("ATTN_OP_WEIGHTS is not supported with ATTN_PARAM_VARLEN", ae.Message);
                }
            }
        }

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
                    using (AttentionDesc desc = pool.Apply(PackBuilder()).Build())
                    // The prefill appends up to 57 tokens per sequence: a varlen descriptor
                    // with room for them, the same pages, table and strides.
                    using (AttentionDesc prefill = pool.Apply(PackBuilder().SeqLen(Seqs.MaxK, Seqs.MaxK)).Build())
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
                        float[] output = Seqs.Filled(outLen, Sentinel), lse = Seqs.Filled(lseLen, Sentinel);
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
                            Assert.IsTrue(output.All(x => !float.IsNaN(x) && x != Sentinel), what);
                            // each kernel gives the paged pack its own dense answer, bit for bit
                            OnEveryIsaAndThreadCount(how =>
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
                output = Seqs.Filled((int)desc.RequiredLen(Operand.Out), Sentinel);
                lse = Seqs.Filled((int)desc.RequiredLen(Operand.Lse), Sentinel);
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
