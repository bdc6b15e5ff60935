package attn

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/libattn/libattn/bindings/go/internal/capi"
)

// ---------------------------------------------------------------------------------------------
// Helpers

// pattern fills n floats deterministically from a seed, in [-1, 1).
func pattern(n, seed int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32((i*37+seed*101+13)%97)/48.5 - 1.0
	}
	return s
}

func close1e5(got float32, want float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(float64(got))
	}
	if math.IsInf(want, 0) {
		return float64(got) == want
	}
	return math.Abs(float64(got)-want) <= 1e-5*math.Max(1, math.Abs(want))
}

func wantError(t *testing.T, err error, status Status, msgParts ...string) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error with status %v containing %q, got nil", status, msgParts)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *attn.Error, got %T: %v", err, err)
	}
	if e.Status != status {
		t.Errorf("status = %d (%v), want %d (%v); message %q", int(e.Status), e.Status, int(status), status, e.Message)
	}
	if e.Message == "" {
		t.Errorf("empty message for status %v", e.Status)
	}
	for _, p := range msgParts {
		if !strings.Contains(e.Message, p) {
			t.Errorf("message %q does not contain %q", e.Message, p)
		}
	}
	if !strings.HasPrefix(err.Error(), "attn: ") || !strings.Contains(err.Error(), e.Message) {
		t.Errorf("Error() = %q does not carry the message %q", err.Error(), e.Message)
	}
	return e
}

func mustDesc(t testing.TB, b, hq, hkv, sq, sk, d int, opts ...Option) *Desc {
	t.Helper()
	desc, err := NewDesc(b, hq, hkv, sq, sk, d, opts...)
	if err != nil {
		t.Fatalf("NewDesc(%d,%d,%d,%d,%d,%d): %v", b, hq, hkv, sq, sk, d, err)
	}
	return desc
}

// ---------------------------------------------------------------------------------------------
// Constants

