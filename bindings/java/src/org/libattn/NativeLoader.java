package org.libattn;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;

/**
 * Loads libattn's native code once, before the first native call, from the first source that
 * works: {@code -Dorg.libattn.library.path=DIR} (or {@code -Dorg.libattn.library=FILE}; then
 * nothing else), the jar's {@code META-INF/native/<os>-<arch>/} extracted into a private
 * directory that is deleted as soon as they are loaded (they stay mapped), else
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

    private static String loadedFrom;

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
            Path dir = null;
            try {
                String t = property(TMPDIR_PROPERTY);
                base = Paths.get(t != null ? t : System.getProperty("java.io.tmpdir"));
                dir = extract(base,
                        name -> NativeLoader.class.getResourceAsStream(resources + name));
                loadedFrom = loadFrom(dir);
                return;
            } catch (IOException | UnsatisfiedLinkError | SecurityException e) {
                tried.add("the jar's " + resources.substring(1) + " extracted under " + base
                        + ": " + e);
            } finally {
                remove(dir); // loaded libraries stay mapped: nothing is left on disk
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

    /** Extracts the natives (open.apply(name); null = absent) into a new private directory. */
    static Path extract(Path base, Function<String, InputStream> open) throws IOException {
        Path dir = Files.createTempDirectory(base, DIR_PREFIX); // 0700 on POSIX, unique name
        dir.toFile().deleteOnExit(); // after its files, should remove() fail to delete them now
        try {
            for (String name : new String[] {CORE_LIBRARY, JNI_LIBRARY}) {
                try (InputStream in = open.apply(name)) {
                    if (in == null) {
                        continue; // libattn.so.0 is absent if the JNI library links it statically
                    }
                    Path target = dir.resolve(name);
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
            remove(dir);
            throw e;
        }
        return dir;
    }

    /** Deletes an extracted directory; what cannot go now (a loaded DLL) goes at exit. */
    static void remove(Path dir) {
        if (dir == null) {
            return;
        }
        for (String name : new String[] {JNI_LIBRARY, CORE_LIBRARY, ""}) { // "": dir itself
            Path f = dir.resolve(name);
            try {
                Files.deleteIfExists(f);
            } catch (IOException | SecurityException e) {
                f.toFile().deleteOnExit();
            }
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
