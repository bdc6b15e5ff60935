package attn

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The shared vectors of the extensible call: tests/vectors/variants.txt, storage.txt (the
// storage types: Args.SetF16 / SetBF16 / SetI8), backward.txt (Args.Backward) and errors.txt
// (format and checks in tests/vectors/VARIANTS.md), run through Desc options and Args. One
// runner (runVectorFile) serves the first three.

// variantParams are the parameter keys in the order they are set (VARIANTS.md).
var variantParams = []struct {
	key   string
	p     Param
	float bool
}{
	{"causal", ParamCausal, false}, {"window_left", ParamWindowLeft, false},
	{"window_right", ParamWindowRight, false}, {"softcap", ParamSoftcap, true},
	{"alibi", ParamAlibi, false}, {"softmax_plus_one", ParamSoftmaxPlusOne, false},
	{"head_dim_v", ParamHeadDimV, false}, {"bias_first", ParamBiasFirst, false},
	{"weights_mode", ParamWeightsMode, false}, {"scale", ParamScale, true},
	{"varlen", ParamVarlen, false},
	{"diagonal", ParamDiagonal, false}, {"alibi_form", ParamAlibiForm, false},
}

// Operands that take strides, in the order they are set (the int8 scales after the others).
var variantStrided = []Operand{OperandQ, OperandK, OperandV, OperandOut, OperandBias, OperandKScale, OperandVScale,
	OperandAlibiSlopes}

// The storage keys of storage.txt (store.q, store.k, store.v) and their file suffixes.
var storageByName = map[string]storage{"f16": storeF16, "bf16": storeBF16, "i8": storeI8}
var storageFileType = [...]string{storeF32: "f32", storeF16: "f16", storeBF16: "bf16", storeI8: "i8"}

// The gradients of backward.txt's grads key, in their order.
var gradOperands = []Operand{OperandDQ, OperandDK, OperandDV, OperandDBias, OperandDSinks}

type variantCase struct {
	line    string
	name    string
	dims    [6]int
	params  map[string]string
	strides map[Operand][3]int
	in      map[Operand]bool
	mass    bool
	store   map[Operand]storage // storage.txt: store.q / store.k / store.v (absent: f32)
	grads   []Operand           // backward.txt: the gradients bound as outputs of OpBackward
	// errors.txt only
	op     Op
	serve  string // "kv_append" (Args.KVAppend) or "merge" (Desc.Merge) instead of Run(op)
	brk    string
	status int
	names  string
}

func operandByName(name string) (Operand, bool) {
	for o := Operand(0); o < numOperands; o++ {
		if operandNames[o] == name {
			return o, true
		}
	}
	return 0, false
}

func parseStrides(s string) ([3]int, error) {
	var r [3]int
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return r, fmt.Errorf("strides %q", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return r, err
		}
		r[i] = n
	}
	return r, nil
}

