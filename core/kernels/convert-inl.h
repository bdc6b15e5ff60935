// Kernel fragment, not a header: body-inl.h includes it inside the namespace of one ISA (and of
// one register blocking, attn::core::<isa>::{wide,mid,narrow}, for the xsimd ISAs), once per
// blocking, so each ISA's translation unit (core/kernels/<isa>.cpp) compiles its own copies with
// its own flags. No include guard on purpose: a guard would keep the second blocking from
// getting its copy.
//
// Widening loads of the kernel body: K/V (and Q) rows of any storage type into fp32. Included by
// body-inl.h inside the ISA namespace. The vector forms use the ISA's conversion
// instructions (AVX-512F vcvtph2ps zmm, F16C on AVX2, integer shifts for bfloat16, sign
// extension for int8); every form gives exactly the scalar conversion of core/convert.hpp.

// dst[x] = fp32 of the binary16 src[x], x < n
static inline void widen_f16(const uint16_t *src, float *dst, size_t n) {
    size_t x = 0;
#if defined(__AVX512F__)
    for (; x + 16 <= n; x += 16)
        _mm512_storeu_ps(dst + x, _mm512_cvtph_ps(_mm256_loadu_si256(
                                      reinterpret_cast<const __m256i *>(src + x))));
#elif defined(__F16C__)
    for (; x + 8 <= n; x += 8)
        _mm256_storeu_ps(
            dst + x, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + x))));
#endif
    for (; x < n; ++x) dst[x] = half_to_float(src[x]);
}

static inline void widen_bf16(const uint16_t *src, float *dst, size_t n) {
    size_t x = 0;
#if defined(__AVX512F__)
    for (; x + 16 <= n; x += 16) {
        const __m512i w =
            _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + x)));
        _mm512_storeu_ps(dst + x, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
#elif defined(__AVX2__)
    for (; x + 8 <= n; x += 8) {
        const __m256i w =
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + x)));
        _mm256_storeu_ps(dst + x, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
#endif
    for (; x < n; ++x) dst[x] = bf16_to_float(src[x]);
}

// dst[x] = float(src[x]) * scale (one fp32 rounding: the dequantized value)
static inline void widen_i8(const int8_t *src, float scale, float *dst, size_t n) {
    size_t x = 0;
#if defined(__AVX512F__)
    const __m512 s16 = _mm512_set1_ps(scale);
    for (; x + 16 <= n; x += 16) {
        const __m512i w =
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + x)));
        _mm512_storeu_ps(dst + x, _mm512_mul_ps(_mm512_cvtepi32_ps(w), s16));
    }
#elif defined(__AVX2__)
    const __m256 s8 = _mm256_set1_ps(scale);
    for (; x + 8 <= n; x += 8) {
        const __m256i w =
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(src + x)));
        _mm256_storeu_ps(dst + x, _mm256_mul_ps(_mm256_cvtepi32_ps(w), s8));
    }
#endif
    for (; x < n; ++x) dst[x] = static_cast<float>(src[x]) * scale;
}

// fp8 widening in the registers (no tables). E5M2: the code shifted into the upper byte of a
// binary16, then the ISA's binary16 widening. E4M3: fp32 bits (code & 0x7F) << 20 times 2^120
// (exact, subnormals included), the sign from bit 7, the NaN codes (0x7F / 0xFF) blended to a
// quiet NaN. Each gives exactly e4m3_to_float / e5m2_to_float.
#if defined(__AVX512F__)
static inline __m512 e4m3_x16(__m128i c8) {
    const __m512i w = _mm512_cvtepu8_epi32(c8);
    const __m512i mag = _mm512_and_si512(w, _mm512_set1_epi32(0x7f));
    const __m512 f =
        _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(mag, 20)), _mm512_set1_ps(0x1p120f));
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x80)), 24);
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7f));
    const __m512i bits =
        _mm512_mask_mov_epi32(_mm512_castps_si512(f), nan, _mm512_set1_epi32(0x7fc00000));
    return _mm512_castsi512_ps(_mm512_or_si512(bits, sign));
}
static inline __m512 e5m2_x16(__m128i c8) {
    return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(c8), 8));
}
#elif defined(__AVX2__) && defined(__F16C__)
static inline __m256 e4m3_x8(__m128i c8) {
    const __m256i w = _mm256_cvtepu8_epi32(c8);
    const __m256i mag = _mm256_and_si256(w, _mm256_set1_epi32(0x7f));
    const __m256 f =
        _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(mag, 20)), _mm256_set1_ps(0x1p120f));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x80)), 24);
    const __m256i nan = _mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7f));
    const __m256i bits =
        _mm256_blendv_epi8(_mm256_castps_si256(f), _mm256_set1_epi32(0x7fc00000), nan);
    return _mm256_castsi256_ps(_mm256_or_si256(bits, sign));
}
static inline __m256 e5m2_x8(__m128i c8) {
    return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(c8), 8));
}
#endif

