package attn

import (
	"math"
	"math/rand"
	"testing"
)

// Args.KVAppendArgs into caches of every storage type, then attention over them; the backward
// with bfloat16 inputs. The references are float64, written plainly here.

// attend64 is float64 softmax(scale q.k) v over the keys given (k, v: [keys][dim]).
func attend64(q []float64, k, v [][]float64, scale float64) []float64 {
	s := make([]float64, len(k))
	m := math.Inf(-1)
	for j := range k {
		for e := range q {
			s[j] += q[e] * k[j][e]
		}
		s[j] *= scale
		m = math.Max(m, s[j])
	}
	den := 0.0
	for j := range s {
		s[j] = math.Exp(s[j] - m)
		den += s[j]
	}
	out := make([]float64, len(v[0]))
	for j := range v {
		for e := range out {
			out[e] += s[j] / den * v[j][e]
		}
	}
	return out
}

// f16Value decodes an IEEE binary16 bit pattern (finite) from the format's definition.
func f16Value(u uint16) float64 { return minifloat(uint32(u), 5, 10) }

// f16Nearest is the binary16 nearest to x (|x| < 65504), ties to the even pattern, in float64.
func f16Nearest(x float32) uint16 {
	a := math.Abs(float64(x))
	lo, hi := uint16(0), uint16(0x7bff)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if f16Value(mid) <= a {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	up := lo + 1
	dl, dh := a-f16Value(lo), f16Value(up)-a
	m := lo
	if dh < dl || (dh == dl && lo&1 == 1) {
		m = up
	}
	if x < 0 {
		m |= 0x8000
	}
	return m
}

func TestKVAppendArgsPagedTypedCaches(t *testing.T) {
	// pages token-major [num_pages][page][heads_kv][d], a reversed block table; sequence b holds
	// lens[b] keys after the append, the last one new; decode (one query) over the cache.
	const B, HQ, HKV, D, P, maxPages, numPages = 2, 4, 2, 16, 4, 3, 6
	lens := []int32{6, 9}
	table := []int32{4, 3, -1, 2, 1, 0}
	slot := func(b, j int) int { return int(table[b*maxPages+j/P])*P + j%P } // row = slot*HKV + h
	for _, store := range []string{"f16", "int8"} {
		forISAs(t, func(isa string) {
			g := rand.New(rand.NewSource(29))
			d, err := NewDesc(B, HQ, HKV, 1, maxPages*P, D, WithPageSize(P), WithCausal(CausalBottomRight))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			a := mustArgs(t, d)
			defer a.Close()
			rows := numPages * P * HKV
			k16, v16 := make([]uint16, rows*D), make([]uint16, rows*D)
			k8, v8 := make([]int8, rows*D), make([]int8, rows*D)
			ks, vs := make([]float32, rows), make([]float32, rows)
			// the keys already cached, encoded by the test
			for b := 0; b < B; b++ {
				for j := 0; j < int(lens[b])-1; j++ {
					for h := 0; h < HKV; h++ {
						r := slot(b, j)*HKV + h
						for _, c := range []struct {
							u []uint16
							i []int8
							s []float32
						}{{k16, k8, ks}, {v16, v8, vs}} {
							x := uniform(g, D, -2, 2)
							for e := range x {
								c.u[r*D+e] = f16Nearest(x[e])
							}
							must(t, QuantizeI8(c.i[r*D:(r+1)*D], c.s[r:r+1], x, 1, D))
						}
					}
				}
			}
			newK, newV := uniform(g, B*HKV*D, -2, 2), uniform(g, B*HKV*D, -2, 2)
			q := uniform(g, B*HQ*D, -1, 1)
			if store == "f16" {
				must(t, a.SetOutF16(OperandK, k16), a.SetOutF16(OperandV, v16))
			} else {
				must(t, a.SetOutI8(OperandK, k8), a.SetOutI8(OperandV, v8),
					a.SetOutF32(OperandKScale, ks), a.SetOutF32(OperandVScale, vs))
			}
			must(t, a.SetF32(OperandNewK, newK), a.SetF32(OperandNewV, newV), a.SetSeqLensK(lens),
				a.SetBlockTable(table))
			must(t, a.KVAppendArgs())
			// the new rows hold exactly the rule's encoding
			value := func(u []uint16, i []int8, s []float32, r, e int) float64 {
				if store == "f16" {
					return f16Value(u[r*D+e])
				}
				return float64(float32(i[r*D+e]) * s[r])
			}
			for b := 0; b < B; b++ {
				for h := 0; h < HKV; h++ {
					r := slot(b, int(lens[b])-1)*HKV + h
					src := newK[(b*HKV+h)*D : (b*HKV+h+1)*D]
					wantQ, wantS := make([]int8, D), make([]float32, 1)
					must(t, QuantizeI8(wantQ, wantS, src, 1, D))
					for e := 0; e < D; e++ {
						if store == "f16" && k16[r*D+e] != f16Nearest(src[e]) {
							t.Fatalf("%s %s: k row %d element %d: %#04x, want %#04x", store, isa, r, e,
								k16[r*D+e], f16Nearest(src[e]))
						}
						if store == "int8" && (k8[r*D+e] != wantQ[e] || ks[r] != wantS[0] ||
							math.Abs(value(k16, k8, ks, r, e)-float64(src[e])) > 0.5*float64(ks[r])*(1+1e-6)) {
							t.Fatalf("%s %s: k row %d element %d: %d x %g, want %d x %g", store, isa, r,
								e, k8[r*D+e], ks[r], wantQ[e], wantS[0])
						}
					}
				}
			}
			out := make([]float32, B*HQ*D)
			must(t, a.SetF32(OperandQ, q), a.SetOutF32(OperandOut, out), a.Run(OpForward))
			checkPagedDecode(t, store+" "+isa, out, q, lens, HQ, HKV, D, slot, func(isV bool, r, e int) float64 {
				if isV {
					return value(v16, v8, vs, r, e)
				}
				return value(k16, k8, ks, r, e)
			})
		})
	}
}

func TestKVAppendArgsErrors(t *testing.T) {
	d := mustDesc(t, 1, 1, 1, 1, 4, 4)
	defer d.Close()
	a := mustArgs(t, d)
	defer a.Close()
	k, v := make([]uint16, 16), make([]uint16, 16)
	must(t, a.SetF16(OperandK, k), a.SetOutF16(OperandV, v), a.SetF32(OperandNewK, filled(4, 1)),
		a.SetF32(OperandNewV, filled(4, 1)), a.SetSeqLensK([]int32{2}))
	wantError(t, a.KVAppendArgs(), StatusInvalidArgument, "attn_kv_append_args: k is bound read-only")
	must(t, a.SetOutF16(OperandK, k), a.SetBF16(OperandNewK, make([]uint16, 4)))
	wantError(t, a.KVAppendArgs(), StatusInvalidArgument, "new_k is bf16 but k is f16")
	must(t, a.SetF16(OperandNewK, []uint16{0x3c00, 0x3c00, 0x3c00, 0x3c00}), a.KVAppendArgs())
	if k[4] != 0x3c00 || k[0] != 0 {
		t.Errorf("same-typed row not copied to position 1: %v", k[:8])
	}
	wantError(t, a.SetOutI8(OperandOut, make([]int8, 4)), StatusInvalidArgument,
		"attn_args_set_out_i8: out cannot be bound with attn_args_set_out_i8")
	wantError(t, a.SetI8(OperandQ, make([]int8, 4)), StatusInvalidArgument,
		"q cannot be bound with attn_args_set_i8 (int8 storage is for K, V, NEW_K and NEW_V)")
}

// backward64 is the float64 backward of out = softmax(scale q k^T) v for one head, every key
// visible: dq, dk, dv ([rows][dim] each).
func backward64(q, k, v, dout [][]float64, scale float64) (dq, dk, dv [][]float64) {
	n, m := len(q), len(k)
	zeros := func(r, c int) [][]float64 {
		x := make([][]float64, r)
		for i := range x {
			x[i] = make([]float64, c)
		}
		return x
	}
	dq, dk, dv = zeros(n, len(q[0])), zeros(m, len(k[0])), zeros(m, len(v[0]))
	for i := 0; i < n; i++ {
		p := make([]float64, m)
		mx := math.Inf(-1)
		for j := 0; j < m; j++ {
			for e := range q[i] {
				p[j] += q[i][e] * k[j][e]
			}
			p[j] *= scale
			mx = math.Max(mx, p[j])
		}
		den := 0.0
		for j := range p {
			p[j] = math.Exp(p[j] - mx)
			den += p[j]
		}
		dp := make([]float64, m)
		dsum := 0.0
		for j := range p {
			p[j] /= den
			for e := range dout[i] {
				dp[j] += dout[i][e] * v[j][e]
				dv[j][e] += p[j] * dout[i][e]
			}
			dsum += p[j] * dp[j]
		}
		for j := range p {
			ds := p[j] * (dp[j] - dsum) * scale
			for e := range q[i] {
				dq[i][e] += ds * k[j][e]
				dk[j][e] += ds * q[i][e]
			}
		}
	}
	return dq, dk, dv
}

func TestBackwardBF16Inputs(t *testing.T) {
	const B, H, SQ, SK, D = 2, 3, 5, 7, 8
	g := rand.New(rand.NewSource(16))
	bf := func(n int) ([]uint16, []float32) { // bfloat16 bits and their exact widening
		x := uniform(g, n, -1.5, 1.5)
		u := make([]uint16, n)
		must(t, ConvertF32ToBF16(u, x))
		w := make([]float32, n)
		must(t, ConvertBF16ToF32(w, u))
		return u, w
	}
	qu, qw := bf(B * H * SQ * D)
	ku, kw := bf(B * H * SK * D)
	vu, vw := bf(B * H * SK * D)
	du, dw := bf(B * H * SQ * D)
	rows := func(x []float32, b, h, n int) [][]float64 {
		r := make([][]float64, n)
		for i := range r {
			r[i] = make([]float64, D)
			for e := range r[i] {
				r[i][e] = float64(x[((b*H+h)*n+i)*D+e])
			}
		}
		return r
	}
	forISAs(t, func(isa string) {
		d := mustDesc(t, B, H, H, SQ, SK, D)
		defer d.Close()
		a := mustArgs(t, d)
		defer a.Close()
		out, lse := make([]float32, B*H*SQ*D), make([]float32, B*H*SQ)
		dq, dk, dv := make([]float32, B*H*SQ*D), make([]float32, B*H*SK*D), make([]float32, B*H*SK*D)
		must(t, a.SetBF16(OperandQ, qu), a.SetBF16(OperandK, ku), a.SetBF16(OperandV, vu),
			a.SetOutF32(OperandOut, out), a.SetOutF32(OperandLSE, lse), a.Run(OpForward))
		must(t, a.SetBF16(OperandDOut, du), a.SetOutF32(OperandDQ, dq), a.SetOutF32(OperandDK, dk),
			a.SetOutF32(OperandDV, dv), a.Backward())
		for b := 0; b < B; b++ {
			for h := 0; h < H; h++ {
				wq, wk, wv := backward64(rows(qw, b, h, SQ), rows(kw, b, h, SK), rows(vw, b, h, SK),
					rows(dw, b, h, SQ), 1/math.Sqrt(D))
				for _, c := range []struct {
					name string
					got  []float32
					want [][]float64
					n    int
				}{{"dq", dq, wq, SQ}, {"dk", dk, wk, SK}, {"dv", dv, wv, SK}} {
					for i := 0; i < c.n; i++ {
						for e := 0; e < D; e++ {
							got := float64(c.got[((b*H+h)*c.n+i)*D+e])
							if math.Abs(got-c.want[i][e]) > 1e-5 {
								t.Fatalf("%s: %s[%d][%d][%d][%d] = %g, float64 %g", isa, c.name, b, h, i, e,
									got, c.want[i][e])
							}
						}
					}
				}
			}
		}
	})
}
