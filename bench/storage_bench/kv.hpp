// The decode operands of attn_storage_bench: one K/V cache (heads_kv 8, seq_k keys, head_dim d)
// in each storage type and layout, and a decode call over it.
//
// Layouts (K, V and the int8 scales alike; a scale is a row of head_dim 1):
//   bhsd      dense [heads_kv][seq_k][d] (the default strides)
//   bshd      dense [seq_k][heads_kv][d] (attn_desc_set_strides)
//   paged-hm  head-major pages [pages][heads_kv][page][d] (vLLM CPU, OpenVINO), page 16
//   paged-tm  token-major pages [pages][page][heads_kv][d] (FlashAttention's k_cache), page 16
//   varlen    a varlen pack of 4 sequences of seq_k/2, seq_k/4, seq_k/8, seq_k/8 keys (the same
//             total), token-major [total_k][heads_kv][d], one query row each
// The pages of the paged layouts are visited in a shuffled order (a block table that is a
// random permutation), as in a server's pool.
#pragma once

#include <attn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../page_alloc.hpp"

namespace attn_bench {

enum Layout : int { BHSD = 0, BSHD = 1, PAGED_HM = 2, PAGED_TM = 3, VARLEN = 4 };
constexpr int kLayouts = 5;
extern const char *const kLayoutName[kLayouts];
constexpr size_t kPage = 16, kHeadsKv = 8, kVarlenSeqs = 4;

using Bytes = std::vector<unsigned char, PageAlloc<unsigned char>>;

// One cache in one layout, in the storage types asked for (the others left empty).
struct KvSet {
    Layout layout;
    size_t seq_k, d;
    Bytes k[4], v[4];                 // by Store
    std::vector<float> ks, vs;        // int8 scales, in the layout
    std::vector<int32_t> table;       // paged: the block table
    std::vector<int32_t> cu_k;        // varlen: prefix sums of the key lengths
    size_t max_len = 0;               // varlen: the longest sequence
    double kv_bytes(int store) const; // bytes of K and V (and int8 scales) a call reads
};

// The caches of one head_dim in the layouts asked for (layouts[l], stores[s] true), made from
// one random fp32 K/V and the library's converters. seq_k a multiple of 128.
std::vector<std::unique_ptr<KvSet>> make_kv_sets(size_t seq_k, size_t d, const bool *layouts,
                                                 const bool *stores);

// A decode call (seq_q 1, group query heads per KV head, causal BOTTOM_RIGHT) over one cache in
// one storage type, with its own Q and OUT.
class DecodeCall {
  public:
    DecodeCall(const KvSet &kv, int store, size_t group, bool invariant);
    ~DecodeCall();
    DecodeCall(const DecodeCall &) = delete;
    DecodeCall &operator=(const DecodeCall &) = delete;
    void run() const;
    const std::vector<float> &out() const { return out_; }

  private:
    attn_desc *desc_ = nullptr;
    attn_args *args_ = nullptr;
    std::vector<float> q_, out_;
    std::vector<int32_t> cu_q_, lens_;
};

} // namespace attn_bench
