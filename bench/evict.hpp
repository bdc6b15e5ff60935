// Cache eviction for "cold" timings: reading 1 GiB of other memory (more than three times the
// largest L3 of this kind of host, 300 MiB) between two timed calls leaves none of the previous
// call's operands in any cache level. The read uses the widest streaming loop the CPU has
// (stream.hpp) on 2 threads, so it costs ~40-80 ms; it is never part of a timed interval.
#pragma once

#include <cstddef>

namespace attn_bench {

class Evictor {
  public:
    static constexpr size_t kBytes = size_t(1) << 30;
    Evictor(); // allocates and touches the buffer
    ~Evictor();
    Evictor(const Evictor &) = delete;
    Evictor &operator=(const Evictor &) = delete;
    void run(); // reads all kBytes once
    size_t bytes() const { return kBytes; }
    const float *data() const { return buf_; } // kBytes / 4 floats, 64-byte aligned

  private:
    float *buf_ = nullptr;
};

} // namespace attn_bench
