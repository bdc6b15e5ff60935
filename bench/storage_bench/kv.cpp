// See kv.hpp.
#include "kv.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "../timing.hpp"
#include "../widen.hpp"

namespace attn_bench {

const char *const kLayoutName[kLayouts] = {"bhsd", "bshd", "paged-hm", "paged-tm", "varlen"};

double KvSet::kv_bytes(int store) const {
    const double rows = 2.0 * static_cast<double>(kHeadsKv * seq_k);
    return rows * static_cast<double>(d * kStoreBytes[store]) + (store == I8 ? rows * 4 : 0.0);
}

namespace {

// Row (KV head h, key j) of a cache in layout l: its index in rows of the layout.
size_t dest_row(const KvSet &s, size_t h, size_t j) {
    switch (s.layout) {
    case BHSD:
        return h * s.seq_k + j;
    case PAGED_HM:
        return (static_cast<size_t>(s.table[j / kPage]) * kHeadsKv + h) * kPage + j % kPage;
    case PAGED_TM:
        return (static_cast<size_t>(s.table[j / kPage]) * kPage + j % kPage) * kHeadsKv + h;
    default: // BSHD, VARLEN: token-major
        return j * kHeadsKv + h;
    }
}

// src: BHSD rows of row_bytes; dst: the same rows in s's layout.
void relayout(const KvSet &s, const unsigned char *src, size_t row_bytes, unsigned char *dst) {
    for (size_t h = 0; h < kHeadsKv; ++h)
        for (size_t j = 0; j < s.seq_k; ++j)
            std::memcpy(dst + dest_row(s, h, j) * row_bytes, src + (h * s.seq_k + j) * row_bytes,
                        row_bytes);
}

} // namespace

std::vector<std::unique_ptr<KvSet>> make_kv_sets(size_t seq_k, size_t d, const bool *layouts,
                                                 const bool *stores) {
    const size_t rows = kHeadsKv * seq_k, n = rows * d;
    std::vector<float> k32(n), v32(n);
    std::mt19937 g(static_cast<unsigned>(d));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto &x : k32) x = u(g);
    for (auto &x : v32) x = u(g);
    // BHSD in each storage type, then each layout's copy
    Bytes kb[4], vb[4];
    std::vector<float> ks(rows), vs(rows);
    for (int s = 0; s < 4; ++s) {
        if (!stores[s]) continue;
        kb[s].resize(n * kStoreBytes[s]);
        vb[s].resize(n * kStoreBytes[s]);
        auto *k = kb[s].data(), *v = vb[s].data();
        switch (s) {
        case F32:
            std::memcpy(k, k32.data(), n * 4);
            std::memcpy(v, v32.data(), n * 4);
            break;
        case F16:
            check(attn_convert_f32_to_f16(k32.data(), reinterpret_cast<uint16_t *>(k), n), "f16");
            check(attn_convert_f32_to_f16(v32.data(), reinterpret_cast<uint16_t *>(v), n), "f16");
            break;
        case BF16:
            check(attn_convert_f32_to_bf16(k32.data(), reinterpret_cast<uint16_t *>(k), n), "bf16");
            check(attn_convert_f32_to_bf16(v32.data(), reinterpret_cast<uint16_t *>(v), n), "bf16");
            break;
        default:
            check(attn_quantize_i8(k32.data(), rows, d, reinterpret_cast<int8_t *>(k), ks.data()),
                  "int8");
            check(attn_quantize_i8(v32.data(), rows, d, reinterpret_cast<int8_t *>(v), vs.data()),
                  "int8");
        }
    }
    std::vector<std::unique_ptr<KvSet>> sets;
    for (int l = 0; l < kLayouts; ++l) {
        if (!layouts[l]) continue;
        auto set = std::make_unique<KvSet>();
        KvSet &z = *set;
        z.layout = static_cast<Layout>(l);
        z.seq_k = seq_k;
        z.d = d;
        if (l == PAGED_HM || l == PAGED_TM) {
            z.table.resize(seq_k / kPage);
            std::iota(z.table.begin(), z.table.end(), 0);
            std::shuffle(z.table.begin(), z.table.end(), std::mt19937(7));
        }
        if (l == VARLEN) {
            z.cu_k = {0};
            for (size_t len : {seq_k / 2, seq_k / 4, seq_k / 8, seq_k / 8})
                z.cu_k.push_back(z.cu_k.back() + static_cast<int32_t>(len));
            z.max_len = seq_k / 2;
        }
        for (int s = 0; s < 4; ++s) {
            if (!stores[s]) continue;
            const size_t rb = d * kStoreBytes[s];
            z.k[s].resize(kb[s].size());
            z.v[s].resize(vb[s].size());
            relayout(z, kb[s].data(), rb, z.k[s].data());
            relayout(z, vb[s].data(), rb, z.v[s].data());
            if (s == I8) {
                z.ks.resize(rows);
                z.vs.resize(rows);
                relayout(z, reinterpret_cast<const unsigned char *>(ks.data()), 4,
                         reinterpret_cast<unsigned char *>(z.ks.data()));
                relayout(z, reinterpret_cast<const unsigned char *>(vs.data()), 4,
                         reinterpret_cast<unsigned char *>(z.vs.data()));
            }
        }
        sets.push_back(std::move(set));
    }
    return sets;
}

