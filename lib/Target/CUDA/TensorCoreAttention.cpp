//===- TensorCoreAttention.cpp - attention forward on tensor cores --------===//
//
// FlashAttention-2's forward pass for 16-bit operands: a block of four warps
// owns 64 query rows, each warp 16 of them, and streams key and value tiles
// through shared memory. Scores Q K^T and the product P V run on tensor
// cores (mma.m16n8k16, f32 accumulators); the softmax is online, with a
// running maximum and sum per row that rescale the accumulators, and the
// probabilities are rounded to the operands' type for P V. The scores' f32
// accumulation and the unnormalized 16-bit probabilities differ from the
// interpreter's rounding (AttentionKernels.cpp keeps that exactly): outputs
// agree to the probabilities' rounding, 2^-8 of the largest value.
//
// Fragments follow the PTX ISA's layout for mma.m16n8k16: lane = 4 g + t;
// A holds rows g and g + 8, columns 2t, 2t + 1 and those + 8; B columns
// g, rows 2t, 2t + 1 and those + 8; C rows g and g + 8, columns 2t, 2t + 1.
// The accumulators of Q K^T are then, pair by pair, the A fragments of P.
//
//===----------------------------------------------------------------------===//

#include "KernelWriter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;

namespace kiln::cuda {

static const char *kTensorCoreForward = R"cuda(
  const u16 *q = (const u16 *)args[0];
  const u16 *k = (const u16 *)args[1];
  const u16 *v = (const u16 *)args[2];
  $OT *out = ($OT *)args[3];
  $LT *lse = ($LT *)args[4];
  // Key and value tiles; values transposed, so that a B fragment of V is
  // two neighbouring keys of one column.
  __shared__ u16 Qs[$BQ * $D], Ks[$BK * $D], Vt[$D * $BK];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const float inf = 1.0f / 0.0f;
  auto pair = [](const u16 *p) { return (u32)p[0] | ((u32)p[1] << 16); };
  auto pack = [](float lo, float hi) {
    return (u32)$TO16(lo) | ((u32)$TO16(hi) << 16);
  };
  const i64 tiles = ($TQ + $BQ - 1) / $BQ;
  for (i64 work = blockIdx.x; work < $HEADS * tiles; work += gridDim.x) {
    const i64 bh = work / tiles, q0 = work % tiles * $BQ, b = bh / $H, h = bh % $H;
    const i64 kv = b * $HKV + h / $GROUP;
    __syncthreads();
    for (i64 e = threadIdx.x; e < $BQ * $D; e += blockDim.x)
      Qs[e] = q0 + e / $D < $TQ ? q[(bh * $TQ + q0) * $D + e] : (u16)0;
    __syncthreads();
    // The warp's 16 query rows as A fragments, 16 columns each.
    u32 qa[$D / 16][4];
    const u16 *rows = Qs + warp * 16 * $D;
    for (int kk = 0; kk < $D / 16; ++kk) {
      qa[kk][0] = pair(rows + g * $D + kk * 16 + 2 * t);
      qa[kk][1] = pair(rows + (g + 8) * $D + kk * 16 + 2 * t);
      qa[kk][2] = pair(rows + g * $D + kk * 16 + 8 + 2 * t);
      qa[kk][3] = pair(rows + (g + 8) * $D + kk * 16 + 8 + 2 * t);
    }
    // Per row (g, g + 8): the running maximum and sum, and the output.
    const i64 row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    float maximum[2] = {-inf, -inf}, sum[2] = {0.0f, 0.0f};
    float o[$D / 8][4];
    for (int n = 0; n < $D / 8; ++n)
      o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    // Causal: no key after the tile's last query row takes part.
    const i64 keys = $CAUSAL && q0 + $BQ < $TK ? q0 + $BQ : $TK;
    for (i64 k0 = 0; k0 < keys; k0 += $BK) {
      __syncthreads();
      for (i64 e = threadIdx.x; e < $BK * $D; e += blockDim.x) {
        const bool inside = k0 + e / $D < $TK;
        const i64 at = (kv * $TK + k0) * $D + e;
        Ks[e] = inside ? k[at] : (u16)0;
        Vt[e % $D * $BK + e / $D] = inside ? v[at] : (u16)0;
      }
      __syncthreads();
      // s = Q K^T * scale, masked, and each row's maximum over the tile.
      float s[$BK / 8][4];
      float tileMax[2] = {-inf, -inf};
      for (int n = 0; n < $BK / 8; ++n) {
        s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
        const u16 *key = Ks + (n * 8 + g) * $D + 2 * t;
        for (int kk = 0; kk < $D / 16; ++kk) {
          const u32 kb[2] = {pair(key + kk * 16), pair(key + kk * 16 + 8)};
          $MMA(s[n], qa[kk], kb);
        }
        for (int e = 0; e < 4; ++e) {
          const i64 j = k0 + n * 8 + 2 * t + (e & 1);
          float x = s[n][e] * (float)$SCALE;
          if (j >= $TK || ($CAUSAL && j > row[e / 2])) x = -inf;
          s[n][e] = x;
          tileMax[e / 2] = fmaxf(tileMax[e / 2], x);
        }
      }
      // The four lanes of a group hold a row's columns between them.
      float scale[2], tileSum[2] = {0.0f, 0.0f};
      for (int r = 0; r < 2; ++r) {
        tileMax[r] = fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffu, tileMax[r], 1));
        tileMax[r] = fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffu, tileMax[r], 2));
        const float next = fmaxf(maximum[r], tileMax[r]);
        scale[r] = next == -inf ? 1.0f : expf(maximum[r] - next);
        maximum[r] = next;
      }
      for (int n = 0; n < $BK / 8; ++n)
        for (int e = 0; e < 4; ++e) {
          const float m = maximum[e / 2];
          s[n][e] = m == -inf ? 0.0f : expf(s[n][e] - m);
          tileSum[e / 2] += s[n][e];
        }
      for (int r = 0; r < 2; ++r) {
        tileSum[r] += __shfl_xor_sync(0xffffffffu, tileSum[r], 1);
        tileSum[r] += __shfl_xor_sync(0xffffffffu, tileSum[r], 2);
        sum[r] = sum[r] * scale[r] + tileSum[r];
      }
      for (int n = 0; n < $D / 8; ++n) {
        o[n][0] *= scale[0];
        o[n][1] *= scale[0];
        o[n][2] *= scale[1];
        o[n][3] *= scale[1];
      }
      // o += P V, 16 keys at a time.
      for (int kk = 0; kk < $BK / 16; ++kk) {
        const u32 pa[4] = {pack(s[2 * kk][0], s[2 * kk][1]),
                           pack(s[2 * kk][2], s[2 * kk][3]),
                           pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                           pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
        for (int n = 0; n < $D / 8; ++n) {
          const u16 *column = Vt + (n * 8 + g) * $BK + kk * 16 + 2 * t;
          const u32 vb[2] = {pair(column), pair(column + 8)};
          $MMA(o[n], pa, vb);
        }
      }
    }
    for (int r = 0; r < 2; ++r) {
      if (row[r] >= $TQ) continue;
      const double total = sum[r];
      for (int n = 0; n < $D / 8; ++n)
        for (int c = 0; c < 2; ++c)
          out[(bh * $TQ + row[r]) * $D + n * 8 + 2 * t + c] =
              $STOREO(total == 0.0 ? 0.0 : o[n][2 * r + c] / total);
      if (t == 0)
        lse[bh * $TQ + row[r]] = ($LT)(total == 0.0 ? -inf : maximum[r] + logf(sum[r]));
    }
  }
)cuda";