func TestConstantsMatchC(t *testing.T) {
	pairs := []struct {
		goVal, cVal int
		name        string
	}{
		{int(StatusOK), int(capi.ATTN_OK), "ATTN_OK"},
		{int(StatusNullPointer), int(capi.ATTN_ERR_NULL_POINTER), "ATTN_ERR_NULL_POINTER"},
		{int(StatusInvalidArgument), int(capi.ATTN_ERR_INVALID_ARGUMENT), "ATTN_ERR_INVALID_ARGUMENT"},
		{int(StatusOutOfMemory), int(capi.ATTN_ERR_OUT_OF_MEMORY), "ATTN_ERR_OUT_OF_MEMORY"},
		{int(StatusUnsupported), int(capi.ATTN_ERR_UNSUPPORTED), "ATTN_ERR_UNSUPPORTED"},
		{int(StatusInternal), int(capi.ATTN_ERR_INTERNAL), "ATTN_ERR_INTERNAL"},
		{int(CausalNone), int(capi.ATTN_CAUSAL_NONE), "ATTN_CAUSAL_NONE"},
		{int(CausalTopLeft), int(capi.ATTN_CAUSAL_TOP_LEFT), "ATTN_CAUSAL_TOP_LEFT"},
		{int(CausalBottomRight), int(capi.ATTN_CAUSAL_BOTTOM_RIGHT), "ATTN_CAUSAL_BOTTOM_RIGHT"},
		{int(OperandQ), int(capi.ATTN_Q), "ATTN_Q"},
		{int(OperandK), int(capi.ATTN_K), "ATTN_K"},
		{int(OperandV), int(capi.ATTN_V), "ATTN_V"},
		{int(OperandOut), int(capi.ATTN_OUT), "ATTN_OUT"},
		{int(OperandLSE), int(capi.ATTN_LSE), "ATTN_LSE"},
		{int(OperandWeights), int(capi.ATTN_WEIGHTS), "ATTN_WEIGHTS"},
		{int(OperandKeyValid), int(capi.ATTN_KEY_VALID), "ATTN_KEY_VALID"},
		{int(OperandAllowed), int(capi.ATTN_ALLOWED), "ATTN_ALLOWED"},
		{int(OperandBias), int(capi.ATTN_BIAS), "ATTN_BIAS"},
		{int(OperandAlibiSlopes), int(capi.ATTN_ALIBI_SLOPES), "ATTN_ALIBI_SLOPES"},
		{int(OperandSinks), int(capi.ATTN_SINKS), "ATTN_SINKS"},
		{int(OperandQueryValid), int(capi.ATTN_QUERY_VALID), "ATTN_QUERY_VALID"},
		{int(OperandSeqLensK), int(capi.ATTN_SEQ_LENS_K), "ATTN_SEQ_LENS_K"},
		{int(OperandKeyMass), int(capi.ATTN_KEY_MASS), "ATTN_KEY_MASS"},
		{int(ParamCausal), int(capi.ATTN_PARAM_CAUSAL), "ATTN_PARAM_CAUSAL"},
		{int(ParamScale), int(capi.ATTN_PARAM_SCALE), "ATTN_PARAM_SCALE"},
		{int(ParamWindowLeft), int(capi.ATTN_PARAM_WINDOW_LEFT), "ATTN_PARAM_WINDOW_LEFT"},
		{int(ParamWindowRight), int(capi.ATTN_PARAM_WINDOW_RIGHT), "ATTN_PARAM_WINDOW_RIGHT"},
		{int(ParamSoftcap), int(capi.ATTN_PARAM_SOFTCAP), "ATTN_PARAM_SOFTCAP"},
		{int(ParamAlibi), int(capi.ATTN_PARAM_ALIBI), "ATTN_PARAM_ALIBI"},
		{int(ParamSoftmaxPlusOne), int(capi.ATTN_PARAM_SOFTMAX_PLUS_ONE), "ATTN_PARAM_SOFTMAX_PLUS_ONE"},
		{int(ParamHeadDimV), int(capi.ATTN_PARAM_HEAD_DIM_V), "ATTN_PARAM_HEAD_DIM_V"},
		{int(ParamWeightsMode), int(capi.ATTN_PARAM_WEIGHTS_MODE), "ATTN_PARAM_WEIGHTS_MODE"},
		{int(ParamBiasFirst), int(capi.ATTN_PARAM_BIAS_FIRST), "ATTN_PARAM_BIAS_FIRST"},
		{int(AlibiNone), int(capi.ATTN_ALIBI_NONE), "ATTN_ALIBI_NONE"},
		{int(AlibiOperand), int(capi.ATTN_ALIBI_OPERAND), "ATTN_ALIBI_OPERAND"},
		{int(AlibiStandard), int(capi.ATTN_ALIBI_STANDARD), "ATTN_ALIBI_STANDARD"},
		{int(WeightsSoftmax), int(capi.ATTN_WEIGHTS_SOFTMAX), "ATTN_WEIGHTS_SOFTMAX"},
		{int(WeightsScores), int(capi.ATTN_WEIGHTS_SCORES), "ATTN_WEIGHTS_SCORES"},
		{int(WeightsMasked), int(capi.ATTN_WEIGHTS_MASKED), "ATTN_WEIGHTS_MASKED"},
		{int(WeightsCapped), int(capi.ATTN_WEIGHTS_CAPPED), "ATTN_WEIGHTS_CAPPED"},
		{int(WeightsSoftcapped), int(capi.ATTN_WEIGHTS_SOFTCAPPED), "ATTN_WEIGHTS_SOFTCAPPED"},
		{int(WeightsSoftcapped), int(weightsModeMax(t)), "ATTN_WEIGHTS_SOFTCAPPED (the last mode: max of ATTN_PARAM_WEIGHTS_MODE)"},
		{int(ComputeExact), int(capi.ATTN_COMPUTE_EXACT), "ATTN_COMPUTE_EXACT"},
		{int(ComputeFP16), int(capi.ATTN_COMPUTE_FP16), "ATTN_COMPUTE_FP16"},
		{int(OpForward), int(capi.ATTN_OP_FORWARD), "ATTN_OP_FORWARD"},
		{int(OpWeights), int(capi.ATTN_OP_WEIGHTS), "ATTN_OP_WEIGHTS"},
		{int(OpBackward), int(capi.ATTN_OP_BACKWARD), "ATTN_OP_BACKWARD"},
	}
	for _, p := range pairs {
		if p.goVal != p.cVal {
			t.Errorf("%s: Go constant %d, C value %d", p.name, p.goVal, p.cVal)
		}
	}
	if got := StatusOK.String(); got != "ok" {
		t.Errorf("StatusOK.String() = %q, want \"ok\"", got)
	}
	if got := StatusNullPointer.String(); got != "null pointer" {
		t.Errorf("StatusNullPointer.String() = %q, want \"null pointer\"", got)
	}
	if got := Status(99).String(); got != "unknown status" {
		t.Errorf("Status(99).String() = %q, want \"unknown status\"", got)
	}
	if CausalTopLeft.String() != "top-left" || CausalBottomRight.String() != "bottom-right" ||
		CausalNone.String() != "none" || Causal(9).String() != "Causal(9)" {
		t.Errorf("Causal.String() wrong: %v %v %v %v", CausalNone, CausalTopLeft, CausalBottomRight, Causal(9))
	}
	if OperandKeyValid.String() != "key_valid" || OperandOut.String() != "out" || Operand(29).String() != "Operand(29)" ||
		OperandSeqLensK.String() != "seq_lens_k" || OperandKeyMass.String() != "key_mass" || OperandBias.String() != "bias" {
		t.Errorf("Operand.String() wrong: %v %v %v %v", OperandKeyValid, OperandOut, Operand(29), OperandSeqLensK)
	}
	if ParamWindowLeft.String() != "window_left" || ParamBiasFirst.String() != "bias_first" || Param(17).String() != "Param(17)" ||
		OpWeights.String() != "weights" || Op(3).String() != "Op(3)" || AlibiStandard.String() != "standard" ||
		WeightsCapped.String() != "capped" || Alibi(3).String() != "Alibi(3)" || WeightsMode(5).String() != "WeightsMode(5)" || WeightsSoftcapped.String() != "softcapped" {
		t.Errorf("Param/Op/Alibi/WeightsMode.String() wrong: %v %v %v %v %v %v", ParamWindowLeft, ParamBiasFirst,
			Param(17), OpWeights, AlibiStandard, WeightsCapped)
	}
	if VersionNumber() < 200 {
		t.Errorf("VersionNumber() = %d: the 0.2 call needs libattn >= 0.2", VersionNumber())
	}
	if v := Version(); v != fmt.Sprintf("%d.%d.%d", VersionNumber()/10000, VersionNumber()/100%100, VersionNumber()%100) {
		t.Errorf("Version() = %q does not match VersionNumber() = %d", v, VersionNumber())
	}
	switch ISA() {
	case "scalar", "sse2", "avx2", "avx512", "avx512fp16":
	default:
		t.Errorf("ISA() = %q", ISA())
	}
	if NumThreads() < 1 {
		t.Errorf("NumThreads() = %d", NumThreads())
	}
}

