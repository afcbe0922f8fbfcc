//===- InitialValuesTest.cpp - first values of parameters without any -----===//
//
// The CPU trainer and the GPU runtime start a graph-only model from these
// values; the runtime draws them in chunks on all cores and lays them out
// padded, so neither the chunks nor the padding may change a value.
//
//===----------------------------------------------------------------------===//

#include "kiln/Support/InitialValues.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

using namespace kiln;

namespace {

std::vector<double> drawAll(const ParameterStart &start, int64_t count) {
  std::vector<double> values(count, NAN);
  start.fill(0, count, [&](int64_t i, double v) { values[i] = v; });
  return values;
}

TEST(InitialValuesTest, MatricesAreNormalWithTheStatedDeviation) {
  const int64_t count = 200000;
  std::vector<double> values =
      drawAll(ParameterStart(7, "h.0.attn.c_attn.weight", 2), count);
  double sum = 0, squares = 0;
  for (double v : values) {
    sum += v;
    squares += v * v;
  }
  double mean = sum / count,
         deviation = std::sqrt(squares / count - mean * mean);
  // Five standard errors: 0.02 / sqrt(n) for the mean, 0.02 / sqrt(2n) for
  // the deviation.
  EXPECT_LT(std::fabs(mean), 5 * 0.02 / std::sqrt(count));
  EXPECT_LT(std::fabs(deviation - 0.02), 5 * 0.02 / std::sqrt(2.0 * count));
}

TEST(InitialValuesTest, ChunksDrawTheSameValues) {
  ParameterStart start(3, "wte.weight", 2);
  std::vector<double> whole = drawAll(start, 101);
  // Chunks that start and end between the two values of one pair.
  std::vector<double> pieces(101, NAN);
  for (auto [begin, end] :
       {std::pair<int64_t, int64_t>{0, 3}, {3, 4}, {4, 50}, {50, 101}})
    start.fill(begin, end, [&](int64_t i, double v) { pieces[i] = v; });
  EXPECT_EQ(whole, pieces);
}

TEST(InitialValuesTest, ParametersSeedsAndNamesDrawApart) {
  std::vector<double> a = drawAll(ParameterStart(1, "a.weight", 2), 8);
  EXPECT_NE(a, drawAll(ParameterStart(2, "a.weight", 2), 8));
  EXPECT_NE(a, drawAll(ParameterStart(1, "b.weight", 2), 8));
  EXPECT_EQ(a, drawAll(ParameterStart(1, "a.weight", 2), 8));
}

TEST(InitialValuesTest, VectorsStartAtOneForANormsScaleElseZero) {
  EXPECT_EQ(drawAll(ParameterStart(1, "h.0.ln_1.weight", 1), 3),
            std::vector<double>(3, 1.0));
  EXPECT_EQ(drawAll(ParameterStart(1, "encoder.LayerNorm.gamma", 1), 3),
            std::vector<double>(3, 1.0));
  EXPECT_EQ(drawAll(ParameterStart(1, "h.0.ln_1.bias", 1), 3),
            std::vector<double>(3, 0.0));
  EXPECT_EQ(drawAll(ParameterStart(1, "h.0.mlp.c_fc.bias", 1), 3),
            std::vector<double>(3, 0.0));
}

TEST(InitialValuesTest, PaddedLayoutsHoldTheLogicalValuesAndZeros) {
  // A 3x5 parameter padded to 4x8 (a vocabulary padded for tensor cores).
  std::vector<float> padded = firstValues("wte.weight", {4, 8}, {3, 5}, 9);
  std::vector<double> logical = drawAll(ParameterStart(9, "wte.weight", 2), 15);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 8; ++c)
      EXPECT_EQ(padded[r * 8 + c],
                r < 3 && c < 5 ? static_cast<float>(logical[r * 5 + c]) : 0.0f)
          << r << "," << c;
  std::vector<float> state = filledValues(0.5, {2, 3, 4}, {2, 2, 3});
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(state[i], (i / 4) % 3 < 2 && i % 4 < 3 ? 0.5f : 0.0f) << i;
  EXPECT_EQ(filledValues(2.0, {}, {}), std::vector<float>{2.0f});
}

TEST(InitialValuesTest, ChunksCoverEveryIndexOnce) {
  for (int64_t count : {0, 1, 7, 65536, 65537, 1000003}) {
    std::vector<std::atomic<int>> seen(count);
    parallelChunks(count, 3, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        ++seen[i];
    });
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(seen[i], 1) << "index " << i << " of " << count;
  }
}

} // namespace
