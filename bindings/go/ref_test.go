package attn

import "math"

// An independent float64 reference of the 0.2 call (attn_run), in plain Go, for contiguous BHSD
// buffers; it follows capi/attn.h ("Extensible call") and tests/reference/attn_ref.py.

type refProblem struct {
	b, hq, hkv, sq, sk, d, dv int
	causal                    Causal
	scale                     float64 // 0 = 1/sqrt(d)
	wl, wr                    int     // -1 = unbounded
	softcap                   float64
	alibi                     Alibi
	plusOne, biasFirst        bool
}

type refInputs struct {
	q, k, v                       []float32 // contiguous BHSD (v rows of dv)
	keyValid, allowed, queryValid []bool
	bias                          []float32 // contiguous [b][hq][sq][sk]
	slopes                        []float32 // AlibiOperand
	sinks                         []float32
	seqLensK                      []int32
}

type refResult struct {
	out, lse, w, mass []float64
	// scores, softcapped, masked, capped: the score stages the weights modes write (every entry;
	// a hidden one -Inf in masked and capped). Only for problems without key padding.
	scores, softcapped, masked, capped []float64
}

// standardSlopes are the ALiBi slopes of n heads as BLOOM computes them.
func standardSlopes(n int) []float64 {
	m := 1
	for m*2 <= n {
		m *= 2
	}
	s := make([]float64, 0, n)
	for h := 0; h < m; h++ {
		s = append(s, math.Pow(2, -8*float64(h+1)/float64(m)))
	}
	for x := 0; x < n-m; x++ {
		s = append(s, math.Pow(2, -8*float64(2*x+1)/float64(2*m)))
	}
	return s
}

func (p refProblem) run(in refInputs) refResult {
	if p.dv == 0 {
		p.dv = p.d
	}
	scale := p.scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(p.d))
	}
	var slopes []float64
	switch p.alibi {
	case AlibiOperand:
		for _, x := range in.slopes {
			slopes = append(slopes, float64(x))
		}
	case AlibiStandard:
		slopes = standardSlopes(p.hq)
	}
	group := p.hq / p.hkv
	nw := p.b * p.hq * p.sq * p.sk
	r := refResult{out: make([]float64, p.b*p.hq*p.sq*p.dv), lse: make([]float64, p.b*p.hq*p.sq),
		w: make([]float64, nw), mass: make([]float64, p.b*p.hq*p.sk),
		scores: make([]float64, nw), softcapped: make([]float64, nw), masked: make([]float64, nw),
		capped: make([]float64, nw)}
	capf := func(s float64) float64 { return p.softcap * math.Tanh(s/p.softcap) }
	ninf := math.Inf(-1)
	for b := 0; b < p.b; b++ {
		L := p.sk
		if in.seqLensK != nil {
			L = int(in.seqLensK[b])
		}
		for h := 0; h < p.hq; h++ {
			hk := h / group
			var sink *float64
			if in.sinks != nil {
				x := float64(in.sinks[h])
				sink = &x
			} else if p.plusOne {
				x := 0.0
				sink = &x
			}
			for i := 0; i < p.sq; i++ {
				row := (b*p.hq+h)*p.sq + i
				dg := i
				if p.causal == CausalBottomRight {
					dg = i + L - p.sq
				}
				scores := map[int]float64{}
				for j := 0; j < p.sk; j++ {
					dot := 0.0
					for x := 0; x < p.d; x++ {
						dot += float64(in.q[row*p.d+x]) * float64(in.k[((b*p.hkv+hk)*p.sk+j)*p.d+x])
					}
					raw := scale * dot
					s, c := raw, raw
					if p.softcap > 0 && !p.biasFirst {
						s = capf(s)
					}
					if in.bias != nil {
						s += float64(in.bias[row*p.sk+j])
					}
					if p.softcap > 0 && p.biasFirst {
						s = capf(s)
					}
					if slopes != nil {
						s += -slopes[h] * float64(dg-j)
					}
					c = s
					hidden := j >= L || (in.keyValid != nil && !in.keyValid[b*p.sk+j]) ||
						(p.causal != CausalNone && j > dg) ||
						(p.wl >= 0 && j < dg-p.wl) || (p.wr >= 0 && j > dg+p.wr) ||
						(in.allowed != nil && !in.allowed[i*p.sk+j]) ||
						(in.queryValid != nil && !in.queryValid[b*p.sq+i]) || s == ninf
					r.scores[row*p.sk+j] = raw
					r.softcapped[row*p.sk+j] = raw
					if p.softcap > 0 {
						r.softcapped[row*p.sk+j] = capf(raw)
					}
					if hidden {
						r.masked[row*p.sk+j], r.capped[row*p.sk+j] = ninf, ninf
						continue
					}
					// masked: the score after bias, ALiBi and masks, without the softcap.
					m := raw
					if in.bias != nil {
						m += float64(in.bias[row*p.sk+j])
					}
					if slopes != nil {
						m += -slopes[h] * float64(dg-j)
					}
					r.masked[row*p.sk+j], r.capped[row*p.sk+j] = m, c
					scores[j] = s
				}
				if len(scores) == 0 {
					r.lse[row] = ninf
					continue
				}
				m := ninf
				for _, s := range scores {
					m = math.Max(m, s)
				}
				if sink != nil {
					m = math.Max(m, *sink)
				}
				total := 0.0
				if sink != nil {
					total = math.Exp(*sink - m)
				}
				for _, s := range scores {
					total += math.Exp(s - m)
				}
				r.lse[row] = m + math.Log(total)
				for j, s := range scores {
					w := math.Exp(s-m) / total
					r.w[row*p.sk+j] = w
					r.mass[(b*p.hq+h)*p.sk+j] += w
					if in.v != nil {
						for x := 0; x < p.dv; x++ {
							r.out[row*p.dv+x] += w * float64(in.v[((b*p.hkv+hk)*p.sk+j)*p.dv+x])
						}
					}
				}
			}
		}
	}
	return r
}
