/* C# (Mono / .NET) interface for libattn: typemaps, then the language-neutral allow-list.
 *
 * Generated at build time by cmake/csharp.cmake (SWIG 4.1, `-csharp -namespace LibAttn`; UseSWIG
 * adds `-dllimport libattn_csharp`). What SWIG emits is the raw layer: the internal classes
 * AttnNative (one static method per C function, names as in attn.h) and AttnNativePINVOKE, plus
 * the public enums Status, Causal and Operand. The idiomatic face (Attention, AttentionDesc,
 * AttentionArgs, AttentionException, ParamBounds and the enums Param, Alibi, WeightsMode, Compute,
 * Op) is hand-written in bindings/csharp/*.cs and is the only other public surface (ApiTests
 * lists the exported types).
 *
 * Typemap catalogue (every typemap binds by the parameter names of attn.h):
 *   [T1] size_t                          -> ulong                (SWIG's default is 32-bit uint)
 *   [T2] const float *q, *k, *v          -> float[]  pinned with `fixed`, zero copy
 *        float *out, *lse, *weights      -> float[]  pinned with `fixed`, zero copy
 *   [T3] const bool *pad_mask, *key_valid, *allowed
 *                                        -> bool[]   pinned with `fixed`, zero copy. Never the
 *        copying `bool INPUT[]` marshalling: Mono marshals it as 4 bytes per bool.
 *        NOTE: `fixed` on an empty array yields NULL; the face rejects short arrays (empty ones
 *        included: every required length is > 0) before calling, so NULL only ever reaches C
 *        for an argument the caller passed as null.
 *   [T4] attn_desc * / const attn_desc * -> System.IntPtr          (no SWIGTYPE_p_attn_desc class)
 *   [T5] attn_desc **desc                -> out System.IntPtr      (create's out parameter)
 *   [T6] enums attn_status / attn_causal / attn_operand -> public C# enums Status / Causal /
 *        Operand with PascalCase members (Status.InvalidArgument, Causal.TopLeft, Operand.KeyMass).
 *   [T7] attn_args * / const attn_args * -> System.IntPtr; attn_args **args -> out IntPtr
 *        (AttentionArgs owns it through the SafeHandle AttnArgsHandle).
 *   [T8] the (data, len) pairs of attn_args_set_f32 / _out_f32 / _u8 / _i32:
 *        const float *data, float *data, const uint8_t *data, const int32_t *data
 *                                        -> System.IntPtr, len -> ulong ([T1]).
 *        Not FIXED[]: attn_args only stores the pointer, which must stay valid until attn_run
 *        returns, and a FIXED[] pin ends when the setter returns. The face (AttentionArgs /
 *        AttentionDesc.Run) pins every bound array with `fixed` around the setters AND
 *        attn_run, then unbinds them: still zero copy, never a dangling pointer.
 *   [T9] int64_t -> long; the read-back pointers as `out` parameters (blittable, no copy):
 *        int64_t *value -> out long, double *value / *min / *max -> out double,
 *        int *is_float -> out int.
 *   [T10] attn_param / attn_alibi / attn_weights_mode / attn_compute / attn_op -> internal enums
 *        under their C names; the public Param / Alibi / WeightsMode / Compute / Op are
 *        hand-written (Enums.cs).
 *   [T11] native loading (NativeLoader.cs). Every raw method is [MethodImpl(NoInlining)] and
 *        starts with NativeLoader.EnsureLoaded() (csout of each return type), and the face types
 *        that call raw methods (Attention, AttentionDesc, AttentionDesc.Builder, AttentionArgs)
 *        preload the natives in their static constructors: Mono binds a [DllImport] when it
 *        JIT-compiles the raw method that calls it, before that method's body runs, so the
 *        libraries must be loaded by then, and a raw method inlined into the face would be
 *        compiled with it. The preload finds and dlopen()s libattn.so.0 and libattn_csharp.so
 *        beside LibAttn.dll or in the NuGet package's runtimes/<rid>/native/; when nothing
 *        loads, EnsureLoaded throws a DllNotFoundException naming both and every place tried
 *        (from the raw method, not wrapped in a TypeInitializationException).
 *        bindings/csharp/check_generated.cmake checks both properties of every raw method.
 *   [T12] XML documentation of the public enums Status, Causal, Operand (%csattributes: mcs
 *        -doc writes LibAttn.xml, shipped in the NuGet package).
 *   [T13] the serving layouts (0.2): attn_kv_append(desc, args, float *k_cache, k_len,
 *        float *v_cache, v_len) and attn_merge(desc, acc, part); k_cache / v_cache -> IntPtr as
 *        [T8] (AttentionDesc.KvAppend pins them with `fixed` / Memory.Pin around the call, with
 *        the operands of `args`), acc / part -> IntPtr ([T7]). They, the operands
 *        ATTN_CU_SEQLENS_Q .. ATTN_NEW_V and the parameters ATTN_PARAM_VARLEN ..
 *        ATTN_PARAM_BATCH_INVARIANT, then ATTN_PARAM_COMPUTE (the forward's arithmetic; its
 *        values attn_compute are in attn.i's list, like attn_alibi's), are re-enabled HERE with
 *        global-scope (::) renames, which beat attn.i's `%ignore ""` as [T6] does: the shared
 *        allow-list stays as it is, since Java's interface (which rejects any pointer it has no
 *        typemap for: SWIGTYPE_p_float would break its build) and Go's (which calls these two
 *        from its own C helpers) include it too.
 *   [T14] the storage types and the backward (0.2): attn_args_set_f16 / _bf16 (const uint16_t
 *        *data) and attn_args_set_i8 (const int8_t *data) -> IntPtr as [T8] (AttentionArgs.BindF16 /
 *        BindBF16 / Bind(sbyte[]) keep ushort[] / sbyte[] arrays pinned around attn_run, like
 *        float[]); the converters attn_convert_* (src, dst) and attn_quantize_i8 (src, dst,
 *        scales) -> IntPtr (Attention.ConvertF32ToF16 .. QuantizeI8 pin spans with `fixed` for
 *        the call); the operands ATTN_DOUT .. ATTN_V_SCALE. Re-enabled here with (::) renames as
 *        [T13], the shared allow-list untouched. Appends into caches of every storage type
 *        (0.2): attn_args_set_out_f16 / _bf16 / _i8 (uint16_t / int8_t *data) -> IntPtr as [T8]
 *        (AttentionArgs binds K / V / their scales with them or attn_args_set_out_f32 for
 *        AttentionDesc.KvAppendArgs), attn_kv_append_args (desc, args) -> IntPtr ([T4], [T7]);
 *        the operands ATTN_NEW_K_SCALE / ATTN_NEW_V_SCALE.
 * None of the raw methods checks a length: that is the face's job (AttentionDesc.Check*,
 * AttentionDesc.Run, Attention.Convert*), and the library checks the lengths it is given once
 * more. */

