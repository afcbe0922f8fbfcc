//===- Lowering.h - a planned function as an artifact -----------*- C++ -*-===//
//
// Internal to the CUDA target: the state of one function's lowering. Its
// ops become kernel launches and GEMMs on arena offsets (Lowering.cpp);
// then the arena's areas are placed, the interface described and the
// kernels compiled (ArtifactAssembly.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TARGET_CUDA_LOWERING_H
#define KILN_LIB_TARGET_CUDA_LOWERING_H

#include "kiln/Target/CUDATarget.h"

#include "GemmEpilogueMatch.h"
#include "KernelWriter.h"

#include "kiln/Transforms/MemoryPlan.h"

#include "llvm/ADT/StringMap.h"

namespace kiln::cuda {

/// Areas of the arena start at multiples of this many bytes.
constexpr int64_t kAlignment = 256;

inline int64_t alignUp(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

/// How the artifact stores elements of `type`; failure for a type it
/// cannot store.
mlir::FailureOr<artifact::ElementType> artifactType(mlir::Type type);

/// Lowers one planned function to an artifact.
class Lowering {
public:
  Lowering(mlir::func::FuncOp function, const TargetOptions &options,
           TargetReport *report)
      : function(function), options(options), report(report),
        plan(planTargetMemory(function, options)) {}

  mlir::FailureOr<std::unique_ptr<artifact::ArtifactT>> run();

private:
  /// The arena offset of a value held in memory, or -1.
  int64_t offsetOf(mlir::Value value) const {
    if (auto it = extraOffsets.find(value); it != extraOffsets.end())
      return it->second;
    return plan.offsetOf(value);
  }
  /// The strides of `value` in its buffer, in elements.
  llvm::SmallVector<int64_t> stridesOf(mlir::Value value) const {
    if (auto it = plan.views.find(value); it != plan.views.end())
      return it->second.strides;
    return contiguousStrides(shapeOf(value));
  }
  mlir::LogicalResult lowerOp(mlir::Operation &op);
  mlir::LogicalResult lowerFusion(FusionOp fusion);
  /// The index of the kernel with `body` for the launch bounds of `plan`
  /// (its block, its blocks per SM), added to the source if new; its one
  /// parameter, the table of arena pointers, is named `parameter`.
  unsigned kernelIndex(const std::string &body, const std::string &parameter,
                       const KernelPlan &plan);
  /// Appends the arena offsets `kernel` reads and writes to `launch`.
  mlir::LogicalResult
  appendArguments(const KernelPlan &kernel, artifact::KernelLaunchT &launch,
                  mlir::Operation *origin,
                  llvm::function_ref<int64_t(mlir::Value)> resultOffset);
  /// Emits `kernels`; `resultOffset` gives where each kernel result goes.
  mlir::LogicalResult
  emitKernels(mlir::Operation *origin, llvm::ArrayRef<KernelPlan> kernels,
              llvm::function_ref<int64_t(mlir::Value)> resultOffset);
  mlir::LogicalResult
  emitElementKernels(mlir::Operation *origin,
                     llvm::ArrayRef<mlir::Value> results,
                     llvm::ArrayRef<mlir::Value> materialized,
                     llvm::function_ref<int64_t(mlir::Value)> resultOffset);
  /// A GEMM for `matmul` writing to `d`, or failure if its batch dimensions
  /// broadcast in a way one strided batch cannot express.
  mlir::LogicalResult emitGemm(MatmulOp matmul, mlir::Value lhs,
                               mlir::Value rhs, int64_t d,
                               const GemmEpilogue &epilogue);
  int64_t constantOffset(mlir::Operation *constant);
  int64_t scratch(int64_t bytes) {
    scratchBytes = std::max(scratchBytes, bytes);
    return scratchOffset;
  }
  mlir::LogicalResult describeInterface(artifact::ArtifactT &result);
  /// Updated parameters, state and buffers are written over the old values.
  void placeUpdates();
  /// After the plan's buffers: GEMM scratch, partials of split reductions,
  /// index checks and constants, now that their sizes are known.
  void placeAreas(artifact::ArtifactT &result);
  /// NVRTC: a cubin per architecture and PTX for the newest.
  mlir::LogicalResult compileKernels(artifact::ArtifactT &result);

  /// cuDNN's operation for attention `op` where options and op allow,
  /// recording in the report why not where they do not.
  std::unique_ptr<artifact::OperationT> libraryAttention(mlir::Operation &op);

  mlir::func::FuncOp function;
  const TargetOptions &options;
  TargetReport *report;
  MemoryPlan plan;
  /// Values not in the plan that kernels read: GEMM products in scratch.
  llvm::DenseMap<mlir::Value, int64_t> extraOffsets;
  /// Values that kernels read from the memory of another, which holds them
  /// exactly in a narrower type: an assembly its parts' producers wrote
  /// (StridedViews.h), read through its rounding.
  llvm::DenseMap<mlir::Value, mlir::Value> readThrough;
  int64_t scratchOffset = 0, scratchBytes = 0;
  /// Constants, placed after the scratch area once its size is known:
  /// offsets relative to the constants' area until then.
  struct PendingConstant {
    mlir::Operation *op;
    int64_t offset;
    std::vector<uint8_t> bytes;
  };
  std::vector<PendingConstant> constants;
  llvm::DenseMap<mlir::Operation *, size_t> constantIndex;
  int64_t constantBytes = 0;
  /// Operations whose constant arguments still need the final offset.
  struct ConstantUse {
    size_t operation, arg, constant;
  };
  std::vector<ConstantUse> constantUses;
  /// The partials of split reductions: one area after the GEMM scratch,
  /// shared by every launch (each run of kernels writing partials and
  /// their combining kernels uses it in turn), a launch's argument
  /// `offset` bytes into it.
  int64_t partialBytes = 0;
  struct PartialUse {
    size_t operation, arg;
    int64_t offset = 0;
  };
  std::vector<PartialUse> partialUses;
  /// Launches that check indices: each gets a status word after the
  /// partials.
  std::vector<PartialUse> checkUses;
  std::vector<std::unique_ptr<artifact::OperationT>> operations;
  std::vector<std::string> kernelNames;
  llvm::StringMap<unsigned> kernelBySource;
  std::string source;
};

} // namespace kiln::cuda

#endif // KILN_LIB_TARGET_CUDA_LOWERING_H
