// The standard ALiBi slopes (ATTN_PARAM_ALIBI = STANDARD): computed by core for the call, read by
// the kernels like slopes given as an operand.
#include <cmath>
#include <vector>

#include "attention.hpp"
#include "plan.hpp"

namespace attn {
namespace core {

namespace {

// Press et al. 2022: for n a power of two, slope_h = 2^(-8 (h + 1) / n); otherwise the slopes
// of the largest power of two m < n, followed by every other slope of 2m (BLOOM's rule).
void standard_slopes(size_t n, float *slopes) {
    size_t m = 1;
    while (m * 2 <= n) m *= 2;
    for (size_t h = 0; h < m; ++h)
        slopes[h] = static_cast<float>(std::pow(2.0, -8.0 * static_cast<double>(h + 1) / m));
    for (size_t x = 0; m + x < n; ++x)
        slopes[m + x] =
            static_cast<float>(std::pow(2.0, -8.0 * static_cast<double>(2 * x + 1) / (2 * m)));
}

} // namespace

void prepare_alibi(Params *p, Tensors *t, ThreadScratch &scratch) {
    if (p->alibi != Alibi::Standard) return;
    const size_t n = p->shape.heads_q;
    if (scratch.alibi.size() != n) {  // the slopes depend on the head count only
        std::vector<float> slopes(n); // throws std::bad_alloc before anything changes
        standard_slopes(n, slopes.data());
        scratch.alibi.swap(slopes);
    }
    t->alibi = scratch.alibi.data();
    p->alibi_batch = 0;
    p->alibi_head = 1;
}

} // namespace core
} // namespace attn