std::optional<KernelPlan> tensorCoreAttentionForward(AttentionOp op) {
  Type qt = elementTypeOf(op.getQuery());
  ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  int64_t d = qs[3];
  bool sixteenBit = qt.isBF16() || qt.isF16();
  if (!sixteenBit || elementTypeOf(op.getKey()) != qt ||
      elementTypeOf(op.getValue()) != qt || shapeOf(op.getValue())[3] != d ||
      d % 16 != 0 || d > 128 || op.getMask() || op.getOffset() ||
      !op.getDropoutRatio().isZero() ||
      !elementTypeOf(op.getLogsumexp()).isF32())
    return std::nullopt;
  // 64 query rows (four warps of 16); key tiles that keep the three tiles
  // within 32 KiB of shared memory.
  int64_t queryRows = 64, keyRows = d <= 64 ? 64 : 32;
  auto count = [](int64_t n) { return std::to_string(n) + "ll"; };
  Type ot = elementTypeOf(op.getOutput());
  KernelPlan plan;
  plan.operands = {op.getQuery(), op.getKey(), op.getValue()};
  plan.results = {op.getOutput(), op.getLogsumexp()};
  plan.body = substitute(
      kTensorCoreForward,
      {{"OT", storageType(ot)},
       {"LT", storageType(elementTypeOf(op.getLogsumexp()))},
       {"STOREO", "[](double x) { return " + stored(ot, "x") + "; }"},
       {"TO16", qt.isBF16() ? "f32_to_bf16" : "f32_to_f16"},
       {"MMA", qt.isBF16() ? "mma_bf16" : "mma_f16"},
       {"SCALE", literal(op.getScale().convertToDouble())},
       {"CAUSAL", op.getCausal() ? "true" : "false"},
       {"TQ", count(qs[2])},
       {"TK", count(ks[2])},
       {"H", count(qs[1])},
       {"HKV", count(ks[1])},
       {"GROUP", count(qs[1] / ks[1])},
       {"HEADS", count(qs[0] * qs[1])},
       {"D", count(d)},
       {"BQ", count(queryRows)},
       {"BK", count(keyRows)}});
  plan.block = 128;
  plan.grid = std::clamp<int64_t>(
      qs[0] * qs[1] * ((qs[2] + queryRows - 1) / queryRows), 1, 4096);
  return plan;
}

} // namespace kiln::cuda
