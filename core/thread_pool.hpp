// A small persistent thread pool of our own (not OpenMP): workers sleep on a condition variable
// between calls (no spinning inside a JVM, Go or .NET process), survive fork() in the parent and
// are recreated lazily in a child, and never clash with another runtime's OpenMP.
#pragma once

#include <cstddef>
#include <functional>

namespace attn {
namespace core {

// Desired thread count (caller included); 0 = default (ATTN_NUM_THREADS or hardware count).
// Takes effect for calls that start afterwards.
void pool_set_threads(size_t n);
size_t pool_threads();

// Runs body(item) for item in [0, items) on up to pool_threads() threads, the caller included.
// Items are handed out dynamically; the body must make each item's result independent of which
// thread runs it. If another call is using the pool, this call runs on the caller alone. The
// first exception thrown by a body is rethrown here after every item has finished or been skipped.
void pool_run(size_t items, const std::function<void(size_t)> &body);

} // namespace core
} // namespace attn
