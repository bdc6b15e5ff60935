// NUnit tests of AttentionArgs: required lengths of every operand, masks as bools, bytes,
// memory and slices, prefixes of longer arrays, bad operands refused naming the argument, no
// copy or allocation per call, unbinding after each call, Dispose, and many threads.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class ArgsTests
    {
        // B=2, HQ=4, HKV=2, SQ=3, SK=5, D=4: Q/OUT 96, K/V 80, LSE 24, W 120, KV 10, ALLOWED 15,
        // BIAS 120, heads 4, QV 6, SEQ_LENS 2, MASS 40.
        static AttentionDesc Desc(int alibi = 0)
        {
            return new AttentionDesc.Builder().Dims(2, 4, 2, 3, 5, 4).Alibi((Alibi)alibi).Build();
        }

        static AttentionArgs Filled(float[] q, float[] kv, float[] o)
        {
            return new AttentionArgs().Bind(Operand.Q, q).Bind(Operand.K, kv).Bind(Operand.V, kv)
                       .Bind(Operand.Out, o);
        }

        [Test]
        public void RequiredLenOfEveryOperand()
        {
            using (var desc = Desc())
            {
                var want = new ulong[] { 96, 80, 80, 96, 24, 120, 10, 15, 120, 4, 4, 6, 2, 40 };
                for (int i = 0; i < want.Length; i++)
                    Assert.AreEqual(want[i], desc.RequiredLen((Operand)i), ((Operand)i).ToString());
            }
        }

        [Test]
        public void MasksAsBoolsBytesOrMemoryAndSlicesGiveIdenticalBits()
        {
            bool[] kv = Run02.Mask(10, 3), qv = Run02.Mask(6, 4);
            byte[] kvb = kv.Select(x => x ? (byte)7 : (byte)0).ToArray(); // any nonzero is true
            byte[] qvb = qv.Select(x => x ? (byte)1 : (byte)0).ToArray();
            int[] lens = { 4, 5 };
            using (var desc = new AttentionDesc.Builder().Dims(2, 4, 2, 3, 5, 4).Causal(Causal.TopLeft)
                                  .Build())
            {
                TestInputs a = Run02.Random(desc, 91);
                Func<Action<AttentionArgs>, float[]> run = bind =>
                {
                    var o = new float[96];
                    using (var args = new AttentionArgs())
                    {
                        bind(args);
                        args.Bind(Operand.Out, o);
                        desc.Run(Op.Forward, args);
                    }
                    return o;
                };
                float[] plain = run(x => x.Bind(Operand.Q, a.Q).Bind(Operand.K, a.K).Bind(Operand.V, a.V)
                                          .Bind(Operand.KeyValid, kv).Bind(Operand.QueryValid, qv)
                                          .Bind(Operand.SeqLensK, lens));
                float[] bytes = run(x => x.Bind(Operand.Q, a.Q).Bind(Operand.K, a.K).Bind(Operand.V, a.V)
                                          .Bind(Operand.KeyValid, kvb).Bind(Operand.QueryValid, qvb)
                                          .Bind(Operand.SeqLensK, lens));
                // Slices of bigger arrays: each Memory window starts at an offset.
                Func<float[], Memory<float>> slice = x =>
                    new Memory<float>(new float[3].Concat(x).Concat(new float[2]).ToArray(), 3, x.Length);
                float[] sliced = run(x => x.Bind(Operand.Q, slice(a.Q))
                                          .Bind(Operand.K, (ReadOnlyMemory<float>)slice(a.K))
                                          .Bind(Operand.V, slice(a.V))
                                          .Bind(Operand.KeyValid, new ReadOnlyMemory<bool>(
                                              new[] { false }.Concat(kv).ToArray(), 1, 10))
                                          .Bind(Operand.QueryValid, new ReadOnlyMemory<byte>(
                                              new byte[] { 0, 0 }.Concat(qvb).ToArray(), 2, 6))
                                          .Bind(Operand.SeqLensK, new ReadOnlyMemory<int>(
                                              new[] { 99, 4, 5 }, 1, 2)));
                CollectionAssert.AreEqual(plain, bytes);
                CollectionAssert.AreEqual(plain, sliced);
                Assert.IsTrue(plain.Any(x => x != 0));

                // Memory not backed by an array: pinned through MemoryManager.Pin for each call.
                using (var nq = new NativeMemory<float>(96))
                using (var no = new NativeMemory<float>(96))
                using (var nkv = new NativeMemory<byte>(10))
                {
                    a.Q.AsSpan().CopyTo(nq.GetSpan());
                    kvb.AsSpan().CopyTo(nkv.GetSpan());
                    no.GetSpan().Fill(0);
                    using (var args = new AttentionArgs())
                    {
                        args.Bind(Operand.Q, nq.Memory).Bind(Operand.K, a.K).Bind(Operand.V, a.V)
                            .Bind(Operand.KeyValid, (ReadOnlyMemory<byte>)nkv.Memory)
                            .Bind(Operand.QueryValid, qv).Bind(Operand.SeqLensK, lens)
                            .Bind(Operand.Out, no.Memory);
                        desc.Run(Op.Forward, args);
                        desc.Run(Op.Forward, args);
                    }
                    CollectionAssert.AreEqual(plain, no.GetSpan().ToArray());
                    Assert.AreEqual(2, nq.Pins, "pinned once per call");
                }
            }
        }

        [Test]
        public void LongerArraysAreFineAndOnlyTheRequiredPrefixIsWritten()
        {
            using (var desc = Desc())
            {
                float[] q = Util.Values(96, 1), kv = Util.Values(80, 2);
                var exact = new float[96];
                using (var args = Filled(q, kv, exact)) desc.Run(Op.Forward, args);
                var longer = Enumerable.Repeat(42f, 100).ToArray();
                var mass = Enumerable.Repeat(43f, 41).ToArray();
                using (var args = Filled(q.Concat(new[] { float.NaN }).ToArray(), kv, longer)
                                      .Bind(Operand.KeyMass, mass)
                                      .Bind(Operand.KeyValid, Enumerable.Repeat(true, 11).ToArray()))
                    desc.Run(Op.Forward, args);
                CollectionAssert.AreEqual(exact, longer.Take(96).ToArray());
                CollectionAssert.AreEqual(new[] { 42f, 42f, 42f, 42f }, longer.Skip(96).ToArray());
                Assert.AreEqual(43f, mass[40]);
            }
        }

        [Test]
        public void BadOperandsAreRefusedNamingTheArgument()
        {
            using (var desc = Desc())
            {
                float[] q = new float[96], kv = new float[80], o = new float[96];
                var shortCases = new Dictionary<string, Action<AttentionArgs>> {
                    { "q has 95 elements, needs at least 96", a => a.Bind(Operand.Q, new float[95]) },
                    { "v has 0 elements, needs at least 80", a => a.Bind(Operand.V, new float[0]) },
                    { "out has 24 elements, needs at least 96", a => a.Bind(Operand.Out, new float[24]) },
                    { "lse has 23 elements, needs at least 24", a => a.Bind(Operand.Lse, new float[23]) },
                    { "key_mass has 0 elements, needs at least 40", a => a.Bind(Operand.KeyMass, new float[0]) },
                    // Empty optional operands are length errors, never "not given".
                    { "bias has 0 elements, needs at least 120", a => a.Bind(Operand.Bias, new float[0]) },
                    { "sinks has 3 elements, needs at least 4", a => a.Bind(Operand.Sinks, new float[3]) },
                    { "key_valid has 0 elements, needs at least 10", a => a.Bind(Operand.KeyValid, new bool[0]) },
                    { "allowed has 14 elements, needs at least 15", a => a.Bind(Operand.Allowed, new byte[14]) },
                    { "query_valid has 0 elements, needs at least 6",
                      a => a.Bind(Operand.QueryValid, ReadOnlyMemory<bool>.Empty) },
                    { "seq_lens_k has 0 elements, needs at least 2", a => a.Bind(Operand.SeqLensK, new int[0]) },
                    { "k has 0 elements, needs at least 80",
                      a => a.Bind(Operand.K, default(ReadOnlyMemory<float>)) },
                    { "q has 0 elements, needs at least 96",
                      a => a.Bind(Operand.Q, new Memory<float>(new float[96], 96, 0)) },
                };
                foreach (var c in shortCases)
                    using (var args = Filled(q, kv, o))
                    {
                        c.Value(args);
                        var e = Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args), c.Key);
                        Assert.IsNotInstanceOf<ArgumentNullException>(e, c.Key);
                        StringAssert.StartsWith("attn_run: " + c.Key, e.Message);
                        Assert.AreEqual(c.Key.Substring(0, c.Key.IndexOf(' ')), e.ParamName);
                    }
                // An operand the operation does not read is ignored, short or not (as in C).
                using (var args = Filled(q, new float[80], o).Bind(Operand.V, new float[1])
                                      .Bind(Operand.Weights, new float[120]))
                    desc.Run(Op.Weights, args);

                // Required operands not bound: the library's NullPointer, as ArgumentNullException.
                foreach (var c in new[] { Tuple.Create(Operand.Q, Op.Forward, "q"),
                                          Tuple.Create(Operand.V, Op.Forward, "v"),
                                          Tuple.Create(Operand.Out, Op.Forward, "out"),
                                          Tuple.Create(Operand.K, Op.Weights, "k"),
                                          Tuple.Create(Operand.Weights, Op.Weights, "weights") })
                    using (var args = Filled(q, kv, o).Bind(Operand.Weights, new float[120]))
                    {
                        args.Unbind(c.Item1);
                        Assert.IsFalse(args.IsBound(c.Item1));
                        var e = Assert.Throws<ArgumentNullException>(() => desc.Run(c.Item2, args));
                        Assert.AreEqual(c.Item3, e.ParamName);
                        StringAssert.Contains("attn_run: " + c.Item3 + " is NULL", e.Message);
                    }
                using (var args = Filled(q, kv, o).Bind(Operand.Q, (float[])null))
                    Assert.AreEqual("q", Assert.Throws<ArgumentNullException>(
                        () => desc.Run(Op.Forward, args)).ParamName);
                Assert.AreEqual("args", Assert.Throws<ArgumentNullException>(
                    () => desc.Run(Op.Forward, null)).ParamName);

                // Outputs overlapping another operand: the library's error and message.
                var alias = new Dictionary<string, Action<AttentionArgs>> {
                    { "attn_run: out overlaps q", a => a.Bind(Operand.Out, q) },
                    { "attn_run: lse overlaps k", a => a.Bind(Operand.Lse, kv) },
                    { "attn_run: key_mass overlaps k", a => a.Bind(Operand.KeyMass, kv) },
                    { "attn_run: out overlaps lse", a => a.Bind(Operand.Lse, o) },
                };
                foreach (var c in alias)
                    using (var args = Filled(q, kv, o))
                    {
                        c.Value(args);
                        var e = Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args));
                        StringAssert.Contains(c.Key, e.Message);
                    }
                using (var args = Filled(q, q, o)) desc.Run(Op.Forward, args); // inputs may alias

                // Values and combinations only the library can judge.
                using (var args = Filled(q, kv, o).Bind(Operand.SeqLensK, new[] { 3, 6 }))
                    StringAssert.Contains("seq_lens_k[1] (6) is outside [0, seq_k = 5]",
                        Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args)).Message);
                using (var args = Filled(q, kv, o).Bind(Operand.AlibiSlopes, new float[4]))
                    StringAssert.Contains("alibi_slopes is bound but ATTN_PARAM_ALIBI is not",
                        Assert.Throws<ArgumentException>(() => desc.Run(Op.Forward, args)).Message);
                using (var plus = new AttentionDesc.Builder().Dims(2, 4, 2, 3, 5, 4).SoftmaxPlusOne().Build())
                using (var args = Filled(q, kv, o).Bind(Operand.Sinks, new float[4]))
                    StringAssert.Contains("sinks cannot be combined with ATTN_PARAM_SOFTMAX_PLUS_ONE",
                        Assert.Throws<ArgumentException>(() => plus.Run(Op.Forward, args)).Message);
                using (var withSlopes = Desc(1))
                using (var args = Filled(q, kv, o))
                {
                    var e = Assert.Throws<ArgumentNullException>(() => withSlopes.Run(Op.Forward, args));
                    Assert.AreEqual("alibi_slopes", e.ParamName);
                }

                // Enum values out of range: the library's refusal of an op, the face's of an
                // operand it cannot index.
                using (var args = Filled(q, kv, o))
                {
                    var oe = Assert.Throws<ArgumentException>(() => desc.Run((Op)3, args));
                    Assert.AreEqual("op", oe.ParamName);
                    StringAssert.Contains("attn_run: op (3) is not an attn_op", oe.Message);
                    oe = Assert.Throws<ArgumentException>(() => desc.Run((Op)(-1), args));
                    StringAssert.Contains("op (-1)", oe.Message);
                    var re = Assert.Throws<ArgumentOutOfRangeException>(() => args.Bind((Operand)255, q));
                    StringAssert.Contains("which (255) is not an Operand value", re.Message);
                    re = Assert.Throws<ArgumentOutOfRangeException>(() => args.Unbind((Operand)(-1)));
                    Assert.AreEqual("which", re.ParamName);
                    // Backward with a forward's operands only: the library asks for dout.
                    var ae = Assert.Throws<ArgumentNullException>(() => desc.Run(Op.Backward, args));
                    StringAssert.Contains("dout is NULL", ae.Message);
                }

                // An operand bound with the wrong element type.
                using (var args = new AttentionArgs())
                {
                    var wrong = new Dictionary<string, TestDelegate> {
                        { "Operand.KeyValid (key_valid) cannot be bound with Single data", () => args.Bind(Operand.KeyValid, q) },
                        { "Operand.Q (q) cannot be bound with Boolean data", () => args.Bind(Operand.Q, new bool[96]) },
                        { "Operand.SeqLensK (seq_lens_k) cannot be bound with Byte data", () => args.Bind(Operand.SeqLensK, new byte[2]) },
                        { "Operand.Allowed (allowed) cannot be bound with Int32 data", () => args.Bind(Operand.Allowed, new int[15]) },
                        { "Operand.Out (out) cannot be bound with read-only Single data",
                          () => args.Bind(Operand.Out, new ReadOnlyMemory<float>(o)) },
                    };
                    foreach (var c in wrong)
                    {
                        var e = Assert.Throws<ArgumentException>(c.Value, c.Key);
                        StringAssert.StartsWith(c.Key, e.Message);
                        Assert.AreEqual("data", e.ParamName);
                    }
                    Assert.IsFalse(Enumerable.Range(0, 14).Any(i => args.IsBound((Operand)i)));
                }
                Assert.IsTrue(o.All(x => x == 0), "no refused call wrote anything");
            }
        }

        [Test]
        public void RunCopiesAndAllocatesNothingPerCall()
        {
            // Every operand of the extensible call bound (the all_combined case of
            // variants.txt; the ALiBi slopes as a window of a bigger array, key_valid as bool[],
            // the other masks as byte[]), 400 calls, no allocation.
            var c = Vectors.Line("variants.txt", "all_combined");
            string p = Vectors.Prefix(c);
            using (var desc = Vectors.Builder(c).Build())
            using (var args = new AttentionArgs())
            {
                Vectors.BindInputs(c, desc, args, false);
                float[] slopes = Util.ReadF32(p + "alibi_slopes.f32");
                args.Bind(Operand.AlibiSlopes,
                          new Memory<float>(new[] { float.NaN }.Concat(slopes).ToArray(), 1, slopes.Length))
                    .Bind(Operand.KeyValid, Util.ReadU8(p + "key_valid.u8"));
                Assert.IsTrue(new[] { Operand.Bias, Operand.Sinks, Operand.Allowed, Operand.QueryValid,
                                      Operand.SeqLensK }.All(args.IsBound));
                var o = new float[desc.RequiredLen(Operand.Out)];
                var lse = new float[desc.RequiredLen(Operand.Lse)];
                var mass = new float[desc.RequiredLen(Operand.KeyMass)];
                var w = new float[desc.RequiredLen(Operand.Weights)];
                args.Bind(Operand.Out, o).Bind(Operand.Lse, lse).Bind(Operand.KeyMass, mass)
                    .Bind(Operand.Weights, w);
                for (int i = 0; i < 10; i++) // JIT and thread pool warm-up
                {
                    desc.Run(Op.Forward, args);
                    desc.Run(Op.Weights, args);
                }
                long before = GC.GetAllocatedBytesForCurrentThread();
                for (int i = 0; i < 200; i++)
                {
                    desc.Run(Op.Forward, args);
                    desc.Run(Op.Weights, args);
                }
                long perCall = (GC.GetAllocatedBytesForCurrentThread() - before) / 400;
                Assert.AreEqual(0, perCall, "bytes allocated per Run");
                // Every result is the library's own, in the caller's arrays (nothing copied
                // back): the outputs hold the case's expected values.
                Vectors.Check(Vectors.Expected(desc, Operand.Out, c, "out"), o, "out");
                Vectors.Check(Vectors.Expected(desc, Operand.Lse, c, "lse"), lse, "lse");
                Vectors.Check(Vectors.Expected(desc, Operand.KeyMass, c, "key_mass"), mass, "key_mass");
                Vectors.Check(Vectors.Expected(desc, Operand.Weights, c, "weights"), w, "weights");
            }
        }

        [Test]
        public void OperandsAreUnboundAfterEachCallAndTheArraysMayMove()
        {
            using (var desc = Desc())
            using (var args = new AttentionArgs())
            {
                float[] q = Util.Values(96, 1), kv = Util.Values(80, 2);
                var o1 = new float[96];
                args.Bind(Operand.Q, q).Bind(Operand.K, kv).Bind(Operand.V, kv).Bind(Operand.Out, o1)
                    .Bind(Operand.KeyValid, Run02.Mask(10, 3));
                desc.Run(Op.Forward, args);
                // Garbage everywhere, compaction: the next call pins the arrays where they are now.
                for (int i = 0; i < 20; i++) GC.KeepAlive(new float[10000]);
                GC.Collect(2, GCCollectionMode.Forced, true, true);
                GC.WaitForPendingFinalizers();
                var o2 = new float[96];
                args.Bind(Operand.Out, o2);
                desc.Run(Op.Forward, args);
                CollectionAssert.AreEqual(o1, o2);
                // Unbinding a mask makes it "not given" again for the library.
                args.Unbind(Operand.KeyValid);
                var o3 = new float[96];
                args.Bind(Operand.Out, o3);
                desc.Run(Op.Forward, args);
                var o4 = desc.Forward(q, kv, kv);
                CollectionAssert.AreEqual(o4, o3);
                CollectionAssert.AreNotEqual(o1, o3);
                // Clear forgets everything.
                args.Clear();
                Assert.Throws<ArgumentNullException>(() => desc.Run(Op.Forward, args));
            }
        }

        [Test]
        public void DisposeOfArgsAndDescriptor()
        {
            var desc = Desc();
            float[] q = new float[96], kv = new float[80], o = new float[96];
            var args = Filled(q, kv, o);
            desc.Run(Op.Forward, args);
            Assert.IsFalse(args.IsDisposed);
            args.Dispose();
            Assert.IsTrue(args.IsDisposed);
            Assert.IsTrue(args.NativeReleased);
            args.Dispose(); // idempotent
            StringAssert.Contains("AttentionArgs",
                Assert.Throws<ObjectDisposedException>(() => desc.Run(Op.Forward, args)).Message);
            Assert.Throws<ObjectDisposedException>(() => args.Bind(Operand.Q, q));
            Assert.Throws<ObjectDisposedException>(() => args.Clear());
            var fresh = Filled(q, kv, o);
            desc.Dispose();
            StringAssert.Contains("AttentionDesc",
                Assert.Throws<ObjectDisposedException>(() => desc.Run(Op.Forward, fresh)).Message);
            Assert.Throws<ObjectDisposedException>(() => desc.GetInt(Param.Causal));
            Assert.Throws<ObjectDisposedException>(() => desc.Run((Op)9, null)); // disposed first
            fresh.Dispose();

            // Never disposed: the SafeHandles' finalizers free the native objects.
            long released = Interlocked.Read(ref AttnArgsHandle.Released);
            MakeGarbage(20);
            for (int i = 0; i < 3; i++)
            {
                GC.Collect();
                GC.WaitForPendingFinalizers();
            }
            Assert.Greater(Interlocked.Read(ref AttnArgsHandle.Released), released + 10,
                           "finalizers freed the abandoned args objects");
        }

        static void MakeGarbage(int n)
        {
            for (int i = 0; i < n; i++) new AttentionArgs().Bind(Operand.Q, new float[4]);
        }

        [Test]
        public void ManyThreadsEachWithTheirOwnArgsOrSharingOne()
        {
            const int T = 6;
            using (var desc = new AttentionDesc.Builder().Dims(2, 4, 2, 16, 24, 16)
                                  .Causal(Causal.BottomRight).Window(9, -1).Softcap(3)
                                  .Alibi(Alibi.Standard).Build())
            using (var shared = new AttentionArgs())
            {
                // Each thread's results against the same call made alone first (whose values
                // the shared vectors check: OperandTests, VariantVectorTests).
                TestInputs a = Run02.Random(desc, 101);
                a.SeqLensK = new[] { 24, 13 };
                a.QueryValid = Run02.Mask(32, 7);
                float[] o0, l0, w0, m0;
                Run02.Both(desc, a, out o0, out l0, out w0, out m0);
                shared.Bind(Operand.Q, a.Q).Bind(Operand.K, a.K).Bind(Operand.V, a.V)
                      .Bind(Operand.SeqLensK, a.SeqLensK).Bind(Operand.QueryValid, a.QueryValid);
                var failures = new System.Collections.Concurrent.ConcurrentQueue<string>();
                var threads = new Thread[T];
                for (int t = 0; t < T; t++)
                {
                    int me = t;
                    threads[t] = new Thread(() =>
                    {
                        try
                        {
                            for (int it = 0; it < 40; it++)
                            {
                                float[] o, l, w, m;
                                Run02.Both(desc, a, out o, out l, out w, out m);
                                if (!o.SequenceEqual(o0) || !l.SequenceEqual(l0) ||
                                    !w.SequenceEqual(w0) || !m.SequenceEqual(m0))
                                    failures.Enqueue("thread " + me + ": own args, wrong result");
                                // One args object shared by every thread: calls run one at a time.
                                var out2 = new float[o0.Length];
                                lock (shared)
                                {
                                    shared.Bind(Operand.Out, out2);
                                    desc.Run(Op.Forward, shared);
                                }
                                if (!out2.SequenceEqual(o0))
                                    failures.Enqueue("thread " + me + ": shared args, wrong result");
                                try
                                {
                                    using (var bad = new AttentionArgs().Bind(Operand.Q, a.Q)
                                                         .Bind(Operand.K, a.K).Bind(Operand.V, a.V)
                                                         .Bind(Operand.Out, a.K))
                                        desc.Run(Op.Forward, bad);
                                    failures.Enqueue("thread " + me + ": aliasing accepted");
                                }
                                catch (ArgumentException e)
                                {
                                    if (!e.Message.Contains("out overlaps k") &&
                                        !e.Message.Contains("out has"))
                                        failures.Enqueue("thread " + me + ": foreign message " + e.Message);
                                }
                            }
                        }
                        catch (Exception e)
                        {
                            failures.Enqueue("thread " + me + ": " + e);
                        }
                    });
                    threads[t].Start();
                }
                foreach (var th in threads) Assert.IsTrue(th.Join(120000), "a thread hung");
                Assert.IsEmpty(failures.ToArray(), string.Join("\n", failures.Take(5)));
            }
        }
    }
}
