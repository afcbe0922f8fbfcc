//===- TensorCoreAttention.cpp - attention on tensor cores ----------------===//
//
// FlashAttention-2 for 16-bit operands. Forward: a block of four warps owns
// 64 query rows, each warp 16 of them, and streams key and value tiles
// through shared memory (by cp.async, the next tile's copies running while
// the block computes on this one); Q K^T and P V run on tensor cores
// (mma.m16n8k16, f32 accumulators), the softmax is online (a running maximum
// and sum per row rescale the accumulators), and the probabilities are rounded
// to the operands' type for P V. Backward: two kernels, as
// AttentionKernels.cpp's exact ones: query tiles accumulate dQ = dS K, key
// tiles dK = dS^T Q and dV = P^T dO; both recompute S and dP on tensor cores.
// The first also stores each query row's delta = dO . O in scratch, which the
// second reads for every key tile instead of recomputing it. The f32 scores and
// the forward pass's unnormalized 16-bit probabilities differ from the
// interpreter's rounding (AttentionKernels.cpp keeps that exactly): outputs
// agree to the probabilities' rounding, 2^-8 of the largest value. Scores
// are kept in base 2 (times log2 e, folded into the scale), so that each
// probability is one exp2 of a difference, an ex2 instruction (CUDA bounds
// exp2f's error by 2 f32 ulps, far inside that bound; FlashAttention-2 does
// the same).
//
// Fragments follow the PTX ISA's layout for mma.m16n8k16: lane = 4 g + t;
// A holds rows g and g + 8, columns 2t, 2t + 1 and those + 8; B columns
// g, rows 2t, 2t + 1 and those + 8; C rows g and g + 8, columns 2t, 2t + 1.
// The accumulators of one product are then, pair by pair, the A fragments
// of the next (S to P, S^T to P^T, dS^T). Every tile is staged row-major;
// B fragments come from it by ldmatrix, transposing (.trans) where a
// fragment needs two neighbouring rows of one column (V in P V, K in dS K,
// Q and dO in dS^T Q and P^T dO).
//
//===----------------------------------------------------------------------===//

#include "KernelWriter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace kiln::cuda {

