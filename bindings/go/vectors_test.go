package attn

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The shared vectors of the 0.1 calls (tests/vectors/index.txt, written by the float64 reference
// tests/reference/attn_ref.py) through Desc.Forward and Desc.Weights, on every ISA this CPU
// runs, with one thread and with the default count; the outputs go to $ATTN_XLANG_DIR/go.bin
// for xlang_identical.

type vecCase struct {
	name                  string
	b, hq, hkv, sq, sk, d int
	causal                int
	scale                 string
	strides               [4]string // q, k, v, out
	keyValid, allowed     bool
}

func readIndex(t *testing.T, dir string) []vecCase {
	f, err := os.Open(filepath.Join(dir, "index.txt"))
	if err != nil {
		t.Fatalf("shared vectors missing (run from bindings/go or set ATTN_VECTORS_DIR): %v", err)
	}
	defer f.Close()
	var cases []vecCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kv := map[string]string{}
		for _, tok := range strings.Fields(line) {
			i := strings.IndexByte(tok, '=')
			if i < 0 {
				t.Fatalf("index.txt: bad token %q in %q", tok, line)
			}
			kv[tok[:i]] = tok[i+1:]
		}
		num := func(key string) int {
			n, err := strconv.Atoi(kv[key])
			if err != nil {
				t.Fatalf("index.txt: %s=%q in %q: %v", key, kv[key], line, err)
			}
			return n
		}
		c := vecCase{name: kv["name"], b: num("batch"), hq: num("heads_q"), hkv: num("heads_kv"),
			sq: num("seq_q"), sk: num("seq_k"), d: num("head_dim"), causal: num("causal"),
			scale: kv["scale"], keyValid: num("key_valid") == 1, allowed: num("allowed") == 1}
		for i, key := range []string{"q_strides", "k_strides", "v_strides", "out_strides"} {
			c.strides[i] = kv[key]
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("index.txt lists no case")
	}
	return cases
}

func (c vecCase) options(t *testing.T) []Option {
	opts := []Option{WithCausal(Causal(c.causal))}
	if c.scale != "default" {
		s, err := strconv.ParseFloat(c.scale, 32)
		if err != nil {
			t.Fatalf("%s: scale %q: %v", c.name, c.scale, err)
		}
		opts = append(opts, WithScale(float32(s)))
	}
	for i, st := range c.strides {
		if st == "default" {
			continue
		}
		parts := strings.Split(st, ",")
		if len(parts) != 3 {
			t.Fatalf("%s: strides %q", c.name, st)
		}
		var n [3]int
		for j, p := range parts {
			var err error
			if n[j], err = strconv.Atoi(p); err != nil {
				t.Fatalf("%s: strides %q: %v", c.name, st, err)
			}
		}
		opts = append(opts, WithStrides(Operand(i), n[0], n[1], n[2]))
	}
	return opts
}

// visible recomputes the mask independently: causal rule, padding, allowed.
func (c vecCase) visible(b, i, j int, keyValid, allowed []bool) bool {
	switch c.causal {
	case 1:
		if j > i {
			return false
		}
	case 2:
		if j > i+c.sk-c.sq {
			return false
		}
	}
	if keyValid != nil && !keyValid[b*c.sk+j] {
		return false
	}
	if allowed != nil && !allowed[i*c.sk+j] {
		return false
	}
	return true
}

// runAllCases checks every shared case within 1e-5 (masked weights exactly 0) and returns the
// xlang bytes: per case, out (zero-initialised buffer), lse and weights.
func runAllCases(t *testing.T, label string) []byte {
	t.Helper()
	dir := vectorsDir()
	cases := readIndex(t, dir)
	var xlang []byte
	for _, c := range cases {
		desc := mustDesc(t, c.b, c.hq, c.hkv, c.sq, c.sk, c.d, c.options(t)...)
		p := func(part string) string { return filepath.Join(dir, c.name+"."+part) }
		q := readF32(t, p("q.f32"), desc.RequiredLen(OperandQ))
		k := readF32(t, p("k.f32"), desc.RequiredLen(OperandK))
		v := readF32(t, p("v.f32"), desc.RequiredLen(OperandV))
		var keyValid, allowed []bool
		if c.keyValid {
			keyValid = readU8(t, p("key_valid.u8"), desc.RequiredLen(OperandKeyValid))
		}
		if c.allowed {
			allowed = readU8(t, p("allowed.u8"), desc.RequiredLen(OperandAllowed))
		}
		wantOut := readF32(t, p("out.f32"), desc.RequiredLen(OperandOut))
		wantLSE := readF32(t, p("lse.f32"), c.b*c.hq*c.sq)
		wantW := readF32(t, p("weights.f32"), c.b*c.hq*c.sq*c.sk)
		if desc.RequiredLen(OperandLSE) != len(wantLSE) || desc.RequiredLen(OperandWeights) != len(wantW) {
			t.Fatalf("%s: RequiredLen(LSE/WEIGHTS) = %d/%d, want %d/%d", c.name,
				desc.RequiredLen(OperandLSE), desc.RequiredLen(OperandWeights), len(wantLSE), len(wantW))
		}

		out := make([]float32, len(wantOut))
		lse := make([]float32, len(wantLSE))
		w := make([]float32, len(wantW))
		if err := desc.Forward(q, k, v, keyValid, allowed, out, lse); err != nil {
			t.Fatalf("%s: Forward: %v", c.name, err)
		}
		if err := desc.Weights(q, k, keyValid, allowed, w); err != nil {
			t.Fatalf("%s: Weights: %v", c.name, err)
		}
		bad := 0
		report := func(what string, i int, got float32, want float32) {
			if bad++; bad <= 5 {
				t.Errorf("[%s] %s: %s[%d] = %v, want %v", label, c.name, what, i, got, want)
			}
		}
		for i := range wantOut {
			if !close1e5(out[i], float64(wantOut[i])) {
				report("out", i, out[i], wantOut[i])
			}
		}
		for i := range wantLSE {
			if !close1e5(lse[i], float64(wantLSE[i])) {
				report("lse", i, lse[i], wantLSE[i])
			}
		}
		for b := 0; b < c.b; b++ {
			for h := 0; h < c.hq; h++ {
				for i := 0; i < c.sq; i++ {
					for j := 0; j < c.sk; j++ {
						idx := ((b*c.hq+h)*c.sq+i)*c.sk + j
						if !c.visible(b, i, j, keyValid, allowed) {
							if w[idx] != 0 || wantW[idx] != 0 {
								report("masked weights", idx, w[idx], wantW[idx])
							}
						} else if !close1e5(w[idx], float64(wantW[idx])) {
							report("weights", idx, w[idx], wantW[idx])
						}
					}
				}
			}
		}
		if err := desc.Close(); err != nil {
			t.Fatal(err)
		}
		xlang = append(xlang, f32Bytes(out)...)
		xlang = append(xlang, f32Bytes(lse)...)
		xlang = append(xlang, f32Bytes(w)...)
	}
	t.Logf("shared vectors [%s]: %d cases checked", label, len(cases))
	return xlang
}

func TestSharedVectors(t *testing.T) {
	xlang := runAllCases(t, "default isa "+ISA())
	if xdir := os.Getenv("ATTN_XLANG_DIR"); xdir != "" {
		if err := os.MkdirAll(xdir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Write then rename, so a reader never sees a half-written file.
		tmp := filepath.Join(xdir, fmt.Sprintf(".go.bin.%d", os.Getpid()))
		if err := os.WriteFile(tmp, xlang, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(xdir, "go.bin")); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d bytes to %s", len(xlang), filepath.Join(xdir, "go.bin"))
	}
}

// Every kernel this CPU runs, and thread count 1 vs the default (bit-identical by contract).
func TestSharedVectorsEveryISAAndThreadCount(t *testing.T) {
	defaultISA := ISA()
	ran := forISAs(t, func(isa string) { runAllCases(t, "isa "+isa) })
	if ISA() != defaultISA {
		t.Errorf("SetISA(\"\") did not restore %q (got %q)", defaultISA, ISA())
	}
	found := false
	for _, isa := range ran {
		found = found || isa == defaultISA
	}
	if !found {
		t.Errorf("the default kernel %q was not among %v", defaultISA, ran)
	}

	many := runAllCases(t, fmt.Sprintf("threads %d", NumThreads()))
	defer func() {
		if err := SetNumThreads(0); err != nil {
			t.Errorf("SetNumThreads(0): %v", err)
		}
	}()
	if err := SetNumThreads(1); err != nil {
		t.Fatal(err)
	}
	if one := runAllCases(t, "threads 1"); string(one) != string(many) {
		t.Errorf("results with 1 thread differ from %d threads (must be bit-identical)", NumThreads())
	}
}
