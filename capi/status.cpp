// The error state (one message per thread), status strings and the version.
#include <cstdarg>
#include <cstdio>

#include "internal.hpp"

namespace attn {
namespace capi {
namespace {
thread_local char t_error[512] = "";
} // namespace

attn_status fail(attn_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(t_error, sizeof t_error, fmt, ap);
    va_end(ap);
    return s;
}

const char *last_error() {
    return t_error;
}

} // namespace capi
} // namespace attn

using namespace attn::capi;

extern "C" {

const char *attn_version_string(void) {
    return ATTN_VERSION_STRING;
}
unsigned attn_version_number(void) {
    return ATTN_VERSION_NUMBER;
}

const char *attn_status_string(attn_status status) {
    switch (raw_enum(status)) {
    case ATTN_OK:
        return "ok";
    case ATTN_ERR_NULL_POINTER:
        return "null pointer";
    case ATTN_ERR_INVALID_ARGUMENT:
        return "invalid argument";
    case ATTN_ERR_OUT_OF_MEMORY:
        return "out of memory";
    case ATTN_ERR_UNSUPPORTED:
        return "unsupported";
    case ATTN_ERR_INTERNAL:
        return "internal error";
    }
    return "unknown status";
}

const char *attn_last_error(void) {
    return last_error();
}

} // extern "C"
