package attn

import (
	"math"
	"math/rand"
	"testing"
)

// fp8 K / V caches: the converters against the formats' definitions, a paged cache filled by
// Args.KVAppendArgs and a decode step over it against float64, and the errors. The references
// are float64, written plainly here.

// fp8Value decodes a finite fp8 code of format: E4M3 (bias 7, 3 mantissa bits) or E5M2 (the
// upper byte of a binary16: bias 15, 2 mantissa bits).
func fp8Value(format DType, u byte) float64 {
	if format == DTypeFP8E5M2 {
		return minifloat(uint32(u), 5, 2)
	}
	return minifloat(uint32(u), 4, 3)
}

// fp8Nearest is the code nearest to x (|x| within the format's finite range), ties to the even
// code, searched over the codes' values.
func fp8Nearest(format DType, x float32) byte {
	top := byte(0x7e) // E4M3: 448 (0x7f is NaN)
	if format == DTypeFP8E5M2 {
		top = 0x7b // 57344
	}
	a := math.Abs(float64(x))
	best := byte(0)
	for c := byte(1); c <= top; c++ {
		dc, db := math.Abs(fp8Value(format, c)-a), math.Abs(fp8Value(format, best)-a)
		if dc < db || (dc == db && c&1 == 0) {
			best = c
		}
	}
	if x < 0 && best != 0 {
		best |= 0x80
	}
	return best
}

func TestFP8Converters(t *testing.T) {
	g := rand.New(rand.NewSource(8))
	for _, c := range []struct {
		format DType
		scale  float32
	}{{DTypeFP8E4M3, 0.01}, {DTypeFP8E5M2, 1}} {
		const rows, dim = 3, 20
		src := uniform(g, rows*dim, -3, 3)
		codes := make([]byte, rows*dim)
		must(t, QuantizeFP8(codes, src, rows, dim, c.format, c.scale))
		back := make([]float32, rows*dim)
		must(t, DequantizeFP8(back, codes, rows, dim, c.format, c.scale))
		for i, x := range src {
			if want := fp8Nearest(c.format, x/c.scale); codes[i] != want {
				t.Fatalf("%v: code of %g / %g = %#02x, want %#02x", c.format, x, c.scale, codes[i], want)
			}
			if want := float32(fp8Value(c.format, codes[i]) * float64(c.scale)); back[i] != want {
				t.Fatalf("%v: value of %#02x x %g = %g, want %g", c.format, codes[i], c.scale, back[i], want)
			}
		}
	}
}

