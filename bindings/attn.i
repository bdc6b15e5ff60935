/* Language-neutral SWIG interface for libattn.
 *
 * Each language's top-level interface (bindings/<lang>/...) declares %module, pulls in its own
 * typemaps, then includes this file. Exposure is an allow-list: everything in the header is
 * ignored, then the published names are re-enabled one by one, so nothing leaks by accident.
 * The list is the whole of attn.h: every function and every enum with each of its values, so a
 * language interface holds typemaps only (a name added to attn.h is added here too).
 * Parameter names in attn.h are what the per-language typemaps bind to: keep them identical. */

%{
#include "attn.h"
%}

/* The export macro means nothing to the wrappers. */
#define ATTN_API

%ignore "";

/* Enums and their values (real enums in every language). */
%rename("%s") attn_status;
%rename("%s") ATTN_OK;
%rename("%s") ATTN_ERR_NULL_POINTER;
%rename("%s") ATTN_ERR_INVALID_ARGUMENT;
%rename("%s") ATTN_ERR_OUT_OF_MEMORY;
%rename("%s") ATTN_ERR_UNSUPPORTED;
%rename("%s") ATTN_ERR_INTERNAL;
%rename("%s") attn_causal;
%rename("%s") ATTN_CAUSAL_NONE;
%rename("%s") ATTN_CAUSAL_TOP_LEFT;
%rename("%s") ATTN_CAUSAL_BOTTOM_RIGHT;
%rename("%s") attn_operand;
%rename("%s") ATTN_Q;
%rename("%s") ATTN_K;
%rename("%s") ATTN_V;
%rename("%s") ATTN_OUT;
%rename("%s") ATTN_LSE;
%rename("%s") ATTN_WEIGHTS;
%rename("%s") ATTN_KEY_VALID;
%rename("%s") ATTN_ALLOWED;
%rename("%s") ATTN_BIAS;
%rename("%s") ATTN_ALIBI_SLOPES;
%rename("%s") ATTN_SINKS;
%rename("%s") ATTN_QUERY_VALID;
%rename("%s") ATTN_SEQ_LENS_K;
%rename("%s") ATTN_KEY_MASS;
%rename("%s") ATTN_CU_SEQLENS_Q;
%rename("%s") ATTN_CU_SEQLENS_K;
%rename("%s") ATTN_BLOCK_TABLE;
%rename("%s") ATTN_NEW_K;
%rename("%s") ATTN_NEW_V;
%rename("%s") ATTN_DOUT;
%rename("%s") ATTN_DQ;
%rename("%s") ATTN_DK;
%rename("%s") ATTN_DV;
%rename("%s") ATTN_DBIAS;
%rename("%s") ATTN_DSINKS;
%rename("%s") ATTN_K_SCALE;
%rename("%s") ATTN_V_SCALE;
%rename("%s") ATTN_NEW_K_SCALE;
%rename("%s") ATTN_NEW_V_SCALE;
%rename("%s") ATTN_Q_SCALE;
%rename("%s") attn_param;
%rename("%s") ATTN_PARAM_CAUSAL;
%rename("%s") ATTN_PARAM_SCALE;
%rename("%s") ATTN_PARAM_WINDOW_LEFT;
%rename("%s") ATTN_PARAM_WINDOW_RIGHT;
%rename("%s") ATTN_PARAM_SOFTCAP;
%rename("%s") ATTN_PARAM_ALIBI;
%rename("%s") ATTN_PARAM_SOFTMAX_PLUS_ONE;
%rename("%s") ATTN_PARAM_HEAD_DIM_V;
%rename("%s") ATTN_PARAM_WEIGHTS_MODE;
%rename("%s") ATTN_PARAM_BIAS_FIRST;
%rename("%s") ATTN_PARAM_VARLEN;
%rename("%s") ATTN_PARAM_PAGE_SIZE;
%rename("%s") ATTN_PARAM_MAX_PAGES;
%rename("%s") ATTN_PARAM_BATCH_INVARIANT;
%rename("%s") ATTN_PARAM_COMPUTE;
%rename("%s") ATTN_PARAM_DIAGONAL;
%rename("%s") ATTN_PARAM_ALIBI_FORM;
%rename("%s") attn_alibi;
%rename("%s") ATTN_ALIBI_NONE;
%rename("%s") ATTN_ALIBI_OPERAND;
%rename("%s") ATTN_ALIBI_STANDARD;
%rename("%s") attn_weights_mode;
%rename("%s") ATTN_WEIGHTS_SOFTMAX;
%rename("%s") ATTN_WEIGHTS_SCORES;
%rename("%s") ATTN_WEIGHTS_MASKED;
%rename("%s") ATTN_WEIGHTS_CAPPED;
%rename("%s") ATTN_WEIGHTS_SOFTCAPPED;
%rename("%s") attn_compute;
%rename("%s") ATTN_COMPUTE_EXACT;
%rename("%s") ATTN_COMPUTE_FP16;
%rename("%s") ATTN_COMPUTE_INT8;
%rename("%s") ATTN_COMPUTE_BF16;
%rename("%s") attn_diagonal;
%rename("%s") ATTN_DIAGONAL_CAUSAL;
%rename("%s") ATTN_DIAGONAL_TOP_LEFT;
%rename("%s") ATTN_DIAGONAL_BOTTOM_RIGHT;
%rename("%s") attn_alibi_form;
%rename("%s") ATTN_ALIBI_LINEAR;
%rename("%s") ATTN_ALIBI_SYMMETRIC;
%rename("%s") attn_op;
%rename("%s") ATTN_OP_FORWARD;
%rename("%s") ATTN_OP_WEIGHTS;
%rename("%s") ATTN_OP_BACKWARD;
%rename("%s") attn_dtype;
%rename("%s") ATTN_DTYPE_F32;
%rename("%s") ATTN_DTYPE_F16;
%rename("%s") ATTN_DTYPE_BF16;
%rename("%s") ATTN_DTYPE_I8;
%rename("%s") ATTN_DTYPE_U8;
%rename("%s") ATTN_DTYPE_I32;
%rename("%s") ATTN_DTYPE_FP8_E4M3;
%rename("%s") ATTN_DTYPE_FP8_E5M2;

