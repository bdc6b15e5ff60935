// The weights call (the weight matrix, or a stage of the scores): one KernelInfo::weights per
// work item of the plan (plan.hpp); keys are never split.
#include "attention.hpp"
#include "kernel.hpp"
#include "plan.hpp"

namespace attn {
namespace core {

void weights(const Params &p0, const Tensors &t0) {
    ThreadScratch &cs = thread_scratch();
    Params p = p0;
    Tensors t = t0;
    prepare_alibi(&p, &t, cs);
    if (build_qmap(p, t, cs.qmap)) t.qmap = cs.qmap.data();
    clear_padded_queries(p, t);
    const Plan pl = make_plan(p, t, current_kernel(), false, cs);
    const size_t bytes = pl.k->scratch_bytes(p);
    run_items(pl, pl.items, [&](size_t it) {
        const WorkItem w = item_of(p, t, pl, it);
        pl.k->weights(p, t, w, thread_scratch().item.get(bytes));
    });
}

} // namespace core
} // namespace attn