template <DType T> static inline float fp8_to_float(uint8_t c) {
    return T == DType::E4M3 ? e4m3_to_float(c) : e5m2_to_float(c);
}

// dst[x] = fp8 value of src[x] * scale (one fp32 rounding: the dequantized value), T E4M3 / E5M2
template <DType T>
static inline void widen_fp8(const uint8_t *src, float scale, float *dst, size_t n) {
    size_t x = 0;
#if defined(__AVX512F__)
    const __m512 s16 = _mm512_set1_ps(scale);
    for (; x + 16 <= n; x += 16) {
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + x));
        _mm512_storeu_ps(dst + x, _mm512_mul_ps(T == DType::E4M3 ? e4m3_x16(c) : e5m2_x16(c), s16));
    }
#elif defined(__AVX2__) && defined(__F16C__)
    const __m256 s8 = _mm256_set1_ps(scale);
    for (; x + 8 <= n; x += 8) {
        const __m128i c = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(src + x));
        _mm256_storeu_ps(dst + x, _mm256_mul_ps(T == DType::E4M3 ? e4m3_x8(c) : e5m2_x8(c), s8));
    }
#endif
    for (; x < n; ++x) dst[x] = fp8_to_float<T>(src[x]) * scale;
}

// dst[0, n) = src[0, n), then zeros up to `padded`.
static inline void copy_row(float *dst, const float *src, size_t n, size_t padded) {
    size_t x = 0;
    for (; x + kL <= n; x += kL) vstore(dst + x, vload(src + x));
    for (; x < n; ++x) dst[x] = src[x];
    for (; x < padded; ++x) dst[x] = 0.0f;
}

// dst[0, n) = key j's row of kv as fp32, then zeros up to `padded`.
static inline void widen_row(const KvRows &kv, size_t j, float *dst, size_t n, size_t padded) {
    size_t doff, soff;
    kv.locate(j, &doff, &soff);
    const unsigned char *src = kv.base + doff * kv.elem;
    switch (kv.type) {
    case DType::F32:
        copy_row(dst, reinterpret_cast<const float *>(src), n, padded);
        return;
    case DType::F16:
        widen_f16(reinterpret_cast<const uint16_t *>(src), dst, n);
        break;
    case DType::BF16:
        widen_bf16(reinterpret_cast<const uint16_t *>(src), dst, n);
        break;
    case DType::I8:
        widen_i8(reinterpret_cast<const int8_t *>(src), kv.scale[soff], dst, n);
        break;
    case DType::E4M3:
        widen_fp8<DType::E4M3>(src, kv.scale[soff], dst, n);
        break;
    case DType::E5M2:
        widen_fp8<DType::E5M2>(src, kv.scale[soff], dst, n);
        break;
    }
    for (size_t x = n; x < padded; ++x) dst[x] = 0.0f;
}

// Element idx of Q as fp32.
static inline float q_value(const Params &p, const Tensors &t, size_t idx) {
    switch (p.q_type) {
    case DType::F16:
        return half_to_float(t.q16[idx]);
    case DType::BF16:
        return bf16_to_float(t.q16[idx]);
    default:
        return t.q[idx];
    }
}

// Element idx of Q of query head h as the score pipeline takes it: widened to fp32, times the
// head's ATTN_Q_SCALE when bound (one rounding). Every path that reads Q goes through here, so
// the same query gives the same bits whichever kernel path computes it.
static inline float q_in(const Params &p, const Tensors &t, size_t idx, size_t h) {
    const float x = q_value(p, t, idx);
    return t.q_scale ? x * t.q_scale[h] : x;
}

// ---- Conversions for callers (attn_convert_*, attn_quantize_i8): whole arrays ----

static void convert_f16_to_f32(const uint16_t *src, float *dst, size_t n) {
    widen_f16(src, dst, n);
}
static void convert_bf16_to_f32(const uint16_t *src, float *dst, size_t n) {
    widen_bf16(src, dst, n);
}

// fp32 -> binary16, round to nearest even (the vector forms round like float_to_half).
static void convert_f32_to_f16(const float *src, uint16_t *dst, size_t n) {
    size_t x = 0;
#if defined(__AVX512F__)
    for (; x + 16 <= n; x += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + x),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + x),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(__F16C__)
    for (; x + 8 <= n; x += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + x),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + x), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; x < n; ++x) dst[x] = float_to_half(src[x]);
}

