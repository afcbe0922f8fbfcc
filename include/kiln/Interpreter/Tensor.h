//===- Tensor.h - the interpreter's tensor value -----------------*- C++ -*-===//
//
// A dense, row-major tensor as the reference interpreter holds it: every
// floating-point value is held in a double but always rounded to its element
// type (fp32 values are exactly fp32, bf16 values exactly bf16; see
// roundToElementType), and every integer or boolean in an int64 wrapped to
// its type's width.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_INTERPRETER_TENSOR_H
#define KILN_INTERPRETER_TENSOR_H

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln {

/// Element types the interpreter and the tensor files know.
enum class DType {
  F32, F64, F16, BF16, TF32,
  I64, I32, I16, I8, U64, U32, U16, U8,
  Bool,
};

bool isFloat(DType type);
/// Size in bytes of one element in files (ONNX raw data, .npy).
unsigned byteWidth(DType type);
llvm::StringRef dtypeName(DType type);

/// The DType of an MLIR element type, if the interpreter supports it.
std::optional<DType> dtypeOf(mlir::Type elementType);
mlir::Type mlirElementType(DType type, mlir::MLIRContext *context);

/// Rounds `value` to the nearest `type` value (ties to even). This is the
/// hook through which fp32, bf16 and fp16 arithmetic is emulated.
double roundToElementType(DType type, double value);
/// Wraps an integer to the width and signedness of `type`.
int64_t wrapToElementType(DType type, int64_t value);

class Tensor {
public:
  Tensor() = default;
  /// A zero-filled tensor.
  Tensor(DType type, llvm::ArrayRef<int64_t> shape);

  DType getDType() const { return dtype; }
  llvm::ArrayRef<int64_t> getShape() const { return shape; }
  int64_t getRank() const { return shape.size(); }
  int64_t getNumElements() const { return numElements; }
  bool isFloat() const { return kiln::isFloat(dtype); }

  /// Storage of float tensors.
  llvm::MutableArrayRef<double> floats() { return floatData; }
  llvm::ArrayRef<double> floats() const { return floatData; }
  /// Storage of integer and boolean tensors.
  llvm::MutableArrayRef<int64_t> ints() { return intData; }
  llvm::ArrayRef<int64_t> ints() const { return intData; }

  /// Element `i` as a double, whatever the storage.
  double getAsDouble(int64_t i) const {
    return isFloat() ? floatData[i] : static_cast<double>(intData[i]);
  }
  /// Stores `value` at `i`, rounding or truncating to the element type.
  void setFromDouble(int64_t i, double value);

  /// The same elements under another shape with the same element count.
  Tensor reshaped(llvm::ArrayRef<int64_t> newShape) const;
  /// A tensor of `newShape` (same rank) holding this one's elements where
  /// the two overlap and zeros elsewhere: pads or crops at the high end of
  /// every dimension (tensor-core padding and its removal).
  Tensor resized(llvm::ArrayRef<int64_t> newShape) const;

  /// The MLIR tensor type of this tensor.
  mlir::RankedTensorType getType(mlir::MLIRContext *context) const;

private:
  DType dtype = DType::F32;
  llvm::SmallVector<int64_t> shape;
  int64_t numElements = 0;
  std::vector<double> floatData;
  std::vector<int64_t> intData;
};

/// The number of elements of a tensor of `shape`.
int64_t product(llvm::ArrayRef<int64_t> shape);

/// Row-major strides of `shape`.
llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape);

} // namespace kiln

#endif // KILN_INTERPRETER_TENSOR_H