func readVariantFile(t *testing.T, path string) []variantCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("shared vectors missing (run from bindings/go or set ATTN_VECTORS_DIR): %v", err)
	}
	defer f.Close()
	dimKeys := []string{"batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim"}
	var cases []variantCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := variantCase{line: line, params: map[string]string{}, strides: map[Operand][3]int{},
			in: map[Operand]bool{}, store: map[Operand]storage{}, status: -1}
		ndims := 0
		for _, tok := range strings.Fields(line) {
			i := strings.IndexByte(tok, '=')
			if i < 0 {
				t.Fatalf("%s: bad token %q in %q", path, tok, line)
			}
			key, val := tok[:i], tok[i+1:]
			known := false
			if key == "name" {
				c.name, known = val, true
			}
			for x, dk := range dimKeys {
				if key == dk {
					n, err := strconv.Atoi(val)
					if err != nil {
						t.Fatalf("%s: %s in %q: %v", path, tok, line, err)
					}
					c.dims[x], known = n, true
					ndims++
				}
			}
			for _, vp := range variantParams {
				if key == vp.key {
					c.params[key], known = val, true
				}
			}
			if strings.HasPrefix(key, "strides.") {
				o, ok := operandByName(key[len("strides."):])
				s, err := parseStrides(val)
				strided := false
				for _, x := range variantStrided {
					strided = strided || x == o
				}
				if !ok || !strided || err != nil {
					t.Fatalf("%s: %s in %q", path, tok, line)
				}
				c.strides[o], known = s, true
			}
			if strings.HasPrefix(key, "store.") {
				o, ok := operandByName(key[len("store."):])
				st, okSt := storageByName[val]
				if !ok || !okSt || o >= numStored || (st == storeI8 && o == OperandQ) {
					t.Fatalf("%s: %s in %q", path, tok, line)
				}
				c.store[o], known = st, true
			}
			switch key {
			case "in":
				for _, n := range strings.Split(val, ",") {
					o, ok := operandByName(n)
					if !ok {
						t.Fatalf("%s: unknown operand %q in %q", path, n, line)
					}
					c.in[o] = true
				}
				known = true
			case "mass":
				c.mass, known = val == "1", true
			case "grads":
				for _, n := range strings.Split(val, ",") {
					o, ok := operandByName(n)
					isGrad := false
					for _, g := range gradOperands {
						isGrad = isGrad || g == o
					}
					if !ok || !isGrad {
						t.Fatalf("%s: unknown gradient %q in %q", path, n, line)
					}
					c.grads = append(c.grads, o)
				}
				known = true
			case "op":
				switch val {
				case "forward":
					c.op = OpForward
				case "weights":
					c.op = OpWeights
				case "kv_append", "merge":
					c.serve = val
				default:
					t.Fatalf("%s: op %q in %q", path, val, line)
				}
				known = true
			case "break":
				c.brk, known = val, true
			case "status":
				n, err := strconv.Atoi(val)
				if err != nil {
					t.Fatalf("%s: %s: %v", path, tok, err)
				}
				c.status, known = n, true
			case "names":
				c.names, known = val, true
			}
			if !known {
				t.Fatalf("%s: unknown key %q in %q", path, key, line)
			}
		}
		if c.name == "" || ndims != 6 {
			t.Fatalf("%s: incomplete line %q", path, line)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// paramOption maps one key=value of a case to an Option: the idiomatic option where one says
// exactly this (WithCausal, WithWindow, WithSoftcap, WithAlibi, WithSoftmaxPlusOne,
// WithHeadDimV, WithBiasFirst, WithWeightsMode, WithScale), else the generic one. generic
// forces WithParamInt / WithParamFloat (attn_desc_set_int / _float, as VARIANTS.md says).
func paramOption(t *testing.T, c variantCase, key, val string, generic bool) Option {
	t.Helper()
	var vp = variantParams[0]
	for _, x := range variantParams {
		if x.key == key {
			vp = x
		}
	}
	if vp.key != key {
		t.Fatalf("%s: unknown parameter %q", c.name, key)
	}
	if vp.float {
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("%s: %s=%q: %v", c.name, key, val, err)
		}
		// The value is the shortest decimal of a float32: rounding the float64 once gives that
		// float32 exactly (what attn_desc_set_float stores). A value beyond float32 (1e39) goes
		// to the generic option, so it reaches the range check instead of becoming +Inf.
		if generic || math.IsInf(float64(float32(f)), 0) {
			return WithParamFloat(vp.p, f)
		}
		if vp.p == ParamScale {
			return WithScale(float32(f))
		}
		return WithSoftcap(float32(f))
	}
	n, err := strconv.ParseInt(val, 10, 64)
	if err != nil {
		t.Fatalf("%s: %s=%q: %v", c.name, key, val, err)
	}
	if generic {
		return WithParamInt(vp.p, n)
	}
	switch vp.p {
	case ParamCausal:
		return WithCausal(Causal(n))
	case ParamAlibi:
		return WithAlibi(Alibi(n))
	case ParamDiagonal:
		return WithDiagonal(Diagonal(n))
	case ParamAlibiForm:
		return WithAlibiForm(AlibiForm(n))
	case ParamHeadDimV:
		return WithHeadDimV(int(n))
	case ParamWeightsMode:
		return WithWeightsMode(WeightsMode(n))
	case ParamSoftmaxPlusOne:
		if n == 1 {
			return WithSoftmaxPlusOne()
		}
	case ParamBiasFirst:
		if n == 1 {
			return WithBiasFirst()
		}
	case ParamVarlen:
		if n == 1 {
			return WithVarlen()
		}
	}
	return WithParamInt(vp.p, n) // window_left / window_right alone, or a value with no option
}

