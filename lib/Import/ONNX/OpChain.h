//===- OpChain.h - straight-line op building for one node -------*- C++ -*-===//
//
// Internal to the ONNX importer. Importers that compose many kiln ops (the
// recurrent cells, GridSample) build them through OpChain: NodeContext
// reports a failure once, as an error of the node, and every builder given
// a null value returns null, so that a computation reads straight through
// and is checked once at its end.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_IMPORT_ONNX_OPCHAIN_H
#define KILN_LIB_IMPORT_ONNX_OPCHAIN_H

#include "NodeContext.h"

#include "llvm/ADT/STLExtras.h"

namespace kiln {

class OpChain {
public:
  /// `element` is the float type of the scalars `constant` makes.
  OpChain(NodeContext &node, mlir::Type element)
      : node(node), element(element) {}

  template <typename OpTy>
  mlir::Value build(llvm::ArrayRef<mlir::Value> operands,
                    llvm::ArrayRef<mlir::NamedAttribute> attributes = {},
                    mlir::TypeRange types = {}) {
    if (llvm::is_contained(operands, mlir::Value()))
      return {};
    return orNull(
        node.create1<OpTy>(mlir::ValueRange(operands), attributes, types));
  }
  template <typename OpTy> mlir::Value unary(mlir::Value x) {
    return x ? build<OpTy>({x}, {}, {x.getType()}) : mlir::Value();
  }
  mlir::Value add(mlir::Value a, mlir::Value b) { return build<AddOp>({a, b}); }
  mlir::Value sub(mlir::Value a, mlir::Value b) { return build<SubOp>({a, b}); }
  mlir::Value mul(mlir::Value a, mlir::Value b) { return build<MulOp>({a, b}); }
  mlir::Value div(mlir::Value a, mlir::Value b) { return build<DivOp>({a, b}); }
  mlir::Value min(mlir::Value a, mlir::Value b) { return build<MinOp>({a, b}); }
  mlir::Value max(mlir::Value a, mlir::Value b) { return build<MaxOp>({a, b}); }
  mlir::Value select(mlir::Value test, mlir::Value onTrue,
                     mlir::Value onFalse) {
    return build<WhereOp>({test, onTrue, onFalse});
  }
  mlir::Value compare(ComparePredicate predicate, mlir::Value a, mlir::Value b);
  /// a x b^T.
  mlir::Value productTransposed(mlir::Value a, mlir::Value b);
  mlir::Value cast(mlir::Value x, mlir::Type elementType);
  /// |x|^p and the p-th root, the two ends of an Lp norm: for p = 1 and 2
  /// without pow (|x|, x * x, sqrt).
  mlir::Value powerOfMagnitude(mlir::Value x, int64_t p);
  mlir::Value root(mlir::Value x, int64_t p);
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape) {
    return x ? orNull(node.reshape(x, shape)) : mlir::Value();
  }
  mlir::Value transpose(mlir::Value x, llvm::ArrayRef<int64_t> permutation) {
    return x ? orNull(node.transpose(x, permutation)) : mlir::Value();
  }
  mlir::Value slice(mlir::Value x, llvm::ArrayRef<int64_t> start,
                    llvm::ArrayRef<int64_t> stride,
                    llvm::ArrayRef<int64_t> shape) {
    return x ? orNull(node.slice(x, start, stride, shape)) : mlir::Value();
  }
  mlir::Value concat(llvm::ArrayRef<mlir::Value> values, int64_t axis) {
    if (values.empty() || llvm::is_contained(values, mlir::Value()))
      return {};
    return orNull(node.concat(values, axis));
  }
  /// A scalar of the chain's float type.
  mlir::Value constant(double value) { return node.scalar(value, element); }
  static mlir::Value orNull(mlir::FailureOr<mlir::Value> value) {
    return mlir::succeeded(value) ? *value : mlir::Value();
  }

private:
  NodeContext &node;
  mlir::Type element;
};

} // namespace kiln

#endif // KILN_LIB_IMPORT_ONNX_OPCHAIN_H
