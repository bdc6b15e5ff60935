// See evict.hpp.
#include "evict.hpp"

#include <cstdio>
#include <cstdlib>

#include "stream.hpp"

namespace attn_bench {

Evictor::Evictor() {
    buf_ = static_cast<float *>(std::aligned_alloc(64, kBytes));
    if (!buf_) {
        std::fprintf(stderr, "attn_bench: out of memory (eviction buffer, %zu bytes)\n", kBytes);
        std::exit(1);
    }
    const size_t n = kBytes / sizeof(float);
    for (size_t i = 0; i < n; ++i) buf_[i] = static_cast<float>(i & 1023) * (1.0f / 1024.0f);
}

Evictor::~Evictor() {
    std::free(buf_);
}

void Evictor::run() {
    static const StreamLoop loop = available_stream_loops().front(); // the widest
    stream_read_gbs(loop, buf_, kBytes / sizeof(float), 2, 1);
}

} // namespace attn_bench
