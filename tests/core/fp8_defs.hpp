// The fp8 formats (OCP E4M3 "fn" and E5M2) by their definitions, written out independently of
// the library, for the fp8 storage tests (test_storage_fp8.cpp, test_serving_fp8.cpp).
#pragma once

#include <cmath>
#include <limits>

#include "attn.h"

namespace fp8_defs {

inline const double kNaN64 = std::numeric_limits<double>::quiet_NaN();

// E4M3 by its definition: (-1)^s * 2^(e-7) * (1 + m/8), subnormal 2^-6 * m/8; S.1111.111 NaN.
inline double e4m3_value(int c) {
    const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    if (e == 15 && m == 7) return kNaN64;
    const double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
    return s ? -v : v;
}

// E5M2 by its definition: (-1)^s * 2^(e-15) * (1 + m/4), subnormal 2^-14 * m/4; e = 31:
// infinity (m = 0) or NaN.
inline double e5m2_value(int c) {
    const int s = c >> 7, e = (c >> 2) & 31, m = c & 3;
    double v;
    if (e == 31)
        v = m ? kNaN64 : std::numeric_limits<double>::infinity();
    else
        v = e == 0 ? std::ldexp(m, -16) : std::ldexp(4 + m, e - 17);
    return s ? -v : v;
}

struct Fmt {
    attn_dtype type;
    const char *name;
    int max_code; // the largest finite positive code
    double (*value)(int);
};
inline const Fmt kFormats[2] = {{ATTN_DTYPE_FP8_E4M3, "e4m3", 0x7e, e4m3_value},
                                {ATTN_DTYPE_FP8_E5M2, "e5m2", 0x7b, e5m2_value}};

} // namespace fp8_defs