%module AttnNative

/* [T11] Mono resolves a [DllImport] when it JIT-compiles the method that calls it (and keeps a
 * failure for good), so a raw method must never be inlined into the face: the face's static
 * constructors preload the natives before the raw method is first compiled. */
%csmethodmodifiers "[global::System.Runtime.CompilerServices.MethodImpl(global::System.Runtime.CompilerServices.MethodImplOptions.NoInlining)] public";

/* Raw layer stays internal to the assembly; only the enums and the face are public. */
%pragma(csharp) moduleclassmodifiers="internal static class"
%pragma(csharp) imclassclassmodifiers="internal class"

/* ---- [T1] size_t is 64-bit on every platform we build for: map it to ulong. ---- */
%apply unsigned long long { size_t };

/* ---- [T2] [T3] pinned arrays (arrays_csharp.i FIXED[]: `fixed` blocks, IntPtr to P/Invoke). */
%include "arrays_csharp.i"
%apply float FIXED[] { const float *q, const float *k, const float *v };
%apply float FIXED[] { float *out, float *lse, float *weights };
%apply bool FIXED[] { const bool *pad_mask, const bool *key_valid, const bool *allowed };
/* [T11]: every raw method is NoInlining (see above); these three are also unsafe. */
%csmethodmodifiers attn_simple "[global::System.Runtime.CompilerServices.MethodImpl(global::System.Runtime.CompilerServices.MethodImplOptions.NoInlining)] public unsafe";
%csmethodmodifiers attn_forward "[global::System.Runtime.CompilerServices.MethodImpl(global::System.Runtime.CompilerServices.MethodImplOptions.NoInlining)] public unsafe";
%csmethodmodifiers attn_weights "[global::System.Runtime.CompilerServices.MethodImpl(global::System.Runtime.CompilerServices.MethodImplOptions.NoInlining)] public unsafe";