/// What every kernel here starts with: the lane's place in its warp's
/// fragments, and 16-bit pairs to and from fragment registers.
static const char *kPrologue = R"cuda(
  const u16 *q = (const u16 *)args[0];
  const u16 *k = (const u16 *)args[1];
  const u16 *v = (const u16 *)args[2];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const float inf = 1.0f / 0.0f;
  $MASK_ARG
  $ADDRESSING
  $OUTSIDE
  $SPANS
  $OFFSET_ARG
  // The dropout factor of probability (i, j) of head bh, 0 or 1 / (1 -
  // ratio), drawn as kiln.dropout draws it (1 without dropout).
  auto factor = [&](idx bh, idx i, idx j) -> float { $FACTOR };
  // The soft cap of a scaled score x, and its slope there (the factor its
  // gradient takes): x and 1 without a cap.
  auto capped = [&](float x) -> float { return $CAPPED; };
  auto slope = [&](float x) -> float { return $SLOPE; };
  const float log2e = 1.4426950408889634f;
  // Score x (scaled) of query i against key j of head bh, capped, after the
  // mask.
  auto masked = [&](idx bh, idx i, idx j, float x) -> float {
    const idx row = bh * $TQ + i;
    (void)row;
    x = capped(x);
    $MASK
    return x;
  };
  // The score of query i against key j of head bh from its product s, in
  // base 2: scaled, capped and masked, times log2 e (one product where
  // there is no cap or mask).
  auto log2Score = [&](idx bh, idx i, idx j, float s) -> float { return $LOG2SCORE; };
  // Whether every query row of [q0, q0 + rows) may attend to every key of
  // [k0, k0 + keys), all of them inside the tensors: such a tile's scores
  // skip the tests of every score (most tiles of a long sequence). Causal
  // masks and windows bound i - j, extreme at two corners of the tile.
  auto attendsWhole = [&](idx q0, int rows, idx k0, int keys) -> bool {
    return q0 + rows <= $TQ && k0 + keys <= $TK &&
           !outside(q0, k0 + keys - 1) && !outside(q0 + rows - 1, k0);
  };
  auto pair = [](const u16 *p) { return (u32)p[0] | ((u32)p[1] << 16); };
  // The B fragments of columns [8 n, 8 n + 16) (two fragments, b[0..1]
  // and b[2..3]) and rows [16 kk, 16 kk + 16) of the transpose of a
  // row-major shared tile (rows D + 8 apart), by one ldmatrix: its four 8x8
  // matrices are tile rows 8 n and 8 n + 8 times columns 16 kk and
  // 16 kk + 8, and lane 8 j + r gives row r of matrix j. Rows are 8 more
  // than a multiple of 64 elements apart: the eight rows of a matrix start
  // in different banks, 16-byte aligned.
  auto columnsB = [&](const u16 *tile, int n, int kk, u32 b[4]) {
    const int matrix = lane / 8;
    ldmatrix_x4(b, tile + (n * 8 + matrix / 2 * 8 + lane % 8) * ($D + 8) + kk * 16 + matrix % 2 * 8);
  };
  // c (16 x 8 `blocks`) = a (16 x D) times the transpose of the first
  // 8 `blocks` rows of a row-major shared tile (rows D + 8 apart): scores
  // against its rows. `blocks` is even.
  auto againstRows = [&](float (*c)[4], int blocks, u32 (*a)[4],
                         const u16 *tile) {
    _Pragma("unroll") for (int n = 0; n < blocks; n += 2) {
      c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.0f;
      c[n + 1][0] = c[n + 1][1] = c[n + 1][2] = c[n + 1][3] = 0.0f;
      _Pragma("unroll") for (int kk = 0; kk < $D / 16; ++kk) {
        u32 b[4];
        columnsB(tile, n, kk, b);
        $MMA(c[n], a[kk], b);
        $MMA(c[n + 1], a[kk], b + 2);
      }
    }
  };
  // The B fragments of rows [16 kk, 16 kk + 16) and columns [8 n, 8 n + 16)
  // (two fragments, b[0..1] and b[2..3]) of a row-major shared tile (rows
  // D + 8 apart), by one transposing ldmatrix: its four 8x8 matrices are
  // rows 16 kk and 16 kk + 8 times columns 8 n and 8 n + 8, and a lane
  // receives two neighbouring rows of one column, as a B fragment holds
  // them.
  auto rowsB = [&](const u16 *tile, int n, int kk, u32 b[4]) {
    const int matrix = lane / 8;
    ldmatrix_x4_trans(b, tile + (kk * 16 + matrix % 2 * 8 + lane % 8) * ($D + 8) + n * 8 + matrix / 2 * 8);
  };
  // acc (16 x D) += a (columns [16 kk, 16 kk + 16)) times that block of
  // rows of a row-major tile.
  auto accumulate = [&](float (*acc)[4], const u32 a[4], const u16 *tile,
                        int kk) {
    _Pragma("unroll") for (int n = 0; n < $D / 8; n += 2) {
      u32 b[4];
      rowsB(tile, n, kk, b);
      $MMA(acc[n], a, b);
      $MMA(acc[n + 1], a, b + 2);
    }
  };
  // The A fragment of columns [16 kk, 16 kk + 16) of accumulators c (C
  // fragments of 8 columns each), rounded to 16 bits.
  auto asA = [&](float (*c)[4], int kk, u32 a[4]) {
    _Pragma("unroll") for (int half = 0; half < 2; ++half) {
      a[2 * half] = $PACK(c[2 * kk + half][0], c[2 * kk + half][1]);
      a[2 * half + 1] = $PACK(c[2 * kk + half][2], c[2 * kk + half][3]);
    }
  };
  // Stores the warp's rows `rows` (those below `limit`) of acc (16 x D) at
  // `base`, rows `step` apart, each element through `store`.
  auto storeRows = [&](auto *base, idx step, const idx *rows, idx limit,
                       float (*acc)[4], auto store) {
    _Pragma("unroll") for (int r = 0; r < 2; ++r)
      _Pragma("unroll") for (int n = 0; rows[r] < limit && n < $D / 8; ++n)
        _Pragma("unroll") for (int c = 0; c < 2; ++c)
          base[rows[r] * step + n * 8 + 2 * t + c] = store(acc[n][2 * r + c]);
  };
  // Starts copying `rows` rows of D elements, `step` apart from `from`
  // (zero from row `valid` on), to a row-major tile (rows D + 8 apart):
  // 16 bytes a copy by cp.async where the rows are 16-byte aligned, which
  // land while the thread goes on (cp_async_wait_all waits for them),
  // element by element where they are not.
  auto stage = [&](const u16 *from, idx step, int rows, idx valid, u16 *tile) {
    const bool wide = ((u64)from & 15) == 0 && step % 8 == 0;
    for (int e = threadIdx.x; e < rows * ($D / 8); e += blockDim.x) {
      const int r = e / ($D / 8), c = e % ($D / 8) * 8;
      u16 *to = tile + r * ($D + 8) + c;
      if (r >= valid)
        _Pragma("unroll") for (int i = 0; i < 8; ++i) to[i] = 0;
      else if (wide)
        cp_async16(to, from + r * step + c);
      else
        _Pragma("unroll") for (int i = 0; i < 8; ++i) to[i] = from[r * step + c + i];
    }
  };
  // Stages the key and value tiles at k0 of key/value head kv.
  [[maybe_unused]] auto stageKeysAndValues = [&](idx kv, idx k0, u16 *keys, u16 *values) {
    stage(k + kAt(kv, k0), kStep, $BK, $TK - k0, keys);
    stage(v + vAt(kv, k0), vStep, $BK, $TK - k0, values);
  };
  // Runs body(tile, buffer) for tiles [0, count), on operands that
  // stageTile(tile, buffer) copies to shared buffer `buffer` (0 or 1): the
  // next tile's copies run while the block computes on this one. The barrier
  // after a tile's copies landed also finds every thread done with the
  // other buffer, which the next tile's copies then overwrite; the one
  // before the first copies, done with the buffers of the block's previous
  // work.
  auto pipeline = [&](idx count, auto stageTile, auto body) {
    __syncthreads();
    if (count > 0)
      stageTile(0, 0);
    for (idx tile = 0; tile < count; ++tile) {
      const int buffer = tile % 2;
      cp_async_wait_all();
      __syncthreads();
      if (tile + 1 < count)
        stageTile(tile + 1, 1 - buffer);
      body(tile, buffer);
    }
  };
  // Runs body(bh, q0, kv, row0) for each tile of BQ query rows the block
  // owns: of head bh (which reads key/value head kv), from row q0; the
  // lane's rows are row0 and row0 + 8 (g and g + 8 of the warp's 16). (An
  // array of them, passed by address, stayed in local memory under NVRTC.)
  [[maybe_unused]] auto forQueryTiles = [&](auto body) {
    const idx tiles = ($TQ + $BQ - 1) / $BQ;
    for (idx work = blockIdx.x; work < $HEADS * tiles; work += gridDim.x) {
      const idx bh = work / tiles, q0 = work % tiles * $BQ;
      body(bh, q0, bh / $H * $HKV + bh % $H / $GROUP, q0 + warp * 16 + g);
    }
  };
  // Runs body(k0, keys, values) for the key tiles that some row of the
  // query tile at q0 may attend to (causal, window), of key/value head kv:
  // the tile at k0, its keys and values row-major in shared memory, staged
  // by the pipeline.
  [[maybe_unused]] auto forKeyTiles = [&](idx q0, idx kv, auto body) {
    alignas(16) __shared__ u16 Ks[2][$BK * ($D + 8)], Vs[2][$BK * ($D + 8)];
    idx firstKey, keys;
    keySpan(q0, firstKey, keys);
    const idx start = firstKey / $BK * $BK;
    auto stageTile = [&](idx tile, int buffer) {
      stageKeysAndValues(kv, start + tile * $BK, Ks[buffer], Vs[buffer]);
    };
    pipeline((keys - start + $BK - 1) / $BK, stageTile, [&](idx tile, int buffer) {
      body(start + tile * $BK, Ks[buffer], Vs[buffer]);
    });
  };
  auto zero = [](float (*acc)[4]) {
    _Pragma("unroll") for (int n = 0; n < $D / 8; ++n)
      acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  };
  // The A fragments of the warp's rows `rows` (g, g + 8) of a matrix at
  // `base` with rows `step` apart, zero past row `limit`.
  auto rowFragments = [&](u32 (*a)[4], const u16 *base, idx step,
                          const idx *rows, idx limit) {
    _Pragma("unroll") for (int kk = 0; kk < $D / 16; ++kk)
      _Pragma("unroll") for (int r = 0; r < 2; ++r)
        _Pragma("unroll") for (int half = 0; half < 2; ++half)
          a[kk][r + 2 * half] =
              rows[r] < limit ? pair(base + rows[r] * step + kk * 16 + 8 * half + 2 * t) : 0u;
  };
)cuda";

