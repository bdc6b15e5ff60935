// From C#: worker threads that cannot start (address space exhausted under a
// lowered RLIMIT_AS) must not fail a call or abort the process: the call runs on the caller's
// thread with the 1-thread result, bit for bit, and no worker is kept.
//
// Run as its own mono process (ctest csharp_thread_failure), since the limit is process-wide:
//   1. a 1-thread forward (the reference) and a dry run of everything the limited phase uses;
//   2. GC, then the SOFT RLIMIT_AS := VM size (/proc/self/statm) + 8 MiB (the hard limit stays);
//   3. NumThreads = 256 (the library's maximum; 255 workers of 1 MiB stack cannot fit), three
//      forwards: each must succeed, equal the reference, and leave no worker thread alive;
//   4. recovery: the soft limit back to the hard one, then forwards until the pool has retried
//      (after its back-off of a second, calls run inline) and shows its 255 workers, 30 s at most
//      (proving the count in 3 would have seen them); every result the same.
// libattn names its pool threads "attn-worker": workers = tasks with that comm, minus the
// baseline counted before the limit.
// Exit 0 only if all holds; the output says what was measured.
using System;
using System.Diagnostics;
using System.IO;
using System.Runtime.InteropServices;
using System.Threading;
using LibAttn;

namespace LibAttn.Tests
{
    static class ThreadFailureChild
    {
        [StructLayout(LayoutKind.Sequential)]
        struct RLimit
        {
            public ulong Cur, Max;
        }

        const int RLIMIT_AS = 9; // Linux x86-64 and aarch64

        [DllImport("libc", SetLastError = true)]
        static extern int getrlimit(int resource, out RLimit rlim);

        [DllImport("libc", SetLastError = true)]
        static extern int setrlimit(int resource, ref RLimit rlim);

        const int Threads = 256; // attn_set_num_threads refuses more
        const long Headroom = 8L << 20;

        static int failures;

        static void Check(bool ok, string what)
        {
            if (!ok)
            {
                ++failures;
                Console.WriteLine("FAIL: " + what);
            }
        }

        static long VmSizeBytes()
        {
            string statm = File.ReadAllText("/proc/self/statm");
            return long.Parse(statm.Split(' ')[0]) * Environment.SystemPageSize;
        }

        // Tasks of this process named "attn-worker" (libattn names its pool threads so).
        static int SameNameTasks()
        {
            int n = 0;
            foreach (string task in Directory.GetDirectories("/proc/self/task"))
            {
                try
                {
                    if (File.ReadAllText(task + "/comm").Trim() == "attn-worker") ++n;
                }
                catch (IOException) { } // the task ended meanwhile
            }
            return n;
        }

        // Workers alive above the baseline. A thread pthread_join has returned for can still be
        // listed in /proc/self/task for a moment (the kernel clears its tid before it leaves the
        // thread group), so a nonzero count is looked at again until it is zero, 10 s at most: a
        // worker the library kept would stay.
        static int WorkersAlive(int baseline)
        {
            var clock = Stopwatch.StartNew();
            for (;;)
            {
                int n = SameNameTasks() - baseline;
                long waited = clock.ElapsedMilliseconds; // every call compiled before the limit
                if (n <= 0 || waited >= 10000) return n;
                Thread.Sleep(10);
            }
        }

        static int Tasks()
        {
            return Directory.GetDirectories("/proc/self/task").Length;
        }

        // Max |a - b| and whether a and b are bit-identical.
        static unsafe int Bits(float f)
        {
            return *(int*)&f;
        }

        static bool Same(float[] a, float[] b, out double maxErr)
        {
            bool same = a.Length == b.Length;
            maxErr = 0;
            for (int i = 0; i < a.Length && i < b.Length; ++i)
            {
                if (Bits(a[i]) != Bits(b[i]))
                    same = false;
                double e = Math.Abs((double)a[i] - b[i]);
                if (!(e <= maxErr)) maxErr = e; // NaN counts as a difference too
            }
            return same;
        }

        static float[] Random(int seed, int n)
        {
            var rng = new Random(seed);
            var x = new float[n];
            for (int i = 0; i < n; ++i) x[i] = (float)(rng.NextDouble() * 2 - 1);
            return x;
        }

