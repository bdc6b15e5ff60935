package org.libattn;

/**
 * Loads the JNI library once, before the first native call.
 *
 * <p>The system property {@code org.libattn.library} may name the JNI library file (absolute
 * path); otherwise {@code attn_java} is looked up on {@code java.library.path}
 * ({@code libattn_java.so} on Linux). The JNI library finds {@code libattn.so} through its
 * RPATH or the system's library path.
 */
final class NativeLoader {
    private static boolean loaded;

    private NativeLoader() {}

    static synchronized void load() {
        if (loaded) {
            return;
        }
        String path = System.getProperty("org.libattn.library");
        if (path != null && !path.isEmpty()) {
            System.load(path);
        } else {
            System.loadLibrary("attn_java");
        }
        loaded = true;
    }
}
