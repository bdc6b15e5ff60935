/* C# (Mono / .NET) interface for libattn: typemaps, then the language-neutral allow-list.
 *
 * Generated at build time by cmake/csharp.cmake (SWIG 4.1, `-csharp -namespace LibAttn`; UseSWIG
 * adds `-dllimport libattn_csharp`). What SWIG emits is the raw layer: the internal classes
 * AttnNative (one static method per C function, names as in attn.h) and AttnNativePINVOKE, plus
 * the public enums Status, Causal and Operand. The idiomatic face (Attention, AttentionDesc,
 * AttentionException) is hand-written in bindings/csharp/LibAttn/ and is the only other public
 * surface.
 *
 * Typemap catalogue (every typemap binds by the parameter names of attn.h):
 *   [T1] size_t                          -> ulong                (SWIG's default is 32-bit uint)
 *   [T2] const float *q, *k, *v          -> float[]  pinned with `fixed`, zero copy
 *        float *out, *lse, *weights      -> float[]  pinned with `fixed`, zero copy
 *   [T3] const bool *pad_mask, *key_valid, *allowed
 *                                        -> bool[]   pinned with `fixed`, zero copy. Never the
 *        copying `bool INPUT[]` marshalling: Mono marshals it as 4 bytes per bool.
 *        NOTE: `fixed` on an empty array yields NULL; the face rejects short arrays before
 *        calling, so an empty array only ever reaches C where NULL is meaningful (no lse/mask).
 *   [T4] attn_desc * / const attn_desc * -> System.IntPtr          (no SWIGTYPE_p_attn_desc class)
 *   [T5] attn_desc **desc                -> out System.IntPtr      (create's out parameter)
 *   [T6] enums attn_status / attn_causal / attn_operand -> public C# enums Status / Causal /
 *        Operand with PascalCase members (Status.InvalidArgument, Causal.TopLeft, Operand.Out).
 * None of the raw methods checks a length: that is the face's job (AttentionDesc.Check*). */

%module AttnNative

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
%csmethodmodifiers attn_simple "public unsafe";
%csmethodmodifiers attn_forward "public unsafe";
%csmethodmodifiers attn_weights "public unsafe";

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

%include "../attn.i"
