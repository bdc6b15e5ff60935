package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.libattn.CallFixture.*;

import org.junit.jupiter.api.Test;

/**
 * The lifetime of the face's native objects: closed descriptors and args refuse calls, and the
 * Cleaner frees those never closed.
 */
class LifecycleTest {
    @Test
    void closedObjects() {
        AttentionDesc d = AttentionDesc.builder().seqLen(2).headDim(2).build();
        AttentionArgs a = d.args();
        float[] x = new float[4];
        a.set(Operand.Q, x).set(Operand.K, x).set(Operand.V, x).set(Operand.OUT, new float[4]);
        a.run(Op.FORWARD);
        assertFalse(a.isClosed());
        a.close();
        assertTrue(a.isClosed());
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> a.run(Op.FORWARD));
        assertMentions(e.getMessage(), "AttentionArgs", "closed");
        assertThrows(IllegalStateException.class, () -> a.set(Operand.Q, x));
        assertThrows(IllegalStateException.class, a::clear);
        a.close(); // idempotent
        AttentionArgs b = d.args();
        b.set(Operand.Q, x).set(Operand.K, x).set(Operand.V, x).set(Operand.OUT, new float[4]);
        d.close();
        e = assertThrows(IllegalStateException.class, () -> b.run(Op.FORWARD));
        assertMentions(e.getMessage(), "AttentionDesc", "closed");
        e = assertThrows(IllegalStateException.class, d::args);
        assertMentions(e.getMessage(), "closed");
        assertThrows(IllegalStateException.class, () -> d.param(Param.SCALE));
        b.close();
        assertEquals(1.0f / (float) Math.sqrt(2), d.scale(), "the getters keep working after close");
    }

    @Test
    void theCleanerFreesObjectsThatAreNeverClosed() throws InterruptedException {
        long descBefore = Natives.DESC_FREED_BY_GC.get(), argsBefore = Natives.ARGS_FREED_BY_GC.get();
        long descTotal = Natives.DESC_FREED.get(), argsTotal = Natives.ARGS_FREED.get();
        // Explicit closes free once, not through the safety net, and never twice.
        AttentionDesc closed = AttentionDesc.builder().seqLen(2).headDim(2).build();
        AttentionArgs closedArgs = closed.args();
        closedArgs.close();
        closedArgs.close();
        closed.close();
        closed.close();
        assertEquals(descTotal + 1, Natives.DESC_FREED.get());
        assertEquals(argsTotal + 1, Natives.ARGS_FREED.get());
        assertEquals(descBefore, Natives.DESC_FREED_BY_GC.get());
        assertEquals(argsBefore, Natives.ARGS_FREED_BY_GC.get());

        int n = 64;
        abandon(n);
        long deadline = System.nanoTime() + 30_000_000_000L;
        while ((Natives.DESC_FREED_BY_GC.get() < descBefore + n
                || Natives.ARGS_FREED_BY_GC.get() < argsBefore + n) && System.nanoTime() < deadline) {
            System.gc();
            Thread.sleep(20);
        }
        assertTrue(Natives.DESC_FREED_BY_GC.get() >= descBefore + n,
                "descriptors freed by the Cleaner: " + (Natives.DESC_FREED_BY_GC.get() - descBefore));
        assertTrue(Natives.ARGS_FREED_BY_GC.get() >= argsBefore + n,
                "args freed by the Cleaner: " + (Natives.ARGS_FREED_BY_GC.get() - argsBefore));
    }

    /** Creates and uses n descriptors and n args objects, and drops them without closing. */
    private static void abandon(int n) {
        for (int i = 0; i < n; i++) {
            AttentionDesc d = AttentionDesc.builder().seqLen(3).headDim(4).window(1, 0).build();
            AttentionArgs a = d.args();
            float[] q = TestData.random(i, 12);
            float[] out = new float[12];
            a.set(Operand.Q, q).set(Operand.K, q).set(Operand.V, q).set(Operand.OUT, out).run(Op.FORWARD);
            assertTrue(Float.isFinite(out[11]));
        }
    }
}