/* ---- [T4] the opaque descriptor travels as a plain IntPtr; AttentionDesc owns it through a
 * SafeHandle (AttnDescHandle) so that Dispose never frees it under an in-flight call. ---- */
%typemap(ctype) attn_desc *, const attn_desc * "void *"
%typemap(imtype) attn_desc *, const attn_desc * "global::System.IntPtr"
%typemap(cstype) attn_desc *, const attn_desc * "global::System.IntPtr"
%typemap(csin) attn_desc *, const attn_desc * "$csinput"
%typemap(in) attn_desc *, const attn_desc * %{ $1 = ($1_ltype)$input; %}

/* ---- [T5] attn_status attn_desc_create(attn_desc **desc, ...): `out IntPtr desc`. ---- */
%typemap(ctype) attn_desc **desc "void **"
%typemap(imtype) attn_desc **desc "out global::System.IntPtr"
%typemap(cstype) attn_desc **desc "out global::System.IntPtr"
%typemap(csin) attn_desc **desc "out $csinput"
%typemap(in) attn_desc **desc %{ $1 = (attn_desc **)$input; %}

/* ---- [T7] the binding object, as [T4] / [T5]. ---- */
%typemap(ctype) attn_args *, const attn_args * "void *"
%typemap(imtype) attn_args *, const attn_args * "global::System.IntPtr"
%typemap(cstype) attn_args *, const attn_args * "global::System.IntPtr"
%typemap(csin) attn_args *, const attn_args * "$csinput"
%typemap(in) attn_args *, const attn_args * %{ $1 = ($1_ltype)$input; %}

%typemap(ctype) attn_args **args "void **"
%typemap(imtype) attn_args **args "out global::System.IntPtr"
%typemap(cstype) attn_args **args "out global::System.IntPtr"
%typemap(csin) attn_args **args "out $csinput"
%typemap(in) attn_args **args %{ $1 = (attn_args **)$input; %}

/* ---- [T8] attn_args_set_*(args, which, data, len): data is a pointer the caller keeps pinned
 * until attn_run returns (see the catalogue). ---- */
%typemap(ctype) const float *data, float *data, const uint8_t *data,
                const int32_t *data "void *"
%typemap(imtype) const float *data, float *data, const uint8_t *data,
                 const int32_t *data "global::System.IntPtr"
%typemap(cstype) const float *data, float *data, const uint8_t *data,
                 const int32_t *data "global::System.IntPtr"
%typemap(csin) const float *data, float *data, const uint8_t *data,
               const int32_t *data "$csinput"
%typemap(in) const float *data, float *data, const uint8_t *data,
             const int32_t *data %{ $1 = ($1_ltype)$input; %}

/* ---- [T14] the 16-bit and int8 setters: as [T8]. The converters: pointers the face pins for
 * the call (spans, so any window of an array or native memory). ---- */
%typemap(ctype) const uint16_t *data, const int8_t *data, uint16_t *data, int8_t *data "void *"
%typemap(imtype) const uint16_t *data, const int8_t *data, uint16_t *data,
                 int8_t *data "global::System.IntPtr"
%typemap(cstype) const uint16_t *data, const int8_t *data, uint16_t *data,
                 int8_t *data "global::System.IntPtr"
