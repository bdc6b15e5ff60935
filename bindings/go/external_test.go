package attn_test

import (
	"testing"

	attn "github.com/libattn/libattn/bindings/go"
)

// A caller in another package: there the compiler inlines the small face methods and analyses
// their bodies again, with less knowledge of the package's generic helpers than inside it (an
// error variable whose address went to one was moved to the heap on every call). The in-package
// tests cannot see that; this one calls as a user does. Values: vectors_test.go checks them.
func TestCallsAllocateNothingFromAnotherPackage(t *testing.T) {
	const n, d = 4, 8
	desc, err := attn.NewDesc(1, 1, 1, n, n, d)
	if err != nil {
		t.Fatal(err)
	}
	defer desc.Close()
	q, k, v, out := make([]float32, n*d), make([]float32, n*d), make([]float32, n*d), make([]float32, n*d)
	w, kv := make([]float32, n*n), []bool{true, true, true, false}
	for name, call := range map[string]func() error{
		"Forward": func() error { return desc.Forward(q, k, v, kv, nil, out, nil) },
		"Weights": func() error { return desc.Weights(q, k, kv, nil, w) },
	} {
		if allocs := testing.AllocsPerRun(100, func() {
			if err := call(); err != nil {
				t.Fatal(err)
			}
		}); allocs != 0 {
			t.Errorf("%s allocates %v times per call from another package, want 0", name, allocs)
		}
	}
}
