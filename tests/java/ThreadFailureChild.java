package org.libattn;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Random;

/**
 * From Java: worker threads that cannot start (address space exhausted under a
 * lowered RLIMIT_AS) must not fail a call: it runs on the caller's thread with the 1-thread
 * result, bit for bit, and no worker is kept.
 *
 * <p>Run as its own small JVM (ctest java_thread_failure; the limit is process-wide). Java cannot
 * call setrlimit, so the JVM lowers its own SOFT limit with util-linux {@code prlimit --pid <own
 * pid> --as=<soft>:<hard>}, the hard limit read from /proc/self/limits and kept:
 * <ol>
 * <li>a 1-thread forward (the reference), then a dry run of everything the limited phase uses;
 * <li>GC, soft RLIMIT_AS := VM size (/proc/self/statm) + 8 MiB;
 * <li>256 threads (the library's maximum: 255 workers of 1 MiB stack cannot fit), three forwards:
 *     each must succeed, equal the reference and leave no worker alive;
 * <li>recovery: the soft limit back, then forwards until the pool has retried (after its
 *     back-off of a second, calls run inline) and shows its 255 workers, 30 s at most (so the
 *     count in 3 would have seen them); every result the same.
 * </ol>
 * libattn names its pool threads "attn-worker": workers = tasks with that comm, minus the baseline
 * counted before the limit. Exit 0 only if all
 * holds.
 */
public final class ThreadFailureChild {
    static final int THREADS = 256; // attn_set_num_threads refuses more
    static final long HEADROOM = 8L << 20;
    static int failures;

    static void check(boolean ok, String what) {
        if (!ok) {
            failures++;
            System.out.println("FAIL: " + what);
        }
    }

    static long vmSizeBytes() throws IOException {
        String statm = Files.readString(Paths.get("/proc/self/statm"));
        return Long.parseLong(statm.split(" ")[0]) * 4096L; // x86-64 / aarch64 4 KiB pages
    }

