package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The demo runs, shows out[1][0] = 15, and prints exactly what the C demo prints (same library,
// same text). ctest sets ATTN_C_DEMO to the built attn_demo.
func TestDemo(t *testing.T) {
	var got bytes.Buffer
	if err := run(&got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.String(), "out = [10, 15, 20]   (out[1][0] = 15:") {
		t.Errorf("seed example line missing:\n%s", got.String())
	}
	cDemo := os.Getenv("ATTN_C_DEMO")
	if cDemo == "" {
		if os.Getenv("ATTN_C_DEMO_REQUIRED") != "" {
			t.Fatal("ATTN_C_DEMO_REQUIRED is set but ATTN_C_DEMO is empty")
		}
		t.Skip("ATTN_C_DEMO not set: output not compared with the C demo")
	}
	want, err := exec.Command(cDemo).Output()
	if err != nil {
		t.Fatalf("%s: %v", cDemo, err)
	}
	if got.String() != string(want) {
		t.Errorf("Go demo output differs from the C demo's\n--- C:\n%s\n--- Go:\n%s", want, got.String())
	}
}
