//===- Lowering.cpp - a planned function as an artifact -------------------===//
//
// Walks the function in order, the order the memory plan assumed, and turns
// each op into kernel launches or GEMMs on arena offsets:
//   - matrix products become cuBLASLt GEMMs (a fusion that starts with one
//     applies the bias in the GEMM's epilogue and the rest of its body in
//     one kernel reading the product back);
//   - attention and scatter-adds use their kernel templates, or attention
//     cuDNN's fused flash attention (--attention=cudnn, LibraryAttention.cpp);
//   - every other op and fusion region becomes generated element kernels.
// The arena is the memory plan's, followed by a scratch area for GEMM
// products that no result holds and by the constants, which
// ArtifactAssembly.cpp places once their sizes are known.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "Emitter.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/TensorAttr.h"
#include "kiln/Target/ArtifactTensors.h"

#include <optional>

using namespace mlir;

namespace kiln::cuda {

/// A run of equal kernels writing partials (batched into one launch) ends
/// before its partials pass this many bytes.
static constexpr int64_t kMaxBatchedPartialBytes = 1 << 20;
/// The most launches batched into one: a grid's rows (gridDim.y).
static constexpr size_t kMaxBatches = 65535;

/// The bytes `value` occupies in memory.
static int64_t bytesOf(Value value) {
  return countOf(value) * elementBytes(elementTypeOf(value));
}

/// An op for messages: its name and where it came from (an ONNX node).
static std::string describe(Operation *op) {
  std::string text = op->getName().getStringRef().str();
  llvm::raw_string_ostream os(text);
  os << " at " << op->getLoc();
  return text;
}

int64_t Lowering::constantOffset(Operation *constant) {
  auto [it, added] = constantIndex.try_emplace(constant, constants.size());
  if (added) {
    auto attr = cast<ElementsAttr>(cast<ConstantOp>(constant).getValue());
    // The constants a kernel reads have types the artifact stores.
    FailureOr<Tensor> value = tensorFromAttr(attr);
    FailureOr<artifact::ElementType> type = artifactType(attr.getElementType());
    std::vector<uint8_t> bytes = succeeded(value) && succeeded(type)
                                     ? encodeTensor(*value, *type)
                                     : std::vector<uint8_t>();
    int64_t size = bytes.size();
    constants.push_back({constant, constantBytes, std::move(bytes)});
    constantBytes = alignUp(constantBytes + size);
  }
  return static_cast<int64_t>(it->second);
}

unsigned Lowering::kernelIndex(const std::string &body,
                               const std::string &parameter,
                               const KernelPlan &plan) {
  // The launch bounds are the block the kernel runs in, so that ptxas
  // allots registers for it (a bound of 256 for a 96-thread block made it
  // spill to keep more blocks than the block size allows).
  std::string bounds = "__launch_bounds__(" + std::to_string(plan.block);
  if (plan.minBlocksPerSM)
    bounds += ", " + std::to_string(plan.minBlocksPerSM);
  bounds += ")";
  auto [it, added] =
      kernelBySource.try_emplace(bounds + body, kernelNames.size());
  if (added) {
    std::string name = "kiln_kernel_" + std::to_string(kernelNames.size());
    kernelNames.push_back(name);
    source += "\nextern \"C\" __global__ void " + bounds + " " + name +
              "(void *const *" + parameter + ") {\n" + body + "}\n";
  }
  return it->second;
}

LogicalResult
Lowering::appendArguments(const KernelPlan &kernel,
                          artifact::KernelLaunchT &launch, Operation *origin,
                          function_ref<int64_t(Value)> resultOffset) {
  // Constants, partials and index checks live in areas placed once their
  // sizes are known: their arguments are filled in then. The scratch the
  // memory plan holds for the op (planTargetMemory) is placed already.
  auto constant = [&](Operation *op) {
    constantUses.push_back({operations.size(), launch.args.size(),
                            static_cast<size_t>(constantOffset(op))});
    launch.args.push_back(0);
  };
  for (Value operand : kernel.operands) {
    int64_t offset = offsetOf(operand);
    if (offset >= 0)
      launch.args.push_back(offset);
    else if (auto op = operand.getDefiningOp<ConstantOp>())
      constant(op);
    else
      return origin->emitError(
          "the CUDA target found an operand without memory");
  }
  for (Operation *op : kernel.constants)
    constant(op);
  for (Value result : kernel.results) {
    int64_t offset = resultOffset(result);
    if (offset < 0)
      return origin->emitError("the CUDA target found a result without memory");
    launch.args.push_back(offset);
  }
  if (kernel.partialBytes) {
    int64_t offset = kernel.partialSlot * kernel.partialBytes;
    auto planned = plan.scratchOf.find(origin);
    if (planned != plan.scratchOf.end() &&
        plan.buffers[planned->second].bytes >= offset + kernel.partialBytes) {
      launch.args.push_back(plan.buffers[planned->second].offset + offset);
    } else {
      partialBytes = std::max(partialBytes, offset + kernel.partialBytes);
      partialUses.push_back({operations.size(), launch.args.size(), offset});
      launch.args.push_back(0);
    }
  }
  if (kernel.checksIndices) {
    checkUses.push_back({operations.size(), launch.args.size()});
    launch.args.push_back(0);
  }
  return success();
}

LogicalResult Lowering::emitKernels(Operation *origin,
                                    ArrayRef<KernelPlan> kernels,
                                    function_ref<int64_t(Value)> resultOffset) {
  // Consecutive launches of one kernel that share no scratch (the
  // per-parameter updates of a multi-tensor optimizer, the sums of squares
  // of a gradient norm in consecutive parts of the partials area) become
  // one launch, each a row of its grid (blockIdx.y) reading its own
  // argument table. The rows run side by side: 74 updates of 768-element
  // biases in one wave, where a grid walking them in turn waited on memory
  // 74 times over, one block working.
  // Each body with the index type it declares: 32 bits where its indices
  // stay below 2^30, which leaves room for a grid-stride loop's last step
  // past the end (at most 2^20 threads) and an unrolled reduction's
  // lookahead.
  auto declared = [&](const KernelPlan &kernel) {
    bool narrow = !options.wideIndices && kernel.indexBound <= (1 << 30);
    return (narrow ? "  typedef int idx;\n" : "  typedef i64 idx;\n") +
           kernel.body;
  };
  auto batches = [&](const KernelPlan &a, const KernelPlan &b,
                     const KernelPlan &previous) {
    return options.batchLaunches && declared(a) == declared(b) &&
           a.grid == b.grid && a.block == b.block &&
           a.minBlocksPerSM == b.minBlocksPerSM && !a.checksIndices &&
           (!a.partialBytes || b.partialSlot == previous.partialSlot + 1);
  };
  for (size_t first = 0; first < kernels.size();) {
    size_t last = first + 1;
    while (last < kernels.size() && last - first < kMaxBatches &&
           batches(kernels[first], kernels[last], kernels[last - 1]))
      ++last;
    const KernelPlan &kernel = kernels[first];
    auto launch = std::make_unique<artifact::KernelLaunchT>();
    launch->grid = kernel.grid;
    launch->block = kernel.block;
    launch->grid_strided = kernel.gridStrided;
    for (size_t k = first; k < last; ++k)
      if (failed(appendArguments(kernels[k], *launch, origin, resultOffset)))
        return failure();
    if (last - first == 1) {
      launch->kernel = kernelIndex(declared(kernel), "args", kernel);
    } else {
      launch->batches = last - first;
      size_t perLaunch = launch->args.size() / launch->batches;
      launch->kernel = kernelIndex(
          "  void *const *args = tables + (i64)blockIdx.y * " +
              std::to_string(perLaunch) + ";\n  {\n" + declared(kernel) +
              "  }\n",
          "tables", kernel);
    }
    auto operation = std::make_unique<artifact::OperationT>();
    operation->kernel = std::move(launch);
    operation->origin = describe(origin);
    for (size_t k = first; k < last; ++k) {
      // A split reduction's partials: written by one kernel, read by the
      // next, which reads nothing else.
      operation->bytes += kernels[k].partialBytes;
      auto touched = [&](Value value) {
        return llvm::is_contained(kernels[k].untouched, value) ? 0
                                                               : bytesOf(value);
      };
      if (!kernels[k].combinesPartials) {
        for (Value value : kernels[k].operands)
          operation->bytes += touched(value);
        for (Operation *constant : kernels[k].constants)
          operation->bytes += bytesOf(constant->getResult(0));
      }
      for (Value value : kernels[k].results)
        operation->bytes += touched(value);
      operation->flops += kernels[k].flops;
    }
    operations.push_back(std::move(operation));
    first = last;
  }
  return success();
}

LogicalResult
Lowering::emitElementKernels(Operation *origin, ArrayRef<Value> results,
                             ArrayRef<Value> materialized,
                             function_ref<int64_t(Value)> resultOffset) {
  auto external = [&](Value value) -> Value {
    if (Value memory = readThrough.lookup(value))
      return memory;
    return offsetOf(value) >= 0 ? value : Value();
  };
  FailureOr<SmallVector<KernelPlan>> kernels =
      planElementKernels(results, external, materialized);
  if (failed(kernels))
    return failure();
  // A launch that overwrites a buffer in place (an optimizer update, a
  // loss gradient over its logits) runs after every other launch of the op
  // that reads that buffer.
  auto writes = [&](const KernelPlan &k, int64_t offset) {
    return llvm::any_of(k.results,
                        [&](Value r) { return resultOffset(r) == offset; });
  };
  // (A kernel combining partials reads none of its operands.)
  auto readsWrittenBy = [&](const KernelPlan &reader,
                            const KernelPlan &writer) {
    return !reader.combinesPartials &&
           llvm::any_of(reader.operands,
                        [&](Value v) { return writes(writer, offsetOf(v)); });
  };
  // Among the launches that may go next, one of the kernel just placed
  // comes first, so that equal kernels end up adjacent and batch. A kernel
  // writing a split reduction's partials (the kernel combining them
  // follows it in `kernels`) starts a run of equal writers, each in the
  // next part of the partials area while the run's partials stay small;
  // then their combining kernels come, in the same order and parts, before
  // any other kernel writes partials over them, and never before.
  auto writesPartials = [](const KernelPlan &k) {
    return k.partialBytes && !k.combinesPartials;
  };
  SmallVector<KernelPlan> ordered;
  SmallVector<bool> done(kernels->size(), false);
  // Placed after every launch that reads what it overwrites.
  auto ready = [&](size_t i) {
    if (done[i])
      return false;
    for (size_t j = 0; j < kernels->size(); ++j)
      if (!done[j] && j != i && readsWrittenBy((*kernels)[j], (*kernels)[i]))
        return false;
    return true;
  };
  // Writers placed whose combining kernels are not, and their slots.
  SmallVector<std::pair<size_t, int64_t>> uncombined;
  for (size_t placed = 0; placed < kernels->size(); ++placed) {
    std::optional<size_t> next;
    const KernelPlan *previous = ordered.empty() ? nullptr : &ordered.back();
    if (!uncombined.empty() && writesPartials(*previous) &&
        int64_t(uncombined.size() + 1) * previous->partialBytes <=
            kMaxBatchedPartialBytes)
      for (size_t i = 0; i < kernels->size() && !next; ++i)
        if (writesPartials((*kernels)[i]) && ready(i) &&
            (*kernels)[i].body == previous->body)
          next = i;
    if (!next && !uncombined.empty()) {
      next = uncombined.front().first + 1;
      (*kernels)[*next].partialSlot = uncombined.front().second;
      uncombined.erase(uncombined.begin());
    }
    if (!next)
      for (size_t i = 0; i < kernels->size(); ++i) {
        if (!ready(i) || (*kernels)[i].combinesPartials)
          continue;
        if (!next)
          next = i;
        if (previous && (*kernels)[i].body == previous->body) {
          next = i;
          break;
        }
      }
    if (!next)
      return origin->emitError("the CUDA target cannot order the in-place "
                               "updates of this op");
    if (writesPartials((*kernels)[*next])) {
      (*kernels)[*next].partialSlot = uncombined.size();
      uncombined.push_back({*next, uncombined.size()});
    }
    done[*next] = true;
    ordered.push_back(std::move((*kernels)[*next]));
  }
  return emitKernels(origin, ordered, resultOffset);
}

LogicalResult Lowering::emitGemm(MatmulOp matmul, Value lhs, Value rhs,
                                 int64_t d, const GemmEpilogue &epilogue) {
  auto resultType = cast<RankedTensorType>(matmul.getType());
  ArrayRef<int64_t> out = resultType.getShape(), a = shapeOf(lhs),
                    b = shapeOf(rhs);
  int64_t rank = out.size();
  int64_t m = out[rank - 2], n = out[rank - 1];
  int64_t k = matmul.getTransposeLhs() ? a[a.size() - 2] : a.back();
  int64_t batch = resultType.getNumElements() / (m * n);
  // Each operand is either batched like the result or one matrix for all.
  auto batchStride = [&](ArrayRef<int64_t> shape) -> std::optional<int64_t> {
    int64_t matrix = shape[shape.size() - 2] * shape.back();
    int64_t count = 1;
    for (int64_t size : shape.drop_back(2))
      count *= size;
    if (count == 1)
      return 0;
    if (shape.drop_back(2) == out.drop_back(2))
      return matrix;
    return std::nullopt;
  };
  std::optional<int64_t> strideA = batchStride(a), strideB = batchStride(b);
  Type inType = elementTypeOf(lhs);
  if (!strideA || !strideB || !isa<FloatType>(inType) || offsetOf(lhs) < 0 ||
      offsetOf(rhs) < 0)
    return failure();
  auto gemm = std::make_unique<artifact::GemmT>();
  gemm->batch = batch;
  gemm->m = m;
  gemm->n = n;
  gemm->k = k;
  gemm->transpose_a = matmul.getTransposeLhs();
  gemm->transpose_b = matmul.getTransposeRhs();
  gemm->a = offsetOf(lhs);
  gemm->b = offsetOf(rhs);
  gemm->d = d;
  gemm->stride_a = *strideA;
  gemm->stride_b = *strideB;
  gemm->stride_d = m * n;
  gemm->input_type = *artifactType(inType);
  Type outType = elementTypeOf(epilogue.result);
  gemm->output_type = *artifactType(outType);
  gemm->epilogue = epilogue.kind;
  gemm->bias = std::max<int64_t>(epilogue.bias, 0);
  gemm->aux = std::max<int64_t>(epilogue.aux, 0);
  gemm->c = epilogue.c;
  auto operation = std::make_unique<artifact::OperationT>();
  int64_t inBytes = elementBytes(inType);
  int64_t outBytes = elementBytes(outType);
  operation->bytes =
      ((*strideA ? batch : 1) * m * k + (*strideB ? batch : 1) * k * n) *
          inBytes +
      batch * m * n * outBytes *
          (1 + artifact::usesAux(epilogue.kind) + (epilogue.c >= 0)) +
      artifact::biasLength(epilogue.kind, m, n) * outBytes;
  operation->flops = 2 * batch * m * n * k;
  operation->gemm = std::move(gemm);
  operation->origin = describe(matmul);
  operations.push_back(std::move(operation));
  return success();
}

LogicalResult Lowering::lowerFusion(FusionOp fusion) {
  Block &body = fusion.getRegion().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  DenseMap<Value, int64_t> yieldedAt;
  for (auto [i, value] : llvm::enumerate(yield.getOperands()))
    yieldedAt.try_emplace(value, offsetOf(fusion->getResult(i)));
  auto resultOffset = [&](Value inner) { return yieldedAt.lookup(inner); };
  auto outer = [&](Value inner) -> Value {
    if (auto argument = dyn_cast<BlockArgument>(inner))
      return fusion->getOperand(argument.getArgNumber());
    return Value();
  };
  // Strided views and the storage a view's definer fills need no kernel.
  // What else the region computes from that storage (an assembly of the
  // views, StridedViews.h) reads it, through its rounding; a strided view
  // it computes again.
  SmallVector<Value> results, materialized;
  for (auto [result, inner] :
       llvm::zip(fusion->getResults(), yield.getOperands())) {
    if (!plan.computedElsewhere(result)) {
      results.push_back(inner);
      continue;
    }
    if (plan.views.count(result))
      continue;
    extraOffsets[inner] = offsetOf(result);
    materialized.push_back(inner);
    if (auto round = inner.getDefiningOp<CastOp>())
      readThrough[round.getInput()] = inner;
  }

  // A region that starts with a matrix product: the GEMM applies what
  // cuBLASLt's epilogues can (a bias along the columns, or the GELU gradient
  // at a saved input) and writes where a result wants it, or to scratch.
  auto matmul = dyn_cast<MatmulOp>(body.front());
  Value lhs = matmul ? outer(matmul.getLhs()) : Value();
  Value rhs = matmul ? outer(matmul.getRhs()) : Value();
  std::optional<int64_t> fallbackOf;
  if (lhs && rhs) {
    GemmEpilogue epilogue = matchGemmEpilogue(
        matmul, outer, [&](Value value) { return offsetOf(value); },
        [&](Value inner) {
          auto it = yieldedAt.find(inner);
          return it == yieldedAt.end() ? int64_t(-1) : it->second;
        });
    // The value and its views (reshapes) hold the same bytes.
    SmallVector<Value> views = {epilogue.result};
    while (views.back().hasOneUse())
      if (auto reshape = dyn_cast<ReshapeOp>(*views.back().getUsers().begin()))
        views.push_back(reshape.getResult());
      else
        break;
    int64_t d = -1;
    for (Value view : views)
      if (yieldedAt.count(view))
        d = yieldedAt.lookup(view);
    bool inScratch = d < 0;
    if (inScratch)
      d = scratch(countOf(epilogue.result) *
                  elementBytes(elementTypeOf(epilogue.result)));
    if (succeeded(emitGemm(matmul, lhs, rhs, d, epilogue))) {
      if (epilogue.biasGradient)
        fallbackOf = operations.size() - 1;
      extraOffsets[epilogue.result] = d;
      materialized.push_back(epilogue.result);
      for (Value view : views)
        if (!inScratch)
          llvm::erase(results, view);
      if (Value aux = epilogue.auxResult) {
        materialized.push_back(aux);
        llvm::erase(results, aux);
      }
    }
  }
  if (results.empty())
    return success();
  // What is left is the bias gradient alone where the GEMM sums it: its
  // kernels run only where cuBLASLt cannot.
  size_t first = operations.size();
  if (failed(emitElementKernels(fusion, results, materialized, resultOffset)))
    return failure();
  if (fallbackOf)
    for (size_t i = first; i < operations.size(); ++i)
      operations[i]->epilogue_fallback_of = *fallbackOf;
  return success();
}

LogicalResult Lowering::lowerOp(Operation &op) {
  if (isa<ConstantOp, ParameterOp, func::ReturnOp>(op))
    return success();
  if (auto reshape = dyn_cast<ReshapeOp>(op))
    if (offsetOf(reshape.getResult()) == offsetOf(reshape.getInput()))
      return success(); // a view
  auto resultOffset = [&](Value value) { return offsetOf(value); };
  if (auto fusion = dyn_cast<FusionOp>(op))
    return lowerFusion(fusion);
  if (auto matmul = dyn_cast<MatmulOp>(op))
    if (succeeded(emitGemm(matmul, matmul.getLhs(), matmul.getRhs(),
                           offsetOf(matmul.getResult()), {matmul.getResult()})))
      return success();
  if (std::unique_ptr<artifact::OperationT> library = libraryAttention(op)) {
    library->origin = describe(&op);
    operations.push_back(std::move(library));
    return success();
  }
  if (isa<AttentionOp, AttentionGradOp, GatherGradOp, ScatterElementsOp>(op)) {
    if (isa<AttentionOp, AttentionGradOp>(op) && report &&
        !options.exactAttention)
      if (std::optional<std::string> reason =
              tensorCoreAttentionUnsupported(&op))
        report->exactAttention[*reason].push_back(describe(&op));
    FailureOr<SmallVector<KernelPlan>> kernels =
        planTemplateKernels(&op, options,
                            [&](Value value) { return stridesOf(value); });
    if (failed(kernels))
      return failure();
    return emitKernels(&op, *kernels, resultOffset);
  }
  // What views fill needs no kernel (a transpose attention wrote).
  SmallVector<Value> results;
  for (Value result : op.getResults())
    if (offsetOf(result) >= 0 && !plan.computedElsewhere(result))
      results.push_back(result);
  if (results.empty())
    return success();
  return emitElementKernels(&op, results, {}, resultOffset);
}

std::unique_ptr<artifact::OperationT>
Lowering::libraryAttention(Operation &op) {
  if (options.attention != AttentionBackend::Cudnn ||
      !isa<AttentionOp, AttentionGradOp>(op))
    return nullptr;
  auto strides = [&](Value value) { return stridesOf(value); };
  if (std::optional<std::string> reason =
          cudnnAttentionUnsupported(&op, strides)) {
    if (report)
      report->keptAttention.push_back(describe(&op) + ": " + *reason);
    return nullptr;
  }
  return cudnnAttention(
      &op, [&](Value value) { return offsetOf(value); }, strides);
}

} // namespace kiln::cuda