// fp32 -> bfloat16, round to nearest even, NaN kept quiet (integer arithmetic: the AVX512-BF16
// instruction would flush subnormal inputs to zero).
static void convert_f32_to_bf16(const float *src, uint16_t *dst, size_t n) {
    size_t x = 0;
#if defined(__AVX512F__)
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff),
                  quiet = _mm512_set1_epi32(0x40);
    for (; x + 16 <= n; x += 16) {
        const __m512 f = _mm512_loadu_ps(src + x);
        const __m512i u = _mm512_castps_si512(f), hi = _mm512_srli_epi32(u, 16);
        const __m512i lsb = _mm512_and_si512(hi, one);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
        const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, quiet));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + x), _mm512_cvtepi32_epi16(r));
    }
#elif defined(__AVX2__)
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff),
                  quiet = _mm256_set1_epi32(0x40);
    for (; x + 8 <= n; x += 8) {
        const __m256 f = _mm256_loadu_ps(src + x);
        const __m256i u = _mm256_castps_si256(f), hi = _mm256_srli_epi32(u, 16);
        const __m256i lsb = _mm256_and_si256(hi, one);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), 16);
        const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
        r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
        // 32 -> 16 bits (every value fits): pack within lanes, then put the halves in order
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + x), _mm256_castsi256_si128(packed));
    }
#endif
    for (; x < n; ++x) dst[x] = float_to_bf16(src[x]);
}

// Symmetric int8 of `rows` rows of `dim` values: scale = max|x| / 127, q = round-to-nearest-even
// of x / scale (|q| <= 127); a row of zeros (or of values so small that the scale is 0) gets
// scale 0 and q = 0. Returns the index of the first row holding a non-finite value, or `rows`.
static size_t quantize_rows_i8(const float *src, size_t rows, size_t dim, int8_t *dst,
                               float *scales) {
    for (size_t r = 0; r < rows; ++r) {
        const float *x = src + r * dim;
        int8_t *q = dst + r * dim;
        float amax = 0.0f;
        bool finite = true;
        size_t c = 0;
#if defined(__AVX512F__)
        __m512 vmax = _mm512_setzero_ps();
        __mmask16 bad = 0;
        const __m512 inf = _mm512_set1_ps(__builtin_inff());
        for (; c + 16 <= dim; c += 16) {
            const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(x + c));
            bad |= _mm512_cmp_ps_mask(a, inf, _CMP_NLT_UQ); // inf or NaN
            vmax = _mm512_max_ps(vmax, a);
        }
        finite = bad == 0;
        amax = _mm512_reduce_max_ps(vmax);
#endif
        for (; c < dim; ++c) {
            const float a = x[c] < 0.0f ? -x[c] : x[c];
            if (!(a <= 3.40282347e38f)) finite = false;
            if (a > amax) amax = a;
        }
        if (!finite) return r;
        const float scale = amax / 127.0f;
        scales[r] = scale;
        c = 0;
        if (scale == 0.0f) {
            for (; c < dim; ++c) q[c] = 0;
            continue;
        }
#if defined(__AVX512F__)
        const __m512 vs = _mm512_set1_ps(scale), lo = _mm512_set1_ps(-127.0f),
                     hi = _mm512_set1_ps(127.0f);
        for (; c + 16 <= dim; c += 16) {
            __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + c), vs);
            v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
            const __m512i iv =
                _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(q + c), _mm512_cvtepi32_epi8(iv));
        }
#endif
        for (; c < dim; ++c) {
            float v = x[c] / scale;
            v = v < -127.0f ? -127.0f : v > 127.0f ? 127.0f : v;
            q[c] = static_cast<int8_t>(round_even(v));
        }
    }
    return rows;
}

