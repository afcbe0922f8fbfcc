//===- kiln-compile.cpp - compile a model's training step -----------------===//
//
// `kiln-compile MODEL.onnx|MODEL.mlir [--dim NAME=SIZE ...] [--precision bf16]
// [--optimizer adamw] [--micro-batches K] --report-memory` builds the
// training step (autodiff, optimizer, precision) and reports its static
// memory plan. Code generation for GPUs (--target) is not built yet.
//
//===----------------------------------------------------------------------===//

#include "kiln/Autodiff/Autodiff.h"
#include "kiln/Autodiff/TrainingStep.h"
#include "kiln/Tools/ModelLoading.h"
#include "kiln/Transforms/AssignPrecision.h"
#include "kiln/Transforms/MemoryPlan.h"

#include "mlir/IR/MLIRContext.h"
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
static cl::opt<std::string> precision("precision", cl::init("fp32"),
                                      cl::desc("fp32 or bf16"),
                                      cl::cat(category));
static cl::opt<std::string> optimizer("optimizer", cl::init("adamw"),
                                      cl::desc("adamw, sgd or adagrad"),
                                      cl::cat(category));
static cl::opt<int64_t> microBatches("micro-batches", cl::init(1),
                                     cl::desc("Micro-batches per step"),
                                     cl::cat(category));
static cl::opt<std::string> loss("loss", cl::desc("The output to minimize"),
                                 cl::cat(category));
static cl::opt<bool> reportMemory(
    "report-memory", cl::desc("Print the step's memory plan and its breakdown"),
    cl::cat(category));

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

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "kiln training-step compiler\n");
  kiln::ImportOptions options;
  for (const std::string &dim : dims)
    if (!kiln::parseDimensionOption(dim, options))
      return fail("--dim expects NAME=SIZE with a positive SIZE, got '" + dim +
                  "'");
  std::optional<kiln::Precision> mode = kiln::parsePrecision(precision);
  if (!mode)
    return fail("unknown --precision '" + precision + "' (fp32 or bf16)");
  kiln::OptimizerOptions optimizerOptions;
  std::optional<kiln::OptimizerKind> kind = kiln::parseOptimizerKind(optimizer);
  if (!kind)
    return fail("unknown --optimizer '" + optimizer + "' (adamw, sgd or adagrad)");
  optimizerOptions.kind = *kind;
  optimizerOptions.microBatches = microBatches;
  if (!reportMemory)
    return fail("nothing to do: give --report-memory (GPU code generation is "
                "not available in this build)");

  mlir::MLIRContext context;
  kiln::registerKilnDialects(context);
  kiln::ToolDiagnostics diagnostics(&context);
  SourceMgr sourceManager;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      kiln::loadModel(modelPath, &context, options, sourceManager);
  if (!module)
    return 1;
  mlir::FailureOr<mlir::func::FuncOp> forward = kiln::findFunction(*module, "");
  if (mlir::failed(forward))
    return 1;
  kiln::AutodiffOptions autodiff;
  autodiff.loss = loss;
  auto gradient = kiln::buildGradientFunction(*forward, autodiff);
  if (mlir::failed(gradient))
    return 1;
  auto step = kiln::buildTrainingStep(*gradient, optimizerOptions);
  if (mlir::failed(step))
    return 1;
  kiln::assignPrecision(*step, *mode);

  kiln::MemoryPlan plan = kiln::planMemory(*step);
  outs() << "memory plan of @" << step->getSymName() << " (" << precision
         << " GEMMs, " << optimizer << ", " << plan.buffers.size()
         << " buffers)\n";
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
  // The largest buffers say where the memory goes.
  std::vector<const kiln::Buffer *> largest;
  for (const kiln::Buffer &buffer : plan.buffers)
    largest.push_back(&buffer);
  std::sort(largest.begin(), largest.end(),
            [](auto *a, auto *b) { return a->bytes > b->bytes; });
  outs() << "largest buffers:\n";
  for (const kiln::Buffer *buffer : llvm::ArrayRef(largest).take_front(5)) {
    std::string producer = "argument";
    if (mlir::Operation *op = buffer->value.getDefiningOp())
      producer = op->getName().getStringRef().str();
    std::string type;
    raw_string_ostream os(type);
    os << buffer->value.getType();
    outs() << formatv("  {0,12}  {1,-24} {2}\n", size(buffer->bytes), producer,
                      os.str());
  }
  return 0;
}
