import org.libattn.*;

/** bindings/java/README.md's example: the seed call, a masked call, an error. */
public final class Quickstart {
    public static void main(String[] argv) {
        // Q = 0, so each query averages the values of the keys it may see (causal).
        float[] out = Attention.simple(new float[] {0, 0, 0}, new float[] {1, 2, 3},
                new float[] {10, 20, 30}, 3, 1, true, null);
        System.out.println("out[1][0] = " + out[1]); // 15.0

        // Two sequences in a cache of 4 keys (the second holds 3), 2 query heads sharing one KV
        // head, the last query aligned with the last key, a window of 1 key to the left.
        try (AttentionDesc desc = AttentionDesc.builder()
                     .batch(2).heads(2, 1).seqLen(4, 4).headDim(1)
                     .causal(Causal.BOTTOM_RIGHT).window(1, 0).build();
             AttentionArgs call = desc.args()) {
            float[] q = new float[(int) desc.requiredLen(Operand.Q)];
            float[] k = {1, 2, 3, 4, 1, 2, 3, 4};
            float[] v = {10, 20, 30, 40, 10, 20, 30, 40};
            float[] o = new float[(int) desc.requiredLen(Operand.OUT)];
            call.set(Operand.Q, q).set(Operand.K, k).set(Operand.V, v)
                    .set(Operand.SEQ_LENS_K, new int[] {4, 3}).set(Operand.OUT, o);
            call.run(Op.FORWARD);
            System.out.println("last query: " + o[3] + " and " + o[11]); // 35.0 and 25.0

            try {
                desc.forward(new float[3], k, v, null, null, o, null);
            } catch (IllegalArgumentException e) {
                System.out.println(e.getMessage()); // q has 3 elements, needs at least 16
            }
            if (out[1] != 15f || o[3] != 35f || o[11] != 25f) {
                System.exit(1);
            }
        }
    }
}