// fp8 of `rows` rows of `dim` values with one scale: code = x / scale (fp32 quotient) rounded
// to nearest even, saturating to the format's largest finite value (a quotient that overflows
// fp32 too; float_to_e4m3 / float_to_e5m2 bit for bit). Returns the first row holding a
// non-finite value (nothing written from it on), or `rows`. T is E4M3 or E5M2.
template <DType T>
static size_t quantize_rows_fp8_t(const float *src, size_t rows, size_t dim, float scale,
                                  uint8_t *dst) {
    constexpr bool e4 = T == DType::E4M3;
    for (size_t r = 0; r < rows; ++r) {
        const float *x = src + r * dim;
        uint8_t *q = dst + r * dim;
        bool finite = true;
        for (size_t c = 0; c < dim; ++c)
            if (!(__builtin_fabsf(x[c]) <= 3.40282347e38f)) finite = false;
        if (!finite) return r;
        size_t c = 0;
#if defined(__AVX512F__)
        const __m512 vs = _mm512_set1_ps(scale);
        const __m512i absm = _mm512_set1_epi32(0x7fffffff);
        const __m512i top = _mm512_set1_epi32(e4 ? 0x43e00000 : 0x47600000);
        const __m512i minnorm = _mm512_set1_epi32(e4 ? 0x3c800000 : 0x38800000);
        const __m512 sub_mul = _mm512_set1_ps(e4 ? 512.0f : 65536.0f);
        const int shift = e4 ? 20 : 21;
        const __m512i half = _mm512_set1_epi32(e4 ? 0x7ffff : 0xfffff), one = _mm512_set1_epi32(1);
        const __m512i rebias = _mm512_set1_epi32(e4 ? 120 << 3 : 112 << 2);
        for (; c + 16 <= dim; c += 16) {
            const __m512i u = _mm512_castps_si512(_mm512_div_ps(_mm512_loadu_ps(x + c), vs));
            const __m512i sign =
                _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80));
            const __m512i a = _mm512_min_epu32(_mm512_and_si512(u, absm), top);
            const __m512i lsb =
                _mm512_and_si512(_mm512_srlv_epi32(a, _mm512_set1_epi32(shift)), one);
            const __m512i rn =
                _mm512_sub_epi32(_mm512_srlv_epi32(_mm512_add_epi32(a, _mm512_add_epi32(half, lsb)),
                                                   _mm512_set1_epi32(shift)),
                                 rebias);
            const __m512i rs =
                _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(a), sub_mul),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __mmask16 small = _mm512_cmplt_epu32_mask(a, minnorm);
            const __m512i code = _mm512_or_si512(_mm512_mask_mov_epi32(rn, small, rs), sign);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(q + c), _mm512_cvtepi32_epi8(code));
        }
#endif
        for (; c < dim; ++c) q[c] = e4 ? float_to_e4m3(x[c] / scale) : float_to_e5m2(x[c] / scale);
    }
    return rows;
}

static size_t quantize_rows_fp8(const float *src, size_t rows, size_t dim, DType type, float scale,
                                uint8_t *dst) {
    return type == DType::E4M3 ? quantize_rows_fp8_t<DType::E4M3>(src, rows, dim, scale, dst)
                               : quantize_rows_fp8_t<DType::E5M2>(src, rows, dim, scale, dst);
}

// dst[x] = the fp8 value of src[x] times scale (as the kernels widen it).
static void convert_fp8_to_f32(const uint8_t *src, size_t n, DType type, float scale, float *dst) {
    if (type == DType::E4M3)
        widen_fp8<DType::E4M3>(src, scale, dst, n);
    else
        widen_fp8<DType::E5M2>(src, scale, dst, n);
}

// ---- Typed loads for the decode path: kL values of a stored row from element dd on, widened
// in the register, so a 16-bit / int8 row is never stored to scratch and read back. 16-bit
// values are exactly the values widen_row writes; int8 and fp8 values come without their scale (the
// decode path applies a row's scale once, to its score or its probability, instead of to each
// of its head_dim values) ----

template <DType T> static inline float value_raw(const unsigned char *row, size_t dd) {
    switch (T) {
    case DType::F16:
        return half_to_float(reinterpret_cast<const uint16_t *>(row)[dd]);
    case DType::BF16:
        return bf16_to_float(reinterpret_cast<const uint16_t *>(row)[dd]);
    case DType::I8:
        return static_cast<float>(reinterpret_cast<const int8_t *>(row)[dd]);
    case DType::E4M3:
    case DType::E5M2:
        return fp8_to_float<T>(row[dd]);
    default:
        return reinterpret_cast<const float *>(row)[dd];
    }
}

template <DType T> static inline vf vload_raw(const unsigned char *row, size_t dd) {
    if (T == DType::F32) return vload(reinterpret_cast<const float *>(row) + dd);
#if defined(__AVX512F__)
    if (kL == 16) {
        if (T == DType::F16)
            return vf(_mm512_cvtph_ps(
                _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row + 2 * dd))));
        if (T == DType::BF16)
            return vf(_mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                      reinterpret_cast<const __m256i *>(row + 2 * dd))),
                                  16)));
        if (T == DType::E4M3)
            return vf(e4m3_x16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + dd))));
        if (T == DType::E5M2)
            return vf(e5m2_x16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + dd))));
        return vf(_mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + dd)))));
    }
#elif defined(__AVX2__) && defined(__F16C__)
    if (kL == 8) {
        if (T == DType::F16)
            return vf(
                _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 2 * dd))));
        if (T == DType::BF16)
            return vf(_mm256_castsi256_ps(
                _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(
                                      reinterpret_cast<const __m128i *>(row + 2 * dd))),
                                  16)));
        if (T == DType::E4M3)
            return vf(e4m3_x8(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(row + dd))));
        if (T == DType::E5M2)
            return vf(e5m2_x8(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(row + dd))));
        return vf(_mm256_cvtepi32_ps(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(row + dd)))));
    }
#endif
    float tmp[kL];
    for (size_t x = 0; x < kL; ++x) tmp[x] = value_raw<T>(row, dd + x);
    return vload(tmp);
}
