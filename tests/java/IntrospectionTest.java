package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * The library's runtime names through the Java face: ISA names as the library words them.
 */
class IntrospectionTest {
    @Test
    void isaNamesWithNulOrNonAsciiGetTheLibrarysWording() {
        for (String name : new String[] {"avx2\0", "scalar\0avx512", "\0", "sse2\u00e9", "avx\u20ac512"}) {
            Refusal e = Refusal.of(() -> Attention.setIsa(name),
                    name);
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertTrue(e.libraryMessage().contains("is not one of scalar, sse2, avx2, avx512"),
                    e.libraryMessage());
        }
        Attention.setIsa("");
        assertTrue(Attention.isas().contains(Attention.isa()));
    }
}
