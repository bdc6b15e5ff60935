/* Pinned ABI values of attn.h, asserted at compile time in C99 (negative array size on failure:
 * _Static_assert is C11) and in C++. Included by the ABI tests only. */
#ifndef ATTN_PINNED_VALUES_H
#define ATTN_PINNED_VALUES_H

#define ATTN_PIN_CAT2(a, b) a##b
#define ATTN_PIN_CAT(a, b) ATTN_PIN_CAT2(a, b)
#define ATTN_PIN(cond) typedef char ATTN_PIN_CAT(attn_pinned_check_, __LINE__)[(cond) ? 1 : -1]

ATTN_PIN(ATTN_OK == 0);
ATTN_PIN(ATTN_ERR_NULL_POINTER == 1);
ATTN_PIN(ATTN_ERR_INVALID_ARGUMENT == 2);
ATTN_PIN(ATTN_ERR_OUT_OF_MEMORY == 3);
ATTN_PIN(ATTN_ERR_UNSUPPORTED == 4);
ATTN_PIN(ATTN_ERR_INTERNAL == 5);

ATTN_PIN(ATTN_CAUSAL_NONE == 0);
ATTN_PIN(ATTN_CAUSAL_TOP_LEFT == 1);
ATTN_PIN(ATTN_CAUSAL_BOTTOM_RIGHT == 2);

ATTN_PIN(ATTN_Q == 0);
ATTN_PIN(ATTN_K == 1);
ATTN_PIN(ATTN_V == 2);
ATTN_PIN(ATTN_OUT == 3);
ATTN_PIN(ATTN_LSE == 4);
ATTN_PIN(ATTN_WEIGHTS == 5);
ATTN_PIN(ATTN_KEY_VALID == 6);
ATTN_PIN(ATTN_ALLOWED == 7);

ATTN_PIN(ATTN_VERSION_NUMBER ==
         ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + ATTN_VERSION_PATCH);
/* One byte per mask element is part of the ABI (bindings pass their bool arrays as is). */
ATTN_PIN(sizeof(bool) == 1);

#ifdef ATTN_PIN_SELFTEST /* proves that a wrong pin is a compile error (abi_header_pin_selftest)   \
                          */
ATTN_PIN(ATTN_ERR_INTERNAL == 6);
#endif

#endif
