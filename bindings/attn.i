/* Language-neutral SWIG interface for libattn.
 *
 * Each language's top-level interface (bindings/<lang>/...) declares %module, pulls in its own
 * typemaps, then includes this file. Exposure is an allow-list: everything in the header is
 * ignored, then the published names are re-enabled one by one, so nothing leaks by accident.
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
%rename("%s") attn_run;
%rename("%s") attn_set_num_threads;
%rename("%s") attn_get_num_threads;
%rename("%s") attn_isa;
%rename("%s") attn_set_isa;

%include "attn.h"
