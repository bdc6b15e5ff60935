package org.libattn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
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
 * platform name, and the extraction and removal on fake files (the real extraction
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
    void extractsIntoAPrivateUniqueDirectoryAndRemovesIt() throws IOException {
        Path a = NativeLoader.extract(base, fakeNatives(twoFiles()));
        Path b = NativeLoader.extract(base, fakeNatives(twoFiles()));
        assertNotEquals(a, b);
        for (Path x : new Path[] {a, b}) {
            assertEquals(base, x.getParent());
            assertTrue(x.getFileName().toString().startsWith("libattn-"));
            assertEquals("rwx------", PosixFilePermissions.toString(
                    Files.getPosixFilePermissions(x)));
            assertArrayEquals("core".getBytes(StandardCharsets.UTF_8),
                    Files.readAllBytes(x.resolve("libattn.so.0")));
            assertArrayEquals("jni".getBytes(StandardCharsets.UTF_8),
                    Files.readAllBytes(x.resolve("libattn_java.so")));
        }
        NativeLoader.remove(a);
        assertEquals(List.of(b), libattnDirs(base), "remove deletes only its own directory");
        NativeLoader.remove(b);
        assertEquals(List.of(), libattnDirs(base));
    }

    @Test
    void aFailedExtractionLeavesNothing() {
        Map<String, byte[]> files = twoFiles();
        Function<String, InputStream> failing = name -> {
            if (name.equals(NativeLoader.JNI_LIBRARY)) {
                throw new IllegalStateException("unreadable resource");
            }
            return fakeNatives(files).apply(name);
        };
        assertThrows(IllegalStateException.class, () -> NativeLoader.extract(base, failing));
        assertEquals(List.of(), assertDoesNotThrow(() -> libattnDirs(base)));
    }

    @Test
    void anAbsentCoreLibraryIsSkipped() throws IOException {
        Map<String, byte[]> only = new HashMap<>();
        only.put(NativeLoader.JNI_LIBRARY, new byte[] {1, 2, 3});
        Path x = NativeLoader.extract(base, fakeNatives(only));
        assertFalse(Files.exists(x.resolve("libattn.so.0")));
        assertTrue(Files.isRegularFile(x.resolve("libattn_java.so")));
        NativeLoader.remove(x);
        assertFalse(Files.exists(x));
    }
}
