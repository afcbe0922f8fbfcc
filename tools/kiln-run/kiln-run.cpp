//===- kiln-run.cpp - run a kiln model ------------------------------------===//
//
// `kiln-run --device=cpu MODEL.onnx|MODEL.mlir --input NAME=FILE ...
// [--output-dir DIR]` runs the forward function on the reference
// interpreter, prints every output and optionally writes them as
// TensorProto files. With --train it trains the model instead (Training.cpp).
// A compiled MODEL.kiln runs on the GPU (--device=cuda, DeviceRunner.cpp).
//
//===----------------------------------------------------------------------===//

#include "DeviceRunner.h"
#include "Training.h"

#include "kiln/Interpreter/Interpreter.h"
#include "kiln/TensorIO/TensorFiles.h"
#include "kiln/Tools/ModelLoading.h"
#include "kiln/Tools/PipelineOptions.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace llvm;

static cl::OptionCategory category("kiln-run options");

static cl::opt<std::string> modelPath(cl::Positional, cl::cat(category),
                                      cl::desc("<model.onnx|model.mlir|model.kiln>"),
                                      cl::Required);
static cl::opt<std::string> device(
    cl::cat(category), "device",
    cl::desc("Where to run: cpu (the reference interpreter; .onnx and .mlir "
             "models) or cuda (a .kiln artifact from kiln-compile "
             "--target=cuda); the default follows the model"));
static cl::list<std::string> inputs(cl::cat(category), "input",
                                    cl::desc("A model input from a .pb or .npy "
                                             "file"),
                                    cl::value_desc("NAME=FILE"));
static cl::list<std::string> dims(cl::cat(category), "dim",
                                  cl::desc("Size of a symbolic dimension"),
                                  cl::value_desc("NAME=SIZE"));
static cl::opt<std::string>
    outputDirectory(cl::cat(category), "output-dir",
                    cl::desc("Write each output as DIR/<name>.pb"),
                    cl::value_desc("DIR"));
static cl::opt<bool> tuneGemms(
    cl::cat(category), "tune-gemms",
    cl::desc("With a .kiln artifact: choose each GEMM's cuBLASLt algorithm "
             "by timing its best candidates at load"));
static cl::opt<bool> gemmBiasGradients(
    cl::cat(category), "gemm-bias-gradients", cl::init(true),
    cl::desc("With a .kiln artifact: let cuBLASLt sum each bias gradient as "
             "the weight gradient's GEMM reads its operand, where it has an "
             "algorithm for that (=false: the artifact's kernels sum them)"));
static cl::opt<bool> cudaGraph(
    cl::cat(category), "cuda-graph", cl::init(true),
    cl::desc("With a .kiln artifact: capture the step once as a CUDA graph "
             "and replay it (=false: launch its operations one by one every "
             "step)"));
static cl::opt<bool> deviceGrids(
    cl::cat(category), "device-grids", cl::init(true),
    cl::desc("With a .kiln artifact: launch each kernel whose loops stride "
             "over its grid in no more blocks than the GPU holds at once "
             "(=false: in the grid the artifact names)"));
static cl::opt<int> profileSteps(
    cl::cat(category), "profile", cl::init(0),
    cl::desc("With a .kiln artifact and --train: after training, time this "
             "many more steps (on the last batch) operation by operation and "
             "print the kernels that take the most time, their share of the "
             "step and their distance from the GPU's measured ceilings"),
    cl::value_desc("STEPS"));
static cl::opt<int> profileRows(
    cl::cat(category), "profile-rows", cl::init(10),
    cl::desc("With --profile: how many of the kernels that take the most "
             "time to print, one row each (the others are summed in one "
             "line); 0 prints every one"),
    cl::value_desc("N"));
static cl::opt<std::string> functionName(cl::cat(category), "function",
                                         cl::desc("The function to run"));

static int fail(const Twine &message) {
  errs() << "kiln-run: error: " << message << "\n";
  return 1;
}

