//===- InitialValues.h - first values of parameters without any -*- C++ -*-===//
//
// A model exported as a graph only declares its parameters; kiln gives them
// first values GPT-2 style. The CPU trainer and the GPU runtime draw the
// same values, each element a pure function of the seed, the parameter's
// name and the element's index (SplitMix.h), so that both start from the
// same weights and the draws of a 124M-parameter model split over all
// cores.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_INITIALVALUES_H
#define KILN_SUPPORT_INITIALVALUES_H

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace kiln {

/// The first values of a parameter declared without any: matrices (rank 2
/// and more) drawn from N(0, 0.02^2), a normalization's scale at one, every
/// other vector (biases, a normalization's shift) at zero.
class ParameterStart {
public:
  ParameterStart(uint64_t seed, std::string_view name, size_t rank);

  /// Calls `store(index, value)` for the elements [begin, end), counted
  /// row-major in the parameter's logical shape.
  template <typename Store>
  void fill(int64_t begin, int64_t end, Store store) const {
    if (!drawn) {
      for (int64_t i = begin; i < end; ++i)
        store(i, constant);
      return;
    }
    // Box-Muller gives two normal values per pair of uniform draws:
    // elements 2j and 2j + 1 share pair j.
    for (int64_t i = begin; i < end;) {
      double even, odd;
      normalPair(i / 2, even, odd);
      if (i % 2 == 0)
        store(i++, 0.02 * even);
      if (i < end)
        store(i++, 0.02 * odd);
    }
  }

private:
  void normalPair(int64_t pair, double &even, double &odd) const;

  uint64_t key;
  bool drawn;
  double constant;
};

/// The first values of the parameter `name` laid out in `stored`, a shape
/// padded from its `logical` one (as wide or wider in every dimension):
/// padding is zero.
std::vector<float> firstValues(std::string_view name,
                               const std::vector<int64_t> &stored,
                               const std::vector<int64_t> &logical,
                               uint64_t seed);
/// `fill` in the logical part of `stored`, zero in its padding (optimizer
/// state).
std::vector<float> filledValues(double fill, const std::vector<int64_t> &stored,
                                const std::vector<int64_t> &logical);

/// The fewest elements worth a thread of their own.
inline constexpr int64_t kElementsPerThread = 1 << 16;

/// Runs `body(begin, end)` over consecutive chunks of [0, count) on the
/// machine's cores, each chunk at least `grain` long (on the calling thread
/// alone when count is below two grains).
void parallelChunks(int64_t count, int64_t grain,
                    const std::function<void(int64_t, int64_t)> &body);

} // namespace kiln

#endif // KILN_SUPPORT_INITIALVALUES_H