static const char *kTensorCoreForward = R"cuda(
  $OT *out = ($OT *)args[$A];
  $LT *lse = ($LT *)args[$A + 1];
  forQueryTiles([&](idx bh, idx q0, idx kv, idx row0) {
    // The warp's 16 query rows as A fragments; per row (g, g + 8) the
    // running maximum (in base 2) and sum, and the output.
    const idx row[2] = {row0, row0 + 8};
    u32 qa[$D / 16][4];
    rowFragments(qa, q + qAt(bh, 0), qStep, row, $TQ);
    float maximum[2] = {-inf, -inf}, sum[2] = {0.0f, 0.0f};
    float o[$D / 8][4];
    zero(o);
    forKeyTiles(q0, kv, [&](idx k0, const u16 *keys, const u16 *values) {
      // s = Q K^T * scale, masked, and each row's maximum over the tile.
      float s[$BK / 8][4];
      float tileMax[2] = {-inf, -inf};
      againstRows(s, $BK / 8, qa, keys);
      // Called with a constant, so that a whole tile's copy has no tests.
      auto scores = [&](bool whole) {
        _Pragma("unroll") for (int n = 0; n < $BK / 8; ++n) {
          _Pragma("unroll") for (int e = 0; e < 4; ++e) {
            const idx j = k0 + n * 8 + 2 * t + (e & 1);
            const idx i = row[e / 2];
            const float x = !whole && (j >= $TK || i >= $TQ || outside(i, j))
                                ? -inf : log2Score(bh, i, j, s[n][e]);
            s[n][e] = x;
            tileMax[e / 2] = fmaxf(tileMax[e / 2], x);
          }
        }
      };
      if (attendsWhole(q0, $BQ, k0, $BK))
        scores(true);
      else
        scores(false);
      // The four lanes of a group hold a row's columns between them.
      float scale[2], tileSum[2] = {0.0f, 0.0f};
      _Pragma("unroll") for (int r = 0; r < 2; ++r) {
        tileMax[r] = fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffu, tileMax[r], 1));
        tileMax[r] = fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffu, tileMax[r], 2));
        const float next = fmaxf(maximum[r], tileMax[r]);
        scale[r] = next == -inf ? 1.0f : exp2f(maximum[r] - next);
        maximum[r] = next;
      }
      // A row with no score yet (all -inf) subtracts 0: exp2(-inf) = 0.
      const float base[2] = {maximum[0] == -inf ? 0.0f : maximum[0],
                             maximum[1] == -inf ? 0.0f : maximum[1]};
      _Pragma("unroll") for (int n = 0; n < $BK / 8; ++n)
        _Pragma("unroll") for (int e = 0; e < 4; ++e) {
          s[n][e] = exp2f(s[n][e] - base[e / 2]);
          tileSum[e / 2] += s[n][e];
        }
      _Pragma("unroll") for (int r = 0; r < 2; ++r) {
        tileSum[r] += __shfl_xor_sync(0xffffffffu, tileSum[r], 1);
        tileSum[r] += __shfl_xor_sync(0xffffffffu, tileSum[r], 2);
        sum[r] = sum[r] * scale[r] + tileSum[r];
      }
      _Pragma("unroll") for (int n = 0; n < $D / 8; ++n) {
        o[n][0] *= scale[0];
        o[n][1] *= scale[0];
        o[n][2] *= scale[1];
        o[n][3] *= scale[1];
      }
      // Dropout weighs V by the dropped probabilities; the sums above are
      // of the kept ones.
      _Pragma("unroll") for (int n = 0; $DROPOUT && n < $BK / 8; ++n)
        _Pragma("unroll") for (int e = 0; e < 4; ++e)
          s[n][e] *= factor(bh, row[e / 2], k0 + n * 8 + 2 * t + (e & 1));
      // o += P V, 16 keys at a time.
      _Pragma("unroll") for (int kk = 0; kk < $BK / 16; ++kk) {
        u32 pa[4];
        asA(s, kk, pa);
        accumulate(o, pa, values, kk);
      }
    });
    _Pragma("unroll") for (int r = 0; r < 2; ++r) {
      _Pragma("unroll") for (int n = 0; n < $D / 8; ++n)
        _Pragma("unroll") for (int c = 0; c < 2; ++c)
          o[n][2 * r + c] = sum[r] == 0.0f ? 0.0f : o[n][2 * r + c] / sum[r];
      if (t == 0 && row[r] < $TQ)
        lse[bh * $TQ + row[r]] = ($LT)(sum[r] == 0.0f ? -inf : maximum[r] / log2e + logf(sum[r]));
    }
    storeRows(out + outAt(bh, 0), outStep, row, $TQ, o, $STOREO);
  });
)cuda";

