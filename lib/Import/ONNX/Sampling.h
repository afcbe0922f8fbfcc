//===- Sampling.h - an image read at computed points ------------*- C++ -*-===//
//
// Internal to the ONNX importer. Sampler reads an image [N, C, H, W] at
// points the model computes, in pixel coordinates: GridSample's sampling,
// and DeformConv's at its kernel's offset taps. Each point's taps along x
// and y (the nearest pixel, the two linear or the four cubic neighbours)
// and their weights are tensors; every pair of taps is one gather of the
// flattened image, weighted. Gradients reach the image through the gathers
// and the points through the weights.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_IMPORT_ONNX_SAMPLING_H
#define KILN_LIB_IMPORT_ONNX_SAMPLING_H

#include "OpChain.h"

namespace kiln {

enum class Interpolation { Nearest, Linear, Cubic };
/// What a tap outside the image reads: zero, the nearest edge pixel, or
/// the pixel its reflection at the edges lands on (at the pixels' centres
/// with align_corners, else at their outer edges).
enum class Padding { Zeros, Border, Reflection };

class Sampler {
public:
  /// Samples `image` [N, C, H, W] of `ops`'s element type.
  Sampler(NodeContext &node, OpChain &ops, mlir::Value image,
          Interpolation interpolation, Padding padding, bool alignCorners);

  /// The image at pixel coordinates `x` and `y` ([N, Ho, Wo]):
  /// [N, C, Ho, Wo], the sum of `terms`; null after an error.
  mlir::Value at(mlir::Value x, mlir::Value y);
  /// Each tap's pixel times its weight, [N, C, Ho, Wo] each.
  llvm::SmallVector<mlir::Value> terms(mlir::Value x, mlir::Value y);
  /// The pixel coordinate along an axis of `size` pixels of a normalized
  /// one in [-1, 1] (GridSample's): -1 and 1 are the first and last
  /// pixels' centres with align_corners, else their outer edges.
  mlir::Value unnormalize(mlir::Value g, int64_t size);

private:
  /// One tap along an axis: its index (a float holding an integer) and
  /// weight.
  struct Tap {
    mlir::Value index, weight;
  };
  llvm::SmallVector<Tap> taps(mlir::Value x);
  mlir::Value reflect(mlir::Value index, int64_t size);
  /// `index` under the padding mode, clamped into [0, size); `inside`
  /// receives whether it was in the image (zeros padding), else null.
  mlir::Value padded(mlir::Value index, int64_t size, mlir::Value &inside);
  /// The image at taps `x` and `y` of [N, Ho, Wo] points, times their
  /// weights: [N, C, Ho, Wo].
  mlir::Value sample(const Tap &x, const Tap &y, int64_t rows, int64_t columns);

  NodeContext &node;
  OpChain &ops;
  Interpolation interpolation;
  Padding padding;
  bool alignCorners;
  int64_t batch, channels, height, width;
  /// The image as [N, C, H * W].
  mlir::Value flat;
};

} // namespace kiln

#endif // KILN_LIB_IMPORT_ONNX_SAMPLING_H
