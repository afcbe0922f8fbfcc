//===- kiln-compile.cpp - compile a model's training step -----------------===//
//
// `kiln-compile MODEL.onnx|MODEL.mlir [--dim NAME=SIZE ...] [--precision bf16]
// [--optimizer adamw] [--micro-batches K] --report-memory` builds the
// training step (kiln's training pipeline) and reports its static
// memory plan; `--max-memory SIZE` first picks the largest batch whose plan
// fits, or, with the batch given, recomputes activations (then products too)
// if that makes it fit. `--target=cuda [--arch=sm_90,sm_80] -o MODEL.kiln`
// compiles the step for NVIDIA GPUs into an artifact that kiln-run trains with.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Target/CUDATarget.h"
#include "kiln/Tools/ModelLoading.h"
#include "kiln/Tools/PipelineOptions.h"
#include "kiln/Training/Checkpoint.h"
#include "kiln/Transforms/MemoryPlan.h"
#include "kiln/Transforms/Pipeline.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

static cl::OptionCategory category("kiln-compile options");
static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.onnx|model.mlir>"),
                                      cl::cat(category));
static cl::list<std::string> dims("dim", cl::value_desc("NAME=SIZE"),
                                  cl::desc("Size of a symbolic dimension"),
                                  cl::cat(category));
static cl::opt<bool>
    reportMemory("report-memory",
                 cl::desc("Print the step's memory plan and its breakdown"),
                 cl::cat(category));
static cl::opt<std::string> maxMemory(
    "max-memory", cl::value_desc("SIZE"),
    cl::desc("Choose the largest batch whose step fits in SIZE (e.g. 80GiB)"),
    cl::cat(category));
static cl::opt<std::string>
    batchDim("batch-dim", cl::init("batch"),
             cl::desc("The symbolic dimension --max-memory chooses"),
             cl::cat(category));

static cl::opt<std::string> target(
    "target", cl::value_desc("cuda"),
    cl::desc("Compile the step for a device (cuda) into an artifact (-o)"),
    cl::cat(category));
static cl::list<std::string>
    archs("arch", cl::CommaSeparated, cl::value_desc("sm_90,sm_80"),
          cl::desc("GPU architectures to compile kernels for (default sm_90)"),
          cl::cat(category));
static cl::opt<std::string>
    outputPath("o", cl::value_desc("MODEL.kiln"),
               cl::desc("Where --target writes the artifact"),
               cl::cat(category));
static cl::opt<bool> forwardOnly(
    "forward",
    cl::desc("Compile the model's function as it is, without training it "
             "(--target=cuda: for running it forward and testing kernels)"),
    cl::cat(category));
static cl::opt<bool>
    printCuda("print-cuda",
              cl::desc("Print the generated CUDA C++ of --target=cuda"),
              cl::cat(category));
static cl::opt<bool> reportTraffic(
    "report-traffic",
    cl::desc("--target=cuda: print the bytes the step's kernels and GEMMs "
             "move at least and the products' floating-point operations, "
             "by op"),
    cl::cat(category));
static cl::opt<bool> reportKernels(
    "report-kernels",
    cl::desc("--target=cuda: print, for each compiled kernel, its block, "
             "the registers, shared and local memory ptxas allotted it "
             "(spills), how many of its blocks an SM holds, and the ops it "
             "runs for"),
    cl::cat(category));
static cl::opt<bool> exactAttention(
    "exact-attention",
    cl::desc("--target=cuda: attention by kernels that round exactly as the "
             "interpreter does, in double on CUDA cores, instead of tensor "
             "cores (slow; for checking results)"),
    cl::cat(category));
static cl::opt<bool> batchLaunches(
    "batch-launches", cl::init(true),
    cl::desc("--target=cuda: consecutive launches of one kernel (the "
             "optimizer's updates of equal-shaped parameters) are one launch "
             "(=false: a launch each, the ablation's unbatched optimizer)"),
    cl::cat(category));