func weightsModeMax(t *testing.T) float64 {
	r, err := ParamBounds(ParamWeightsMode)
	if err != nil {
		t.Fatal(err)
	}
	return r.Max
}

// ---------------------------------------------------------------------------------------------
// The seed example and the simple API

func TestSeedExample(t *testing.T) {
	q := []float32{0, 0, 0}
	k := []float32{1, 2, 3}
	v := []float32{10, 20, 30}
	out, err := Simple(q, k, v, 3, 1, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	// All scores are 0, so each query averages the values it sees: 10, (10+20)/2, (10+20+30)/3.
	if out[0] != 10 || out[1] != 15.0 || out[2] != 20 {
		t.Fatalf("out = %v, want [10 15 20] (out[1][0] exactly 15)", out)
	}

	desc := mustDesc(t, 1, 1, 1, 3, 3, 1, WithCausal(CausalTopLeft))
	defer desc.Close()
	w := make([]float32, desc.RequiredLen(OperandWeights))
	if err := desc.Weights(q, k, nil, nil, w); err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 0, 0, 0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3}
	for i := range want {
		if !close1e5(w[i], want[i]) || (want[i] == 0 && w[i] != 0) {
			t.Errorf("weights[%d][%d] = %v, want %v", i/3, i%3, w[i], want[i])
		}
	}
}

// Simple on the shared vectors it can express: one (batch, head) at a time of every index.txt
// case with seq_q = seq_k, the default scale and strides, no allowed mask and no or top-left
// causal; key_valid as padMask (the padded K/V rows hold NaN, which must never be read).
func TestSimpleSharedVectors(t *testing.T) {
	dir := vectorsDir()
	ran, padded, causal := 0, 0, 0
	for _, c := range readIndex(t, dir) {
		if c.sq != c.sk || c.scale != "default" || c.allowed || c.causal > 1 ||
			c.strides != [4]string{"default", "default", "default", "default"} {
			continue
		}
		desc := mustDesc(t, c.b, c.hq, c.hkv, c.sq, c.sk, c.d, c.options(t)...)
		p := func(part string) string { return filepath.Join(dir, c.name+"."+part) }
		q := readF32(t, p("q.f32"), desc.RequiredLen(OperandQ))
		k := readF32(t, p("k.f32"), desc.RequiredLen(OperandK))
		v := readF32(t, p("v.f32"), desc.RequiredLen(OperandV))
		want := readF32(t, p("out.f32"), desc.RequiredLen(OperandOut))
		var keyValid []bool
		if c.keyValid {
			keyValid = readU8(t, p("key_valid.u8"), desc.RequiredLen(OperandKeyValid))
		}
		desc.Close()
		n, d, rows := c.sq, c.d, c.sq*c.d
		for b := 0; b < c.b; b++ {
			var pad []bool
			if keyValid != nil {
				pad = keyValid[b*n : (b+1)*n]
			}
			for h := 0; h < c.hq; h++ {
				hk := b*c.hkv + h/(c.hq/c.hkv)
				got, err := Simple(q[(b*c.hq+h)*rows:][:rows], k[hk*rows:][:rows], v[hk*rows:][:rows], n, d,
					c.causal == 1, pad)
				if err != nil {
					t.Fatalf("%s: Simple: %v", c.name, err)
				}
				checkVec(t, fmt.Sprintf("%s batch %d head %d", c.name, b, h), "out", got,
					want[(b*c.hq+h)*rows:][:rows])
			}
		}
		ran++
		if c.keyValid {
			padded++
		}
		if c.causal == 1 {
			causal++
		}
	}
	if ran < 4 || padded == 0 || causal == 0 {
		t.Fatalf("index.txt has %d cases for Simple (%d padded, %d causal)", ran, padded, causal)
	}
	t.Logf("Simple: %d shared cases checked", ran)
}