%typemap(csin) const uint16_t *data, const int8_t *data, uint16_t *data, int8_t *data "$csinput"
%typemap(in) const uint16_t *data, const int8_t *data, uint16_t *data,
             int8_t *data %{ $1 = ($1_ltype)$input; %}
%typemap(ctype) const float *src, const uint16_t *src, uint16_t *dst, float *dst, int8_t *dst,
                float *scales "void *"
%typemap(imtype) const float *src, const uint16_t *src, uint16_t *dst, float *dst, int8_t *dst,
                 float *scales "global::System.IntPtr"
%typemap(cstype) const float *src, const uint16_t *src, uint16_t *dst, float *dst, int8_t *dst,
                 float *scales "global::System.IntPtr"
%typemap(csin) const float *src, const uint16_t *src, uint16_t *dst, float *dst, int8_t *dst,
               float *scales "$csinput"
%typemap(in) const float *src, const uint16_t *src, uint16_t *dst, float *dst, int8_t *dst,
             float *scales %{ $1 = ($1_ltype)$input; %}

/* ---- [T13] attn_kv_append's caches: pointers the face keeps pinned for the call. ---- */
%typemap(ctype) float *k_cache, float *v_cache "void *"
%typemap(imtype) float *k_cache, float *v_cache "global::System.IntPtr"
%typemap(cstype) float *k_cache, float *v_cache "global::System.IntPtr"
%typemap(csin) float *k_cache, float *v_cache "$csinput"
%typemap(in) float *k_cache, float *v_cache %{ $1 = ($1_ltype)$input; %}

/* ---- [T9] 64-bit integers and the read-back out parameters. ---- */
%include "typemaps.i"
%apply long long { int64_t };
%apply long long *OUTPUT { int64_t *value };
%apply double *OUTPUT { double *value, double *min, double *max };
%apply int *OUTPUT { int *is_float };

/* ---- [T6] real enums with .NET names. Global-scope (::) renames are more specific than
 * attn.i's plain `%rename("%s")` allow-list entries, so they win although they come first.
 * A value added to attn.i but not listed here still appears, under its C name. ---- */
%rename(Status) ::attn_status;
%rename(Ok) ::ATTN_OK;
%rename(NullPointer) ::ATTN_ERR_NULL_POINTER;
%rename(InvalidArgument) ::ATTN_ERR_INVALID_ARGUMENT;
%rename(OutOfMemory) ::ATTN_ERR_OUT_OF_MEMORY;
%rename(Unsupported) ::ATTN_ERR_UNSUPPORTED;
%rename(Internal) ::ATTN_ERR_INTERNAL;
%rename(Causal) ::attn_causal;
%rename(None) ::ATTN_CAUSAL_NONE;
%rename(TopLeft) ::ATTN_CAUSAL_TOP_LEFT;
%rename(BottomRight) ::ATTN_CAUSAL_BOTTOM_RIGHT;
%rename(Operand) ::attn_operand;
%rename(Q) ::ATTN_Q;
%rename(K) ::ATTN_K;
%rename(V) ::ATTN_V;
%rename(Out) ::ATTN_OUT;
%rename(Lse) ::ATTN_LSE;
%rename(Weights) ::ATTN_WEIGHTS;
%rename(KeyValid) ::ATTN_KEY_VALID;
%rename(Allowed) ::ATTN_ALLOWED;
%rename(Bias) ::ATTN_BIAS;
%rename(AlibiSlopes) ::ATTN_ALIBI_SLOPES;
%rename(Sinks) ::ATTN_SINKS;
%rename(QueryValid) ::ATTN_QUERY_VALID;
%rename(SeqLensK) ::ATTN_SEQ_LENS_K;
%rename(KeyMass) ::ATTN_KEY_MASS;
%rename(CuSeqlensQ) ::ATTN_CU_SEQLENS_Q;
%rename(CuSeqlensK) ::ATTN_CU_SEQLENS_K;
%rename(BlockTable) ::ATTN_BLOCK_TABLE;
%rename(NewK) ::ATTN_NEW_K;
%rename(NewV) ::ATTN_NEW_V;
%rename(DOut) ::ATTN_DOUT;
%rename(DQ) ::ATTN_DQ;
%rename(DK) ::ATTN_DK;
%rename(DV) ::ATTN_DV;
%rename(DBias) ::ATTN_DBIAS;
%rename(DSinks) ::ATTN_DSINKS;
%rename(KScale) ::ATTN_K_SCALE;
%rename(VScale) ::ATTN_V_SCALE;
%rename(NewKScale) ::ATTN_NEW_K_SCALE;
%rename(NewVScale) ::ATTN_NEW_V_SCALE;

