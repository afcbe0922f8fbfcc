//===- ArtifactAssembly.cpp - a lowered function's artifact ---------------===//
//
// What follows lowering the ops (Lowering.cpp): updated parameters and
// state written over their old values; after the plan's buffers, the GEMM
// scratch, the partials of split reductions, the index checks' status
// words and the constants, placed now that their sizes are known; the
// interface (inputs, state, parameters with their initial values,
// outputs); the kernels compiled with NVRTC.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "kiln/Autodiff/TrainingStep.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/TensorAttr.h"
#include "kiln/Target/ArtifactTensors.h"
#include "kiln/Training/Checkpoint.h"

#include "llvm/ADT/StringSet.h"

#include <optional>
#include <thread>

using namespace mlir;

namespace kiln::cuda {

FailureOr<artifact::ElementType> artifactType(Type type) {
  using artifact::ElementType;
  if (type.isF32() || type.isTF32())
    return ElementType::F32;
  if (type.isF64())
    return ElementType::F64;
  if (type.isF16())
    return ElementType::F16;
  if (type.isBF16())
    return ElementType::BF16;
  if (type.isInteger(1))
    return ElementType::Bool;
  if (type.isUnsignedInteger(8))
    return ElementType::U8;
  if (type.isInteger(64))
    return ElementType::I64;
  if (type.isInteger(32))
    return ElementType::I32;
  if (type.isInteger(16))
    return ElementType::I16;
  if (type.isInteger(8))
    return ElementType::I8;
  return failure();
}

/// The bytes of a parameter's initial value, padded to its stored shape.
static std::vector<uint8_t> initialBytes(ParameterOp parameter,
                                         artifact::ElementType type) {
  std::optional<ElementsAttr> initial = parameter.getInitialValue();
  if (!initial)
    return {};
  FailureOr<Tensor> value = tensorFromAttr(*initial);
  if (failed(value))
    return {};
  return encodeTensor(value->resized(parameter.getType().getShape()), type);
}

LogicalResult Lowering::describeInterface(artifact::ArtifactT &result) {
  auto tensorOf = [&](Value value, StringRef name, artifact::Role role)
      -> FailureOr<std::unique_ptr<artifact::TensorT>> {
    auto type = cast<RankedTensorType>(value.getType());
    FailureOr<artifact::ElementType> element =
        artifactType(type.getElementType());
    if (failed(element))
      return function.emitError() << "the CUDA target cannot store " << type;
    auto tensor = std::make_unique<artifact::TensorT>();
    tensor->name = name.str();
    tensor->role = role;
    tensor->element_type = *element;
    tensor->shape.assign(type.getShape().begin(), type.getShape().end());
    tensor->offset = offsetOf(value);
    return tensor;
  };
  Block &body = function.getBody().front();
  for (BlockArgument argument : body.getArguments()) {
    unsigned i = argument.getArgNumber();
    auto owner = function.getArgAttrOfType<StringAttr>(i, kStateOfAttr);
    std::string name;
    if (owner) {
      auto slot = function.getArgAttrOfType<StringAttr>(i, kSlotAttr);
      name = (owner.getValue() + "." + (slot ? slot.getValue() : "")).str();
    } else if (auto attr =
                   function.getArgAttrOfType<StringAttr>(i, "kiln.name")) {
      name = attr.str();
    } else {
      name = "arg" + std::to_string(i);
    }
    auto tensor = tensorOf(
        argument, name, owner ? artifact::Role::State : artifact::Role::Input);
    if (failed(tensor))
      return failure();
    if (auto init = function.getArgAttrOfType<FloatAttr>(i, kStateInitAttr))
      (*tensor)->fill = init.getValueAsDouble();
    else if (owner && owner.getValue() != kLossScalerState &&
             function.getArgAttrOfType<StringAttr>(i, kSlotAttr).getValue() ==
                 "sum")
      (*tensor)->fill = options.initialAccumulator;
    result.tensors.push_back(std::move(*tensor));
  }
  llvm::StringSet<> trained, seen;
  for (unsigned i = 0; i < function.getNumResults(); ++i)
    if (auto name = function.getResultAttrOfType<StringAttr>(i, kUpdateOfAttr))
      trained.insert(name.getValue());
  for (auto parameter : body.getOps<ParameterOp>()) {
    if (!seen.insert(parameter.getName()).second)
      continue;
    auto tensor =
        tensorOf(parameter, parameter.getName(), artifact::Role::Parameter);
    if (failed(tensor))
      return failure();
    if (std::optional<ArrayRef<int64_t>> logical = parameter.getLogicalShape())
      (*tensor)->logical_shape.assign(logical->begin(), logical->end());
    (*tensor)->trained = trained.contains(parameter.getName());
    (*tensor)->data = initialBytes(parameter, (*tensor)->element_type);
    result.tensors.push_back(std::move(*tensor));
  }
  auto terminator = body.getTerminator();
  for (auto [i, value] : llvm::enumerate(terminator->getOperands())) {
    if (writesBack(function, i))
      continue;
    auto name = function.getResultAttrOfType<StringAttr>(i, "kiln.name");
    auto tensor =
        tensorOf(value, name ? name.getValue() : "result" + std::to_string(i),
                 artifact::Role::Output);
    if (failed(tensor))
      return failure();
    if ((*tensor)->offset < 0)
      return function.emitError()
             << "the CUDA target needs result " << i << " in memory";
    result.tensors.push_back(std::move(*tensor));
  }
  return success();
}

void Lowering::placeUpdates() {
  Block &body = function.getBody().front();
  llvm::StringMap<int64_t> parameters, state;
  for (auto parameter : body.getOps<ParameterOp>())
    parameters[parameter.getName()] = offsetOf(parameter);
  auto stateKey = [&](auto attrs) {
    auto owner = attrs.template getAs<StringAttr>(kStateOfAttr);
    auto slot = attrs.template getAs<StringAttr>(kSlotAttr);
    return owner && slot ? (owner.getValue() + "." + slot.getValue()).str()
                         : std::string();
  };
  for (BlockArgument argument : body.getArguments())
    if (DictionaryAttr attrs = function.getArgAttrDict(argument.getArgNumber()))
      if (std::string key = stateKey(attrs); !key.empty())
        state[key] = offsetOf(argument);
  for (auto [i, value] : llvm::enumerate(body.getTerminator()->getOperands())) {
    DictionaryAttr attrs = function.getResultAttrDict(i);
    if (!attrs)
      continue;
    auto name = attrs.getAs<StringAttr>(kUpdateOfAttr);
    if (!name)
      name = attrs.getAs<StringAttr>(kBufferUpdateOfAttr);
    if (name)
      extraOffsets[value] = parameters.lookup(name.getValue());
    else if (std::string key = stateKey(attrs); !key.empty())
      extraOffsets[value] = state.lookup(key);
  }
}

void Lowering::placeAreas(artifact::ArtifactT &result) {
  int64_t partialsAt = alignUp(scratchOffset + scratchBytes);
  for (PartialUse use : partialUses)
    operations[use.operation]->kernel->args[use.arg] = partialsAt + use.offset;
  int64_t checksAt = alignUp(partialsAt + partialBytes);
  for (auto [k, use] : llvm::enumerate(checkUses)) {
    int64_t offset = checksAt + 4 * static_cast<int64_t>(k);
    operations[use.operation]->kernel->args[use.arg] = offset;
    auto check = std::make_unique<artifact::IndexCheckT>();
    check->offset = offset;
    check->operation = use.operation;
    result.checks.push_back(std::move(check));
  }
  int64_t constantsAt =
      alignUp(checksAt + 4 * static_cast<int64_t>(checkUses.size()));
  for (ConstantUse use : constantUses)
    operations[use.operation]->kernel->args[use.arg] =
        constantsAt + constants[use.constant].offset;
  for (PendingConstant &constant : constants) {
    auto entry = std::make_unique<artifact::ConstantT>();
    entry->offset = constantsAt + constant.offset;
    entry->data = std::move(constant.bytes);
    result.constants.push_back(std::move(entry));
  }
  result.arena_bytes = constantsAt + constantBytes;
}

/// `kernels` (ptxas's report for `arch`) with the block each launches with
/// in `artifact` and the blocks of it one SM holds.
static std::vector<KernelResources>
withOccupancy(std::vector<KernelResources> kernels,
              const artifact::ArtifactT &artifact, StringRef arch) {
  std::map<std::string, int64_t> blocks;
  for (const auto &operation : artifact.operations)
    if (operation->kernel)
      blocks[artifact.kernel_names[operation->kernel->kernel]] =
          operation->kernel->block;
  for (KernelResources &kernel : kernels) {
    kernel.block = blocks[kernel.kernel];
    kernel.blocksPerSM = residentBlocks(arch, kernel.block, kernel);
  }
  return kernels;
}

LogicalResult Lowering::compileKernels(artifact::ArtifactT &result) {
  if (options.archs.empty())
    return success();
  // One NVRTC compilation per cubin and one for the PTX of the newest
  // architecture, all at once: each is single-threaded.
  std::string newest = *llvm::max_element(options.archs, [](auto &a, auto &b) {
    return std::stoi(a.substr(3)) < std::stoi(b.substr(3));
  });
  size_t jobs = options.archs.size() + 1;
  std::vector<std::optional<llvm::Expected<std::vector<uint8_t>>>> images(jobs);
  std::vector<std::string> ptxasInfo(jobs);
  std::vector<std::thread> workers;
  for (size_t i = 0; i < jobs; ++i)
    workers.emplace_back([&, i] {
      bool ptx = i == options.archs.size();
      images[i].emplace(compileWithNVRTC(result.source,
                                         ptx ? newest : options.archs[i], ptx,
                                         report ? &ptxasInfo[i] : nullptr));
    });
  for (std::thread &worker : workers)
    worker.join();
  std::string errors;
  for (size_t i = 0; i < jobs; ++i) {
    llvm::Expected<std::vector<uint8_t>> &image = *images[i];
    if (!image) {
      errors += llvm::toString(image.takeError());
      continue;
    }
    if (i == options.archs.size()) {
      result.ptx.assign(image->begin(), image->end());
      result.ptx_arch = newest;
      continue;
    }
    if (report)
      report->kernels[options.archs[i]] =
          withOccupancy(parsePtxasInfo(ptxasInfo[i]), result, options.archs[i]);
    auto entry = std::make_unique<artifact::CubinT>();
    entry->arch = options.archs[i];
    entry->image = std::move(*image);
    result.cubins.push_back(std::move(entry));
  }
  if (!errors.empty())
    return function.emitError() << errors;
  return success();
}

FailureOr<std::unique_ptr<artifact::ArtifactT>> Lowering::run() {
  if (!function.getBody().hasOneBlock())
    return function.emitError(
        "the CUDA target compiles single-block functions");
  // The plan shares these buffers without listing the updated values.
  placeUpdates();
  scratchOffset = alignUp(plan.arenaBytes);
  for (Operation &op : function.getBody().front())
    if (failed(lowerOp(op)))
      return failure();
  auto result = std::make_unique<artifact::ArtifactT>();
  result->format_version = artifact::kFormatVersion;
  result->kiln_version = kKilnVersion;
  result->model_hash = options.modelHash;
  result->options = options.optionsText;
  placeAreas(*result);
  if (failed(describeInterface(*result)))
    return failure();
  result->kernel_names = kernelNames;
  result->source = kernelPrelude().str() + source;
  result->operations = std::move(operations);
  if (failed(compileKernels(*result)))
    return failure();
  return result;
}

std::string targetOptionsText(const TargetOptions &options) {
  std::string text;
  if (options.exactAttention)
    text += "|exact-attention";
  if (!options.batchLaunches)
    text += "|unbatched-launches";
  if (options.wideIndices)
    text += "|wide-indices";
  if (options.attention == AttentionBackend::Cudnn)
    text += "|cudnn-attention";
  if (options.queryGradient == QueryGradient::Atomic)
    text += "|atomic-query-gradient";
  if (options.queryGradient == QueryGradient::Recomputed)
    text += "|recomputed-query-gradient";
  if (options.queryGradient == QueryGradient::Stored)
    text += "|stored-query-gradient";
  if (options.attentionQueryTile != 128)
    text += "|attention-query-tile=" + std::to_string(options.attentionQueryTile);
  return text;
}

MemoryPlan planTargetMemory(func::FuncOp step, const TargetOptions &options) {
  return planMemory(step, overwritesOperand, [&](Operation *op) {
    return kernelScratchBytes(op, options);
  });
}

TargetOptions resolveTargetOptions(func::FuncOp step,
                                   const TargetOptions &options) {
  TargetOptions resolved = options;
  if (options.queryGradient != QueryGradient::Auto)
    return resolved;
  // The gradients cuDNN leaves to kiln keep their scratch after the plan's
  // buffers, where stored dS would add to the arena.
  if (options.attention == AttentionBackend::Cudnn) {
    resolved.queryGradient = QueryGradient::Recomputed;
    return resolved;
  }
  auto arena = [&](QueryGradient queryGradient) {
    resolved.queryGradient = queryGradient;
    return planTargetMemory(step, resolved).arenaBytes;
  };
  int64_t recomputed = arena(QueryGradient::Recomputed);
  int64_t stored = arena(QueryGradient::Stored);
  resolved.queryGradient = stored <= recomputed + recomputed / 100
                               ? QueryGradient::Stored
                               : QueryGradient::Recomputed;
  return resolved;
}

FailureOr<std::unique_ptr<artifact::ArtifactT>>
compileFunction(func::FuncOp function, const TargetOptions &options,
                TargetReport *report) {
  TargetOptions resolved = resolveTargetOptions(function, options);
  return Lowering(function, resolved, report).run();
}

} // namespace kiln::cuda