    /** Tasks of this process named "attn-worker" (libattn names its pool threads so). */
    static int sameNameTasks() throws IOException {
        int n = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Paths.get("/proc/self/task"))) {
            for (Path t : tasks) {
                try {
                    if (Files.readString(t.resolve("comm")).trim().equals("attn-worker")) {
                        n++;
                    }
                } catch (IOException ended) {
                    // the task ended meanwhile
                }
            }
        }
        return n;
    }

    /**
     * Workers alive above the baseline. A thread pthread_join has returned for can still be listed
     * in /proc/self/task for a moment (the kernel clears its tid before it leaves the thread
     * group), so a nonzero count is looked at again until it is zero, 10 s at most: a worker the
     * library kept would stay.
     */
    static int workersAlive(int baseline) throws IOException, InterruptedException {
        long start = System.nanoTime();
        for (;;) {
            int n = sameNameTasks() - baseline;
            long waited = System.nanoTime() - start;
            if (n <= 0 || waited >= 10_000_000_000L) {
                return n;
            }
            Thread.sleep(10);
        }
    }

    static int tasks() throws IOException {
        int n = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Paths.get("/proc/self/task"))) {
            for (Path t : tasks) {
                n++;
            }
        }
        return n;
    }

    /** The hard RLIMIT_AS from /proc/self/limits: "unlimited" or a byte count. */
    static String hardAsLimit() throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/limits"))) {
            if (line.startsWith("Max address space")) {
                String[] f = line.substring("Max address space".length()).trim().split("\\s+");
                return f[1];
            }
        }
        throw new IOException("no 'Max address space' in /proc/self/limits");
    }

    static String softAsLimit() throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/limits"))) {
            if (line.startsWith("Max address space")) {
                return line.substring("Max address space".length()).trim().split("\\s+")[0];
            }
        }
        throw new IOException("no 'Max address space' in /proc/self/limits");
    }

    static void prlimit(String soft, String hard) throws IOException, InterruptedException {
        long pid = ProcessHandle.current().pid();
        Process p = new ProcessBuilder("prlimit", "--pid", Long.toString(pid),
                "--as=" + soft + ":" + hard).inheritIO().start();
        int rc = p.waitFor();
        if (rc != 0) {
            throw new IOException("prlimit --as=" + soft + ":" + hard + " exited with " + rc);
        }
    }

    /** Max |a - b|, and whether a and b are bit-identical (stored in same[0]). */
    static double maxErr(float[] a, float[] b, boolean[] same) {
        same[0] = a.length == b.length;
        double m = 0;
        for (int i = 0; i < Math.min(a.length, b.length); i++) {
            if (Float.floatToRawIntBits(a[i]) != Float.floatToRawIntBits(b[i])) {
                same[0] = false;
            }
            double e = Math.abs((double) a[i] - b[i]);
            if (!(e <= m)) {
                m = e; // NaN counts as a difference too
            }
        }
        return m;
    }

    static float[] random(long seed, int n) {
        Random r = new Random(seed);
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = r.nextFloat() * 2 - 1;
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        AttentionDesc desc = AttentionDesc.builder().batch(2).heads(8, 4).seqLen(300, 280)
                .headDim(32).causal(Causal.TOP_LEFT).build();
        float[] q = random(1, (int) desc.requiredLen(Operand.Q));
        float[] k = random(2, (int) desc.requiredLen(Operand.K));
        float[] v = random(3, (int) desc.requiredLen(Operand.V));
        int outLen = (int) desc.requiredLen(Operand.OUT);
        float[] want = new float[outLen];
        float[][] got = {new float[outLen], new float[outLen], new float[outLen]};
        float[] recovered = new float[outLen];
        int[] workers = new int[3];
        boolean[] same = new boolean[1];

        Attention.setNumThreads(1);
        desc.forward(q, k, v, want);
        // Dry run of the limited phase's code (class loading, file reads), still on one thread.
        desc.forward(q, k, v, got[0]);
        maxErr(got[0], want, same);
        int baseline = sameNameTasks();
        int tasksBefore = tasks();
        workersAlive(baseline);
        Thread.sleep(1);
        String hard = hardAsLimit();
        String softBefore = softAsLimit();
        prlimit(softBefore, hard); // a no-op: starts the process machinery before the limit
        System.gc();

        // --- limited phase: no sizeable allocation until the limit is raised again ------------
        long vm = vmSizeBytes();
        long soft = vm + HEADROOM;
        if (!hard.equals("unlimited") && Long.parseLong(hard) < soft) {
            System.out.println("FAIL: the hard RLIMIT_AS (" + hard + ") is below VM size + 8 MiB");
            System.exit(2);
        }
        prlimit(Long.toString(soft), hard);
        String softSeen = softAsLimit();
        Attention.setNumThreads(THREADS);
        for (int call = 0; call < 3; call++) {
            desc.forward(q, k, v, got[call]); // throws AttentionException if the call fails
            workers[call] = workersAlive(baseline);
        }
        long vmLimited = vmSizeBytes();
        int tasksLimited = tasks();
        prlimit(softBefore, hard);
        // --- end of the limited phase ---------------------------------------------------------

        System.out.println("soft RLIMIT_AS " + softSeen + " = VM size " + vm + " + " + HEADROOM
                + " (hard " + hard + "), " + THREADS + " threads requested");
        check(softSeen.equals(Long.toString(soft)), "the soft limit reads " + softSeen + ", not " + soft);
        for (int call = 0; call < 3; call++) {
            double err = maxErr(got[call], want, same);
            System.out.println("  limited call " + call + ": ok, max |err| vs 1 thread " + err
                    + (same[0] ? " (bit-identical)" : " (DIFFERENT)") + ", workers alive "
                    + workers[call]);
            check(same[0], "limited call " + call + ": result differs from the 1-thread result");
            check(workers[call] == 0, "limited call " + call + ": " + workers[call]
                    + " worker thread(s) alive, expected none");
        }
        System.out.println("  tasks: " + tasksBefore + " before, " + tasksLimited
                + " after the limited calls; VM size then " + vmLimited + " (limit " + soft + ")");

        // Recovery: the pool retries the same worker count once a second has passed since the
        // failed start (calls run inline until then), and names its workers before the call that
        // started them returns: call until they are there, 30 s at most.
        long recoveryStart = System.nanoTime();
        int after;
        int recoveryCalls = 0;
        boolean sameAfter = true;
        double err = 0;
        for (;;) {
            desc.forward(q, k, v, recovered);
            recoveryCalls++;
            err = Math.max(err, maxErr(recovered, want, same));
            sameAfter &= same[0];
            after = sameNameTasks() - baseline;
            if (after == THREADS - 1 || System.nanoTime() - recoveryStart > 30_000_000_000L) {
                break;
            }
            Thread.sleep(20);
        }
        same[0] = sameAfter;
        System.out.println("  limit restored (" + softAsLimit() + "): workers alive " + after
                + " after " + recoveryCalls + " call(s) in "
                + (System.nanoTime() - recoveryStart) / 1_000_000 + " ms, max |err| " + err
                + (same[0] ? " (bit-identical)" : " (DIFFERENT)"));
        check(after == THREADS - 1, "after recovery: " + after + " workers, expected "
                + (THREADS - 1) + " (so the limited calls could start none)");
        check(same[0], "after recovery: result differs");
        Attention.setNumThreads(1);
        desc.close();
        System.out.println(failures == 0 ? "java_thread_failure: ok"
                : "java_thread_failure: " + failures + " failure(s)");
        System.exit(failures == 0 ? 0 : 1);
    }
}