// options builds a case's options: parameters in table order (a window given on both sides in
// one WithWindow), the errors' param: break, strides, the strides: break.
func (c variantCase) options(t *testing.T, generic bool) []Option {
	t.Helper()
	var opts []Option
	for _, vp := range variantParams {
		val, ok := c.params[vp.key]
		if !ok {
			continue
		}
		if !generic && vp.key == "window_left" {
			right, hasRight := c.params["window_right"]
			l, err1 := strconv.Atoi(val)
			r, err2 := strconv.Atoi(right)
			if hasRight && err1 == nil && err2 == nil {
				opts = append(opts, WithWindow(l, r))
				continue
			}
			if !hasRight && err1 == nil {
				opts = append(opts, WithWindow(l, -1)) // -1: the default right bound
				continue
			}
		}
		if !generic && vp.key == "window_right" {
			if _, hasLeft := c.params["window_left"]; hasLeft {
				continue // set with window_left
			}
		}
		opts = append(opts, paramOption(t, c, vp.key, val, generic))
	}
	if strings.HasPrefix(c.brk, "param:") {
		kv := strings.SplitN(c.brk[len("param:"):], "=", 2)
		if len(kv) != 2 {
			t.Fatalf("%s: bad break %q", c.name, c.brk)
		}
		opts = append(opts, paramOption(t, c, kv[0], kv[1], generic))
	}
	for _, o := range variantStrided {
		if s, ok := c.strides[o]; ok {
			opts = append(opts, WithStrides(o, s[0], s[1], s[2]))
		}
	}
	if strings.HasPrefix(c.brk, "strides:") {
		kv := strings.SplitN(c.brk[len("strides:"):], "=", 2)
		o, ok := operandByName(kv[0])
		s, err := parseStrides(kv[len(kv)-1])
		if len(kv) != 2 || !ok || err != nil {
			t.Fatalf("%s: bad break %q", c.name, c.brk)
		}
		opts = append(opts, WithStrides(o, s[0], s[1], s[2]))
	}
	return opts
}

func readI32(t *testing.T, path string, n int) []int32 {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 4*n {
		t.Fatalf("%s: %d bytes, want %d int32", path, len(raw), n)
	}
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return s
}

func readU16(t *testing.T, path string, n int) []uint16 {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 2*n {
		t.Fatalf("%s: %d bytes, want %d uint16", path, len(raw), n)
	}
	s := make([]uint16, n)
	for i := range s {
		s[i] = binary.LittleEndian.Uint16(raw[2*i:])
	}
	return s
}

func readI8(t *testing.T, path string, n int) []int8 {
	raw := readBytes(t, path, n)
	s := make([]int8, n)
	for i, b := range raw {
		s[i] = int8(b)
	}
	return s
}

func readBytes(t *testing.T, path string, n int) []byte {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != n {
		t.Fatalf("%s: %d bytes, want %d", path, len(raw), n)
	}
	return raw
}

// closeVariant is VARIANTS.md's check: within 1e-5 relative-or-absolute, an expected 0 exactly
// 0, an expected infinity exactly that infinity.
func closeVariant(got, want float32) bool { return closeWithin(got, want, 1e-5) }