/* ---- [T13] the serving layouts: enabled for C# only (see the catalogue). The parameters keep
 * their C names ([T10]). ---- */
%rename("%s") ::ATTN_PARAM_VARLEN;
%rename("%s") ::ATTN_PARAM_PAGE_SIZE;
%rename("%s") ::ATTN_PARAM_MAX_PAGES;
%rename("%s") ::ATTN_PARAM_BATCH_INVARIANT;
%rename("%s") ::ATTN_PARAM_COMPUTE;
%rename("%s") ::ATTN_PARAM_DIAGONAL;
%rename("%s") ::ATTN_PARAM_ALIBI_FORM;
%rename("%s") ::attn_kv_append;
%rename("%s") ::attn_merge;

/* ---- [T14] the storage types: enabled for C# here, as [T13]. ---- */
%rename("%s") ::attn_args_set_f16;
%rename("%s") ::attn_args_set_bf16;
%rename("%s") ::attn_args_set_i8;
%rename("%s") ::attn_args_set_out_f16;
%rename("%s") ::attn_args_set_out_bf16;
%rename("%s") ::attn_args_set_out_i8;
%rename("%s") ::attn_kv_append_args;
%rename("%s") ::attn_convert_f32_to_f16;
%rename("%s") ::attn_convert_f32_to_bf16;
%rename("%s") ::attn_convert_f16_to_f32;
%rename("%s") ::attn_convert_bf16_to_f32;
%rename("%s") ::attn_quantize_i8;

/* ---- [T10] the 0.2 enums attn_param / attn_alibi / attn_weights_mode / attn_compute / attn_op
 * stay under their C names and internal: C enumerators share one scope, so their natural .NET
 * names collide with each other and with [T6] (ATTN_PARAM_CAUSAL vs attn_causal,
 * ATTN_OP_WEIGHTS vs ATTN_WEIGHTS, ATTN_ALIBI_NONE vs ATTN_CAUSAL_NONE, ...) and SWIG would
 * silently drop the later ones (warning 302). The public enums Param, Alibi, WeightsMode, Compute
 * and Op are hand-written in Enums.cs; ApiTests.PublicEnumsMirrorTheHeader checks them name for
 * name and value for value against these generated ones, so a value added to attn.h cannot be
 * missed. ---- */
%typemap(csclassmodifiers) enum attn_param, enum attn_alibi, enum attn_weights_mode,
                           enum attn_compute, enum attn_diagonal, enum attn_alibi_form,
                           enum attn_op "internal enum"

/* ---- [T11] load the natives before any P/Invoke (NativeLoader.cs). One csout per return type
 * the raw layer has (and the other primitives, for functions added later); the bodies are
 * SWIG's own (csharp.swg, enums.swg) with the call in front. ---- */
%define ATTN_CSOUT_PRIMITIVE(CTYPE, CSTYPE)
%typemap(csout, excode=SWIGEXCODE) CTYPE, const CTYPE & {
    NativeLoader.EnsureLoaded();
    CSTYPE ret = $imcall;$excode
    return ret;
  }
