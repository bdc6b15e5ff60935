package org.libattn;

import java.io.IOException;
import java.io.InputStream;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;

/**
 * Loads libattn's native code once, before the first native call, from the first source that
 * works: {@code -Dorg.libattn.library.path=DIR} (or {@code -Dorg.libattn.library=FILE}; then
 * nothing else), the jar's {@code META-INF/native/<os>-<arch>/} extracted into a private locked
 * directory (removed at exit, or by a later load if the JVM was killed), else
 * {@code System.loadLibrary("attn_java")}. Failing all, an UnsatisfiedLinkError lists each try.
 */
public final class NativeLoader {
    /** System property: a directory with {@code libattn.so.0} and {@code libattn_java.so}. */
    public static final String LIBRARY_PATH_PROPERTY = "org.libattn.library.path";
    /** System property: the JNI library file itself (older spelling, still honoured). */
    public static final String LIBRARY_FILE_PROPERTY = "org.libattn.library";
    /** System property: where the bundled natives are extracted (default java.io.tmpdir). */
    public static final String TMPDIR_PROPERTY = "org.libattn.tmpdir";

    /** The file names inside {@code META-INF/native/<platform>/}, in load order. */
    static final String CORE_LIBRARY = "libattn.so.0";
    static final String JNI_LIBRARY = "libattn_java.so";
    static final String DIR_PREFIX = "libattn-";
    static final String LOCK_FILE = ".lock";

    private static String loadedFrom;
    /** Held for the life of the JVM: tells other JVMs that the extracted directory is in use. */
    private static final List<Extracted> EXTRACTED = new ArrayList<>();

    private NativeLoader() {}

    /** Loads the native code if it is not loaded yet (idempotent, thread-safe). */
    public static synchronized void load() {
        if (loadedFrom != null) {
            return;
        }
        List<String> tried = new ArrayList<>();

        for (String prop : new String[] {LIBRARY_PATH_PROPERTY, LIBRARY_FILE_PROPERTY}) {
            String v = property(prop);
            if (v == null) {
                continue; // when set, nothing else is tried
            }
            Path p = Paths.get(v).toAbsolutePath();
            try {
                if (prop.equals(LIBRARY_FILE_PROPERTY)) {
                    System.load(p.toString());
                }
                loadedFrom = prop.equals(LIBRARY_FILE_PROPERTY) ? p.toString() : loadFrom(p);
                return;
            } catch (UnsatisfiedLinkError | SecurityException e) {
                tried.add("-D" + prop + "=" + v + ": " + e.getMessage());
                throw failure(tried, false);
            }
        }

        String resources = "/META-INF/native/" + platform() + "/";
        if (NativeLoader.class.getResource(resources + JNI_LIBRARY) != null) {
            Path base = null;
            try {
                String t = property(TMPDIR_PROPERTY);
                base = Paths.get(t != null ? t : System.getProperty("java.io.tmpdir"));
                removeStale(base);
                Extracted x = extract(base,
                        name -> NativeLoader.class.getResourceAsStream(resources + name));
                EXTRACTED.add(x);
                loadedFrom = loadFrom(x.dir);
                return;
            } catch (IOException | UnsatisfiedLinkError | SecurityException e) {
                tried.add("the jar's " + resources.substring(1) + " extracted under " + base
                        + ": " + e);
            }
        } else {
            tried.add("the jar has no natives for this platform (no resource " + resources
                    + JNI_LIBRARY + ")");
        }
        try {
            System.loadLibrary("attn_java");
            loadedFrom = "System.loadLibrary(\"attn_java\")";
            return;
        } catch (UnsatisfiedLinkError | SecurityException e) {
            tried.add("System.loadLibrary(\"attn_java\"): " + e.getMessage());
        }
        throw failure(tried, true);
    }

    /** Where the JNI library was loaded from (a path or System.loadLibrary); loads it first. */
    public static synchronized String loadedFrom() {
        load();
        return loadedFrom;
    }