// closeWithin is closeVariant with the tolerance tol. backward.txt's gradients (tol 1e-4) have
// no exact-zero rule: a gradient that cancels to 0 in exact arithmetic is about 1e-7 in float32.
func closeWithin(got, want float32, tol float64) bool {
	switch {
	case want == 0 && tol <= 1e-5:
		return got == 0
	case math.IsInf(float64(want), 0) || math.IsInf(float64(got), 0):
		return got == want
	case math.IsNaN(float64(want)) || math.IsNaN(float64(got)):
		return false
	}
	return math.Abs(float64(got)-float64(want)) <= tol*math.Max(1, math.Abs(float64(want)))
}

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
// []bool, for the tests that bind them their own way.
type vecInputs struct {
	q, k, v, bias, slopes, sinks  []float32
	keyValid, allowed, queryValid []bool
	seqLensK                      []int32
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
	if len(got) != len(want) {
		t.Fatalf("%s: %s has %d elements, expected %d", label, what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		if !closeVariant(got[i], want[i]) {
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
					err = a.SetU8(o, readBytes(t, p(o, "u8"), need))
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
		for o, g := range got {
			want := readF32(t, p(o, "f32"), d.RequiredLen(o))
			eps := 1e-5
			if x, ok := tol[o]; ok {
				eps = x
			}
			bad := 0
			for i := range want {
				if !closeWithin(g[i], want[i], eps) {
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
		if err := SetISA(""); err != nil {
			t.Errorf("SetISA(\"\"): %v", err)
		}
		if err := SetNumThreads(0); err != nil {
			t.Errorf("SetNumThreads(0): %v", err)
		}
	}()
	ran := 0
	for _, isa := range []string{"scalar", "sse2", "avx2", "avx512", "avx512fp16"} {
		if err := SetISA(isa); err != nil {
			if errors.Is(err, &Error{Status: StatusUnsupported}) {
				continue
			}
			t.Fatalf("SetISA(%q): %v", isa, err)
		}
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
		ran++
	}
	if ran == 0 {
		t.Fatal("no ISA ran")
	}
}

// hasWord: msg contains word case-insensitively, with no letter or digit right before or after
// (the C test's rule: "ATTN_PARAM_WINDOW_LEFT" names window_left).
func hasWord(msg, word string) bool {
	lm, lw := strings.ToLower(msg), strings.ToLower(word)
	alnum := func(r byte) bool { return r < 0x80 && (unicode.IsLetter(rune(r)) || unicode.IsDigit(rune(r))) }
	for i := 0; i+len(lw) <= len(lm); i++ {
		if lm[i:i+len(lw)] == lw && (i == 0 || !alnum(lm[i-1])) && (i+len(lw) == len(lm) || !alnum(lm[i+len(lw)])) {
			return true
		}
	}
	return false
}

// errorRun configures, binds and runs one errors.txt case with its break; it returns the first
// failing call's error (nil when everything succeeded).
func errorRun(t *testing.T, c variantCase, generic bool) error {
	n := c.dims
	d, err := NewDesc(n[0], n[1], n[2], n[3], n[4], n[5], c.options(t, generic)...)
	if err != nil {
		return err
	}
	defer d.Close()
	a, err := d.NewArgs()
	if err != nil {
		return err
	}
	defer a.Close()
	bound := map[Operand]bool{}
	for o := range c.in {
		bound[o] = true
	}
	switch {
	case c.serve == "kv_append": // k and v are the caches
		bound[OperandQ] = false
	case c.serve == "merge": // acc: out and lse (and cu_seqlens_q)
		bound[OperandQ], bound[OperandK], bound[OperandV] = false, false, false
		bound[OperandOut], bound[OperandLSE] = true, true
	case c.op == OpForward:
		bound[OperandOut], bound[OperandLSE], bound[OperandKeyMass] = true, true, c.mass
	default:
		bound[OperandWeights] = true
	}
	target := func(prefix string) (Operand, string, bool) {
		if !strings.HasPrefix(c.brk, prefix+":") {
			return 0, "", false
		}
		rest := c.brk[len(prefix)+1:]
		name := rest
		if i := strings.IndexAny(rest, "=["); i >= 0 {
			name = rest[:i]
		}
		o, ok := operandByName(name)
		if !ok {
			t.Fatalf("%s: bad break %q", c.name, c.brk)
		}
		return o, rest[len(name):], true
	}
	shortOp, _, isShort := target("short")
	nullPart := c.brk == "null:part"
	var nullOp Operand
	isNull := false
	if !nullPart {
		nullOp, _, isNull = target("null")
	}
	empty := map[Operand]bool{} // empty:<a>,<b>: bound with 0 elements (not nil)
	if strings.HasPrefix(c.brk, "empty:") {
		for _, n := range strings.Split(c.brk[len("empty:"):], ",") {
			o, ok := operandByName(n)
			if !ok {
				t.Fatalf("%s: bad break %q", c.name, c.brk)
			}
			empty[o] = true
		}
	}
	aliasA, aliasRest, isAlias := target("alias")
	setOp, setRest, isSet := target("set")
	op := c.op
	if c.brk == "op:backward" {
		op = OpBackward
	}
	// Zero-filled buffers of the required length; an alias shares its target's buffer.
	f32 := map[Operand][]float32{}
	masks := map[Operand][]byte{}
	i32 := map[Operand][]int32{}
	for o := Operand(0); o < numOperands; o++ {
		if !bound[o] {
			continue
		}
		switch operandKinds[o] {
		case kindF32In, kindF32Out:
			f32[o] = make([]float32, d.RequiredLen(o))
		case kindMask:
			masks[o] = make([]byte, d.RequiredLen(o))
		case kindI32:
			i32[o] = make([]int32, d.RequiredLen(o))
		}
	}
	if isAlias {
		b, ok := operandByName(strings.TrimPrefix(aliasRest, "="))
		if !ok || f32[aliasA] == nil || f32[b] == nil {
			t.Fatalf("%s: bad break %q", c.name, c.brk)
		}
		need := d.RequiredLen(aliasA)
		if len(f32[b]) < need {
			f32[b] = make([]float32, need)
		}
		f32[aliasA] = f32[b][:need]
	}
	if isSet {
		var idx int
		var val int32
		if _, err := fmt.Sscanf(setRest, "[%d]=%d", &idx, &val); err != nil || idx >= len(i32[setOp]) {
			t.Fatalf("%s: bad break %q", c.name, c.brk)
		}
		i32[setOp][idx] = val
	}
	for o := Operand(0); o < numOperands; o++ {
		if !bound[o] || (isNull && o == nullOp) || (c.serve == "kv_append" && (o == OperandK || o == OperandV)) {
			continue
		}
		shorten := isShort && o == shortOp
		if empty[o] {
			f32[o], masks[o], i32[o] = f32[o][:0], masks[o][:0], i32[o][:0]
		}
		switch operandKinds[o] {
		case kindF32In, kindF32Out:
			s := f32[o]
			if shorten {
				s = s[:len(s)-1]
			}
			if operandKinds[o] == kindF32In {
				err = a.SetF32(o, s)
			} else {
				err = a.SetOutF32(o, s)
			}
		case kindMask:
			s := masks[o]
			if shorten {
				s = s[:len(s)-1]
			}
			err = a.SetU8(o, s)
		case kindI32:
			s := i32[o]
			if shorten {
				s = s[:len(s)-1]
			}
			err = a.SetI32(o, s)
		}
		if err != nil {
			return err
		}
	}
	switch c.serve {
	case "kv_append":
		return a.KVAppend(f32[OperandK], f32[OperandV])
	case "merge":
		if nullPart {
			return d.Merge(a, nil)
		}
		part, err := d.NewArgs()
		if err != nil {
			return err
		}
		defer part.Close()
		for _, o := range []Operand{OperandOut, OperandLSE} {
			if err := part.SetOutF32(o, make([]float32, d.RequiredLen(o))); err != nil {
				return err
			}
		}
		return d.Merge(a, part)
	}
	return a.Run(op)
}

func TestSharedErrors(t *testing.T) {
	path := filepath.Join(vectorsDir(), "errors.txt")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	cases := readVariantFile(t, path)
	if len(cases) < 40 {
		t.Fatalf("errors.txt lists %d cases, expected at least 40", len(cases))
	}
	for _, generic := range []bool{false, true} {
		for _, c := range cases {
			if c.status < 0 || c.brk == "" || (c.status != 0 && c.names == "") {
				t.Fatalf("%s: errors.txt lines need break, status and names", c.name)
			}
			err := errorRun(t, c, generic)
			if c.status == 0 {
				if err != nil {
					t.Errorf("%s (%s): %v, want success", c.name, c.brk, err)
				}
				continue
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("%s (%s): %v, want status %d", c.name, c.brk, err, c.status)
				continue
			}
			if int(e.Status) != c.status {
				t.Errorf("%s (%s): status %d (%v), want %d; message %q", c.name, c.brk, int(e.Status), e.Status, c.status, e.Message)
			}
			if !hasWord(e.Message, c.names) {
				t.Errorf("%s (%s): message %q does not name %q", c.name, c.brk, e.Message, c.names)
			}
		}
	}
	t.Logf("errors.txt: %d cases checked (typed and generic options)", len(cases))
}