static cl::opt<bool> wideIndices(
    "wide-indices",
    cl::desc("--target=cuda: every generated kernel computes its indices in "
             "64 bits, as those over tensors of 2^30 or more elements do "
             "(the others use 32 bits; for checking)"),
    cl::cat(category));

static cl::opt<kiln::cuda::AttentionBackend> attentionBackend(
    "attention", cl::init(kiln::cuda::AttentionBackend::Kiln),
    cl::desc("--target=cuda: who computes attention"),
    cl::values(clEnumValN(kiln::cuda::AttentionBackend::Kiln, "kiln",
                          "kiln's kernels (default)"),
               clEnumValN(kiln::cuda::AttentionBackend::Cudnn, "cudnn",
                          "cuDNN's fused flash attention where it computes "
                          "what kiln.attention does (16-bit, causal or no "
                          "mask, no dropout); kiln's kernels elsewhere")),
    cl::cat(category));

static cl::opt<kiln::cuda::QueryGradient> queryGradient(
    "attention-query-gradient", cl::init(kiln::cuda::QueryGradient::Auto),
    cl::desc("--target=cuda: how kiln's tensor-core kernels compute "
             "attention's query gradient"),
    cl::values(
        clEnumValN(kiln::cuda::QueryGradient::Atomic, "atomic",
                   "summed with f32 atomics by the key/value kernel (five "
                   "products; head dimensions up to 128)"),
        clEnumValN(kiln::cuda::QueryGradient::Recomputed, "recompute",
                   "by a kernel of its own that computes the scores again "
                   "(seven products, the same bits every run)"),
        clEnumValN(kiln::cuda::QueryGradient::Stored, "stored",
                   "by a kernel of its own from the score gradients the "
                   "key/value kernel stores in scratch (five products, the "
                   "same bits every run, 2 bytes per score; head dimensions "
                   "up to 64)"),
        clEnumValN(kiln::cuda::QueryGradient::Auto, "auto",
                   "stored where the step's memory plan holds the score "
                   "gradients in memory free while attention's gradient "
                   "runs (the arena grows by at most 1%), else recompute "
                   "(default)")),
    cl::cat(category));

static cl::opt<unsigned> attentionQueryTile(
    "attention-query-tile", cl::init(128),
    cl::desc("--target=cuda: query rows per block of attention's forward "
             "pass and query gradient on tensor cores at head dimensions up "
             "to 64 without dropout: 128 (two tiles of 16 per warp; "
             "default) or 64"),
    cl::cat(category));

/// What --max-memory recomputes for the chosen batch to fit: nothing,
/// "activations", or "activations and N of M products".
static std::string recomputedToFit;

/// The matrix products of `step`, fused or not.
static int64_t countProducts(mlir::func::FuncOp step) {
  int64_t products = 0;
  step.walk([&](kiln::MatmulOp) { ++products; });
  return products;
}

static int fail(const Twine &message) {
  errs() << "kiln-compile: error: " << message << "\n";
  return 1;
}

static std::string size(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = bytes;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return formatv("{0:f1} {1}", value, units[unit]).str();
}

/// A model's training step and its memory plan (which refers to the step).
struct PlannedStep {
  kiln::TrainingPipelineConfig config;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp step;
  kiln::MemoryPlan plan;
  /// The token vocabulary of the model's first input (0: none).
  int64_t vocabulary = 0;
};

/// The target options that decide the kernels (--target=cuda).
static kiln::cuda::TargetOptions kernelOptions() {
  kiln::cuda::TargetOptions options;
  options.exactAttention = exactAttention;
  options.batchLaunches = batchLaunches;
  options.wideIndices = wideIndices;
  options.attention = attentionBackend;
  options.queryGradient = queryGradient;
  options.attentionQueryTile = attentionQueryTile;
  return options;
}

