import org.libattn.*;

/** bindings/java/README.md's table queries. */
public final class Tables {
    public static void main(String[] argv) {
        for (IsaInfo isa : Attention.isaInfo()) { // weakest first: scalar, sse2, avx2, ...
            System.out.println(isa); // "avx512fp16 (unsupported)" where this CPU lacks it
        }
        ParamInfo p = Param.CAUSAL.info();
        System.out.println(p); // causal: int in [0.0, 2.0], default 0.0
        OperandInfo k = Operand.K.info();
        System.out.println(k); // k: rank 4, in [F32, F16, BF16, I8], out [F32, F16, BF16, I8], strided
        try {
            Attention.paramInfo(99);
        } catch (IllegalArgumentException e) {
            System.out.println(e.getMessage()); // attn_param_info: param (99) is not an attn_param
        }
        if (!p.name().equals("causal") || p.max() != 2 || k.rank() != 4
                || !k.inputTypes().contains(Dtype.BF16)) {
            System.exit(1);
        }
    }
}
