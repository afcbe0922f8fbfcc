//===- InitialValues.cpp - first values of parameters without any ---------===//

#include "kiln/Support/InitialValues.h"
#include "kiln/Support/SplitMix.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

namespace kiln {

/// Whether `name` names a normalization's parameter (`ln_1.weight`,
/// `encoder.LayerNorm.bias`, `norm.scale`).
static bool belongsToNorm(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return lower.find("norm") != std::string::npos ||
         lower.find("ln_") != std::string::npos ||
         lower.find(".ln") != std::string::npos;
}

static bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.substr(text.size() - suffix.size()) == suffix;
}

/// FNV-1a: a parameter's name as 64 bits, the same on every machine.
static uint64_t nameHash(std::string_view name) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : name)
    hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

ParameterStart::ParameterStart(uint64_t seed, std::string_view name,
                               size_t rank)
    : key(splitMix64(splitMix64(seed) ^ nameHash(name))), drawn(rank >= 2),
      constant(0.0) {
  bool shift = endsWith(name, "bias") || endsWith(name, "beta");
  if (!drawn && belongsToNorm(name) && !shift)
    constant = 1.0;
}

void ParameterStart::normalPair(int64_t pair, double &even, double &odd) const {
  double radius = std::sqrt(-2.0 * std::log(1.0 - uniformDraw(key, 2 * pair)));
  double angle = 2.0 * M_PI * uniformDraw(key, 2 * pair + 1);
  even = radius * std::cos(angle);
  odd = radius * std::sin(angle);
}

/// Calls `row(index, first)` for every row of the `logical` shape (its last
/// dimension) with the row's first element in the `stored` layout, on all
/// cores.
static void forEachRow(const std::vector<int64_t> &stored,
                       const std::vector<int64_t> &logical,
                       const std::function<void(int64_t, int64_t)> &row) {
  int64_t rows = logical.empty() || logical.back() != 0 ? 1 : 0;
  for (size_t d = 0; d + 1 < logical.size(); ++d)
    rows *= logical[d];
  int64_t length = logical.empty() ? 1 : std::max<int64_t>(logical.back(), 1);
  parallelChunks(rows, std::max<int64_t>(1, kElementsPerThread / length),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t r = begin; r < end; ++r) {
                     int64_t first = 0, rest = r,
                             stride = logical.empty() ? 1 : stored.back();
                     for (int64_t d = static_cast<int64_t>(logical.size()) - 2;
                          d >= 0; --d) {
                       first += (rest % logical[d]) * stride;
                       rest /= logical[d];
                       stride *= stored[d];
                     }
                     row(r, first);
                   }
                 });
}

static int64_t elementCount(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

std::vector<float> firstValues(std::string_view name,
                               const std::vector<int64_t> &stored,
                               const std::vector<int64_t> &logical,
                               uint64_t seed) {
  std::vector<float> values(elementCount(stored), 0.0f);
  int64_t length = logical.empty() ? 1 : logical.back();
  ParameterStart start(seed, name, logical.size());
  forEachRow(stored, logical, [&](int64_t row, int64_t first) {
    start.fill(row * length, (row + 1) * length, [&](int64_t i, double v) {
      values[first + i - row * length] = static_cast<float>(v);
    });
  });
  return values;
}

std::vector<float> filledValues(double fill, const std::vector<int64_t> &stored,
                                const std::vector<int64_t> &logical) {
  std::vector<float> values(elementCount(stored), 0.0f);
  int64_t length = logical.empty() ? 1 : logical.back();
  forEachRow(stored, logical, [&](int64_t, int64_t first) {
    std::fill(values.begin() + first, values.begin() + first + length,
              static_cast<float>(fill));
  });
  return values;
}

void parallelChunks(int64_t count, int64_t grain,
                    const std::function<void(int64_t, int64_t)> &body) {
  int64_t threads =
      std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()),
                        count / std::max<int64_t>(grain, 1));
  if (threads <= 1) {
    body(0, count);
    return;
  }
  std::vector<std::thread> workers;
  int64_t per = (count + threads - 1) / threads;
  for (int64_t t = 0; t < threads; ++t)
    workers.emplace_back(body, t * per, std::min(count, (t + 1) * per));
  for (std::thread &worker : workers)
    worker.join();
}

} // namespace kiln