        static int Main()
        {
            var desc = AttentionDesc.CreateBuilder().Batch(2).Heads(8, 4).SeqLen(300, 280)
                .HeadDim(32).Causal(Causal.TopLeft).Build();
            float[] q = Random(1, (int)desc.RequiredLen(Operand.Q));
            float[] k = Random(2, (int)desc.RequiredLen(Operand.K));
            float[] v = Random(3, (int)desc.RequiredLen(Operand.V));
            int outLen = (int)desc.RequiredLen(Operand.Out);
            float[] want = new float[outLen];
            float[][] got = { new float[outLen], new float[outLen], new float[outLen] };
            float[] recovered = new float[outLen];

            Attention.NumThreads = 1;
            desc.Forward(q, k, v, null, null, want);
            // Dry run of the limited phase's code (JIT, file reads), still on one thread.
            desc.Forward(q, k, v, null, null, got[0]);
            double err;
            Same(got[0], want, out err);
            int baseline = SameNameTasks(), tasksBefore = Tasks();
            WorkersAlive(baseline);
            Thread.Sleep(1); // compiled before the limit, like everything the limited phase calls
            long vm = VmSizeBytes();

            RLimit lim;
            if (getrlimit(RLIMIT_AS, out lim) != 0)
            {
                Console.WriteLine("FAIL: getrlimit: errno " + Marshal.GetLastWin32Error());
                return 2;
            }
            ulong hard = lim.Max, softBefore = lim.Cur;
            GC.Collect();
            GC.WaitForPendingFinalizers();
            GC.Collect();

            // --- limited phase: no sizeable allocation from here to the limit's removal --------
            vm = VmSizeBytes();
            lim.Cur = (ulong)(vm + Headroom);
            if (lim.Cur > hard)
            {
                Console.WriteLine("FAIL: the hard RLIMIT_AS (" + hard + ") is below VM size + 8 MiB");
                return 2;
            }
            if (setrlimit(RLIMIT_AS, ref lim) != 0)
            {
                Console.WriteLine("FAIL: setrlimit: errno " + Marshal.GetLastWin32Error());
                return 2;
            }
            RLimit seen;
            getrlimit(RLIMIT_AS, out seen); // compiled before the limit (first call above)
            Attention.NumThreads = Threads;
            var workers = new int[3];
            for (int call = 0; call < 3; ++call)
            {
                desc.Forward(q, k, v, null, null, got[call]); // throws if the call fails
                workers[call] = WorkersAlive(baseline);
            }
            long vmLimited = VmSizeBytes();
            int tasksLimited = Tasks();

            lim.Cur = softBefore;
            if (setrlimit(RLIMIT_AS, ref lim) != 0)
            {
                Console.WriteLine("FAIL: setrlimit (restore): errno " + Marshal.GetLastWin32Error());
                return 2;
            }
            // --- end of the limited phase -----------------------------------------------------

            Console.WriteLine("soft RLIMIT_AS " + seen.Cur + " = VM size " + vm + " + " + Headroom +
                              " (hard " + hard + ", kept), " + Threads + " threads requested");
            Check(seen.Cur == (ulong)(vm + Headroom) && seen.Max == hard,
                  "getrlimit under the limit reads " + seen.Cur + ":" + seen.Max);
            for (int call = 0; call < 3; ++call)
            {
                bool same = Same(got[call], want, out err);
                Console.WriteLine("  limited call " + call + ": ok, max |err| vs 1 thread " + err +
                                  (same ? " (bit-identical)" : " (DIFFERENT)") + ", workers alive " +
                                  workers[call]);
                Check(same, "limited call " + call + ": result differs from the 1-thread result");
                Check(workers[call] == 0, "limited call " + call + ": " + workers[call] +
                                          " worker thread(s) alive, expected none");
            }
            Console.WriteLine("  tasks: " + tasksBefore + " before, " + tasksLimited +
                              " after the limited calls; VM size then " + vmLimited +
                              " (limit " + ((ulong)vm + (ulong)Headroom) + ")");

            // Recovery: the pool retries the same worker count once a second has passed since the
            // failed start (calls run inline until then), and names its workers before the call
            // that started them returns: call until they are there, 30 s at most.
            var recovery = Stopwatch.StartNew();
            int after = 0, recoveryCalls = 0;
            bool sameAfter = true;
            double errAfter = 0;
            for (;;)
            {
                desc.Forward(q, k, v, null, null, recovered);
                ++recoveryCalls;
                sameAfter &= Same(recovered, want, out err);
                errAfter = Math.Max(errAfter, err);
                after = SameNameTasks() - baseline;
                if (after == Threads - 1 || recovery.ElapsedMilliseconds > 30000) break;
                Thread.Sleep(20);
            }
            err = errAfter;
            Console.WriteLine("  limit restored: workers alive " + after + " after " + recoveryCalls +
                              " call(s) in " + recovery.ElapsedMilliseconds + " ms, max |err| " +
                              err + (sameAfter ? " (bit-identical)" : " (DIFFERENT)"));
            Check(after == Threads - 1, "after recovery: " + after + " workers, expected " +
                                        (Threads - 1) + " (so the limited calls could start none)");
            Check(sameAfter, "after recovery: result differs");
            Attention.NumThreads = 1;
            desc.Dispose();
            Console.WriteLine(failures == 0 ? "csharp_thread_failure: ok" :
                              "csharp_thread_failure: " + failures + " failure(s)");
            return failures == 0 ? 0 : 1;
        }
    }
}
