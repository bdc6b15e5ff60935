// Compiled (not linked) by the abi_header_cxx* tests with -std=c++11 / -std=c++17 -Wall -Wextra
// -pedantic -Werror: the public header must be clean C++ too, with C linkage for every function.
#include "attn.h"

#include "pinned_values.h"

#include <type_traits>

static_assert(ATTN_ERR_INTERNAL == 5, "attn_status values are pinned");
static_assert(ATTN_CAUSAL_BOTTOM_RIGHT == 2, "attn_causal values are pinned");
static_assert(ATTN_ALLOWED == 7, "attn_operand values are pinned");
static_assert(
    std::is_same<decltype(&attn_forward),
                 attn_status (*)(const attn_desc *, const float *, const float *, const float *,
                                 const bool *, const bool *, float *, float *)>::value,
    "attn_forward signature");
static_assert(std::is_same<decltype(&attn_weights),
                           attn_status (*)(const attn_desc *, const float *, const float *,
                                           const bool *, const bool *, float *)>::value,
              "attn_weights signature");
static_assert(std::is_same<decltype(&attn_desc_required_len),
                           size_t (*)(const attn_desc *, attn_operand)>::value,
              "attn_desc_required_len signature");

// C linkage: an extern "C" function type can be named through a C-linkage typedef.
extern "C" typedef attn_status attn_simple_c_fn(const float *, const float *, const float *, size_t,
                                                size_t, bool, const bool *, float *);
static attn_simple_c_fn *const simple_ptr = &attn_simple;

int attn_abi_header_probe();
int attn_abi_header_probe() {
    attn_desc *desc = nullptr;
    attn_status st = attn_desc_create(&desc, 1, 1, 1, 1, 1, 1);
    float buf[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    bool mask[1] = {true};
    st = attn_desc_set_causal(desc, ATTN_CAUSAL_TOP_LEFT);
    st = attn_desc_set_scale(desc, 1.0f);
    st = attn_desc_set_strides(desc, ATTN_Q, 1, 1, 1);
    st = attn_forward(desc, buf, buf, buf, mask, mask, buf + 1, buf + 2);
    st = attn_weights(desc, buf, buf, mask, mask, buf + 3);
    st = simple_ptr(buf, buf, buf, 1, 1, false, mask, buf + 1);
    st = attn_set_num_threads(attn_get_num_threads());
    st = attn_set_isa(attn_isa());
    attn_desc_destroy(desc);
    return static_cast<int>(st) + static_cast<int>(attn_desc_required_len(desc, ATTN_ALLOWED)) +
           static_cast<int>(attn_version_number()) + (attn_version_string() != nullptr) +
           (attn_status_string(ATTN_OK) != nullptr) + (attn_last_error() != nullptr);
}