/// The gradient's operands after q, k, v: the output, its log-sum-exp and
/// its gradient; after the results, the scratch of each query row's
/// delta = dO . O (batch x heads x TQ floats). And the score gradients of
/// the warp's query rows against a key tile, which the query and mask
/// kernels share.
static const char *kGradientPrologue = R"cuda(
  const $OT *o = (const $OT *)args[$A];
  const float *lse = (const float *)args[$A + 1];
  const u16 *dout = (const u16 *)args[$A + 2];
  float *deltaScratch = (float *)args[$SCRATCH_ARG];
  // ds = P (dP - delta), the gradient of the masked scores (the mask's),
  // of query rows `row` (of the tile at q0) of head bh (their fragments of Q and dO,
  // log-sum-exps in base 2 and deltas) against the CHUNK keys at k0 (their keys and
  // values row-major in shared memory): S and dP again on tensor cores,
  // P = exp(S - L), 0 where a key takes no part; with `slopes`, also the
  // soft cap's slope at each score. A streamed tile is taken in chunks so
  // that these products' accumulators, live at once, hold 32 columns at
  // most: the gradient kernels' registers bound their blocks per SM.
  auto scoreGradients = [&](float (*ds)[4], idx bh, idx q0, const idx *row,
                            u32 (*qa)[4], u32 (*da)[4], const float *logsumexp,
                            const float *deltas, idx k0, const u16 *keys,
                            const u16 *values, float (*slopes)[4]) {
    float dp[$CHUNK / 8][4];
    againstRows(ds, $CHUNK / 8, qa, keys);
    againstRows(dp, $CHUNK / 8, da, values);
    auto gradients = [&](bool whole) {
      _Pragma("unroll") for (int n = 0; n < $CHUNK / 8; ++n)
        _Pragma("unroll") for (int e = 0; e < 4; ++e) {
          const idx j = k0 + n * 8 + 2 * t + (e & 1);
          const int r = e / 2;
          const bool live = logsumexp[r] != -inf && (whole || (j < $TK && !outside(row[r], j)));
          const float s = ds[n][e];
          const float p = live ? exp2f(log2Score(bh, row[r], j, s) - logsumexp[r]) : 0.0f;
          ds[n][e] = p * (dp[n][e] * factor(bh, row[r], j) - deltas[r]);
          if (slopes)
            slopes[n][e] = slope(s * (float)$SCALE);
        }
    };
    if (attendsWhole(q0, $BQ, k0, $CHUNK))
      gradients(true);
    else
      gradients(false);
  };
)cuda";

/// dQ = dS K for a tile of 64 query rows (16 per warp), streaming key
/// tiles: S = Q K^T and dP = dO V^T again, P = exp(S - L), dS = P (dP -
/// delta) scale, each product on tensor cores.
static const char *kTensorCoreQueryGradient = R"cuda(
  $DQT *dq = ($DQT *)args[$A + 3];
  forQueryTiles([&](idx bh, idx q0, idx kv, idx row0) {
    const idx row[2] = {row0, row0 + 8};
    u32 qa[$D / 16][4], da[$D / 16][4];
    rowFragments(qa, q + qAt(bh, 0), qStep, row, $TQ);
    rowFragments(da, dout + doutAt(bh, 0), doutStep, row, $TQ);
    // The four lanes of a group sum a quarter of the row's delta each.
    float logsumexp[2], deltas[2], acc[$D / 8][4];
    _Pragma("unroll") for (int r = 0; r < 2; ++r) {
      const bool inside = row[r] < $TQ;
      const u16 *dRow = dout + doutAt(bh, row[r]);
      const $OT *oRow = o + oAt(bh, row[r]);
      float d = 0.0f;
      _Pragma("unroll") for (int c = t * ($D / 4); inside && c < (t + 1) * ($D / 4); ++c)
        d += (float)$FROM16(dRow[c]) * (float)$LOADO(oRow[c]);
      d += __shfl_xor_sync(0xffffffffu, d, 1);
      d += __shfl_xor_sync(0xffffffffu, d, 2);
      deltas[r] = d;
      logsumexp[r] = inside ? lse[bh * $TQ + row[r]] * log2e : -inf;
      if (inside && t == 0)
        deltaScratch[bh * $TQ + row[r]] = d;
    }
    zero(acc);
    forKeyTiles(q0, kv, [&](idx k0, const u16 *keys, const u16 *values) {
      _Pragma("unroll 1") for (int c0 = 0; c0 < $BK; c0 += $CHUNK) {
        const u16 *keyChunk = keys + c0 * ($D + 8);
        // dS = P (dP - delta) through the cap, scaled.
        float ds[$CHUNK / 8][4], slopes[$CHUNK / 8][4];
        scoreGradients(ds, bh, q0, row, qa, da, logsumexp, deltas, k0 + c0, keyChunk,
                       values + c0 * ($D + 8), slopes);
        _Pragma("unroll") for (int n = 0; n < $CHUNK / 8; ++n)
          _Pragma("unroll") for (int e = 0; e < 4; ++e)
            ds[n][e] *= slopes[n][e] * (float)$SCALE;
        _Pragma("unroll") for (int kk = 0; kk < $CHUNK / 16; ++kk) {
          u32 sa[4];
          asA(ds, kk, sa);
          accumulate(acc, sa, keyChunk, kk);
        }
      }
    });
    storeRows(dq + dqAt(bh, 0), dqStep, row, $TQ, acc, $STOREDQ);
  });
)cuda";

