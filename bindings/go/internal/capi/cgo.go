// Package capi holds the raw SWIG wrappers of libattn (generated at build time from capi.swig).
// It is internal: use package attn.
package capi

// The include paths reach both the C compiler and SWIG (cmd/go passes every -I to swig).
// The library path comes from the environment: CGO_LDFLAGS="-L<build dir> -Wl,-rpath,<build dir>".

// #cgo CFLAGS: -I${SRCDIR}/../../../../capi -I${SRCDIR}/../../..
// #cgo LDFLAGS: -lattn
import "C"
