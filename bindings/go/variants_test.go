package attn

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The shared vectors of the extensible call: tests/vectors/variants.txt, storage.txt (the
// storage types: Args.SetF16 / SetBF16 / SetI8) and backward.txt (Args.Backward), run through
// Desc options and Args by one runner (runVectorFile), on every ISA and thread count; the
// outputs go to $ATTN_XLANG_DIR for xlang_identical.

var variantOutputs = []Operand{OperandOut, OperandLSE, OperandWeights, OperandKeyMass}

// variantCaseByName is the case called name of a vector file (variants.txt, backward.txt, ...).
func variantCaseByName(t *testing.T, file, name string) variantCase {
	t.Helper()
	for _, c := range readVariantFile(t, filepath.Join(vectorsDir(), file)) {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("%s has no case %q", file, name)
	return variantCase{}
}

// vecInputs are the float32 inputs of a case (nil: not in the case's in list), the masks as
// []bool, for the tests that bind them their own way; other holds the inputs without a field of
// their own (e.g. q_scale) as []float32, []bool or []int32 by their kind.
type vecInputs struct {
	q, k, v, bias, slopes, sinks  []float32
	keyValid, allowed, queryValid []bool
	seqLensK                      []int32
	other                         map[Operand]any
}

// loadVecInputs reads the inputs of a float32 case of a vector file for the Desc d made from its
// options (each file exactly RequiredLen elements long).
func loadVecInputs(t *testing.T, c variantCase, d *Desc) vecInputs {
	t.Helper()
	if len(c.store) != 0 {
		t.Fatalf("%s: stored operands are not float32", c.name)
	}
	p := func(o Operand, typ string) string {
		return filepath.Join(vectorsDir(), c.name+"."+o.String()+"."+typ)
	}
	f32 := func(o Operand) []float32 {
		if !c.in[o] {
			return nil
		}
		return readF32(t, p(o, "f32"), d.RequiredLen(o))
	}
	mask := func(o Operand) []bool {
		if !c.in[o] {
			return nil
		}
		return readU8(t, p(o, "u8"), d.RequiredLen(o))
	}
	in := vecInputs{q: f32(OperandQ), k: f32(OperandK), v: f32(OperandV), bias: f32(OperandBias),
		slopes: f32(OperandAlibiSlopes), sinks: f32(OperandSinks), keyValid: mask(OperandKeyValid),
		allowed: mask(OperandAllowed), queryValid: mask(OperandQueryValid)}
	if c.in[OperandSeqLensK] {
		in.seqLensK = readI32(t, p(OperandSeqLensK, "i32"), d.RequiredLen(OperandSeqLensK))
	}
	in.other = map[Operand]any{}
	for o := Operand(0); o < numOperands; o++ {
		switch o {
		case OperandQ, OperandK, OperandV, OperandBias, OperandAlibiSlopes, OperandSinks,
			OperandKeyValid, OperandAllowed, OperandQueryValid, OperandSeqLensK:
			continue
		}
		if !c.in[o] {
			continue
		}
		switch operandKinds[o] {
		case kindF32In:
			in.other[o] = readF32(t, p(o, "f32"), d.RequiredLen(o))
		case kindMask:
			in.other[o] = readU8(t, p(o, "u8"), d.RequiredLen(o))
		case kindI32:
			in.other[o] = readI32(t, p(o, "i32"), d.RequiredLen(o))
		default:
			t.Fatalf("%s: %v is not an input", c.name, o)
		}
	}
	return in
}

// vecExpected is a case's expected output o (out, lse, weights, key_mass or a gradient).
func vecExpected(t *testing.T, c variantCase, d *Desc, o Operand) []float32 {
	t.Helper()
	return readF32(t, filepath.Join(vectorsDir(), c.name+"."+o.String()+".f32"), d.RequiredLen(o))
}

// checkVec compares got with the expected want by VARIANTS.md's rule (closeVariant: within
// 1e-5 relative-or-absolute, an expected 0 exactly 0, an expected -inf exactly -inf).
func checkVec(t *testing.T, label, what string, got, want []float32) {
	t.Helper()
	checkVecTol(t, label, what, got, want, 1e-5)
}

// checkVecTol is checkVec within tol (a fast mode's out and lse), an expected 0 still exactly 0.
func checkVecTol(t *testing.T, label, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %s has %d elements, expected %d", label, what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		if !closeWithin(got[i], want[i], tol) || (want[i] == 0 && got[i] != 0) {
			if bad++; bad <= 5 {
				t.Errorf("%s: %s[%d] = %v, want %v", label, what, i, got[i], want[i])
			}
		}
	}
}

