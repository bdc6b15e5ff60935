// Package capi holds the raw SWIG wrappers of libattn: capi.go and capi_wrap.c, generated from
// attn_go.i and committed, so building needs no swig. It is internal: use package attn.
package capi

// The C package is found through pkg-config (its attn.pc): the wrapper includes <attn.h> from
// `pkg-config --cflags attn` and links `pkg-config --libs attn`. For a package installed outside
// the default search path, set PKG_CONFIG_PATH=<prefix>/lib/pkgconfig.

// #cgo pkg-config: attn
import "C"

import "unsafe"

// The committed wrappers were generated with `swig -intgosize 64` (Go's int is 64 bits): on a
// 32-bit platform this constant overflows and the build stops here rather than miscompiling.
const _ = unsafe.Sizeof(int(0)) - 8

//go:generate sh ./generate.sh

// GoString copies the NUL-terminated C string at address p into a Go string ("" for 0): for
// the string out-parameters (*uintptr) of the introspection queries, which point into the
// library's static storage.
func GoString(p uintptr) string {
	if p == 0 {
		return ""
	}
	return C.GoString((*C.char)(unsafe.Pointer(p)))
}