/// Imports the model with `options`, runs the training pipeline on it and
/// plans the step; errors are emitted on `context`. A `trial` of a search
/// for what fits keeps its warnings and remarks to itself: the plan the
/// search settles on says them once.
static std::optional<PlannedStep> planStep(mlir::MLIRContext &context,
                                           const kiln::ImportOptions &options,
                                           kiln::TrainingPipelineConfig config,
                                           bool trial = true) {
  mlir::ScopedDiagnosticHandler quiet(&context, [&](mlir::Diagnostic &d) {
    return mlir::success(trial &&
                         d.getSeverity() != mlir::DiagnosticSeverity::Error);
  });
  PlannedStep planned;
  SourceMgr sourceManager;
  planned.module = kiln::loadModel(modelPath, &context, options, sourceManager);
  if (!planned.module)
    return std::nullopt;
  mlir::FailureOr<mlir::func::FuncOp> forward =
      kiln::findFunction(*planned.module, "");
  if (mlir::failed(forward))
    return std::nullopt;
  config.function = forward->getSymName().str();
  planned.config = config;
  planned.vocabulary = kiln::tokenVocabulary(*forward);
  if (forwardOnly) {
    planned.step = *forward;
  } else {
    auto functions = kiln::runTrainingPipeline(*planned.module, config);
    if (mlir::failed(functions))
      return std::nullopt;
    planned.step = functions->step;
  }
  // The pass recorded offsets; the report needs the buffers themselves, as
  // the target places them (a loss gradient over its logits, the scratch
  // of attention's gradient).
  if (target.empty()) {
    planned.plan = kiln::planMemory(planned.step);
    return planned;
  }
  planned.plan = kiln::cuda::planTargetMemory(
      planned.step,
      kiln::cuda::resolveTargetOptions(planned.step, kernelOptions()));
  return planned;
}

/// Parses "40GiB", "512MiB", "2.5GB" or a number of bytes.
static std::optional<int64_t> parseBytes(StringRef text) {
  StringRef number = text.take_while([](char c) {
    return isdigit(static_cast<unsigned char>(c)) || c == '.';
  });
  StringRef unit = text.drop_front(number.size()).trim();
  double value;
  if (number.empty() || number.getAsDouble(value))
    return std::nullopt;
  double scale = StringSwitch<double>(unit.lower())
                     .Cases("", "b", 1.0)
                     .Case("kib", 1024.0)
                     .Case("kb", 1e3)
                     .Case("mib", 1024.0 * 1024)
                     .Case("mb", 1e6)
                     .Case("gib", 1024.0 * 1024 * 1024)
                     .Case("gb", 1e9)
                     .Default(0.0);
  if (scale == 0.0)
    return std::nullopt;
  return static_cast<int64_t>(value * scale);
}

