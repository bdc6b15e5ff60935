package org.libattn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * NativeLoader: the explicit directory the tests run with (-Dorg.libattn.library.path), the
 * platform name, and the extraction / stale-directory logic on fake files (the real extraction
 * from the Maven jar is ctest consumer_java).
 */
class NativeLoaderTest {
    @TempDir
    Path base;

    static Function<String, InputStream> fakeNatives(Map<String, byte[]> files) {
        return name -> files.containsKey(name) ? new ByteArrayInputStream(files.get(name)) : null;
    }

    static Map<String, byte[]> twoFiles() {
        Map<String, byte[]> m = new HashMap<>();
        m.put(NativeLoader.CORE_LIBRARY, "core".getBytes(StandardCharsets.UTF_8));
        m.put(NativeLoader.JNI_LIBRARY, "jni".getBytes(StandardCharsets.UTF_8));
        return m;
    }

    static List<Path> libattnDirs(Path base) throws IOException {
        try (Stream<Path> s = Files.list(base)) {
            return s.filter(p -> p.getFileName().toString().startsWith(NativeLoader.DIR_PREFIX))
                    .sorted().collect(Collectors.toList());
        }
    }

    @Test
    void loadsFromTheExplicitDirectory() throws IOException {
        String dir = System.getProperty(NativeLoader.LIBRARY_PATH_PROPERTY);
        if (dir == null) {
            return; // run without the property (e.g. by hand with java.library.path)
        }
        Path d = Paths.get(dir).toAbsolutePath();
        assertEquals(d.resolve("libattn_java.so").toString(), NativeLoader.loadedFrom());
        String maps = new String(Files.readAllBytes(Paths.get("/proc/self/maps")),
                StandardCharsets.UTF_8);
        assertTrue(maps.contains(d.resolve("libattn.so.0").toString()), maps);
        assertTrue(maps.contains(d.resolve("libattn_java.so").toString()), maps);
        assertTrue(Attention.version().matches("[0-9]+\\.[0-9]+\\.[0-9]+"), Attention.version());
    }

    @Test
    void platformName() {
        String os = System.getProperty("os.name");
        String arch = System.getProperty("os.arch");
        if (os.equals("Linux") && arch.equals("amd64")) {
            assertEquals("linux-x86_64", NativeLoader.platform());
        }
        assertTrue(NativeLoader.platform().matches("[a-z0-9]+-[a-z0-9_]+"), NativeLoader.platform());
    }

    @Test
    void extractsIntoAPrivateUniqueLockedDirectory() throws IOException {
        try (NativeLoader.Extracted a = NativeLoader.extract(base, fakeNatives(twoFiles()));
                NativeLoader.Extracted b = NativeLoader.extract(base, fakeNatives(twoFiles()))) {
            assertNotEquals(a.dir, b.dir);
            for (NativeLoader.Extracted x : new NativeLoader.Extracted[] {a, b}) {
                assertEquals(base, x.dir.getParent());
                assertTrue(x.dir.getFileName().toString().startsWith("libattn-"));
                assertEquals("rwx------", PosixFilePermissions.toString(
                        Files.getPosixFilePermissions(x.dir)));
                assertArrayEquals("core".getBytes(StandardCharsets.UTF_8),
                        Files.readAllBytes(x.dir.resolve("libattn.so.0")));
                assertArrayEquals("jni".getBytes(StandardCharsets.UTF_8),
                        Files.readAllBytes(x.dir.resolve("libattn_java.so")));
                assertTrue(Files.isRegularFile(x.dir.resolve(".lock")));
                assertFalse(Files.exists(x.dir.resolve(".lock.new")));
                assertTrue(x.lock.isValid());
            }
            // Both are in use by this JVM: never removed as stale.
            NativeLoader.removeStale(base);
            assertEquals(2, libattnDirs(base).size());
        }
    }

    @Test
    void removesOnlyUnlockedDirectories() throws IOException {
        NativeLoader.Extracted dead = NativeLoader.extract(base, fakeNatives(twoFiles()));
        dead.close(); // as if its JVM had been killed: the lock is gone, the files are not
        NativeLoader.Extracted alive = NativeLoader.extract(base, fakeNatives(twoFiles()));
        Path settingUp = Files.createDirectory(base.resolve("libattn-being-set-up"));
        Path other = Files.createDirectory(base.resolve("unrelated"));
        Files.createFile(other.resolve(".lock"));
        Files.createFile(other.resolve("precious"));
        Path link = Files.createSymbolicLink(base.resolve("libattn-link"), other);
        try {
            NativeLoader.removeStale(base);
            assertTrue(Files.isSymbolicLink(link), "a symbolic link is never followed");
            assertTrue(Files.exists(other.resolve("precious")), "a symbolic link is never followed");
            assertFalse(Files.exists(dead.dir), "an unlocked directory is stale");
            assertTrue(Files.isDirectory(alive.dir), "a locked directory is in use");
            assertTrue(Files.isDirectory(settingUp), "no .lock yet: being set up, left alone");
            assertTrue(Files.isDirectory(other), "not libattn-*: never touched");
        } finally {
            alive.close();
        }
    }

    @Test
    void anAbsentCoreLibraryIsSkipped() throws IOException {
        Map<String, byte[]> only = new HashMap<>();
        only.put(NativeLoader.JNI_LIBRARY, new byte[] {1, 2, 3});
        try (NativeLoader.Extracted x = NativeLoader.extract(base, fakeNatives(only))) {
            assertFalse(Files.exists(x.dir.resolve("libattn.so.0")));
            assertTrue(Files.isRegularFile(x.dir.resolve("libattn_java.so")));
        }
    }
}
