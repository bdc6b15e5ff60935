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
%rename("%s") attn_set_num_threads;
%rename("%s") attn_get_num_threads;
%rename("%s") attn_isa;
%rename("%s") attn_set_isa;

%include "attn.h"