static void report(PlannedStep &planned) {
  const kiln::MemoryPlan &plan = planned.plan;
  outs() << "memory plan of @" << planned.step.getSymName() << " ("
         << kiln::precisionName(planned.config.precision) << " GEMMs, "
         << (planned.config.narrowNorms ? "16-bit norms, " : "")
         << kiln::optimizerKindName(planned.config.optimizer.kind) << ", "
         << plan.buffers.size() << " buffers)\n";
  outs() << formatv("  {0,-30} {1,12}\n", "arena (peak memory)",
                    size(plan.arenaBytes));
  outs() << formatv("  {0,-30} {1,12}\n", "largest live set",
                    size(plan.peakLiveBytes));
  for (int k = 0; k < 5; ++k) {
    auto bufferKind = static_cast<kiln::BufferKind>(k);
    bool transient = bufferKind == kiln::BufferKind::Gradient ||
                     bufferKind == kiln::BufferKind::Activation;
    outs() << formatv("  {0,-30} {1,12}{2}\n", kiln::bufferKindName(bufferKind),
                      size(plan.bytesByKind[k]),
                      transient ? "  (at their peak)" : "");
  }
  // Ops that will be kernels: all but constants, parameter reads and views
  // (reshapes, slices of contiguous blocks, and fusions whose results are
  // strided views or filled by one).
  int gemms = 0, epilogues = 0, attention = 0, fusions = 0, others = 0;
  auto isEpilogue = [](mlir::Operation &op) {
    auto fusion = dyn_cast<kiln::FusionOp>(op);
    return fusion && !fusion.getBody().getOps<kiln::MatmulOp>().empty();
  };
  auto isView = [&](mlir::Operation &op) {
    return isa<kiln::FusionOp, kiln::SliceOp>(op) &&
           llvm::all_of(op.getResults(), [&](mlir::Value result) {
             return plan.computedElsewhere(result);
           });
  };
  for (mlir::Operation &op :
       planned.step.getBody().front().without_terminator()) {
    if (isView(op))
      continue;
    if (isEpilogue(op))
      ++gemms, ++epilogues;
    else if (isa<kiln::MatmulOp>(op))
      ++gemms;
    else if (isa<kiln::AttentionOp, kiln::AttentionGradOp>(op))
      ++attention;
    else if (isa<kiln::FusionOp>(op))
      ++fusions;
    else if (!isa<kiln::ConstantOp, kiln::ParameterOp, kiln::ReshapeOp>(op))
      ++others;
  }
  outs() << formatv("kernels: {0} ({1} GEMMs, {2} of them with a fused "
                    "epilogue, {3} attention, {4} fusions, {5} other ops)\n",
                    gemms + attention + fusions + others, gemms, epilogues,
                    attention, fusions, others);
  // The largest buffers say where the memory goes.
  std::vector<const kiln::Buffer *> largest;
  for (const kiln::Buffer &buffer : plan.buffers)
    largest.push_back(&buffer);
  std::sort(largest.begin(), largest.end(),
            [](auto *a, auto *b) { return a->bytes > b->bytes; });
  outs() << "largest buffers:\n";
  for (const kiln::Buffer *buffer : llvm::ArrayRef(largest).take_front(5)) {
    std::string producer = "argument", type = "scratch";
    if (buffer->scratchOf) {
      producer = buffer->scratchOf->getName().getStringRef().str();
    } else {
      if (mlir::Operation *op = buffer->value.getDefiningOp())
        producer = op->getName().getStringRef().str();
      type.clear();
      raw_string_ostream(type) << buffer->value.getType();
    }
    outs() << formatv("  {0,12}  {1,-24} {2}\n", size(buffer->bytes), producer,
                      type);
  }
}

/// `value` with a decimal prefix (k, M, G, T) before `unit`, as bandwidths
/// and throughputs are quoted.
static std::string decimal(double value, StringRef unit) {
  const char *prefixes[] = {"", "k", "M", "G", "T"};
  int prefix = 0;
  while (prefix < 4 && value >= 1000) {
    value /= 1000;
    ++prefix;
  }
  return formatv("{0:f1} {1}{2}", value, prefixes[prefix], unit).str();
}

/// `origin` (an op and its location) with the layer numbers of the
/// location's names replaced by N (`h.3` -> `h.N`), so that the layers of a
/// stack add up.
static std::string acrossLayers(StringRef origin) {
  std::string merged;
  for (size_t i = 0; i < origin.size(); ++i) {
    merged += origin[i];
    if (origin[i] != '.' || i + 1 == origin.size() || !isDigit(origin[i + 1]))
      continue;
    merged += 'N';
    while (i + 1 < origin.size() && isDigit(origin[i + 1]))
      ++i;
  }
  return merged;
}