DecodeCall::DecodeCall(const KvSet &kv, int store, size_t group, bool invariant) {
    const size_t hq = group * kHeadsKv, d = kv.d, sk = kv.seq_k, hk = kHeadsKv;
    const bool varlen = kv.layout == VARLEN;
    const size_t batch = varlen ? kVarlenSeqs : 1;
    check(attn_desc_create(&desc_, batch, hq, hk, 1, varlen ? kv.max_len : sk, d), "desc");
    check(attn_desc_set_int(desc_, ATTN_PARAM_CAUSAL, ATTN_CAUSAL_BOTTOM_RIGHT), "causal");
    check(attn_desc_set_int(desc_, ATTN_PARAM_BATCH_INVARIANT, invariant ? 1 : 0), "invariant");
    // K, V and their scales (head_dim 1): (batch or page, head, row) strides of the layout
    auto strides = [&](size_t b, size_t h, size_t r) {
        check(attn_desc_set_strides(desc_, ATTN_K, b * d, h * d, r * d), "k strides");
        check(attn_desc_set_strides(desc_, ATTN_V, b * d, h * d, r * d), "v strides");
        if (store == I8) {
            check(attn_desc_set_strides(desc_, ATTN_K_SCALE, b, h, r), "k_scale strides");
            check(attn_desc_set_strides(desc_, ATTN_V_SCALE, b, h, r), "v_scale strides");
        }
    };
    switch (kv.layout) {
    case BSHD:
        strides(sk * hk, 1, hk);
        break;
    case PAGED_HM:
        check(attn_desc_set_int(desc_, ATTN_PARAM_PAGE_SIZE, kPage), "page size");
        strides(hk * kPage, kPage, 1);
        break;
    case PAGED_TM: // the default strides of a paged cache
        check(attn_desc_set_int(desc_, ATTN_PARAM_PAGE_SIZE, kPage), "page size");
        break;
    case VARLEN: // the default strides of varlen: token-major
        check(attn_desc_set_int(desc_, ATTN_PARAM_VARLEN, 1), "varlen");
        break;
    default:
        break;
    }
    q_.resize(batch * hq * d);
    out_.resize(batch * hq * d);
    std::mt19937 g(11);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto &x : q_) x = u(g);
    check(attn_args_create(&args_), "args");
    check(attn_args_set_f32(args_, ATTN_Q, q_.data(), q_.size()), "q");
    const size_t n = kv.k[store].size() / kStoreBytes[store];
    switch (store) {
    case F32:
        check(
            attn_args_set_f32(args_, ATTN_K, reinterpret_cast<const float *>(kv.k[F32].data()), n),
            "k");
        check(
            attn_args_set_f32(args_, ATTN_V, reinterpret_cast<const float *>(kv.v[F32].data()), n),
            "v");
        break;
    case F16:
    case BF16: {
        auto set = store == F16 ? attn_args_set_f16 : attn_args_set_bf16;
        check(set(args_, ATTN_K, reinterpret_cast<const uint16_t *>(kv.k[store].data()), n), "k");
        check(set(args_, ATTN_V, reinterpret_cast<const uint16_t *>(kv.v[store].data()), n), "v");
        break;
    }
    default:
        check(attn_args_set_i8(args_, ATTN_K, reinterpret_cast<const int8_t *>(kv.k[I8].data()), n),
              "k");
        check(attn_args_set_i8(args_, ATTN_V, reinterpret_cast<const int8_t *>(kv.v[I8].data()), n),
              "v");
        check(attn_args_set_f32(args_, ATTN_K_SCALE, kv.ks.data(), kv.ks.size()), "k_scale");
        check(attn_args_set_f32(args_, ATTN_V_SCALE, kv.vs.data(), kv.vs.size()), "v_scale");
    }
    if (kv.layout == PAGED_HM || kv.layout == PAGED_TM) {
        lens_ = {static_cast<int32_t>(sk)};
        check(attn_args_set_i32(args_, ATTN_BLOCK_TABLE, kv.table.data(), kv.table.size()),
              "block table");
        check(attn_args_set_i32(args_, ATTN_SEQ_LENS_K, lens_.data(), lens_.size()), "seq lens");
    }
    if (varlen) {
        for (size_t b = 0; b <= batch; ++b) cu_q_.push_back(static_cast<int32_t>(b));
        check(attn_args_set_i32(args_, ATTN_CU_SEQLENS_Q, cu_q_.data(), cu_q_.size()), "cu_q");
        check(attn_args_set_i32(args_, ATTN_CU_SEQLENS_K, kv.cu_k.data(), kv.cu_k.size()), "cu_k");
    }
    check(attn_args_set_out_f32(args_, ATTN_OUT, out_.data(), out_.size()), "out");
}

DecodeCall::~DecodeCall() {
    attn_args_destroy(args_);
    attn_desc_destroy(desc_);
}

void DecodeCall::run() const {
    check(attn_run(desc_, ATTN_OP_FORWARD, args_), "decode");
}

} // namespace attn_bench