// ---------------------------------------------------------------------------------------------
// Shared vectors (tests/vectors, from the float64 reference in tests/reference)

type vecCase struct {
	name                  string
	b, hq, hkv, sq, sk, d int
	causal                int
	scale                 string
	strides               [4]string // q, k, v, out
	keyValid, allowed     bool
}

func vectorsDir() string {
	if dir := os.Getenv("ATTN_VECTORS_DIR"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "tests", "vectors")
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

func readF32(t *testing.T, path string, n int) []float32 {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 4*n {
		t.Fatalf("%s: %d bytes, want %d floats", path, len(raw), n)
	}
	s := make([]float32, n)
	for i := range s {
		s[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return s
}

func readU8(t *testing.T, path string, n int) []bool {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != n {
		t.Fatalf("%s: %d bytes, want %d", path, len(raw), n)
	}
	s := make([]bool, n)
	for i, b := range raw {
		s[i] = b != 0
	}
	return s
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

func f32Bytes(s []float32) []byte {
	raw := make([]byte, 4*len(s))
	for i, x := range s {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	return raw
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
	var ran []string
	func() {
		defer func() {
			if err := SetISA(""); err != nil {
				t.Errorf("SetISA(\"\"): %v", err)
			}
		}()
		for _, isa := range []string{"scalar", "sse2", "avx2", "avx512", "avx512fp16"} {
			if err := SetISA(isa); err != nil {
				if errors.Is(err, &Error{Status: StatusUnsupported}) {
					continue // this CPU or build lacks it
				}
				t.Fatalf("SetISA(%q): %v", isa, err)
			}
			if ISA() != isa {
				t.Fatalf("after SetISA(%q), ISA() = %q", isa, ISA())
			}
			runAllCases(t, "isa "+isa)
			ran = append(ran, isa)
		}
	}()
	if ISA() != defaultISA {
		t.Errorf("SetISA(\"\") did not restore %q (got %q)", defaultISA, ISA())
	}
	if len(ran) == 0 || ran[0] != "scalar" {
		t.Errorf("the scalar kernel did not run (ran %v)", ran)
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

// ---------------------------------------------------------------------------------------------
// Error paths

func TestErrorsSimple(t *testing.T) {
	q := []float32{0, 0, 0, 0}
	wantError(t, func() error { _, err := Simple(nil, q, q, 2, 2, false, nil); return err }(),
		StatusNullPointer, "q is nil (needs 4 elements)")
	// Empty (non-nil) slices are length errors, required or optional.
	wantError(t, func() error { _, err := Simple(q, []float32{}, q, 2, 2, false, nil); return err }(),
		StatusInvalidArgument, "k has 0 elements, needs at least 4")
	wantError(t, func() error { _, err := Simple(q, q, q, 2, 2, false, []bool{}); return err }(),
		StatusInvalidArgument, "pad_mask has 0 elements, needs at least 2")
	// Impossible sizes with tiny arrays: refused before anything is allocated.
	wantError(t, func() error { _, err := Simple(q, q, q, 40000, 2, false, nil); return err }(),
		StatusInvalidArgument, "q has 4 elements, needs at least 80000")
	wantError(t, func() error { _, err := Simple(q, q, q, 1<<31, 1, false, nil); return err }(),
		StatusInvalidArgument, "n (2147483648) must be in [1, 2147483647]")
	wantError(t, func() error { _, err := Simple(q, q, q, 2, 1<<40, false, nil); return err }(),
		StatusInvalidArgument, "d (1099511627776) must be in [1, 2147483647]")
	wantError(t, func() error { _, err := Simple(q, q, q[:3], 2, 2, false, nil); return err }(),
		StatusInvalidArgument, "v has 3 elements, needs at least 4")
	wantError(t, func() error { _, err := Simple(q, q, q, 2, 2, false, []bool{true}); return err }(),
		StatusInvalidArgument, "pad_mask has 1 elements, needs at least 2")
	wantError(t, func() error { _, err := Simple(q, q, q, 0, 2, false, nil); return err }(),
		StatusInvalidArgument, "n (0) must be in [1, 2147483647]")
	wantError(t, func() error { _, err := Simple(q, q, q, 2, -1, false, nil); return err }(),
		StatusInvalidArgument, "d (-1) must be in [1, 2147483647]")
	wantError(t, func() error { _, err := Simple(q, q, q, math.MaxInt/2, 3, false, nil); return err }(),
		StatusInvalidArgument, "must be in [1, 2147483647]")
}

func TestErrorsDesc(t *testing.T) {
	// Bad dimensions: the library's own message, with the numbers of this call.
	_, err := NewDesc(1, 6, 4, 3, 3, 8)
	wantError(t, err, StatusInvalidArgument, "heads_q", "6", "heads_kv", "4")
	_, err = NewDesc(0, 1, 1, 3, 3, 8)
	wantError(t, err, StatusInvalidArgument, "batch")
	_, err = NewDesc(1, 1, 1, 3, 3, 0)
	wantError(t, err, StatusInvalidArgument, "head_dim")
	_, err = NewDesc(1, 1, 1, -3, 3, 8)
	wantError(t, err, StatusInvalidArgument, "seq_q (-3) is negative")
	// Bad causal mode, scale and strides.
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithCausal(Causal(7)))
	wantError(t, err, StatusInvalidArgument, "causal (7) is not an attn_causal value")
	// 64-bit values are range-checked, never truncated to the C enum's 32 bits.
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithCausal(Causal(1<<40)))
	wantError(t, err, StatusInvalidArgument, "causal (1099511627776) does not fit a C int")
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithCausal(Causal(1<<32+1)))
	wantError(t, err, StatusInvalidArgument, "causal (4294967297)")
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithStrides(Operand(1<<32), 24, 24, 8))
	wantError(t, err, StatusInvalidArgument, "which (4294967296) does not fit a C int")
	_, err = NewDesc(1<<31, 1, 1, 3, 3, 8)
	wantError(t, err, StatusInvalidArgument, "batch (2147483648) exceeds the limit")
	_, err = NewDesc(1, 1, 1, 1<<32+3, 3, 8)
	wantError(t, err, StatusInvalidArgument, "seq_q (4294967299) exceeds the limit")
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithScale(float32(math.NaN())))
	wantError(t, err, StatusInvalidArgument, "scale")
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithScale(float32(math.Inf(1))))
	wantError(t, err, StatusInvalidArgument, "scale")
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithStrides(OperandLSE, 24, 24, 8))
	wantError(t, err, StatusInvalidArgument)
	_, err = NewDesc(1, 1, 1, 3, 3, 8, WithStrides(OperandQ, 24, -1, 8))
	wantError(t, err, StatusInvalidArgument, "head_stride (-1) is negative")
	_, err = NewDesc(1, 2, 2, 3, 3, 8, WithStrides(OperandOut, 48, 24, 4)) // OUT rows overlap
	wantError(t, err, StatusInvalidArgument)

	// Nil, empty and short slices, each named, before any pointer reaches C.
	desc := mustDesc(t, 2, 2, 1, 3, 4, 8)
	defer desc.Close()
	nq, nk, nv := desc.RequiredLen(OperandQ), desc.RequiredLen(OperandK), desc.RequiredLen(OperandV)
	if nq != 2*2*3*8 || nk != 2*1*4*8 || nv != nk || desc.RequiredLen(OperandOut) != nq ||
		desc.RequiredLen(OperandLSE) != 2*2*3 || desc.RequiredLen(OperandWeights) != 2*2*3*4 ||
		desc.RequiredLen(OperandKeyValid) != 2*4 || desc.RequiredLen(OperandAllowed) != 3*4 {
		t.Fatalf("RequiredLen wrong: q %d k %d v %d", nq, nk, nv)
	}
	if desc.RequiredLen(Operand(29)) != 0 || desc.RequiredLen(Operand(-1)) != 0 || desc.RequiredLen(Operand(1<<32)) != 0 {
		t.Errorf("RequiredLen of an unknown operand is not 0")
	}
	q, k, v := pattern(nq, 1), pattern(nk, 2), pattern(nv, 3)
	out, lse, w := make([]float32, nq), make([]float32, 12), make([]float32, 48)
	kv, al := make([]bool, 8), make([]bool, 12)
	wantError(t, desc.Forward(nil, k, v, nil, nil, out, nil), StatusNullPointer, "q is nil (needs 96 elements)")
	wantError(t, desc.Forward(q, k, nil, nil, nil, out, nil), StatusNullPointer, "v is nil")
	wantError(t, desc.Forward(q, k, v, nil, nil, nil, nil), StatusNullPointer, "out is nil")
	// Empty (non-nil) slices: length errors, never "null pointer" and never "not given".
	wantError(t, desc.Forward(q, []float32{}, v, nil, nil, out, nil), StatusInvalidArgument, "k has 0 elements, needs at least 64")
	wantError(t, desc.Forward(q, k, v, nil, nil, []float32{}, nil), StatusInvalidArgument, "out has 0 elements")
	wantError(t, desc.Forward(q, k, v, []bool{}, nil, out, nil), StatusInvalidArgument, "key_valid has 0 elements, needs at least 8")
	wantError(t, desc.Forward(q, k, v, nil, []bool{}, out, nil), StatusInvalidArgument, "allowed has 0 elements, needs at least 12")
	wantError(t, desc.Forward(q, k, v, nil, nil, out, []float32{}), StatusInvalidArgument, "lse has 0 elements, needs at least 12")
	wantError(t, desc.Weights(q, k, []bool{}, nil, w), StatusInvalidArgument, "key_valid has 0 elements")
	wantError(t, desc.Weights(q, k, nil, nil, []float32{}), StatusInvalidArgument, "weights has 0 elements")
	wantError(t, desc.Forward(q[:47], k, v, nil, nil, out, nil), StatusInvalidArgument, "q has 47 elements, needs at least 96")
	wantError(t, desc.Forward(q, k[:1], v, nil, nil, out, nil), StatusInvalidArgument, "k has 1 elements, needs at least 64")
	wantError(t, desc.Forward(q, k, v[:31], nil, nil, out, nil), StatusInvalidArgument, "v has 31 elements, needs at least 64")
	wantError(t, desc.Forward(q, k, v, kv[:7], nil, out, nil), StatusInvalidArgument, "key_valid has 7 elements, needs at least 8")
	wantError(t, desc.Forward(q, k, v, nil, al[:11], out, nil), StatusInvalidArgument, "allowed has 11 elements, needs at least 12")
	wantError(t, desc.Forward(q, k, v, nil, nil, out[:40], nil), StatusInvalidArgument, "out has 40 elements, needs at least 96")
	wantError(t, desc.Forward(q, k, v, nil, nil, out, lse[:11]), StatusInvalidArgument, "lse has 11 elements, needs at least 12")
	wantError(t, desc.Weights(nil, k, nil, nil, w), StatusNullPointer, "q is nil")
	wantError(t, desc.Weights(q, k[:31], nil, nil, w), StatusInvalidArgument, "k has 31 elements")
	wantError(t, desc.Weights(q, k, kv[:1], nil, w), StatusInvalidArgument, "key_valid has 1 elements")
	wantError(t, desc.Weights(q, k, nil, al[:1], w), StatusInvalidArgument, "allowed has 1 elements")
	wantError(t, desc.Weights(q, k, nil, nil, nil), StatusNullPointer, "weights is nil")
	wantError(t, desc.Weights(q, k, nil, nil, w[:47]), StatusInvalidArgument, "weights has 47 elements, needs at least 48")
	// Rejected by the library itself: an output aliasing an input or another output.
	wantError(t, desc.Forward(q, k, v, nil, nil, q, nil), StatusInvalidArgument, "attn_forward: out overlaps q")
	wantError(t, desc.Forward(q, k, v, nil, nil, out, out), StatusInvalidArgument, "overlaps")
	wantError(t, desc.Weights(q, k, nil, nil, k), StatusInvalidArgument, "attn_weights: weights overlaps k")
	// None of the failures wrote anything.
	for i, x := range out {
		if x != 0 {
			t.Fatalf("out[%d] = %v written by a failing call", i, x)
		}
	}
	// Longer slices are fine (only the required prefix is used), and inputs may share memory.
	if err := desc.Forward(q, k, append(v, 1, 2), append(kv, true), nil, append(out, 0), append(lse, 5)); err != nil {
		t.Fatal(err)
	}
	if err := desc.Forward(q, q, q, nil, nil, out, nil); err != nil {
		t.Fatal(err)
	}
	// Library-wide settings.
	wantError(t, SetNumThreads(257), StatusInvalidArgument)
	wantError(t, SetNumThreads(-1), StatusInvalidArgument, "n (-1) is negative")
	wantError(t, SetISA("no-such-isa"), StatusInvalidArgument,
		`attn_set_isa: name "no-such-isa" is not one of scalar, sse2, avx2, avx512`)
	// C would read "avx2\x00junk" as "avx2": an embedded NUL or a non-ASCII byte is refused
	// first, in the library's wording, and the ISA is unchanged.
	before := ISA()
	// The list of names is the library's own (one table in C), for every refusal.
	list := func(err error) string {
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Message, "is not one of ") {
			t.Fatalf("SetISA: %v", err)
		}
		return e.Message[strings.Index(e.Message, "is not one of "):]
	}
	libList := list(SetISA("no-such-isa"))
	if !strings.HasSuffix(libList, ", avx512fp16") {
		t.Errorf("the library's list of ISA names: %q", libList)
	}
	for _, name := range []string{"avx2\x00junk", "scalar\x00", "\x00", "avx\u00b2", "sse2\xff", "\u0073calar\u00a0"} {
		err := SetISA(name)
		wantError(t, err, StatusInvalidArgument, fmt.Sprintf("attn_set_isa: name %q is not one of scalar, sse2, avx2, avx512", name))
		if got := list(err); got != libList {
			t.Errorf("SetISA(%q): %q, the library's list is %q", name, got, libList)
		}
	}
	if ISA() != before {
		t.Errorf("a refused SetISA changed the ISA from %q to %q", before, ISA())
	}
	if err := SetISA(""); err != nil {
		t.Errorf("SetISA(\"\"): %v", err)
	}
	// errors.Is by status.
	err = desc.Forward(nil, k, v, nil, nil, out, nil)
	if !errors.Is(err, &Error{Status: StatusNullPointer}) || errors.Is(err, &Error{Status: StatusInvalidArgument}) ||
		errors.Is(err, ErrClosed) {
		t.Errorf("errors.Is by status wrong for %v", err)
	}
}