/// The memory traffic the artifact's operations record (each operand and
/// result of a launch or GEMM once: a floor, which caches can only lower by
/// what one kernel rereads), in total, by the kind of op they come from,
/// and, for the largest, by where in the model (layers added up).
static void printTraffic(const kiln::artifact::ArtifactT &artifact) {
  struct Share {
    int64_t bytes = 0, flops = 0, operations = 0;
  };
  llvm::StringMap<Share> kinds, sites;
  Share total;
  for (const auto &operation : artifact.operations) {
    if (operation->epilogue_fallback_of >= 0)
      continue; // runs only where cuBLASLt cannot compute its epilogue
    StringRef origin = operation->origin;
    for (Share *share : {&kinds[origin.split(" at ").first],
                         &sites[acrossLayers(origin)], &total}) {
      share->bytes += operation->bytes;
      share->flops += operation->flops;
      ++share->operations;
    }
  }
  auto largestFirst = [](const llvm::StringMap<Share> &shares) {
    std::vector<std::pair<StringRef, Share>> sorted;
    for (auto &entry : shares)
      sorted.emplace_back(entry.getKey(), entry.getValue());
    llvm::sort(sorted, [](auto &a, auto &b) {
      return a.second.bytes != b.second.bytes ? a.second.bytes > b.second.bytes
                                              : a.first < b.first;
    });
    return sorted;
  };
  auto print = [](StringRef name, const Share &share) {
    outs() << formatv("  {0,10} {1,12} {2,5}  {3}\n", decimal(share.bytes, "B"),
                      decimal(share.flops, "FLOP"), share.operations, name);
  };
  outs() << "traffic: " << decimal(total.bytes, "B") << " moved at least, "
         << decimal(total.flops, "FLOP") << " in products, " << total.operations
         << " operations\n";
  for (auto &[name, share] : largestFirst(kinds))
    print(name, share);
  constexpr size_t kLargestSites = 10;
  outs() << "largest by where in the model (layers added up):\n";
  auto sorted = largestFirst(sites);
  for (auto &[name, share] : ArrayRef(sorted).take_front(kLargestSites))
    print(name, share);
}

/// What ptxas allotted each kernel, with its block, its blocks per SM and
/// the first op it runs for (--report-kernels).
static void printKernels(const kiln::artifact::ArtifactT &artifact,
                         const kiln::cuda::TargetReport &report) {
  struct Use {
    std::string origin;
    size_t launches = 0;
  };
  std::vector<Use> uses(artifact.kernel_names.size());
  for (const auto &operation : artifact.operations) {
    if (!operation->kernel)
      continue;
    Use &use = uses[operation->kernel->kernel];
    if (use.launches++ == 0)
      use.origin = operation->origin;
  }
  for (const auto &[arch, kernels] : report.kernels) {
    outs() << "kernels for " << arch
           << ": block, registers, shared memory, local memory per thread "
              "(spilled registers), blocks per SM, launches, op\n";
    // In the artifact's order (ptxas reports the last first).
    std::vector<std::pair<size_t, const kiln::cuda::KernelResources *>> byIndex;
    for (const kiln::cuda::KernelResources &k : kernels) {
      size_t n = 0;
      if (!StringRef(k.kernel).rsplit('_').second.getAsInteger(10, n) &&
          n < uses.size())
        byIndex.push_back({n, &k});
    }
    llvm::sort(byIndex);
    for (auto [n, resources] : byIndex) {
      const kiln::cuda::KernelResources &k = *resources;
      outs() << formatv("  {0,-16} {1,4} {2,4} regs {3,6} B smem {4,5} B local "
                        "({5} B spilled) {6,2} per SM {7,4}x {8}\n",
                        k.kernel, k.block, k.registers, k.sharedBytes,
                        k.stackBytes, k.spillStoreBytes,
                        k.blocksPerSM ? std::to_string(k.blocksPerSM) : "?",
                        uses[n].launches, uses[n].origin);
    }
  }
}

