// NUnit tests of concurrent use: many threads on one descriptor, each with its own results and
// errors, and Dispose while calls are in flight.
using System;
using System.Linq;
using System.Threading;
using NUnit.Framework;

namespace LibAttn.Tests
{
    [TestFixture]
    public class ConcurrencyTests
    {
        const int Threads = 8;

        [Test]
        public void ManyThreadsOnOneDescriptorEachWithItsOwnResultsAndErrors()
        {
            int B = 2, HQ = 4, HKV = 2, S = 24, D = 16;
            using (var desc = new AttentionDesc.Builder().Dims(B, HQ, HKV, S, S, D)
                                  .Causal(Causal.TopLeft).Build())
            {
                // Per-thread inputs and their expected outputs, computed one at a time first (the
                // dense call itself is checked by the shared vectors).
                var inputs = new float[Threads][][];
                var expected = new float[Threads][];
                var expectedLse = new float[Threads][];
                for (int t = 0; t < Threads; t++)
                {
                    inputs[t] = new[] { Util.Values(B * HQ * S * D, 10 * t + 1),
                                        Util.Values(B * HKV * S * D, 10 * t + 2),
                                        Util.Values(B * HKV * S * D, 10 * t + 3) };
                    expected[t] = new float[desc.RequiredLen(Operand.Out)];
                    expectedLse[t] = new float[desc.RequiredLen(Operand.Lse)];
                    desc.Forward(inputs[t][0], inputs[t][1], inputs[t][2], null, null, expected[t],
                                 expectedLse[t]);
                }

                var failures = new System.Collections.Concurrent.ConcurrentQueue<string>();
                var start = new Barrier(Threads);
                var threads = new Thread[Threads];
                for (int t = 0; t < Threads; t++)
                {
                    int me = t;
                    threads[t] = new Thread(() =>
                    {
                        try
                        {
                            start.SignalAndWait();
                            for (int it = 0; it < 60; it++)
                            {
                                var o = new float[expected[me].Length];
                                var lse = new float[expectedLse[me].Length];
                                desc.Forward(inputs[me][0], inputs[me][1], inputs[me][2], null,
                                             null, o, lse);
                                if (!o.SequenceEqual(expected[me]) ||
                                    !lse.SequenceEqual(expectedLse[me]))
                                    failures.Enqueue("thread " + me + ": wrong result, iteration "
                                                     + it);

                                // An error of this thread's own, between the others' calls: the
                                // message must be this call's (the C side's is per thread).
                                long hq = 4 * (me + 1) + 1; // never a multiple of 4
                                try
                                {
                                    new AttentionDesc.Builder().Dims(1, hq, 4, 2, 2, 2).Build()
                                        .Dispose();
                                    failures.Enqueue("thread " + me + ": bad heads accepted");
                                }
                                catch (ArgumentException e)
                                {
                                    if (!e.Message.Contains("heads_q") ||
                                        !e.Message.Contains("(" + hq + ")"))
                                        failures.Enqueue("thread " + me + ": foreign message '"
                                                         + e.Message + "'");
                                }
                                // And a library error on the shared descriptor (output aliases q).
                                try
                                {
                                    float[] qq = (float[])inputs[me][0].Clone();
                                    desc.Forward(qq, inputs[me][1], inputs[me][2], null, null, qq);
                                    failures.Enqueue("thread " + me + ": aliasing accepted");
                                }
                                catch (ArgumentException e)
                                {
                                    if (!e.Message.Contains("out overlaps") ||
                                        e.Message.Contains("heads_q"))
                                        failures.Enqueue("thread " + me + ": foreign message '"
                                                         + e.Message + "'");
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
                foreach (var th in threads) th.Join();
                Assert.IsEmpty(failures.ToArray(), string.Join("\n", failures.Take(10)));
            }
        }

        [Test]
        public void DisposeWhileCallsAreInFlight()
        {
            int S = 64, D = 32;
            var desc = new AttentionDesc.Builder().SeqLen(S).HeadDim(D).Build();
            float[] q = Util.Values(S * D, 1), k = Util.Values(S * D, 2), v = Util.Values(S * D, 3);
            float[] expected = desc.Forward(q, k, v);
            var failures = new System.Collections.Concurrent.ConcurrentQueue<string>();
            int calls = 0, disposedSeen = 0;
            var threads = new Thread[Threads];
            for (int t = 0; t < Threads; t++)
            {
                threads[t] = new Thread(() =>
                {
                    var o = new float[S * D];
                    try
                    {
                        while (true)
                        {
                            Array.Clear(o, 0, o.Length);
                            desc.Forward(q, k, v, null, null, o);
                            if (!o.SequenceEqual(expected)) failures.Enqueue("wrong result");
                            Interlocked.Increment(ref calls);
                        }
                    }
                    catch (ObjectDisposedException)
                    {
                        Interlocked.Increment(ref disposedSeen);
                    }
                    catch (Exception e)
                    {
                        failures.Enqueue(e.ToString());
                    }
                });
                threads[t].Start();
            }
            while (Volatile.Read(ref calls) < 200) Thread.Sleep(1);
            desc.Dispose();
            foreach (var th in threads) Assert.IsTrue(th.Join(60000), "a thread hung");
            Assert.IsEmpty(failures.ToArray(), string.Join("\n", failures.Take(10)));
            Assert.AreEqual(Threads, disposedSeen, "every thread ends with ObjectDisposedException");
            Assert.IsTrue(desc.NativeReleased, "the native descriptor was freed after the last call");
        }
    }
}