%enddef
ATTN_CSOUT_PRIMITIVE(bool, bool)
ATTN_CSOUT_PRIMITIVE(int, int)
ATTN_CSOUT_PRIMITIVE(unsigned int, uint)
ATTN_CSOUT_PRIMITIVE(long long, long)
ATTN_CSOUT_PRIMITIVE(unsigned long long, ulong)
ATTN_CSOUT_PRIMITIVE(float, float)
ATTN_CSOUT_PRIMITIVE(double, double)
ATTN_CSOUT_PRIMITIVE(size_t, ulong)   /* [T1] and [T9] copied SWIG's csout before this point */
ATTN_CSOUT_PRIMITIVE(int64_t, long)
%typemap(csout, excode=SWIGEXCODE) char *, char *&, char[ANY], char[] {
    NativeLoader.EnsureLoaded();
    string ret = $imcall;$excode
    return ret;
  }
%typemap(csout, excode=SWIGEXCODE) void {
    NativeLoader.EnsureLoaded();
    $imcall;$excode
  }
%typemap(csout, excode=SWIGEXCODE) enum SWIGTYPE {
    NativeLoader.EnsureLoaded();
    $csclassname ret = ($csclassname)$imcall;$excode
    return ret;
  }

/* ---- [T12] documentation of the generated public enums: the csattributes typemap (the enum)
 * and %csattributes (its values) go verbatim before the declaration, so a /// comment there
 * becomes XML documentation. ---- */
