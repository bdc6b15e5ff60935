// Prefill over K or V rows that lie a KiB or more apart (BSHD, token-major varlen packs): the
// rows are copied once per call into one contiguous block per (batch entry, KV head), and the
// call then runs as if the operand were BHSD. Without the copy every work item (64 query rows
// on AVX2) reads each tile's rows from their own 4 KiB pages and copies V's tile again.
#pragma once

#include <cstddef>

#include "attention.hpp"

namespace attn {
namespace core {

class KvPack {
  public:
    KvPack() = default;
    KvPack(const KvPack &) = delete;
    KvPack &operator=(const KvPack &) = delete;
    ~KvPack();
    // Whether the call gains from the copy (fp32 K or V with rows >= 1 KiB apart, dense or
    // varlen, at least `rows` query rows per KV head) and the copy could be allocated. On true,
    // params() / tensors() describe the call over the copy; pack(task) for every task in
    // [0, tasks()) must run first (tasks are independent).
    bool init(const Params &p, const Tensors &t, size_t rows_per_kv_head);
    size_t tasks() const { return tasks_; }
    void pack(size_t task) const;
    const Params &params() const { return p_; }
    const Tensors &tensors() const { return t_; }

  private:
    Params p_, src_p_;
    Tensors t_, src_t_;
    float *k_ = nullptr, *v_ = nullptr;
    void *buf_ = nullptr;
    size_t tasks_ = 0;
};

} // namespace core
} // namespace attn