/// dK = dS^T Q and dV = P^T dO for a tile of 64 key rows (16 per warp) of
/// one key/value head, streaming the query tiles of every head that reads
/// it: S^T = K Q^T and dP^T = V dO^T, whose accumulators are, pair by
/// pair, the A fragments of P^T and dS^T.
static const char *kTensorCoreKeyValueGradient = R"cuda(
  $DKT *dk = ($DKT *)args[$A + 4];
  $DVT *dv = ($DVT *)args[$A + 5];
  // Queries and output gradients, row-major; each query row's log-sum-exp
  // (in base 2) and delta (which the query kernel, launched first,
  // stored); two of each (pipeline).
  alignas(16) __shared__ u16 Qs[2][$BQ * ($D + 8)], Gs[2][$BQ * ($D + 8)];
  __shared__ float Ls[2][$BQ], Deltas[2][$BQ];
  const idx tiles = ($TK + $BK - 1) / $BK;
  for (idx work = blockIdx.x; work < $KVHEADS * tiles; work += gridDim.x) {
    const idx kv = work / tiles, k0 = work % tiles * $BK, b = kv / $HKV, group = kv % $HKV;
    const idx key[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
    u32 ka[$D / 16][4], va[$D / 16][4];
    rowFragments(ka, k + kAt(kv, 0), kStep, key, $TK);
    rowFragments(va, v + vAt(kv, 0), vStep, key, $TK);
    float dkAcc[$D / 8][4], dvAcc[$D / 8][4];
    zero(dkAcc);
    zero(dvAcc);
    // Only the query tiles some row of which may attend to the key tile,
    // of each head that reads it: tile t is query tile t % queryTiles of
    // the group's head t / queryTiles.
    idx firstQuery, queries;
    querySpan(k0, firstQuery, queries);
    const idx start = firstQuery / $BQ * $BQ, queryTiles = (queries - start + $BQ - 1) / $BQ;
    auto head = [&](idx tile) -> idx { return b * $H + group * $GROUP + tile / queryTiles; };
    auto queryStart = [&](idx tile) -> idx { return start + tile % queryTiles * $BQ; };
    auto stageTile = [&](idx tile, int buffer) {
      const idx bh = head(tile), q0 = queryStart(tile);
      stage(q + qAt(bh, q0), qStep, $BQ, $TQ - q0, Qs[buffer]);
      stage(dout + doutAt(bh, q0), doutStep, $BQ, $TQ - q0, Gs[buffer]);
      for (idx r = threadIdx.x; r < $BQ; r += blockDim.x) {
        const bool inside = q0 + r < $TQ;
        Ls[buffer][r] = inside ? lse[bh * $TQ + q0 + r] * log2e : -inf;
        Deltas[buffer][r] = inside ? deltaScratch[bh * $TQ + q0 + r] : 0.0f;
      }
    };
    pipeline($GROUP * queryTiles, stageTile, [&](idx tile, int buffer) {
      const idx bh = head(tile), q0 = queryStart(tile);
      // In chunks of queries, as scoreGradients takes keys.
      _Pragma("unroll 1") for (int c0 = 0; c0 < $BQ; c0 += $CHUNK) {
        const u16 *queryChunk = Qs[buffer] + c0 * ($D + 8), *gradientChunk = Gs[buffer] + c0 * ($D + 8);
        const float *chunkLse = Ls[buffer] + c0, *chunkDeltas = Deltas[buffer] + c0;
        // P^T, and dS^T = P^T (dP^T - delta) through the cap, scaled, in
        // place of dP^T.
        float pt[$CHUNK / 8][4], dst[$CHUNK / 8][4];
        againstRows(pt, $CHUNK / 8, ka, queryChunk);
        againstRows(dst, $CHUNK / 8, va, gradientChunk);
        auto gradients = [&](bool whole) {
          _Pragma("unroll") for (int n = 0; n < $CHUNK / 8; ++n)
            _Pragma("unroll") for (int e = 0; e < 4; ++e) {
              const int c = n * 8 + 2 * t + (e & 1);
              const idx i = q0 + c0 + c, j = key[e / 2];
              const bool live = chunkLse[c] != -inf && (whole || (i < $TQ && j < $TK && !outside(i, j)));
              const float s = pt[n][e];
              pt[n][e] = live ? exp2f(log2Score(bh, i, j, s) - chunkLse[c]) : 0.0f;
              const float f = factor(bh, i, j);
              dst[n][e] = pt[n][e] * (dst[n][e] * f - chunkDeltas[c]) * slope(s * (float)$SCALE) *
                          (float)$SCALE;
              pt[n][e] *= f; // dV = (dropped P)^T dO
            }
        };
        if (attendsWhole(q0 + c0, $CHUNK, k0, $BK))
          gradients(true);
        else
          gradients(false);
        _Pragma("unroll") for (int kk = 0; kk < $CHUNK / 16; ++kk) {
          u32 pa[4], sa[4];
          asA(pt, kk, pa);
          asA(dst, kk, sa);
          accumulate(dvAcc, pa, gradientChunk, kk);
          accumulate(dkAcc, sa, queryChunk, kk);
        }
      }
    });
    storeRows(dk + dkAt(kv, 0), dkStep, key, $TK, dkAcc, $STOREDK);
    storeRows(dv + dvAt(kv, 0), dvStep, key, $TK, dvAcc, $STOREDV);
  }
)cuda";