func TestUseAfterClose(t *testing.T) {
	desc := mustDesc(t, 1, 1, 1, 2, 2, 2)
	x := []float32{1, 2, 3, 4}
	out := make([]float32, 4)
	if err := desc.Forward(x, x, x, nil, nil, out, nil); err != nil {
		t.Fatal(err)
	}
	if err := desc.Close(); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		desc.Forward(x, x, x, nil, nil, out, nil),
		desc.Weights(x, x, nil, nil, out),
		desc.Close(),
	} {
		e := wantError(t, err, StatusInvalidArgument, "desc is closed")
		if !errors.Is(err, ErrClosed) || e != ErrClosed {
			t.Errorf("%v is not ErrClosed", err)
		}
	}
	if n := desc.RequiredLen(OperandQ); n != 0 {
		t.Errorf("RequiredLen after Close = %d, want 0", n)
	}
	// A nil or zero Desc behaves as a closed one: an error, never a crash.
	var nilDesc *Desc
	var zero Desc
	for _, dd := range []*Desc{nilDesc, &zero} {
		if err := dd.Forward(x, x, x, nil, nil, out, nil); !errors.Is(err, ErrClosed) {
			t.Errorf("Forward on %p: %v, want ErrClosed", dd, err)
		}
		if err := dd.Weights(x, x, nil, nil, out); !errors.Is(err, ErrClosed) {
			t.Errorf("Weights on %p: %v, want ErrClosed", dd, err)
		}
		if err := dd.Close(); !errors.Is(err, ErrClosed) {
			t.Errorf("Close on %p: %v, want ErrClosed", dd, err)
		}
		if n := dd.RequiredLen(OperandQ); n != 0 {
			t.Errorf("RequiredLen on %p = %d", dd, n)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// Zero copy: slices are written in place, at the offset of a sub-slice, and a call allocates
// nothing on the Go side.

func TestZeroCopyInPlace(t *testing.T) {
	// The shared case causal_br_sq_lt_sk: bottom-right, seq_q 4 < seq_k 9, two batches.
	c := indexCaseByName(t, "causal_br_sq_lt_sk")
	desc := mustDesc(t, c.b, c.hq, c.hkv, c.sq, c.sk, c.d, c.options(t)...)
	defer desc.Close()
	p := func(part string) string { return filepath.Join(vectorsDir(), c.name+"."+part) }
	q := readF32(t, p("q.f32"), desc.RequiredLen(OperandQ))
	k := readF32(t, p("k.f32"), desc.RequiredLen(OperandK))
	v := readF32(t, p("v.f32"), desc.RequiredLen(OperandV))
	want := readF32(t, p("out.f32"), desc.RequiredLen(OperandOut))
	n := desc.RequiredLen(OperandOut)
	backing := make([]float32, 3+n+5)
	out := backing[3 : 3+n]
	if err := desc.Forward(q, k, v, nil, nil, out, nil); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 2, len(backing) - 5, len(backing) - 1} {
		if backing[i] != 0 {
			t.Errorf("backing[%d] = %v written outside the sub-slice", i, backing[i])
		}
	}
	checkVec(t, c.name+" at offset 3", "out", out, want)
	allocs := testing.AllocsPerRun(200, func() {
		if err := desc.Forward(q, k, v, nil, nil, out, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Forward allocates %v times per call on the Go side, want 0 (no copies)", allocs)
	}
}

// ---------------------------------------------------------------------------------------------
// Concurrency: 64 goroutines on one Desc, each checking its own results and its own messages.

func TestConcurrentOneDesc(t *testing.T) {
	// Between a failing C call and the read of its message, yield: without the locked OS thread
	// the goroutine would then often resume on another thread and read someone else's message.
	testHookBeforeLastError = runtime.Gosched
	defer func() { testHookBeforeLastError = nil }()

	const goroutines, iters = 64, 40
	// The dimensions, masks and (for job 0) the data of the shared case combined_all: GQA 6/2,
	// bottom-right, key padding and an allowed mask.
	c := indexCaseByName(t, "combined_all")
	desc := mustDesc(t, c.b, c.hq, c.hkv, c.sq, c.sk, c.d, c.options(t)...)
	defer desc.Close()
	p := func(part string) string { return filepath.Join(vectorsDir(), c.name+"."+part) }

	// Per goroutine inputs, and expected results computed serially first.
	type job struct {
		q, k, v, out, lse []float32
		kv, allowed       []bool
	}
	jobs := make([]job, goroutines)
	for g := range jobs {
		j := job{q: pattern(desc.RequiredLen(OperandQ), 3*g), k: pattern(desc.RequiredLen(OperandK), 3*g+1),
			v: pattern(desc.RequiredLen(OperandV), 3*g+2), kv: make([]bool, desc.RequiredLen(OperandKeyValid)),
			out: make([]float32, desc.RequiredLen(OperandOut)), lse: make([]float32, desc.RequiredLen(OperandLSE))}
		for i := range j.kv {
			j.kv[i] = (i+g)%5 != 0
		}
		if g == 0 {
			j.q, j.k, j.v = readF32(t, p("q.f32"), len(j.q)), readF32(t, p("k.f32"), len(j.k)), readF32(t, p("v.f32"), len(j.v))
			j.kv = readU8(t, p("key_valid.u8"), len(j.kv))
			j.allowed = readU8(t, p("allowed.u8"), desc.RequiredLen(OperandAllowed))
		}
		if err := desc.Forward(j.q, j.k, j.v, j.kv, j.allowed, j.out, j.lse); err != nil {
			t.Fatal(err)
		}
		jobs[g] = j
	}
	// The serial results themselves are right: job 0 is the shared case.
	checkVec(t, "serial "+c.name, "out", jobs[0].out, readF32(t, p("out.f32"), len(jobs[0].out)))
	checkVec(t, "serial "+c.name, "lse", jobs[0].lse, readF32(t, p("lse.f32"), len(jobs[0].lse)))

	var wg sync.WaitGroup
	errs := make(chan string, goroutines*4)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			j := jobs[g]
			out := make([]float32, len(j.out))
			lse := make([]float32, len(j.lse))
			headsKV := g + 2
			headsQ := 2*headsKV + 1 // never a multiple: a message with this goroutine's numbers
			for it := 0; it < iters; it++ {
				for i := range out {
					out[i] = -1
				}
				if err := desc.Forward(j.q, j.k, j.v, j.kv, j.allowed, out, lse); err != nil {
					errs <- fmt.Sprintf("g%d: Forward: %v", g, err)
					return
				}
				for i := range out {
					if math.Float32bits(out[i]) != math.Float32bits(j.out[i]) {
						errs <- fmt.Sprintf("g%d it%d: out[%d] = %v, serial run gave %v", g, it, i, out[i], j.out[i])
						return
					}
				}
				for i := range lse {
					if math.Float32bits(lse[i]) != math.Float32bits(j.lse[i]) {
						errs <- fmt.Sprintf("g%d it%d: lse[%d] = %v, serial run gave %v", g, it, i, lse[i], j.lse[i])
						return
					}
				}
				_, err := NewDesc(1, headsQ, headsKV, 3, 3, 8)
				var e *Error
				if !errors.As(err, &e) || e.Status != StatusInvalidArgument ||
					!strings.Contains(e.Message, fmt.Sprintf("(%d)", headsQ)) ||
					!strings.Contains(e.Message, fmt.Sprintf("(%d)", headsKV)) {
					errs <- fmt.Sprintf("g%d it%d: NewDesc(heads_q=%d, heads_kv=%d) gave %v: not this call's message",
						g, it, headsQ, headsKV, err)
					return
				}
				// A failure on the shared Desc (Go-side) and one inside the library.
				err = desc.Forward(j.q, j.k, j.v[:g%len(j.v)], nil, nil, out, nil)
				if !errors.As(err, &e) || (g == 0 && !strings.Contains(e.Message, "v has 0 elements")) ||
					(g > 0 && !strings.Contains(e.Message, fmt.Sprintf("v has %d elements", g))) {
					errs <- fmt.Sprintf("g%d it%d: short v gave %v", g, it, err)
					return
				}
				err = desc.Forward(j.q, j.k, j.v, nil, nil, j.q, nil)
				if !errors.As(err, &e) || e.Status != StatusInvalidArgument ||
					strings.Contains(e.Message, "heads_q") {
					errs <- fmt.Sprintf("g%d it%d: out aliasing q gave %v", g, it, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	n := 0
	for msg := range errs {
		if n++; n <= 10 {
			t.Error(msg)
		}
	}
}

// Close while other goroutines are calling: every call either completes or gets ErrClosed.
func TestCloseWhileInFlight(t *testing.T) {
	const sq, sk, d = 16, 16, 32
	for round := 0; round < 20; round++ {
		desc := mustDesc(t, 1, 1, 1, sq, sk, d)
		q, k, v := pattern(sq*d, 1), pattern(sk*d, 2), pattern(sk*d, 3)
		var wg sync.WaitGroup
		var mu sync.Mutex
		okCalls, closedCalls := 0, 0
		start := make(chan struct{})
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out := make([]float32, sq*d)
				<-start
				for i := 0; i < 50; i++ {
					err := desc.Forward(q, k, v, nil, nil, out, nil)
					mu.Lock()
					if err == nil {
						okCalls++
					} else if errors.Is(err, ErrClosed) {
						closedCalls++
					} else {
						t.Errorf("unexpected error: %v", err)
					}
					mu.Unlock()
				}
			}()
		}
		close(start)
		runtime.Gosched()
		if err := desc.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if okCalls+closedCalls != 16*50 {
			t.Fatalf("round %d: %d ok + %d closed != %d", round, okCalls, closedCalls, 16*50)
		}
		if err := desc.Forward(q, k, v, nil, nil, make([]float32, sq*d), nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
	}
}
