// Flash-style attention kernel body, written once for every ISA.
//
// Kernel fragment, not a header (highway's -inl.h convention): included by core/kernels/<isa>.cpp
// INSIDE namespace attn::core::<isa> (so every ISA's copy has its own symbols; highway's
// HWY_NAMESPACE idea), by xsimd-inl.h once per register blocking (wide, mid, narrow). No include
// guard on purpose: each inclusion must compile a fresh copy. Before including, the TU defines:
//   vf, vm                      vector of floats, and its lane mask
//   kL                          lanes of vf
//   kNV, kKT, kDT, kBK          register blocking: query vectors per item, key rows per Q.K^T
//                               block, head_dim values per P.V block, keys per tile
//   vload vstore vbcast vzero vfma(a, b, c) = a*b + c, vmax, vexp, vlog, vtanh, vsel(m, a, b),
//   vlt, veq, vne, vand, vany, vhsum,
//   vtranspose_add(st, ld, rows, c0): st[c * ld + l] += rows[l][c0 + c] for c, l < kL (-inf
//                               where rows[l][c0 + c] is -inf: a -inf bias hides the key)
//   vtranspose_pack(dst, ld, rows, c0, f): dst[c * ld + l] = rows[l][c0 + c] * f, and
//   vtranspose_unpack(src, ld, rows, c0): rows[l][c0 + c] = src[c * ld + l]
//   vi (kL int32 lanes), vi_zero, vi_load, vi_store, vi_bcast, vi_madd(acc, a, b) = acc + the
//                               sums of the products of a's and b's int16 pairs (pmaddwd),
//                               vi_to_f, vi_from_f (nearest), vi_pack_lohi(lo, hi) (int16 pairs)
// and includes nothing else after it. No std:: function is called here (see kernel.hpp).
//
// The body is these files, each with one job:
//   convert-inl.h  widening loads of 16-bit and int8 rows into fp32
//   int8-inl.h     the integer products of ATTN_COMPUTE_INT8: K smoothed and quantized per key,
//                  a row block's queries per row, a tile's V per channel and its probabilities
//                  in 15 bits, the Q.K^T and P.V product blocks
//   score-inl.h    scratch, the rows of an item, key gathering, masks, the score pipeline of
//                  a tile (scale, softcap, bias, ALiBi, causal / window / allowed), softmax
//   forward-inl.h  row blocks: P.V of a tile, the tile loop of an item's blocks, a row's scale
//   decode-inl.h   the decode path of one item (<= kDecodeRows rows per KV head), and
//                  forward_item, which sends an item there or to the row blocks
//   walks-inl.h    several KV heads through one decode tile: key-major over token-major
//                  K/V, page-major over small head-major pages
//   backward-inl.h dQ, dK, dV (dBias, dSinks) of one (batch entry, KV head)
//   weights-inl.h  the weight matrix (and score stages) and the per-key attention mass
//
// Layout inside one work item (R = kL * kNV lanes = rows of the item; "T" marks a transposed,
// lane-minor layout so that every vector op runs across queries):
//   qt[head_dim][R]      scale * q, transposed: one vector load per head_dim step
//   st[kBK][R]           scores of the current key tile, row = key, lanes = queries
//   ot[dpad][R]          unnormalised output accumulator, row = head_dim index
//   m[R], l[R], vis[R]   running max, running sum (online softmax, Milakov & Gimelshein 2018;
//                        FlashAttention, Dao et al. 2022) and "has any visible key" flag
// Keys are read only through kidx[] (the tile's visible-candidate key indices): padding keys are
// compacted away before the tile is formed, so a padded K or V row is never read.

#include "convert-inl.h"
#include "int8-inl.h"
#include "score-inl.h"
#include "forward-inl.h"
#include "decode-inl.h"
#include "walks-inl.h"
#include "backward-inl.h"
#include "weights-inl.h"

__attribute__((unused)) static KernelInfo make_info(const KernelInfo *narrow) {
    KernelInfo k{};
    k.lanes = kRows;
    k.dim_block = kDT;
    k.scratch_bytes = &scratch_bytes;
    k.forward = &forward_item;
    k.forward_heads = &forward_heads;
    k.weights = &weights_item;
    k.mass = &mass_item;
    k.backward_scratch = &backward_scratch;
    k.backward = &backward_item;
    k.narrow = narrow;
    k.f16_to_f32 = &convert_f16_to_f32;
    k.bf16_to_f32 = &convert_bf16_to_f32;
    k.f32_to_f16 = &convert_f32_to_f16;
    k.f32_to_bf16 = &convert_f32_to_bf16;
    k.quantize_i8 = &quantize_rows_i8;
    k.quantize_fp8 = &quantize_rows_fp8;
    k.fp8_to_f32 = &convert_fp8_to_f32;
    k.quantize_keys = &quantize_keys;
    k.quantize_values = &quantize_values;
    k.tile_keys = kBK;
    return k;
}