/// Prints one output: a scalar's value, or a tensor's summary statistics.
static void printOutput(StringRef name, const kiln::Tensor &tensor) {
  outs() << name << ": " << kiln::dtypeName(tensor.getDType()) << "[";
  interleave(tensor.getShape(), outs(), "x");
  outs() << "]";
  int64_t n = tensor.getNumElements();
  if (n == 1) {
    outs() << format(" = %.9g\n", tensor.getAsDouble(0));
    return;
  }
  if (n == 0) {
    outs() << " (empty)\n";
    return;
  }
  double minimum = INFINITY, maximum = -INFINITY, sum = 0, squares = 0;
  for (int64_t i = 0; i < n; ++i) {
    double x = tensor.getAsDouble(i);
    minimum = std::min(minimum, x);
    maximum = std::max(maximum, x);
    sum += x;
    squares += x * x;
  }
  double mean = sum / n;
  double variance = std::max(squares / n - mean * mean, 0.0);
  outs() << format("  min %.6g  max %.6g  mean %.6g  std %.6g\n", minimum,
                   maximum, mean, std::sqrt(variance));
}

/// The --input tensors by name (and `files`, their files); fails on a
/// malformed option or file.
static std::optional<StringMap<kiln::Tensor>>
readInputs(StringMap<std::string> &files) {
  StringMap<kiln::Tensor> tensors;
  for (const std::string &entry : inputs) {
    auto [name, file] = StringRef(entry).split('=');
    if (name.empty() || file.empty()) {
      fail("--input expects NAME=FILE, got '" + entry + "'");
      return std::nullopt;
    }
    Expected<kiln::Tensor> tensor = kiln::readTensorFile(file);
    if (!tensor) {
      fail(toString(tensor.takeError()));
      return std::nullopt;
    }
    tensors[name] = std::move(*tensor);
    files[name] = file.str();
  }
  return tensors;
}