// Minimum number of cases of each file (a truncated file fails).
var vectorFileMin = map[string]int{"variants.txt": 30, "storage.txt": 6, "backward.txt": 1}

// runVectorFile runs every case of variants.txt, storage.txt or backward.txt and returns the
// xlang bytes. variants.txt and storage.txt: forward with out, lse (and key_mass when mass=1),
// then weights; per case out, lse, weights (and key_mass). backward.txt (a case with grads):
// forward with out and lse, then Backward with dout and the listed gradients; per case the
// gradients in the grads order. Q, K and V are bound with the setter of their store key.
func runVectorFile(t *testing.T, file, label string, generic bool) []byte {
	t.Helper()
	dir := vectorsDir()
	cases := readVariantFile(t, filepath.Join(dir, file))
	if len(cases) < vectorFileMin[file] {
		t.Fatalf("%s lists %d cases, expected at least %d", file, len(cases), vectorFileMin[file])
	}
	var xlang []byte
	for _, c := range cases {
		if (file == "backward.txt") != (len(c.grads) > 0) {
			t.Fatalf("%s: %s: grads is for backward.txt (and required there)", file, c.name)
		}
		n := c.dims
		d := mustDesc(t, n[0], n[1], n[2], n[3], n[4], n[5], c.options(t, generic)...)
		a, err := d.NewArgs()
		if err != nil {
			t.Fatal(err)
		}
		p := func(o Operand, typ string) string { return filepath.Join(dir, c.name+"."+o.String()+"."+typ) }
		for o := Operand(0); o < numOperands; o++ {
			if !c.in[o] {
				continue
			}
			need := d.RequiredLen(o)
			st := storeF32
			if o < numStored {
				st = c.store[o]
			}
			switch {
			case st == storeF16:
				err = a.SetF16(o, readU16(t, p(o, "f16"), need))
			case st == storeBF16:
				err = a.SetBF16(o, readU16(t, p(o, "bf16"), need))
			case st == storeI8:
				scale := OperandKScale
				if o == OperandV {
					scale = OperandVScale
				}
				err = a.SetI8(o, readI8(t, p(o, "i8"), need))
				if err == nil {
					err = a.SetF32(scale, readF32(t, p(scale, "f32"), d.RequiredLen(scale)))
				}
			case operandKinds[o] == kindF32In:
				err = a.SetF32(o, readF32(t, p(o, "f32"), need))
			case operandKinds[o] == kindMask:
				// key_valid as []bool, the other masks as raw bytes: both setters get used.
				if o == OperandKeyValid {
					err = a.SetBool(o, readU8(t, p(o, "u8"), need))
				} else {
					err = a.SetU8(o, readRaw(t, p(o, "u8"), need, 1))
				}
			case operandKinds[o] == kindI32:
				err = a.SetI32(o, readI32(t, p(o, "i32"), need))
			default:
				t.Fatalf("%s: %v is not an input", c.name, o)
			}
			if err != nil {
				t.Fatalf("%s: bind %v (%s): %v", c.name, o, storageFileType[st], err)
			}
		}
		outputs := variantOutputs
		if len(c.grads) > 0 {
			outputs = []Operand{OperandOut, OperandLSE}
		}
		got := map[Operand][]float32{}
		for _, o := range outputs {
			if o == OperandKeyMass && !c.mass {
				continue
			}
			got[o] = make([]float32, d.RequiredLen(o))
			if o != OperandWeights {
				if err := a.SetOutF32(o, got[o]); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := a.Run(OpForward); err != nil {
			t.Fatalf("[%s] %s: Run(OpForward): %v", label, c.name, err)
		}
		var ran []Operand // the buffers appended to the xlang bytes, in order
		tol := map[Operand]float64{}
		if len(c.grads) == 0 {
			if err := a.SetOutF32(OperandWeights, got[OperandWeights]); err != nil {
				t.Fatal(err)
			}
			if err := a.Run(OpWeights); err != nil {
				t.Fatalf("[%s] %s: Run(OpWeights): %v", label, c.name, err)
			}
			for _, o := range outputs {
				if _, ok := got[o]; ok {
					ran = append(ran, o)
				}
			}
		} else {
			if err := a.SetF32(OperandDOut, readF32(t, p(OperandDOut, "f32"), d.RequiredLen(OperandDOut))); err != nil {
				t.Fatalf("%s: bind dout: %v", c.name, err)
			}
			for _, g := range c.grads {
				got[g] = make([]float32, d.RequiredLen(g))
				if err := a.SetOutF32(g, got[g]); err != nil {
					t.Fatalf("%s: bind %v: %v", c.name, g, err)
				}
				tol[g] = 1e-4
			}
			if err := a.Backward(); err != nil {
				t.Fatalf("[%s] %s: Backward: %v", label, c.name, err)
			}
			ran = c.grads
		}
		tol[OperandOut], tol[OperandLSE] = c.tol, c.tol // a fast mode's (1e-5 otherwise)
		for o, g := range got {
			want := readF32(t, p(o, "f32"), d.RequiredLen(o))
			eps := 1e-5
			if x, ok := tol[o]; ok {
				eps = x
			}
			exactZero := o < OperandDQ || o > OperandDSinks // gradients: no exact-zero rule
			bad := 0
			for i := range want {
				if !closeWithin(g[i], want[i], eps) || (exactZero && want[i] == 0 && g[i] != 0) {
					if bad++; bad <= 3 {
						t.Errorf("[%s] %s: %v[%d] = %v, want %v", label, c.name, o, i, g[i], want[i])
					}
				}
			}
		}
		for _, o := range ran {
			xlang = append(xlang, f32Bytes(got[o])...)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s [%s]: %d cases checked", file, label, len(cases))
	return xlang
}

// runVariants runs variants.txt (see runVectorFile).
func runVariants(t *testing.T, label string, generic bool) []byte {
	t.Helper()
	return runVectorFile(t, "variants.txt", label, generic)
}

func writeXlang(t *testing.T, file string, data []byte) {
	xdir := os.Getenv("ATTN_XLANG_DIR")
	if xdir == "" {
		return
	}
	if err := os.MkdirAll(xdir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Write then rename, so a reader never sees a half-written file.
	tmp := filepath.Join(xdir, fmt.Sprintf(".%s.%d", file, os.Getpid()))
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(xdir, file)); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d bytes to %s", len(data), filepath.Join(xdir, file))
}

// sharedFiles are the vector files of runVectorFile.
var sharedFiles = []string{"variants.txt", "storage.txt", "backward.txt"}

func testSharedFile(t *testing.T, file, xfile string) {
	// The xlang bytes come from the default ISA and thread count.
	if err := SetISA(""); err != nil {
		t.Fatal(err)
	}
	if err := SetNumThreads(0); err != nil {
		t.Fatal(err)
	}
	xlang := runVectorFile(t, file, "default isa "+ISA(), false)
	// The generic setters (attn_desc_set_int / _float) give the same bytes.
	if generic := runVectorFile(t, file, "generic setters", true); string(generic) != string(xlang) {
		t.Errorf("%s: WithParamInt/WithParamFloat results differ from the typed options'", file)
	}
	writeXlang(t, xfile, xlang)
}

func TestSharedVariants(t *testing.T) { testSharedFile(t, "variants.txt", "go.variants.bin") }

// storage.txt: Q, K, V as f16, bf16 and int8 (+ scales), through SetF16 / SetBF16 / SetI8.
func TestSharedStorage(t *testing.T) { testSharedFile(t, "storage.txt", "go.storage.bin") }

// backward.txt: forward, then Backward with dout and the listed gradients (within 1e-4).
func TestSharedBackward(t *testing.T) { testSharedFile(t, "backward.txt", "go.backward.bin") }

// Every kernel this CPU runs with 1 and 2 threads, every file: within tolerance, and
// bit-identical across thread counts.
func TestSharedVariantsEveryISAAndThreadCount(t *testing.T) {
	defer func() {
		if err := SetNumThreads(0); err != nil {
			t.Errorf("SetNumThreads(0): %v", err)
		}
	}()
	forISAs(t, func(isa string) {
		for _, file := range sharedFiles {
			var first []byte
			for _, n := range []int{1, 2} {
				if err := SetNumThreads(n); err != nil {
					t.Fatal(err)
				}
				got := runVectorFile(t, file, fmt.Sprintf("%s, %d threads", isa, n), false)
				if first == nil {
					first = got
				} else if string(got) != string(first) {
					t.Errorf("%s, %s: 1 and 2 threads differ (must be bit-identical)", file, isa)
				}
			}
		}
	})
}
