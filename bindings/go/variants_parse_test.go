package attn

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The reader of the extensible call's shared vectors (tests/vectors/variants.txt, storage.txt,
// backward.txt and errors.txt; format in tests/vectors/VARIANTS.md): cases, parameters, strides
// and the Desc options they stand for.

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
	{"compute", ParamCompute, false},
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
	tol     float64             // tolerance of the forward's out and lse (1e-5 unless given)
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
			in: map[Operand]bool{}, store: map[Operand]storage{}, status: -1, tol: 1e-5}
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
				// Any operand the library's table (Operand.Info) lists as an input.
				for _, n := range strings.Split(val, ",") {
					o, ok := operandByName(n)
					if info, err := o.Info(); !ok || err != nil || info.In == 0 {
						t.Fatalf("%s: %q is not an input operand of the library, in %q", path, n, line)
					}
					c.in[o] = true
				}
				known = true
			case "mass":
				c.mass, known = val == "1", true
			case "tol":
				x, err := strconv.ParseFloat(val, 64)
				if err != nil || !(x > 0) {
					t.Fatalf("%s: %s in %q", path, tok, line)
				}
				c.tol, known = x, true
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
	case ParamCompute:
		return WithCompute(Compute(n))
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