/// A trained mask's gradient for a tile of 64 query rows (16 per warp) and
/// the streamed number of keys of one [batch or 1, heads or 1] slice of
/// the mask: dS before the scale, P (dP - delta), summed over the batch
/// entries and heads the slice broadcasts to, in order. S and dP run on
/// tensor cores as in the query kernel, whose deltas (it runs first) it
/// reads; each element of the mask's gradient has one writer.
static const char *kTensorCoreMaskGradient = R"cuda(
  $MT *dmask = ($MT *)args[$A + 6];
  alignas(16) __shared__ u16 Ks[2][$BK * ($D + 8)], Vs[2][$BK * ($D + 8)];
  const idx rowTiles = ($TQ + $BQ - 1) / $BQ, keyTiles = ($TK + $BK - 1) / $BK;
  for (idx work = blockIdx.x; work < $SLICES * rowTiles * keyTiles; work += gridDim.x) {
    const idx slice = work / (rowTiles * keyTiles), q0 = work / keyTiles % rowTiles * $BQ,
              k0 = work % keyTiles * $BK;
    const idx row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    const idx firstB = $MB == 1 ? 0 : slice / $MH, lastBatch = $MB == 1 ? $B : firstB + 1;
    const idx firstH = $MH == 1 ? 0 : slice % $MH, heads = $MH == 1 ? $H : 1;
    float acc[$BK / 8][4];
    _Pragma("unroll") for (int n = 0; n < $BK / 8; ++n)
      acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    // A key tile no query row of the tile may attend to (causal, window)
    // has a zero gradient, computed from nothing. Tile t is the key tile of
    // batch entry firstB + t / heads and head firstH + t % heads.
    idx firstKey, keys;
    keySpan(q0, firstKey, keys);
    const idx lastB = k0 + $BK > firstKey && k0 < keys ? lastBatch : firstB;
    auto head = [&](idx tile) -> idx { return (firstB + tile / heads) * $H + firstH + tile % heads; };
    auto stageTile = [&](idx tile, int buffer) {
      const idx bh = head(tile);
      stageKeysAndValues(bh / $H * $HKV + bh % $H / $GROUP, k0, Ks[buffer], Vs[buffer]);
    };
    pipeline((lastB - firstB) * heads, stageTile, [&](idx tile, int buffer) {
      const idx bh = head(tile);
      u32 qa[$D / 16][4], da[$D / 16][4];
      rowFragments(qa, q + qAt(bh, 0), qStep, row, $TQ);
      rowFragments(da, dout + doutAt(bh, 0), doutStep, row, $TQ);
      float logsumexp[2], deltas[2];
      _Pragma("unroll") for (int r = 0; r < 2; ++r) {
        const bool inside = row[r] < $TQ;
        logsumexp[r] = inside ? lse[bh * $TQ + row[r]] * log2e : -inf;
        deltas[r] = inside ? deltaScratch[bh * $TQ + row[r]] : 0.0f;
      }
      _Pragma("unroll") for (int c0 = 0; c0 < $BK; c0 += $CHUNK) {
        float ds[$CHUNK / 8][4];
        scoreGradients(ds, bh, q0, row, qa, da, logsumexp, deltas, k0 + c0,
                       Ks[buffer] + c0 * ($D + 8), Vs[buffer] + c0 * ($D + 8), nullptr);
        _Pragma("unroll") for (int n = 0; n < $CHUNK / 8; ++n)
          _Pragma("unroll") for (int e = 0; e < 4; ++e)
            acc[c0 / 8 + n][e] += ds[n][e];
      }
    });
    _Pragma("unroll") for (int n = 0; n < $BK / 8; ++n)
      _Pragma("unroll") for (int e = 0; e < 4; ++e) {
        const idx j = k0 + n * 8 + 2 * t + (e & 1), i = row[e / 2];
        if (i < $TQ && j < $TK)
          dmask[(slice * $TQ + i) * $TK + j] = $STOREM(acc[n][e]);
      }
  }
)cuda";

namespace {

using Values = std::vector<std::pair<std::string, std::string>>;

/// Device code for `keySpan(q0, first, last)`, the keys [first, last) that
/// some query row of the tile at q0 may attend to, and `querySpan(k0,
/// first, last)`, the query rows that may attend to some key of the tile at
/// k0: what causal masking and the window leave of every tile.
template <typename OpTy> std::string spans(OpTy op) {
  int64_t left = -1, right = op.getCausal() ? 0 : -1;
  if (std::optional<ArrayRef<int64_t>> window = op.getWindow()) {
    left = (*window)[0];
    if (!op.getCausal())
      right = (*window)[1];
  }
  auto atLeastZero = [](const std::string &x) {
    return "(" + x + " > 0 ? " + x + " : 0)";
  };
  auto atMost = [](const std::string &x, const char *bound) {
    return "(" + x + " < " + bound + " ? " + x + " : " + bound + ")";
  };
  std::string l = indexConstant(left), r = indexConstant(right);
  std::string keyFirst = left < 0 ? "0" : atLeastZero("q0 - " + l);
  std::string keyLast = right < 0 ? "$TK" : atMost("q0 + $BQ + " + r, "$TK");
  std::string queryFirst = right < 0 ? "0" : atLeastZero("k0 - " + r);
  std::string queryLast = left < 0 ? "$TQ" : atMost("k0 + $BK + " + l, "$TQ");
  return "  auto keySpan = [&](idx q0, idx &first, idx &last) { first = " +
         keyFirst + "; last = " + keyLast +
         "; };\n  auto querySpan = [&](idx k0, idx &first, idx &last) { "
         "first = " +
         queryFirst + "; last = " + queryLast + "; };\n";
}

/// Rows of the streamed side's tiles, which keep shared memory within
/// 48 KiB (a block's static limit) for head dimension `d`, rows padded
/// by 8 (16 rows for Gemma's 256).
int64_t streamedRows(int64_t d) { return d <= 64 ? 64 : d <= 128 ? 32 : 16; }

} // namespace

std::optional<std::string> tensorCoreAttentionUnsupported(Operation *op) {
  auto attention = dyn_cast<AttentionOp>(op);
  auto gradient = dyn_cast<AttentionGradOp>(op);
  Value query = attention ? attention.getQuery() : gradient.getQuery();
  Value key = attention ? attention.getKey() : gradient.getKey();
  Value value = attention ? attention.getValue() : gradient.getValue();
  Value logsumexp =
      attention ? attention.getLogsumexp() : gradient.getLogsumexp();
  Type qt = elementTypeOf(query);
  int64_t d = shapeOf(query)[3];
  if (!qt.isBF16() && !qt.isF16())
    return std::string("operands that are not bf16 or fp16");
  if (elementTypeOf(key) != qt || elementTypeOf(value) != qt)
    return std::string("query, key and value of different types");
  if (shapeOf(value)[3] != d)
    return std::string("a value head dimension other than the query's");
  if (d % 16 != 0 || d > 256)
    return "head dimension " + std::to_string(d) +
           " (tensor cores take multiples of 16 up to 256)";
  if (!elementTypeOf(logsumexp).isF32())
    return std::string("a log-sum-exp that is not f32");
  if (gradient && elementTypeOf(gradient.getOutputGrad()) != qt)
    return std::string("an output gradient of another type than the operands");
  return std::nullopt;
}