/// Writes the artifact of `planned` (--target=cuda).
static int compileForCuda(PlannedStep &planned) {
  kiln::cuda::TargetOptions targetOptions = kernelOptions();
  if (!archs.empty())
    targetOptions.archs.assign(archs.begin(), archs.end());
  if (outputPath.empty() && !reportKernels)
    targetOptions.archs.clear(); // nothing to write: nothing to compile
  auto modelBytes = MemoryBuffer::getFile(modelPath);
  targetOptions.modelHash =
      kiln::digest(modelBytes ? (*modelBytes)->getBuffer() : StringRef());
  targetOptions.initialAccumulator = kiln::initialAccumulatorFromOptions();
  targetOptions.optionsText = kiln::pipelineOptionsIdentity() +
                              kiln::cuda::targetOptionsText(targetOptions);
  if (!recomputedToFit.empty())
    targetOptions.optionsText += "|recomputed-to-fit: " + recomputedToFit;
  kiln::cuda::TargetReport targetReport;
  auto artifact =
      kiln::cuda::compileFunction(planned.step, targetOptions, &targetReport);
  if (mlir::failed(artifact))
    return 1;
  for (const std::string &kept : targetReport.keptAttention)
    outs() << "attention on kiln's kernels, not cuDNN: " << kept << "\n";
  for (const auto &[reason, ops] : targetReport.exactAttention)
    outs() << "attention on the exact kernels (CUDA cores, slow), not tensor "
              "cores, for "
           << ops.size() << " op" << (ops.size() > 1 ? "s" : "") << " ("
           << ops.front() << (ops.size() > 1 ? ", ..." : "") << "): " << reason
           << "\n";
  (*artifact)->vocabulary = planned.vocabulary;
  if (printCuda)
    outs() << (*artifact)->source;
  if (reportTraffic)
    printTraffic(**artifact);
  if (reportKernels)
    printKernels(**artifact, targetReport);
  if (outputPath.empty())
    return 0;
  std::string error;
  if (!kiln::artifact::write(**artifact, outputPath, error))
    return fail(error);
  kiln::artifact::Summary summary = kiln::artifact::summarize(**artifact);
  outs() << formatv(
      "wrote {0}: {1} operations ({2} GEMMs: {3} with a bias epilogue, {4} "
      "with bias and GELU, {5} with DGELU, {6} summing a bias gradient; {7} "
      "kernel launches (and {8} where cuBLASLt cannot sum a bias gradient) "
      "of {9} distinct kernels{12}), arena {10}, cubins for {11}\n",
      outputPath, summary.operations, summary.gemms, summary.bias, summary.gelu,
      summary.dgelu, summary.biasGradients, summary.launches, summary.fallbacks,
      summary.kernels, size((*artifact)->arena_bytes),
      llvm::join(targetOptions.archs, ", "),
      summary.libraryAttentions ? formatv("; {0} attention passes by cuDNN",
                                          summary.libraryAttentions)
                                      .str()
                                : std::string());
  return 0;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&category, &kiln::pipelineOptions()});
  cl::ParseCommandLineOptions(argc, argv, "kiln training-step compiler\n");
  kiln::ImportOptions options;
  for (const std::string &dim : dims)
    if (!kiln::parseDimensionOption(dim, options))
      return fail("--dim expects NAME=SIZE with a positive SIZE, got '" + dim +
                  "'");
  Expected<kiln::TrainingPipelineConfig> config =
      kiln::pipelineConfigFromOptions();
  if (!config)
    return fail(toString(config.takeError()));
  if ((printCuda || reportTraffic || reportKernels) && target.empty())
    return fail(std::string(printCuda       ? "--print-cuda"
                            : reportTraffic ? "--report-traffic"
                                            : "--report-kernels") +
                " needs --target=cuda");
  if (!reportMemory && maxMemory.empty() && target.empty())
    return fail("nothing to do: give --report-memory, --max-memory or "
                "--target=cuda");
  if (!target.empty() && target != "cuda")
    return fail("unknown --target '" + target + "' (the one target is cuda)");
  if (!target.empty() && outputPath.empty() && !printCuda && !reportTraffic &&
      !reportKernels)
    return fail("--target=cuda needs -o MODEL.kiln (or --print-cuda, "
                "--report-traffic, --report-kernels)");
  for (const std::string &arch : archs)
    if (!kiln::cuda::isArchitectureName(arch))
      return fail("--arch expects names like sm_80 or sm_90, got '" + arch +
                  "'");
  if (attentionQueryTile != 64 && attentionQueryTile != 128)
    return fail("--attention-query-tile must be 64 or 128, got " +
                Twine(attentionQueryTile.getValue()));

  mlir::MLIRContext context;
  kiln::registerKilnDialects(context);
  kiln::ToolDiagnostics diagnostics(&context);
  auto planAndReport = [&] {
    std::optional<PlannedStep> planned =
        planStep(context, options, *config, /*trial=*/false);
    if (!planned)
      return 1;
    if (reportMemory || !maxMemory.empty())
      report(*planned);
    return target.empty() ? 0 : compileForCuda(*planned);
  };
  if (maxMemory.empty())
    return planAndReport();
  std::optional<int64_t> budget = parseBytes(maxMemory);
  if (!budget || *budget <= 0)
    return fail("--max-memory expects a size such as 40GiB, got '" + maxMemory +
                "'");

  // A batch the user chose: recompute activations, then as few products as
  // make it fit.
  if (options.dimensions.count(batchDim)) {
    std::optional<PlannedStep> planned = planStep(context, options, *config);
    if (!planned)
      return 1;
    auto fits = [&] { return planned->plan.arenaBytes <= *budget; };
    auto replan = [&] {
      planned = planStep(context, options, *config);
      return planned.has_value();
    };
    if (!fits() && !config->recompute) {
      config->recompute = true;
      if (!replan())
        return 1;
      recomputedToFit = "activations";
    }
    if (!fits() && !config->recomputeProducts) {
      int64_t without = countProducts(planned->step);
      config->recomputeProducts = true;
      config->maxRecomputedProducts = -1;
      if (!replan())
        return 1;
      int64_t all = countProducts(planned->step) - without;
      if (fits() && all > 1) {
        // As few products as fit: bisect between a count that does not fit
        // and one that does (the plan shrinks as the count grows, though
        // not at every step; the count found fits).
        int64_t bad = 0, good = all;
        while (good - bad > 1) {
          config->maxRecomputedProducts = bad + (good - bad) / 2;
          if (!replan())
            return 1;
          (fits() ? good : bad) = config->maxRecomputedProducts;
        }
        config->maxRecomputedProducts = good;
        if (!replan())
          return 1;
      }
      int64_t used = config->maxRecomputedProducts < 0
                         ? all
                         : config->maxRecomputedProducts;
      if (all > 0)
        recomputedToFit =
            formatv("activations and {0} of {1} products", used, all).str();
    }
    if (!fits())
      return fail(formatv("the step at {0}={1} needs {2} even recomputing "
                          "activations and products, more than --max-memory "
                          "{3}: choose a smaller {0}, or leave it out to find "
                          "the largest that fits",
                          batchDim, options.dimensions[batchDim],
                          size(planned->plan.arenaBytes), maxMemory));
    if (!recomputedToFit.empty())
      outs() << "recomputing " << recomputedToFit << " to fit in " << maxMemory
             << "\n";
    return planAndReport();
  }

  // The largest batch that fits: double, then bisect, planning each size.
  auto fits = [&](int64_t batch) -> std::optional<bool> {
    options.dimensions[batchDim] = batch;
    std::optional<PlannedStep> planned = planStep(context, options, *config);
    if (!planned)
      return std::nullopt;
    return planned->plan.arenaBytes <= *budget;
  };
  std::optional<bool> one = fits(1);
  if (!one)
    return 1;
  if (!*one)
    return fail("the step does not fit in " + maxMemory + " even with " +
                batchDim + "=1");
  int64_t good = 1, bad = 0;
  for (int64_t batch = 2; batch <= (int64_t(1) << 20); batch *= 2) {
    std::optional<bool> result = fits(batch);
    if (!result)
      return 1;
    if (!*result) {
      bad = batch;
      break;
    }
    good = batch;
  }
  while (bad && bad - good > 1) {
    int64_t middle = good + (bad - good) / 2;
    std::optional<bool> result = fits(middle);
    if (!result)
      return 1;
    (*result ? good : bad) = middle;
  }
  outs() << "largest " << batchDim << " that fits in " << maxMemory << ": "
         << good << "\n";
  options.dimensions[batchDim] = good;
  return planAndReport();
}