/// kiln-run MODEL.kiln: the options that shape the step were compiled in.
static int runArtifactCommand() {
  for (auto &entry : cl::getRegisteredOptions()) {
    cl::Option *option = entry.getValue();
    if (option->getNumOccurrences() &&
        (is_contained(option->Categories, &kiln::pipelineOptions()) ||
         option->ArgStr == "dim" || option->ArgStr == "function"))
      return fail("--" + option->ArgStr +
                  " shapes the compiled step: give it to kiln-compile");
  }
  if (kiln::trainingSelectsParameters())
    return fail("--train=REGEX shapes the compiled step: give --freeze to "
                "kiln-compile");
  StringMap<std::string> files;
  std::optional<StringMap<kiln::Tensor>> tensors = readInputs(files);
  if (!tensors)
    return 1;
  kiln::ArtifactRunOptions options;
  options.train = kiln::trainingRequested();
  options.tuneGemms = tuneGemms;
  options.gemmBiasGradients = gemmBiasGradients;
  options.cudaGraph = cudaGraph;
  options.deviceGrids = deviceGrids;
  options.profileSteps = profileSteps;
  options.profileRows = profileRows;
  options.outputDirectory = outputDirectory;
  return kiln::runArtifact(modelPath, *tensors, options, printOutput);
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(
      {&category, &kiln::pipelineOptions(), &kiln::trainingOptions()});
  cl::ParseCommandLineOptions(argc, argv, "kiln model runner\n");
  bool artifact = StringRef(modelPath).ends_with(".kiln");
  if (device.empty())
    device = artifact ? "cuda" : "cpu";
  if (device != "cpu" && device != "cuda")
    return fail("unknown --device '" + device + "' (cpu or cuda)");
  if (device == "cuda" && !artifact)
    return fail("--device=cuda runs compiled artifacts: compile the model "
                "with kiln-compile --target=cuda -o MODEL.kiln first");
  if (device == "cpu" && artifact)
    return fail("'" + modelPath + "' is compiled for the GPU; train on the "
                "CPU from the model's .onnx or .mlir");
  if (profileSteps < 0)
    return fail("--profile expects a number of steps, at least 1");
  if (profileRows < 0)
    return fail("--profile-rows expects a number of rows, or 0 for all");
  if (profileRows.getNumOccurrences() && profileSteps == 0)
    return fail("--profile-rows says how --profile prints: give --profile");
  if (artifact)
    return runArtifactCommand();
  if (profileSteps > 0)
    return fail("--profile times the steps of a compiled artifact on the "
                "GPU: give a .kiln file from kiln-compile --target=cuda");
  if (tuneGemms.getNumOccurrences() || gemmBiasGradients.getNumOccurrences() ||
      cudaGraph.getNumOccurrences() || deviceGrids.getNumOccurrences())
    return fail("--tune-gemms, --gemm-bias-gradients, --cuda-graph and "
                "--device-grids choose how a compiled artifact runs on the "
                "GPU: give a .kiln file from kiln-compile --target=cuda");
  kiln::ImportOptions options;
  for (const std::string &dim : dims)
    if (!kiln::parseDimensionOption(dim, options))
      return fail("--dim expects NAME=SIZE with a positive SIZE, got '" + dim +
                  "'");

  mlir::MLIRContext context;
  kiln::registerKilnDialects(context);
  kiln::ToolDiagnostics diagnostics(&context);
  SourceMgr sourceManager;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      kiln::loadModel(modelPath, &context, options, sourceManager);
  if (!module)
    return 1;
  mlir::FailureOr<mlir::func::FuncOp> function =
      kiln::findFunction(*module, functionName);
  if (mlir::failed(function))
    return 1;

  // Read --input NAME=FILE, matching the function's arguments by name.
  std::vector<std::string> names;
  for (unsigned i = 0; i < function->getNumArguments(); ++i)
    names.push_back(kiln::argumentName(*function, i));
  StringMap<std::string> files;
  std::optional<StringMap<kiln::Tensor>> read = readInputs(files);
  if (!read)
    return 1;
  StringMap<kiln::Tensor> &tensors = *read;
  for (const auto &entry : tensors)
    if (!is_contained(names, entry.getKey()))
      return fail("the model has no input named '" + entry.getKey() +
                  "'; its inputs are: " + join(names, ", "));
  if (kiln::trainingRequested())
    return kiln::runTraining(*module, *function, modelPath, join(dims, ","),
                             tensors);

  SmallVector<kiln::Tensor> arguments;
  for (auto [i, name] : enumerate(names)) {
    auto it = tensors.find(name);
    if (it == tensors.end())
      return fail("input '" + name + "' is missing; give it with --input " +
                  name + "=FILE");
    mlir::Type expected = function->getArgumentTypes()[i];
    mlir::Type actual = it->second.getType(&context);
    if (expected != actual) {
      std::string text;
      raw_string_ostream os(text);
      os << "input '" << name << "' must be " << expected << ", but "
         << files[name] << " holds " << actual;
      return fail(text);
    }
    arguments.push_back(std::move(it->second));
  }

  mlir::FailureOr<SmallVector<kiln::Tensor>> results =
      kiln::interpret(*function, arguments);
  if (mlir::failed(results))
    return 1;

  if (!outputDirectory.empty())
    if (std::error_code error = sys::fs::create_directories(outputDirectory))
      return fail("cannot create '" + outputDirectory +
                  "': " + error.message());
  for (auto [i, tensor] : enumerate(*results)) {
    std::string name = kiln::resultName(*function, i);
    printOutput(name, tensor);
    if (outputDirectory.empty())
      continue;
    SmallString<256> path(outputDirectory);
    sys::path::append(path, name + ".pb");
    if (Error error = kiln::writeTensorProtoFile(tensor, name, path))
      return fail(toString(std::move(error)));
  }
  return 0;
}
