package org.libattn;

import java.lang.ref.Cleaner;
import java.util.concurrent.atomic.AtomicLong;

/** Native objects are freed exactly once, by close() or by the {@link Cleaner} (counted). */
final class Natives {
    private Natives() {}

    /** One daemon thread for every libattn object of the process. */
    static final Cleaner CLEANER = Cleaner.create(r -> {
        Thread t = new Thread(r, "libattn-cleaner");
        t.setDaemon(true);
        return t;
    });

    /** Native objects freed, in total and by the Cleaner (never closed), per kind. */
    static final AtomicLong DESC_FREED = new AtomicLong();
    static final AtomicLong DESC_FREED_BY_GC = new AtomicLong();
    static final AtomicLong ARGS_FREED = new AtomicLong();
    static final AtomicLong ARGS_FREED_BY_GC = new AtomicLong();

    /**
     * The Cleaner action of one native object. It must not refer to the Java object that owns the
     * handle (or that object would never become unreachable).
     */
    static final class Handle implements Runnable {
        final long handle;
        private final boolean isArgs;
        /** Set by close() before it runs the action: the free was explicit. */
        volatile boolean closing;

        Handle(long handle, boolean isArgs) {
            this.handle = handle;
            this.isArgs = isArgs;
        }

        @Override
        public void run() {
            if (isArgs) {
                AttnNative.attn_args_destroy(handle);
            } else {
                AttnNative.attn_desc_destroy(handle);
            }
            (isArgs ? ARGS_FREED : DESC_FREED).incrementAndGet();
            if (!closing) {
                (isArgs ? ARGS_FREED_BY_GC : DESC_FREED_BY_GC).incrementAndGet();
            }
        }
    }
}
