//===- Windows.h - the sliding windows of convolutions and pools -*- C++
//-*-===//
//
// Internal to the ONNX importer. Conv, ConvTranspose, the pools and their
// kin gather their input's windows (im2col): a strided slice of the padded
// input per kernel position, stacked as [N, C, K, O] (K kernel positions, O
// output positions, each flattened row-major). When the kernel tiles the
// input (stride equal to the kernel, no dilation or padding: a vision
// Transformer's patch embedding) the windows are a reshape and a transpose
// of the input rather than one slice per position.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_IMPORT_ONNX_WINDOWS_H
#define KILN_LIB_IMPORT_ONNX_WINDOWS_H

#include "NodeContext.h"

namespace kiln {

/// Where the windows of one node lie along its spatial dimensions.
struct WindowShape {
  llvm::SmallVector<int64_t> kernel, strides, dilations, padBegin, padEnd,
      output;
  /// Padding past `padEnd` that ceil_mode's last windows reach into: it
  /// counts neither as input nor as padding.
  llvm::SmallVector<int64_t> overhang;

  /// Whether the windows tile the input without overlap, gaps or padding.
  bool tiles() const {
    for (size_t d = 0; d < kernel.size(); ++d)
      if (strides[d] != kernel[d] || dilations[d] != 1 || padBegin[d] != 0 ||
          padEnd[d] != 0 || overhang[d] != 0)
        return false;
    return true;
  }
};

/// The attributes every windowed op has, per spatial dimension.
struct WindowAttributes {
  llvm::SmallVector<int64_t> strides, dilations, pads;
  std::string autoPad;
};

/// `name`'s integers, one per spatial dimension, or `fallback` for each.
mlir::FailureOr<llvm::SmallVector<int64_t>> perDimension(NodeContext &node,
                                                         llvm::StringRef name,
                                                         size_t count,
                                                         int64_t fallback);
/// Reads a windowed node's strides, dilations, pads and auto_pad.
mlir::FailureOr<WindowAttributes> windowAttributes(NodeContext &node,
                                                   size_t spatial);
/// Reads the strides, dilations, pads, auto_pad and (for pools) ceil_mode
/// of a node with `kernel` over `input` and places its windows.
mlir::FailureOr<WindowShape> windowShape(NodeContext &node,
                                         mlir::RankedTensorType input,
                                         llvm::ArrayRef<int64_t> kernel,
                                         bool ceilMode);
/// The windows of `input` [N, C, spatial...] as [N, C, K, O]: the input
/// padded with `padding`, then with `overhang` past that.
mlir::FailureOr<mlir::Value> windows(NodeContext &node, mlir::Value input,
                                     const WindowShape &shape, double padding,
                                     double overhang);
/// Checks that `node`'s input 0 is [N, C, spatial...].
mlir::LogicalResult requireSpatial(NodeContext &node);

} // namespace kiln

#endif // KILN_LIB_IMPORT_ONNX_WINDOWS_H
