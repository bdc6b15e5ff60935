package org.libattn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.libattn.VectorFile.*;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The shared vectors of the extensible call (tests/vectors/variants.txt, VARIANTS.md): every line
 * runs through the Java face (AttentionDesc.Builder's typed parameters + AttentionArgs.run), is
 * checked within 1e-5 * max(1, |expected|) with expected zeros exactly 0 and expected -inf lse
 * exactly -inf, through arrays and (bit for bit the same) direct buffers, then on every kernel
 * (ISA) the CPU supports on 1 and 2 threads (bit-identical across thread counts). Writes
 * $ATTN_XLANG_DIR/java.variants.bin. The same runner takes storage.txt (16-bit and int8 Q/K/V
 * bound through setF16 / setBf16 / setI8 as short[] / byte[] and direct ShortBuffer /
 * ByteBuffer; writes java.storage.bin) and backward.txt (forward, then Op.BACKWARD with the
 * listed gradients, checked within 1e-4; writes java.backward.bin). The errors.txt lines:
 * ErrorVectorsTest.
 */
class VariantsTest {
    /** Runs one line of a vectors file through the face. */
    interface Runner {
        Got run(Line c, AttentionDesc desc, Map<Operand, Object> in, boolean buffers);
    }

    static final Runner FORWARD_RUNNER = (c, desc, in, buffers) -> run(desc, in,
            c.get("mass").equals("1"), buffers);
    static final Runner BACKWARD_RUNNER = (c, desc, in, buffers) -> runBackward(desc, in, c.grads(),
            buffers);

    /**
     * Every line of a vectors file: checked through arrays, the same bits through direct
     * buffers, the array results written to $ATTN_XLANG_DIR/{@code bin}; then every kernel the
     * CPU supports on 1 and 2 threads (within tolerance, bit-identical across thread counts).
     */
    static void runFile(String file, String bin, Runner runner) throws IOException {
        Path dir = VectorsTest.vectorsDir();
        List<Line> cases = read(vectorsFile(file));
        assertTrue(cases.size() > 0, file + " lists no case");
        ByteArrayOutputStream xlang = new ByteArrayOutputStream();
        List<String> failures = new ArrayList<>();
        List<AttentionDesc> descs = new ArrayList<>();
        List<Map<Operand, Object>> inputs = new ArrayList<>();
        try {
            for (Line c : cases) {
                String name = c.get("name");
                AttentionDesc desc = builder(c).build();
                descs.add(desc);
                Map<Operand, Object> in = readInputs(dir, c, desc);
                inputs.add(in);
                Got g = runner.run(c, desc, in, false);
                g.write(xlang);
                String m = check(dir, c, desc, g);
                if (m != null) {
                    failures.add(name + " (arrays): " + m);
                }
                if (!runner.run(c, desc, in, true).sameBits(g)) {
                    failures.add(name + ": direct-buffer results differ from the array results");
                }
            }
            String xdir = System.getenv("ATTN_XLANG_DIR");
            if (xdir != null && !xdir.isEmpty()) {
                Files.createDirectories(Paths.get(xdir));
                Files.write(Paths.get(xdir, bin), xlang.toByteArray());
            }

            // Every kernel, 1 and 2 threads: within tolerance, bit-identical across threads.
            List<String> isas = new ArrayList<>();
            try {
                for (String isa : Attention.isas()) {
                    try {
                        Attention.setIsa(isa);
                    } catch (AttentionException e) {
                        assertEquals(Status.UNSUPPORTED, e.status(), isa + ": " + e.getMessage());
                        continue;
                    }
                    isas.add(isa);
                    for (int i = 0; i < cases.size(); i++) {
                        Line c = cases.get(i);
                        Attention.setNumThreads(1);
                        Got one = runner.run(c, descs.get(i), inputs.get(i), false);
                        Attention.setNumThreads(2);
                        Got two = runner.run(c, descs.get(i), inputs.get(i), false);
                        String m = check(dir, c, descs.get(i), one);
                        if (m != null) {
                            failures.add(c.get("name") + " (isa " + isa + "): " + m);
                        }
                        if (!one.sameBits(two)) {
                            failures.add(c.get("name") + " (isa " + isa + "): 2 threads differ from 1");
                        }
                    }
                }
            } finally {
                Attention.setIsa(null);
                Attention.setNumThreads(0);
            }
            assertTrue(isas.contains("scalar"), "the scalar kernel must always be available");
            System.out.println(file + ": " + cases.size() + " cases, ISAs " + isas + ", "
                    + failures.size() + " failure(s)");
        } finally {
            descs.forEach(AttentionDesc::close);
        }
        if (!failures.isEmpty()) {
            fail(failures.size() + " " + file + " check(s) failed:\n" + String.join("\n", failures));
        }
    }

    @Test
    void sharedVariantVectors() throws IOException {
        runFile("variants.txt", "java.variants.bin", FORWARD_RUNNER);
    }

    /** storage.txt: 16-bit and int8 q/k/v through setF16 / setBf16 / setI8 (arrays and buffers). */
    @Test
    void sharedStorageVectors() throws IOException {
        runFile("storage.txt", "java.storage.bin", FORWARD_RUNNER);
    }

    /** backward.txt: forward, then Op.BACKWARD with the listed gradients. */
    @Test
    void sharedBackwardVectors() throws IOException {
        runFile("backward.txt", "java.backward.bin", BACKWARD_RUNNER);
    }
}