    /** This JVM's platform directory in the jar, {@code <os>-<arch>} (e.g. linux-x86_64). */
    public static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        os = os.startsWith("linux") ? "linux"
                : os.startsWith("mac") || os.startsWith("darwin") ? "osx"
                : os.startsWith("windows") ? "windows" : os.replaceAll("[^a-z0-9]", "");
        arch = arch.equals("amd64") || arch.equals("x64") ? "x86_64"
                : arch.equals("arm64") ? "aarch64" : arch.replaceAll("[^a-z0-9_]", "");
        return os + "-" + arch;
    }

    // ------------------------------------------------------------------ internals

    private static String property(String name) {
        String v = System.getProperty(name);
        return v == null || v.isEmpty() ? null : v;
    }

    /** Loads DIR/libattn.so.0 (when present) then DIR/libattn_java.so; returns the latter. */
    private static String loadFrom(Path dir) {
        Path core = dir.resolve(CORE_LIBRARY);
        Path jni = dir.resolve(JNI_LIBRARY);
        if (!Files.isRegularFile(jni)) {
            throw new UnsatisfiedLinkError(jni + " does not exist");
        }
        if (Files.isRegularFile(core)) {
            System.load(core.toString());
        }
        System.load(jni.toString());
        return jni.toString();
    }

    /** An extracted directory and the lock that marks it in use (released when closed). */
    static final class Extracted implements AutoCloseable {
        final Path dir;
        final FileChannel channel;
        final FileLock lock;

        Extracted(Path dir, FileChannel channel, FileLock lock) {
            this.dir = dir;
            this.channel = channel;
            this.lock = lock;
        }

        @Override
        public void close() throws IOException {
            channel.close(); // releases the lock
        }
    }

    /** Extracts the natives (open.apply(name); null = absent) into a new locked directory. */
    static Extracted extract(Path base, Function<String, InputStream> open) throws IOException {
        Path dir = Files.createTempDirectory(base, DIR_PREFIX); // 0700 on POSIX, unique name
        dir.toFile().deleteOnExit(); // deleteOnExit runs in reverse order: files, then the dir
        // Lock before anything else exists under its final name: another JVM's removeStale only
        // considers a ".lock", which appears (by an atomic rename) already locked.
        Path pending = dir.resolve(LOCK_FILE + ".new");
        FileChannel ch = FileChannel.open(pending, StandardOpenOption.CREATE_NEW,
                StandardOpenOption.WRITE);
        FileLock l = ch.lock();
        Path lockFile = Files.move(pending, dir.resolve(LOCK_FILE), StandardCopyOption.ATOMIC_MOVE);
        lockFile.toFile().deleteOnExit();
        Extracted x = new Extracted(dir, ch, l);
        try {
            for (String name : new String[] {CORE_LIBRARY, JNI_LIBRARY}) {
                try (InputStream in = open.apply(name)) {
                    if (in == null) {
                        continue; // libattn.so.0 is absent if the JNI library links it statically
                    }
                    Path target = dir.resolve(name);
                    target.toFile().deleteOnExit();
                    Files.copy(in, target);
                    try {
                        Files.setPosixFilePermissions(target,
                                PosixFilePermissions.fromString("r-x------"));
                    } catch (UnsupportedOperationException e) {
                        // not a POSIX file system: the directory's own permissions apply
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            x.close(); // unlocked: the next load anywhere removes the partial directory
            throw e;
        }
        return x;
    }

    /** Best effort: deletes this user's base/libattn-* directories whose .lock no JVM holds. */
    static void removeStale(Path base) {
        String user = System.getProperty("user.name");
        try (DirectoryStream<Path> dirs = Files.newDirectoryStream(base, DIR_PREFIX + "*")) {
            for (Path d : dirs) {
                Path lockFile = d.resolve(LOCK_FILE);
                try {
                    LinkOption here = LinkOption.NOFOLLOW_LINKS;
                    if (!Files.isDirectory(d, here) || !Files.isRegularFile(lockFile, here)
                            || !Files.getOwner(d, here).getName().equals(user)) {
                        continue;
                    }
                } catch (IOException | UnsupportedOperationException | SecurityException e) {
                    continue;
                }
                try (FileChannel ch = FileChannel.open(lockFile, StandardOpenOption.WRITE)) {
                    FileLock l;
                    try {
                        l = ch.tryLock();
                    } catch (OverlappingFileLockException e) {
                        continue; // this JVM's own directory
                    }
                    if (l == null) {
                        continue; // a live JVM holds it
                    }
                    try (DirectoryStream<Path> files = Files.newDirectoryStream(d)) {
                        for (Path f : files) {
                            Files.deleteIfExists(f);
                        }
                    }
                    Files.deleteIfExists(d);
                    l.release();
                } catch (IOException | SecurityException e) {
                    // another JVM removed it first, or it is not ours to remove: leave it
                }
            }
        } catch (IOException | SecurityException e) {
            // base is unreadable: extraction reports the real problem
        }
    }

    private static UnsatisfiedLinkError failure(List<String> tried, boolean hint) {
        StringBuilder b = new StringBuilder("libattn: could not load the native library for ")
                .append(platform()).append(". Tried:");
        for (int i = 0; i < tried.size(); i++) {
            b.append("\n  ").append(i + 1).append(". ").append(tried.get(i));
        }
        if (hint) {
            b.append("\nUse a jar with natives for this platform, or set -D" + LIBRARY_PATH_PROPERTY
                    + "=<dir with " + CORE_LIBRARY + " and " + JNI_LIBRARY + ">; if the temporary"
                    + " directory is mounted noexec, set -D" + TMPDIR_PROPERTY
                    + "=<another directory>.");
        }
        return new UnsatisfiedLinkError(b.toString());
    }
}
