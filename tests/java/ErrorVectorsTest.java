package org.libattn;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.libattn.VectorFile.*;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Every line of tests/vectors/errors.txt must fail (or pass) with its status through the Java
 * face: IllegalArgumentException = INVALID_ARGUMENT, NullPointerException = NULL_POINTER,
 * AttentionException = its own status; the message must contain the named word.
 */
class ErrorVectorsTest {
    /**
     * Runs one errors.txt line; returns the status the Java face reported (0 = none) by the kind
     * of its exception: IllegalArgumentException = INVALID_ARGUMENT, NullPointerException =
     * NULL_POINTER, AttentionException = its own status, which is then never one of those two
     * (an AttentionException carrying them is reported as -1: the wrong kind).
     */
    static int runError(Line c, StringBuilder message) {
        try {
            runBrokenCase(c);
            return Status.OK.code();
        } catch (IllegalArgumentException e) {
            message.append(e.getMessage());
            return Status.INVALID_ARGUMENT.code();
        } catch (NullPointerException e) {
            message.append(e.getMessage());
            return Status.NULL_POINTER.code();
        } catch (AttentionException e) {
            message.append(e.getMessage());
            if (e.status() == Status.INVALID_ARGUMENT || e.status() == Status.NULL_POINTER) {
                message.append(" [an AttentionException, where the rule is "
                        + (e.status() == Status.NULL_POINTER ? "NullPointerException"
                                : "IllegalArgumentException") + "]");
                return -1;
            }
            return e.code();
        }
    }

    static void runBrokenCase(Line c) {
        String brk = c.get("break");
        int colon = brk.indexOf(':');
        String kind = brk.substring(0, colon), what = brk.substring(colon + 1);
        AttentionDesc.Builder bl = builder(c);
        if (kind.equals("param")) { // through the generic, bounds-checked setter
            String[] p = what.split("=");
            Param param = Param.valueOf(p[0].toUpperCase(Locale.ROOT));
            double v = Double.parseDouble(p[1]);
            if (param.isFloat()) {
                bl.param(param, v);
            } else {
                bl.param(param, (long) v);
            }
        }
        if (kind.equals("strides")) {
            String[] p = what.split("=");
            String[] s = p[1].split(",");
            bl.strides(operand(p[0]), Long.parseLong(s[0]), Long.parseLong(s[1]), Long.parseLong(s[2]));
        }
        // kv_append: Args.kvAppend with k and v as the caches; merge: Desc.merge(acc, part)
        String serve = c.get("op").equals("kv_append") || c.get("op").equals("merge") ? c.get("op")
                : null;
        Op op = serve != null ? Op.FORWARD : Op.valueOf(c.get("op").toUpperCase(Locale.ROOT));
        if (kind.equals("op")) {
            op = Op.valueOf(what.toUpperCase(Locale.ROOT));
        }
        try (AttentionDesc desc = bl.build(); AttentionArgs args = desc.args()) {
            // Zero-filled buffers of the required lengths: the inputs, then the outputs.
            Map<Operand, Object> data = new HashMap<>();
            List<Operand> bound = new ArrayList<>();
            for (String name : c.inputs()) {
                bound.add(operand(name));
            }
            if ("kv_append".equals(serve)) {
                bound.remove(Operand.Q);
            } else if ("merge".equals(serve)) {
                bound.removeAll(Arrays.asList(Operand.Q, Operand.K, Operand.V));
                bound.add(Operand.OUT);
                bound.add(Operand.LSE);
            } else if (op == Op.WEIGHTS) {
                bound.add(Operand.WEIGHTS);
            } else {
                bound.add(Operand.OUT);
                bound.add(Operand.LSE);
                if (c.get("mass").equals("1")) {
                    bound.add(Operand.KEY_MASS);
                }
            }
            String shortOf = kind.equals("short") ? what : null;
            String nullOf = kind.equals("null") ? what : null;
            // empty:<a>,<b>: bound with 0 elements (not null)
            List<String> empty = kind.equals("empty") ? Arrays.asList(what.split(","))
                    : java.util.Collections.emptyList();
            String[] alias = kind.equals("alias") ? what.split("=") : null;
            for (Operand o : bound) {
                int len = (int) desc.requiredLen(o);
                if (o.cname().equals(shortOf)) {
                    len -= 1;
                }
                if (empty.contains(o.cname())) {
                    len = 0;
                }
                if (alias != null && (o.cname().equals(alias[0]) || o.cname().equals(alias[1]))) {
                    // Both operands share one buffer, long enough for either.
                    len = (int) Math.max(desc.requiredLen(operand(alias[0])),
                            desc.requiredLen(operand(alias[1])));
                }
                data.put(o, ext(o).equals("f32") ? new float[len]
                        : ext(o).equals("i32") ? new int[len] : new byte[len]);
            }
            if (alias != null) {
                data.put(operand(alias[0]), data.get(operand(alias[1])));
            }
            if (kind.equals("set")) { // set:seq_lens_k[1]=6
                String name = what.substring(0, what.indexOf('['));
                int at = Integer.parseInt(what.substring(what.indexOf('[') + 1, what.indexOf(']')));
                int value = Integer.parseInt(what.substring(what.indexOf('=') + 1));
                ((int[]) data.get(operand(name)))[at] = value;
            }
            for (Operand o : bound) {
                if (!o.cname().equals(nullOf)
                        && !("kv_append".equals(serve) && (o == Operand.K || o == Operand.V))) {
                    bind(args, o, data.get(o));
                }
            }
            if ("kv_append".equals(serve)) {
                args.kvAppend((float[]) data.get(Operand.K), (float[]) data.get(Operand.V));
            } else if ("merge".equals(serve)) {
                if (brk.equals("null:part")) {
                    desc.merge(args, null);
                } else {
                    try (AttentionArgs part = desc.args()) {
                        part.set(Operand.OUT, new float[(int) desc.requiredLen(Operand.OUT)]);
                        part.set(Operand.LSE, new float[(int) desc.requiredLen(Operand.LSE)]);
                        desc.merge(args, part);
                    }
                }
            } else {
                args.run(op);
            }
        }
    }

    @Test
    void sharedErrorCases() throws IOException {
        Path file = VectorsTest.vectorsDir().resolve("errors.txt");
        if (!Files.isRegularFile(file)) {
            fail("tests/vectors/errors.txt not found: " + file.toAbsolutePath());
        }
        List<Line> cases = read(file);
        assertTrue(cases.size() > 0, "errors.txt lists no case");
        List<String> failures = new ArrayList<>();
        for (Line c : cases) {
            StringBuilder msg = new StringBuilder();
            int got;
            try {
                got = runError(c, msg);
            } catch (RuntimeException e) {
                failures.add(c.get("name") + ": unexpected " + e);
                continue;
            }
            int want = c.i("status");
            if (got != want) {
                failures.add(c.get("name") + ": status " + got + " (" + msg + "), expected " + want);
                continue;
            }
            // The word, case-insensitively, with no letter or digit right before or after it.
            String word = c.opt("names");
            if (word != null && !java.util.regex.Pattern.compile("(?<![A-Za-z0-9])"
                    + java.util.regex.Pattern.quote(word) + "(?![A-Za-z0-9])",
                    java.util.regex.Pattern.CASE_INSENSITIVE).matcher(msg).find()) {
                failures.add(c.get("name") + ": the message does not name '" + word + "': " + msg);
            }
        }
        System.out.println("error cases: " + cases.size() + ", " + failures.size() + " failure(s)");
        if (!failures.isEmpty()) {
            fail(failures.size() + " error case(s) failed:\n" + String.join("\n", failures));
        }
    }
}