/* Functions. */
%rename("%s") attn_version_string;
%rename("%s") attn_version_number;
%rename("%s") attn_status_string;
%rename("%s") attn_last_error;
%rename("%s") attn_simple;
%rename("%s") attn_desc_create;
%rename("%s") attn_desc_destroy;
%rename("%s") attn_desc_set_causal;
%rename("%s") attn_desc_set_scale;
%rename("%s") attn_desc_set_strides;
%rename("%s") attn_desc_required_len;
%rename("%s") attn_forward;
%rename("%s") attn_weights;
/* since 0.2: the extensible call. The typed attn_args setters bind (data, len) pairs: one
 * typemap per element type in each language's interface file. */
%rename("%s") attn_desc_set_int;
%rename("%s") attn_desc_set_float;
%rename("%s") attn_desc_get_int;
%rename("%s") attn_desc_get_float;
%rename("%s") attn_param_bounds;
%rename("%s") attn_args_create;
%rename("%s") attn_args_destroy;
%rename("%s") attn_args_clear;
%rename("%s") attn_args_set_f32;
%rename("%s") attn_args_set_out_f32;
%rename("%s") attn_args_set_u8;
%rename("%s") attn_args_set_i32;
%rename("%s") attn_args_set_f16;
%rename("%s") attn_args_set_bf16;
%rename("%s") attn_args_set_i8;
%rename("%s") attn_args_set_out_f16;
%rename("%s") attn_args_set_out_bf16;
%rename("%s") attn_args_set_out_i8;
%rename("%s") attn_args_set_fp8;
%rename("%s") attn_args_set_out_fp8;
%rename("%s") attn_convert_f32_to_f16;
%rename("%s") attn_convert_f32_to_bf16;
%rename("%s") attn_convert_f16_to_f32;
%rename("%s") attn_convert_bf16_to_f32;
%rename("%s") attn_quantize_i8;
%rename("%s") attn_quantize_fp8;
%rename("%s") attn_dequantize_fp8;
%rename("%s") attn_run;
%rename("%s") attn_kv_append;
%rename("%s") attn_kv_append_args;
%rename("%s") attn_merge;
/* the model queries: the library's operand, parameter and ISA tables */
%rename("%s") attn_operand_info;
%rename("%s") attn_operand_dims;
%rename("%s") attn_param_info;
%rename("%s") attn_isa_info;
%rename("%s") attn_set_num_threads;
%rename("%s") attn_get_num_threads;
%rename("%s") attn_isa;
%rename("%s") attn_compute_unit;
%rename("%s") attn_set_isa;

%include "attn.h"