%typemap(csattributes) enum attn_status "/// <summary>Status of a libattn call (attn_status); failures reach C# as exceptions (see AttentionException).</summary>"
%csattributes ATTN_OK "/// <summary>Success.</summary>"
%csattributes ATTN_ERR_NULL_POINTER "/// <summary>A required pointer argument was null (ArgumentNullException).</summary>"
%csattributes ATTN_ERR_INVALID_ARGUMENT "/// <summary>A size, stride, enum value or float is out of range (ArgumentException).</summary>"
%csattributes ATTN_ERR_OUT_OF_MEMORY "/// <summary>Scratch memory or a descriptor could not be allocated.</summary>"
%csattributes ATTN_ERR_UNSUPPORTED "/// <summary>A valid request this build or CPU cannot serve.</summary>"
%csattributes ATTN_ERR_INTERNAL "/// <summary>A bug in libattn; please report it with the message.</summary>"
%typemap(csattributes) enum attn_causal "/// <summary>The causal rule (attn_causal): which keys j a query i may see.</summary>"
%csattributes ATTN_CAUSAL_NONE "/// <summary>No causal rule: every key.</summary>"
%csattributes ATTN_CAUSAL_TOP_LEFT "/// <summary>j &lt;= i (PyTorch is_causal).</summary>"
%csattributes ATTN_CAUSAL_BOTTOM_RIGHT "/// <summary>j &lt;= i + (seq_k - seq_q): the last query aligned with the last key (KV cache, decode).</summary>"
%typemap(csattributes) enum attn_operand "/// <summary>The tensors of a call (attn_operand): strides, RequiredLen and AttentionArgs.Bind name them.</summary>"
%csattributes ATTN_Q "/// <summary>Queries, float (or f16 / bf16: AttentionArgs.BindF16 / BindBF16) [batch][heads_q][seq_q][head_dim], strided.</summary>"
%csattributes ATTN_K "/// <summary>Keys, float (or f16 / bf16 / int8 with KScale) [batch][heads_kv][seq_k][head_dim], strided.</summary>"
%csattributes ATTN_V "/// <summary>Values, float (or f16 / bf16 / int8 with VScale) [batch][heads_kv][seq_k][head_dim_v], strided.</summary>"
%csattributes ATTN_OUT "/// <summary>Output, float [batch][heads_q][seq_q][head_dim_v], strided.</summary>"
%csattributes ATTN_LSE "/// <summary>Log-sum-exp output, float [batch][heads_q][seq_q] (-inf for a query with no visible key).</summary>"
%csattributes ATTN_WEIGHTS "/// <summary>Weights output, float [batch][heads_q][seq_q][seq_k].</summary>"
%csattributes ATTN_KEY_VALID "/// <summary>Key padding, bool/byte [batch][seq_k]: false = padding, never read.</summary>"
%csattributes ATTN_ALLOWED "/// <summary>Allowed mask, bool/byte [seq_q][seq_k], broadcast over batch and heads.</summary>"
%csattributes ATTN_BIAS "/// <summary>Additive bias, float [batch][heads_q][seq_q][seq_k], strided (0 broadcasts); -inf hides a key.</summary>"
%csattributes ATTN_ALIBI_SLOPES "/// <summary>ALiBi slopes, float [heads_q] (with Alibi.Operand).</summary>"
%csattributes ATTN_SINKS "/// <summary>Attention sink logits, float [heads_q]: they join the softmax denominator only.</summary>"
%csattributes ATTN_QUERY_VALID "/// <summary>Query padding, bool/byte [batch][seq_q]: a padded query's row is 0, its lse -inf.</summary>"
%csattributes ATTN_SEQ_LENS_K "/// <summary>Per-batch key lengths, int [batch]: keys at or past the length are padding.</summary>"
%csattributes ATTN_KEY_MASS "/// <summary>Per-key attention mass output, float [batch][heads_q][seq_k]: the sum of the weights over the queries.</summary>"
%csattributes ATTN_CU_SEQLENS_Q "/// <summary>Varlen query offsets, int [batch + 1]: prefix sums of the query lengths, cu[0] = 0 (with Builder.Varlen).</summary>"
%csattributes ATTN_CU_SEQLENS_K "/// <summary>Varlen key offsets, int [batch + 1]: prefix sums of the key lengths, cu[0] = 0 (Varlen without a paged cache).</summary>"
%csattributes ATTN_BLOCK_TABLE "/// <summary>Paged K/V block table, int [batch][max_pages]: the page of each sequence's keys j / page_size; -1 marks an unused slot (with Builder.PageSize).</summary>"
%csattributes ATTN_NEW_K "/// <summary>New key rows for AttentionDesc.KvAppend, float [tokens][heads_kv][head_dim], contiguous.</summary>"
%csattributes ATTN_NEW_V "/// <summary>New value rows for AttentionDesc.KvAppend, float [tokens][heads_kv][head_dim_v], contiguous.</summary>"
%csattributes ATTN_DOUT "/// <summary>Gradient of Out for Op.Backward, float in Out's layout, input.</summary>"
%csattributes ATTN_DQ "/// <summary>Gradient of Q written by Op.Backward, float in Q's layout (zero-fill it first: gaps are not written).</summary>"
%csattributes ATTN_DK "/// <summary>Gradient of K written by Op.Backward, float in K's layout (GQA: summed over a KV head's query heads).</summary>"
%csattributes ATTN_DV "/// <summary>Gradient of V written by Op.Backward, float in V's layout (GQA: summed over a KV head's query heads).</summary>"
%csattributes ATTN_DBIAS "/// <summary>Gradient of Bias written by Op.Backward, float in Bias's layout (broadcast dimensions summed); needs Bias bound.</summary>"
%csattributes ATTN_DSINKS "/// <summary>Gradient of Sinks written by Op.Backward, float [heads_q]; needs Sinks bound.</summary>"
%csattributes ATTN_K_SCALE "/// <summary>Scales of an int8 K (bound with AttentionArgs.Bind(Operand, sbyte[])), float [batch][heads_kv][seq_k] (K's shape with head_dim 1), strided; required with an int8 K, refused otherwise.</summary>"
%csattributes ATTN_V_SCALE "/// <summary>Scales of an int8 V, float [batch][heads_kv][seq_k], strided; required with an int8 V, refused otherwise.</summary>"
%csattributes ATTN_NEW_K_SCALE "/// <summary>Scales of int8 NewK rows (AttentionDesc.KvAppendArgs into an int8 K cache), float [tokens][heads_kv]; required with an int8 NewK, refused otherwise.</summary>"
%csattributes ATTN_NEW_V_SCALE "/// <summary>Scales of int8 NewV rows, float [tokens][heads_kv]; required with an int8 NewV, refused otherwise.</summary>"

%include "../attn.i"