namespace {

/// The substitutions both passes share, if `op` is one the tensor-core
/// kernels compute: 16-bit operands of one type, equal head dimensions of
/// a multiple of 16 up to 256, an f32 log-sum-exp.
template <typename OpTy>
std::optional<Values> tensorCoreValues(OpTy op, StridesOf stridesOf) {
  if (tensorCoreAttentionUnsupported(op))
    return std::nullopt;
  Type qt = elementTypeOf(op.getQuery());
  ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  int64_t d = qs[3];
  Type ot = elementTypeOf(op.getOutput());
  // An additive or boolean mask, broadcast to batch x heads x TQ x TK, is
  // the fourth operand.
  std::string maskArg, mask;
  if (Value m = op.getMask()) {
    Type mt = elementTypeOf(m);
    maskArg = "const " + storageType(mt) + " *mask = (const " +
              storageType(mt) + " *)args[3];";
    std::string element =
        loaded(mt, "mask[" +
                       broadcastIndex(m, {qs[0], qs[1], qs[2], ks[2]},
                                      "((row * $TK) + j)") +
                       "]");
    mask = isa<FloatType>(mt) ? "x = (float)(x + " + element + ");"
                              : "if (!" + element + ") return -inf;";
  }
  // Dropout's offset (the step's draw) follows the mask.
  double ratio = op.getDropoutRatio().convertToDouble();
  std::string offsetArg,
      key = "random_key(" + std::to_string(op.getSeed()) + "ll)";
  if (op.getOffset()) {
    offsetArg = "const i64 *offset = (const i64 *)args[" +
                std::to_string(3 + bool(op.getMask())) + "];";
    key = "random_key(" + std::to_string(op.getSeed()) + "ll, *offset)";
  }
  std::string factor = ratio > 0.0
                           ? "return dropout_keep(" + key +
                                 ", (bh * $TQ + i) * $TK + j, " +
                                 literal(ratio) + ") ? (float)" +
                                 literal(1.0 / (1.0 - ratio)) + " : 0.0f;"
                           : "return 1.0f;";
  std::string capped = "x", slope = "1.0f";
  if (std::optional<APFloat> softcap = op.getSoftcap()) {
    std::string c = "(float)" + literal(softcap->convertToDouble());
    capped = c + " * tanhf(x / " + c + ")";
    slope = "1.0f - tanhf(x / " + c + ") * tanhf(x / " + c + ")";
  }
  // Tiles of 64 rows (four warps of 16) on the side a block owns; the
  // streamed side's tiles keep shared memory within 48 KiB.
  return Values{
      {"PROLOGUE", kPrologue},
      {"ADDRESSING", attentionAddressing(op, stridesOf)},
      {"MASK_ARG", maskArg},
      {"MASK", mask},
      {"A", std::to_string(3 + bool(op.getMask()) + bool(op.getOffset()))},
      {"OFFSET_ARG", offsetArg},
      {"FACTOR", factor},
      {"DROPOUT", ratio > 0.0 ? "true" : "false"},
      {"OT", storageType(ot)},
      {"LOADO",
       "[](" + storageType(ot) + " x) { return " + loaded(ot, "x") + "; }"},
      {"STOREO", "[](double x) { return " + stored(ot, "x") + "; }"},
      {"PACK", qt.isBF16() ? "pack_bf16" : "pack_f16"},
      {"FROM16", qt.isBF16() ? "bf16_to_f32" : "f16_to_f32"},
      {"MMA", qt.isBF16() ? "mma_bf16" : "mma_f16"},
      {"SCALE", literal(op.getScale().convertToDouble())},
      {"OUTSIDE", outsideKeys(op)},
      {"SPANS", spans(op)},
      {"CAPPED", capped},
      {"SLOPE", slope},
      {"LOG2SCORE",
       op.getMask() || op.getSoftcap()
           ? "masked(bh, i, j, s * (float)$SCALE) * log2e"
           : "s * (float)" + literal(op.getScale().convertToDouble() *
                                     llvm::numbers::log2e)},
      {"TQ", indexConstant(qs[2])},
      {"TK", indexConstant(ks[2])},
      {"H", indexConstant(qs[1])},
      {"HKV", indexConstant(ks[1])},
      {"GROUP", indexConstant(qs[1] / ks[1])},
      {"HEADS", indexConstant(qs[0] * qs[1])},
      {"KVHEADS", indexConstant(ks[0] * ks[1])},
      {"D", indexConstant(d)},
      {"STREAMED", indexConstant(streamedRows(d))},
      {"CHUNK", indexConstant(std::min<int64_t>(32, streamedRows(d)))}};
}

std::pair<std::string, std::string> storer(const char *name, Value value) {
  return {name,
          "[](double x) { return " + stored(elementTypeOf(value), "x") + "; }"};
}

/// The most elements an index of `op`'s kernels ranges over: each
/// tensor's view in its storage, and the scores where a mask or dropout
/// addresses them (`(bh * TQ + i) * TK + j`).
template <typename OpTy> int64_t indexBound(OpTy op, StridesOf stridesOf) {
  int64_t bound = 0;
  SmallVector<Value> values(op->getOperands());
  llvm::append_range(values, op->getResults());
  for (Value value : values) {
    ArrayRef<int64_t> shape = shapeOf(value);
    SmallVector<int64_t> strides = stridesOf(value);
    int64_t extent = 1;
    for (auto [size, stride] : llvm::zip_equal(shape, strides))
      extent += (size - 1) * stride;
    bound = std::max({bound, extent, countOf(value)});
  }
  if (op.getMask() || !op.getDropoutRatio().isZero()) {
    ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
    bound = std::max(bound, qs[0] * qs[1] * qs[2] * ks[2]);
  }
  return bound;
}

/// A block of four warps for each tile of 64 of `rows` in `heads`.
void launchTiles(KernelPlan &plan, int64_t heads, int64_t rows) {
  plan.block = 128;
  plan.grid = std::clamp<int64_t>(heads * ((rows + 63) / 64), 1, 4096);
}

} // namespace

