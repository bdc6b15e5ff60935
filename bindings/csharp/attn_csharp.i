/* C# (Mono / .NET) typemaps for libattn; bindings/attn.i, included last, is the allow-list.
 *
 * Generated at build time by cmake/csharp.cmake (SWIG 4.1, `-csharp -namespace LibAttn`; UseSWIG
 * adds `-dllimport libattn_csharp`): the internal classes AttnNative (one static method per C
 * function, names as in attn.h) and AttnNativePINVOKE, and every enum of attn.h as an internal
 * enum under its C names; gen_enums.cmake turns those into the public .NET enums (Status,
 * Operand, Param, ...). The face (Attention, AttentionDesc, AttentionArgs) is bindings/csharp/*.cs.
 *
 * Typemap catalogue (every typemap binds by the parameter names of attn.h):
 *   [T1] size_t -> ulong (SWIG's default is 32-bit uint); int64_t -> long.
 *   [T2] the 0.1 arrays of attn_simple / attn_forward / attn_weights -> float[] / bool[] pinned
 *        with `fixed` (arrays_csharp.i FIXED[]), zero copy; never the copying `bool INPUT[]`
 *        (Mono marshals it as 4 bytes per bool). `fixed` on an empty array gives NULL: the face
 *        checks these lengths (the 0.1 calls pass none), so NULL only means a null argument.
 *   [T3] attn_desc * / attn_args * -> IntPtr, their ** create parameters -> out IntPtr (the face
 *        owns them through SafeHandles).
 *   [T4] every other data pointer (the attn_args setters' data, kv_append's caches, the
 *        converters' src / dst / scales) -> IntPtr: the face pins the memory for the whole call
 *        (a setter only stores the pointer, attn_run reads it), zero copy.
 *   [T5] read-back pointers -> out parameters (blittable): int64_t / double / unsigned / int,
 *        and the static name strings of the queries -> out IntPtr.
 *   [T6] enums -> internal C# enums under their C names (see gen_enums.cmake).
 *   [T7] native loading (NativeLoader.cs): every raw method is [MethodImpl(NoInlining)] and
 *        starts with NativeLoader.EnsureLoaded(): Mono binds a [DllImport] when it compiles the
 *        calling method, so the natives must be loaded first (the face's static constructors
 *        preload them). check_generated.cmake checks both properties of every raw method. */

%module AttnNative

%csmethodmodifiers "[global::System.Runtime.CompilerServices.MethodImpl(global::System.Runtime.CompilerServices.MethodImplOptions.NoInlining)] public";
%pragma(csharp) moduleclassmodifiers="internal static class"
%pragma(csharp) imclassclassmodifiers="internal class"

/* [T1] */
%apply unsigned long long { size_t };
%apply long long { int64_t };

/* [T2] */
%include "arrays_csharp.i"
%apply float FIXED[] { const float *q, const float *k, const float *v };
%apply float FIXED[] { float *out, float *lse, float *weights };
%apply bool FIXED[] { const bool *pad_mask, const bool *key_valid, const bool *allowed };
%csmethodmodifiers attn_simple "[global::System.Runtime.CompilerServices.MethodImpl(global::System.Runtime.CompilerServices.MethodImplOptions.NoInlining)] public unsafe";
%csmethodmodifiers attn_forward "[global::System.Runtime.CompilerServices.MethodImpl(global::System.Runtime.CompilerServices.MethodImplOptions.NoInlining)] public unsafe";
%csmethodmodifiers attn_weights "[global::System.Runtime.CompilerServices.MethodImpl(global::System.Runtime.CompilerServices.MethodImplOptions.NoInlining)] public unsafe";

/* [T3] [T4] a pointer as an IntPtr; a pointer to one as an out IntPtr. */
%define ATTN_INTPTR(TYPES...)
%typemap(ctype) TYPES "void *"
%typemap(imtype) TYPES "global::System.IntPtr"
%typemap(cstype) TYPES "global::System.IntPtr"
%typemap(csin) TYPES "$csinput"
%typemap(in) TYPES %{ $1 = ($1_ltype)$input; %}
%enddef
%define ATTN_OUT_INTPTR(TYPES...)
%typemap(ctype) TYPES "void **"
%typemap(imtype) TYPES "out global::System.IntPtr"
%typemap(cstype) TYPES "out global::System.IntPtr"
%typemap(csin) TYPES "out $csinput"
%typemap(in) TYPES %{ $1 = ($1_ltype)$input; %}
%enddef
ATTN_INTPTR(attn_desc *, const attn_desc *, attn_args *, const attn_args *)
ATTN_OUT_INTPTR(attn_desc **desc, attn_args **args, const char **name, const char **dims)
ATTN_INTPTR(const float *data, float *data, const uint16_t *data, uint16_t *data,
            const int8_t *data, int8_t *data, const uint8_t *data, const int32_t *data,
            float *k_cache, float *v_cache, const float *src, const uint16_t *src,
            uint16_t *dst, float *dst, int8_t *dst, float *scales, uint8_t *data,
            const uint8_t *src, uint8_t *dst)

/* [T5] */
%include "typemaps.i"
%apply long long *OUTPUT { int64_t *value };
%apply double *OUTPUT { double *value, double *min, double *max, double *default_value };
%apply int *OUTPUT { int *is_float, int *rank, int *strided, int *supported };
%apply unsigned int *OUTPUT { unsigned *in_types, unsigned *out_types };

/* [T6] */
%typemap(csclassmodifiers) enum SWIGTYPE "internal enum"

/* [T7] one csout per return type (and the other primitives, for functions added later); the
 * bodies are SWIG's own (csharp.swg, enums.swg) with the call in front. */
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
ATTN_CSOUT_PRIMITIVE(size_t, ulong)   /* [T1] copied SWIG's csout before this point */
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

%include "../attn.i"
