package example;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.stream.Stream;
import org.libattn.Attention;
import org.libattn.NativeLoader;

/**
 * A consumer of org.libattn:attn: the seed example through the Java binding, plus where the
 * native code came from. Run as {@code java -cp attn-<v>.jar:attn-consumer.jar example.App}
 * with no java.library.path and no LD_LIBRARY_PATH.
 *
 * <p>Options: {@code --report FILE} also writes the report there; {@code --barrier DIR
 * --parties N} waits (at most 60 s) until N processes have checked in under DIR before the first
 * call into the library, so that N JVMs extract their natives at the same moment.
 *
 * <p>Exit 0 only if out[1][0] is exactly 15 and both libattn.so.0 and libattn_java.so are mapped
 * from one directory under java.io.tmpdir named libattn-*.
 */
public final class App {
    private App() {}

    public static void main(String[] args) throws Exception {
        Path report = null;
        Path barrier = null;
        int parties = 1;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--report":
                    report = Paths.get(args[i + 1]);
                    break;
                case "--barrier":
                    barrier = Paths.get(args[i + 1]);
                    break;
                case "--parties":
                    parties = Integer.parseInt(args[i + 1]);
                    break;
                default:
                    throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (barrier != null) {
            await(barrier, parties);
        }

        // The seed example: Q = 0, K = [1, 2, 3], V = [10, 20, 30], n = 3, d = 1, causal.
        float[] q = {0, 0, 0};
        float[] k = {1, 2, 3};
        float[] v = {10, 20, 30};
        float[] out = Attention.simple(q, k, v, 3, 1, true, null);

        StringBuilder b = new StringBuilder();
        boolean ok = true;
        b.append("libattn ").append(Attention.version()).append(" (jar ")
                .append(Attention.class.getPackage().getImplementationVersion())
                .append(", kernel ").append(Attention.isa()).append(")\n");
        b.append("out = [").append(out[0]).append(", ").append(out[1]).append(", ")
                .append(out[2]).append("]\n");
        b.append("out[1][0] = ").append(out[1]).append('\n');
        if (out[1] != 15.0f) {
            b.append("FAIL: out[1][0] is not exactly 15\n");
            ok = false;
        }

        String from = NativeLoader.loadedFrom();
        Path tmp = Paths.get(System.getProperty("java.io.tmpdir")).toAbsolutePath();
        b.append("natives: ").append(from).append('\n');
        b.append("java.io.tmpdir: ").append(tmp).append('\n');
        Path dir = Paths.get(from).getParent();
        if (dir == null || !dir.getFileName().toString().startsWith("libattn-")
                || !tmp.equals(dir.getParent())) {
            b.append("FAIL: the JNI library was not loaded from an extracted libattn-* ")
                    .append("directory under java.io.tmpdir\n");
            ok = false;
        }
        Set<String> mapped = mappedLibattn();
        for (String m : mapped) {
            b.append("mapped: ").append(m).append('\n');
        }
        for (String name : new String[] {"libattn.so.0", "libattn_java.so"}) {
            if (dir == null || !mapped.contains(dir.resolve(name).toString())) {
                b.append("FAIL: ").append(name).append(" is not mapped from ").append(dir)
                        .append('\n');
                ok = false;
            }
        }
        if (mapped.size() != 2) {
            b.append("FAIL: expected exactly two libattn files mapped\n");
            ok = false;
        }
        b.append(ok ? "consumer: OK\n" : "consumer: FAILED\n");

        System.out.print(b);
        System.out.flush();
        if (report != null) {
            Files.write(report, b.toString().getBytes(StandardCharsets.UTF_8));
        }
        System.exit(ok ? 0 : 1);
    }

    /** The files named libattn* this process has mapped (/proc/self/maps), in order. */
    static Set<String> mappedLibattn() throws IOException {
        Set<String> paths = new LinkedHashSet<>();
        try (Stream<String> lines = Files.lines(Paths.get("/proc/self/maps"))) {
            lines.forEach(line -> {
                int slash = line.indexOf('/');
                if (slash >= 0) {
                    // The loader deletes its extracted files once they are loaded.
                    String p = line.substring(slash).replaceFirst(" \\(deleted\\)$", "");
                    if (Paths.get(p).getFileName().toString().startsWith("libattn")) {
                        paths.add(p);
                    }
                }
            });
        }
        return paths;
    }

    /** Checks in under dir, then waits until `parties` processes have (60 s at most). */
    static void await(Path dir, int parties) throws IOException, InterruptedException {
        Files.createDirectories(dir);
        Files.createFile(dir.resolve("ready-" + ProcessHandle.current().pid()));
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (true) {
            long n;
            try (Stream<Path> s = Files.list(dir)) {
                n = s.count();
            }
            if (n >= parties) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("only " + n + " of " + parties + " processes started");
            }
            Thread.sleep(5);
        }
    }
}