std::optional<KernelPlan> tensorCoreAttentionForward(AttentionOp op,
                                                     StridesOf stridesOf) {
  std::optional<Values> values = tensorCoreValues(op, stridesOf);
  if (!values)
    return std::nullopt;
  values->push_back({"LT", storageType(elementTypeOf(op.getLogsumexp()))});
  values->push_back({"BQ", "64"});
  values->push_back({"BK", "$STREAMED"});
  KernelPlan plan;
  plan.operands = {op.getQuery(), op.getKey(), op.getValue()};
  if (Value mask = op.getMask())
    plan.operands.push_back(mask);
  if (Value offset = op.getOffset())
    plan.operands.push_back(offset);
  plan.results = {op.getOutput(), op.getLogsumexp()};
  plan.body =
      substitute(std::string("$PROLOGUE") + kTensorCoreForward, *values);
  ArrayRef<int64_t> qs = shapeOf(op.getQuery());
  launchTiles(plan, qs[0] * qs[1], qs[2]);
  plan.indexBound = indexBound(op, stridesOf);
  plan.flops = 2 * attentionProductFlops(op);
  return plan;
}

/// The kernel of `op`'s mask gradient on tensor cores, sharing the query
/// kernel `query`'s arguments and scratch, if the mask has every query and
/// key and broadcasts over the batch or the heads at most.
static std::optional<KernelPlan> tensorCoreMaskGradient(AttentionGradOp op,
                                                        const KernelPlan &query,
                                                        Values values) {
  ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  Value maskGrad = op.getMaskGrad();
  SmallVector<int64_t> shape(4 - shapeOf(maskGrad).size(), 1);
  llvm::append_range(shape, shapeOf(maskGrad));
  if (shape[2] != qs[2] || shape[3] != ks[2])
    return std::nullopt;
  values.push_back({"MT", storageType(elementTypeOf(maskGrad))});
  values.push_back(storer("STOREM", maskGrad));
  values.push_back({"MB", indexConstant(shape[0])});
  values.push_back({"MH", indexConstant(shape[1])});
  values.push_back({"SLICES", indexConstant(shape[0] * shape[1])});
  values.push_back({"B", indexConstant(qs[0])});
  values.push_back({"BQ", "64"});
  values.push_back({"BK", "$STREAMED"});
  KernelPlan plan = query;
  plan.body = substitute(std::string("$PROLOGUE") + kGradientPrologue +
                             kTensorCoreMaskGradient,
                         values);
  plan.untouched = {op.getOutput(), op.getQueryGrad(), op.getKeyGrad(),
                    op.getValueGrad()};
  int64_t streamed = streamedRows(qs[3]);
  launchTiles(plan, shape[0] * shape[1] * ((ks[2] + streamed - 1) / streamed),
              qs[2]);
  // S and dP again, for every head the mask's slices broadcast to.
  plan.flops = 2 * attentionProductFlops(op);
  return plan;
}

std::optional<SmallVector<KernelPlan>>
tensorCoreAttentionGradient(AttentionGradOp op, StridesOf stridesOf) {
  std::optional<Values> values = tensorCoreValues(op, stridesOf);
  if (!values)
    return std::nullopt;
  values->push_back({"DQT", storageType(elementTypeOf(op.getQueryGrad()))});
  values->push_back({"DKT", storageType(elementTypeOf(op.getKeyGrad()))});
  values->push_back({"DVT", storageType(elementTypeOf(op.getValueGrad()))});
  values->push_back(storer("STOREDQ", op.getQueryGrad()));
  values->push_back(storer("STOREDK", op.getKeyGrad()));
  values->push_back(storer("STOREDV", op.getValueGrad()));
  KernelPlan query;
  query.operands = {op.getQuery(), op.getKey(), op.getValue()};
  if (Value mask = op.getMask())
    query.operands.push_back(mask);
  if (Value offset = op.getOffset())
    query.operands.push_back(offset);
  query.operands.append(
      {op.getOutput(), op.getLogsumexp(), op.getOutputGrad()});
  query.results = {op.getQueryGrad(), op.getKeyGrad(), op.getValueGrad()};
  if (Value maskGrad = op.getMaskGrad()) {
    query.results.push_back(maskGrad);
    query.untouched.push_back(maskGrad);
  }
  ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  // The rows' deltas go to scratch, whose pointer follows the results.
  query.partialBytes = qs[0] * qs[1] * qs[2] * 4;
  query.indexBound = indexBound(op, stridesOf);
  values->push_back({"SCRATCH_ARG", std::to_string(query.operands.size() +
                                                   query.results.size())});
  KernelPlan keyValue = query;
  std::string prologue = std::string("$PROLOGUE") + kGradientPrologue;
  Values queryValues = *values, keyValues = *values;
  queryValues.push_back({"BQ", "64"});
  queryValues.push_back({"BK", "$STREAMED"});
  keyValues.push_back({"BQ", "$STREAMED"});
  keyValues.push_back({"BK", "64"});
  query.body = substitute(prologue + kTensorCoreQueryGradient, queryValues);
  keyValue.body = substitute(prologue + kTensorCoreKeyValueGradient, keyValues);
  // The query kernel stores dq and each row's delta (dO . O), which the
  // key/value kernel reads instead of the output.
  query.untouched.append({op.getKeyGrad(), op.getValueGrad()});
  keyValue.untouched.append({op.getOutput(), op.getQueryGrad()});
  launchTiles(query, qs[0] * qs[1], qs[2]);
  launchTiles(keyValue, ks[0] * ks[1], ks[2]);
  query.flops = 3 * attentionProductFlops(op);
  keyValue.flops = 4 * attentionProductFlops(op);
  SmallVector<KernelPlan> plans = {query, keyValue};
  if (op.getMaskGrad())
    plans.push_back(tensorCoreMaskGradient(op, query, *values)
                        .value_or(attentionMaskGradient(op, stridesOf)));
  return plans;
}

} // namespace kiln::cuda