func TestKVAppendArgsPagedFP8(t *testing.T) {
	// pages token-major [num_pages][page][heads_kv][d], a reversed block table; sequence b holds
	// lens[b] keys after the append, the last one new; decode (one query) over the cache. E4M3
	// with one scale per tensor for K and V (strides 0, 0, 0), E5M2 with no scale (= 1).
	const B, HQ, HKV, D, P, maxPages, numPages = 2, 4, 2, 16, 4, 3, 6
	lens := []int32{6, 9}
	table := []int32{4, 3, -1, 2, 1, 0}
	slot := func(b, j int) int { return int(table[b*maxPages+j/P])*P + j%P } // row = slot*HKV + h
	for _, c := range []struct {
		format DType
		ks, vs float32 // 1: no scale bound
	}{{DTypeFP8E4M3, 0.0078125, 0.01}, {DTypeFP8E5M2, 1, 1}} {
		forISAs(t, func(isa string) {
			g := rand.New(rand.NewSource(34))
			opts := []Option{WithPageSize(P), WithCausal(CausalBottomRight)}
			if c.ks != 1 {
				opts = append(opts, WithStrides(OperandKScale, 0, 0, 0), WithStrides(OperandVScale, 0, 0, 0))
			}
			d, err := NewDesc(B, HQ, HKV, 1, maxPages*P, D, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			a := mustArgs(t, d)
			defer a.Close()
			rows := numPages * P * HKV
			kc, vc := make([]byte, rows*D), make([]byte, rows*D)
			// the keys already cached, encoded by the test
			for b := 0; b < B; b++ {
				for j := 0; j < int(lens[b])-1; j++ {
					for h := 0; h < HKV; h++ {
						r := slot(b, j)*HKV + h
						for e, x := range uniform(g, 2*D, -2, 2) {
							if e < D {
								kc[r*D+e] = fp8Nearest(c.format, x/c.ks)
							} else {
								vc[r*D+e-D] = fp8Nearest(c.format, x/c.vs)
							}
						}
					}
				}
			}
			newK, newV := uniform(g, B*HKV*D, -2, 2), uniform(g, B*HKV*D, -2, 2)
			q := uniform(g, B*HQ*D, -1, 1)
			must(t, a.SetOutFP8(OperandK, c.format, kc), a.SetOutFP8(OperandV, c.format, vc))
			if c.ks != 1 {
				must(t, a.SetKScale([]float32{c.ks}), a.SetVScale([]float32{c.vs}))
			}
			must(t, a.SetF32(OperandNewK, newK), a.SetF32(OperandNewV, newV), a.SetSeqLensK(lens),
				a.SetBlockTable(table))
			must(t, a.KVAppendArgs())
			// the new rows hold the nearest codes of x / scale (an fp32 quotient)
			for b := 0; b < B; b++ {
				for h := 0; h < HKV; h++ {
					r := slot(b, int(lens[b])-1)*HKV + h
					for e := 0; e < D; e++ {
						x, y := newK[(b*HKV+h)*D+e], newV[(b*HKV+h)*D+e]
						if kc[r*D+e] != fp8Nearest(c.format, x/c.ks) || vc[r*D+e] != fp8Nearest(c.format, y/c.vs) {
							t.Fatalf("%v %s: row %d element %d: k %#02x v %#02x, want %#02x %#02x", c.format,
								isa, r, e, kc[r*D+e], vc[r*D+e], fp8Nearest(c.format, x/c.ks),
								fp8Nearest(c.format, y/c.vs))
						}
					}
				}
			}
			// decode: K and V bound read-only as fp8
			must(t, a.SetFP8(OperandK, c.format, kc), a.SetFP8(OperandV, c.format, vc))
			out := make([]float32, B*HQ*D)
			must(t, a.SetF32(OperandQ, q), a.SetOutF32(OperandOut, out), a.Run(OpForward))
			checkPagedDecode(t, c.format.String()+" "+isa, out, q, lens, HQ, HKV, D, slot, func(isV bool, r, e int) float64 {
				if isV {
					return float64(float32(fp8Value(c.format, vc[r*D+e]) * float64(c.vs)))
				}
				return float64(float32(fp8Value(c.format, kc[r*D+e]) * float64(c.ks)))
			})
		})
	}
}

func TestFP8Errors(t *testing.T) {
	d := mustDesc(t, 1, 1, 1, 1, 4, 8)
	defer d.Close()
	a := mustArgs(t, d)
	defer a.Close()
	codes := make([]byte, 32)
	wantError(t, a.SetFP8(OperandK, DTypeI8, codes), StatusInvalidArgument, "fmt (3) is not an fp8 format")
	wantError(t, a.SetOutFP8(OperandV, DType(99), codes), StatusInvalidArgument, "fmt (99) is not an fp8 format")
	wantError(t, a.SetFP8(OperandQ, DTypeFP8E4M3, codes), StatusInvalidArgument)
	// a short cache: the call names the operand and its needed length
	must(t, a.SetFP8(OperandK, DTypeFP8E4M3, codes[:31]), a.SetFP8(OperandV, DTypeFP8E4M3, codes),
		a.SetF32(OperandQ, make([]float32, 8)), a.SetOutF32(OperandOut, make([]float32, 8)))
	wantError(t, a.Run(OpForward), StatusInvalidArgument, "k has 31")
	src := make([]float32, 16)
	wantError(t, QuantizeFP8(make([]byte, 15), src, 2, 8, DTypeFP8E4M3, 1), StatusInvalidArgument, "dst has 15 elements")
	wantError(t, QuantizeFP8(make([]byte, 16), src, 2, 8, DTypeFP8E5M2, 0), StatusInvalidArgument, "scale (0)")
	wantError(t, QuantizeFP8(make([]byte, 16), src, 2, 8, DTypeF16, 1), StatusInvalidArgument, "fmt (1) is not an fp8 format")
	wantError(t, DequantizeFP8(make([]float32, 16), make([]byte, 8), 2, 8, DTypeFP8E4M3, 1), StatusInvalidArgument, "src has 8 elements")
	src[9] = float32(math.NaN())
	wantError(t, QuantizeFP8(make([]byte, 16), src, 2, 8, DTypeFP8E4M3, 1), StatusInvalidArgument, "row 1")
}
