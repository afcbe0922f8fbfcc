//===- AttentionEmulation.cpp - cuDNN's attention on the CPU --------------===//
//
// What an artifact's library attention computes, in double, from and into
// the emulated arena: the forward pass (output and log-sum-exp) and the
// backward pass (query, key and value gradients), as kiln.attention and
// kiln.attention_grad define them without mask or dropout.
//
//===----------------------------------------------------------------------===//

#include "CudaEmulation.h"

#include "kiln/Target/ArtifactTensors.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace kiln::testing {

namespace {
/// One [batch, heads, rows, head_dim] operand in the arena.
class StridedOperand {
public:
  StridedOperand(std::vector<uint8_t> &arena,
                 const artifact::LibraryAttentionT &a, int64_t offset,
                 size_t index)
      : arena(arena), type(a.element_type), offset(offset),
        strides(a.strides.begin() + 4 * index,
                a.strides.begin() + 4 * index + 4),
        width(a.head_dim), heads(a.heads) {}

  /// Row `row` of head `head` of the flattened batch x heads.
  std::vector<double> row(int64_t head, int64_t row) const {
    std::vector<double> values(width);
    for (int64_t d = 0; d < width; ++d)
      values[d] =
          decodeTensor(arena.data() + at(head, row, d), type, {1}).floats()[0];
    return values;
  }
  void setRow(int64_t head, int64_t row, const std::vector<double> &values) {
    for (int64_t d = 0; d < width; ++d) {
      Tensor element(dtypeOf(type), {1});
      element.setFromDouble(0, values[d]);
      std::vector<uint8_t> bytes = encodeTensor(element, type);
      std::memcpy(arena.data() + at(head, row, d), bytes.data(), bytes.size());
    }
  }

private:
  int64_t at(int64_t head, int64_t row, int64_t d) const {
    int64_t elements = head / heads * strides[0] + head % heads * strides[1] +
                       row * strides[2] + d * strides[3];
    return offset + elements * artifact::elementBytes(type);
  }

  std::vector<uint8_t> &arena;
  artifact::ElementType type;
  int64_t offset;
  std::vector<int64_t> strides;
  int64_t width, heads;
};

double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += a[i] * b[i];
  return sum;
}
} // namespace

void CudaEmulation::libraryAttention(const artifact::LibraryAttentionT &a) {
  StridedOperand q(arena, a, a.query, 0), k(arena, a, a.key, 1),
      v(arena, a, a.value, 2), o(arena, a, a.output, 3);
  auto lseAt = [&](int64_t head, int64_t row) {
    return arena.data() + a.logsumexp + (head * a.rows + row) * sizeof(float);
  };
  // Keys row `i` takes part with: all, or those at or before it (causal).
  auto keysOf = [&](int64_t i) {
    return a.causal ? std::min(i + 1, a.keys) : a.keys;
  };
  for (int64_t head = 0; head < a.batch * a.heads; ++head) {
    std::vector<std::vector<double>> keys, values;
    for (int64_t j = 0; j < a.keys; ++j) {
      keys.push_back(k.row(head, j));
      values.push_back(v.row(head, j));
    }
    if (!a.backward) {
      for (int64_t i = 0; i < a.rows; ++i) {
        std::vector<double> query = q.row(head, i), scores;
        double maximum = -std::numeric_limits<double>::infinity(), sum = 0.0;
        for (int64_t j = 0; j < keysOf(i); ++j) {
          scores.push_back(a.scale * dot(query, keys[j]));
          maximum = std::max(maximum, scores.back());
        }
        for (double s : scores)
          sum += std::exp(s - maximum);
        double lse = maximum + std::log(sum);
        std::vector<double> output(a.head_dim, 0.0);
        for (size_t j = 0; j < scores.size(); ++j)
          for (int64_t d = 0; d < a.head_dim; ++d)
            output[d] += std::exp(scores[j] - lse) * values[j][d];
        o.setRow(head, i, output);
        float stored = static_cast<float>(lse);
        std::memcpy(lseAt(head, i), &stored, sizeof(float));
      }
      continue;
    }
    StridedOperand dout(arena, a, a.output_grad, 4),
        dq(arena, a, a.query_grad, 5), dk(arena, a, a.key_grad, 6),
        dv(arena, a, a.value_grad, 7);
    std::vector<std::vector<double>> keyGrads(
        a.keys, std::vector<double>(a.head_dim, 0.0)),
        valueGrads = keyGrads;
    for (int64_t i = 0; i < a.rows; ++i) {
      std::vector<double> query = q.row(head, i), gradient = dout.row(head, i);
      float lse;
      std::memcpy(&lse, lseAt(head, i), sizeof(float));
      double delta = dot(gradient, o.row(head, i));
      std::vector<double> queryGrad(a.head_dim, 0.0);
      for (int64_t j = 0; j < keysOf(i); ++j) {
        double p = std::exp(a.scale * dot(query, keys[j]) - lse);
        double ds = p * (dot(gradient, values[j]) - delta);
        for (int64_t d = 0; d < a.head_dim; ++d) {
          valueGrads[j][d] += p * gradient[d];
          queryGrad[d] += a.scale * ds * keys[j][d];
          keyGrads[j][d] += a.scale * ds * query[d];
        }
      }
      dq.setRow(head, i, queryGrad);
    }
    for (int64_t j = 0; j < a.keys; ++j) {
      dk.setRow(head, j, keyGrads[j]);
      dv.setRow(head, j, valueGrads[j]);
    }
  }
}

} // namespace kiln::testing
