//===- Training.cpp - kiln-run --train ------------------------------------===//
//
// Trains a model on the reference interpreter: options, data, the step loop
// with its progress line and JSON log, checkpoints and exports.
//
//===----------------------------------------------------------------------===//

#include "Training.h"
#include "kiln/Training/StepRunner.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/Interpreter.h"
#include "kiln/Interpreter/TensorAttr.h"
#include "kiln/Tools/ModelLoading.h"
#include "kiln/Tools/PipelineOptions.h"
#include "kiln/TensorIO/ModelExport.h"
#include "kiln/TensorIO/TensorFiles.h"
#include "kiln/Training/Checkpoint.h"
#include "kiln/Training/TokenData.h"
#include "kiln/Training/Trainer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace llvm;

namespace kiln {

static cl::OptionCategory category("Training (with --train)");

// `--train` alone trains every parameter; `--train=REGEX` only those whose
// name matches.
static cl::opt<std::string> train(
    "train", cl::ValueOptional, cl::cat(category),
    cl::desc("Train the model; with =REGEX, only the matching parameters"),
    cl::value_desc("REGEX"));
static cl::opt<int64_t> steps("steps", cl::init(1), cl::cat(category),
                              cl::desc("Total number of optimizer steps"));
static cl::opt<double> lr("lr", cl::init(1e-3), cl::cat(category),
                          cl::desc("Peak learning rate"));
static cl::opt<std::string> schedule("schedule", cl::init("constant"),
                                     cl::cat(category),
                                     cl::desc("constant, linear or cosine"));
static cl::opt<int64_t> warmup("warmup", cl::init(0), cl::cat(category),
                               cl::desc("Linear warmup steps"));
static cl::opt<double> minLr("min-lr", cl::init(0.0), cl::cat(category),
                             cl::desc("Learning rate that decay ends at"));
static cl::opt<uint64_t> seed("seed", cl::init(0), cl::cat(category),
                              cl::desc("Seed of data sampling and of the "
                                       "initialization of declared "
                                       "parameters"));
static cl::opt<std::string> data("data", cl::cat(category),
                                 cl::desc("A flat token file (nanoGPT .bin)"),
                                 cl::value_desc("FILE"));
static cl::opt<std::string> dataDtype("data-dtype", cl::init("uint16"),
                                      cl::cat(category),
                                      cl::desc("uint16 or uint32"));
static cl::opt<std::string> labels(
    "labels", cl::init("inputs"), cl::cat(category),
    cl::desc("Labels of token windows: 'inputs' (the model shifts them, as "
             "Hugging Face models do) or 'next' (the following tokens)"));
static cl::opt<int64_t> batch("batch", cl::init(0), cl::cat(category),
                              cl::desc("Windows per micro-batch (default: the "
                                       "model's batch size)"));
static cl::opt<int64_t> seq("seq", cl::init(0), cl::cat(category),
                            cl::desc("Tokens per window (default: the "
                                     "model's sequence length)"));
static cl::opt<std::string> saveGradients(
    "save-gradients", cl::cat(category), cl::value_desc("DIR"),
    cl::desc("Write the last step's gradients as DIR/<parameter>.pb"));
static cl::opt<std::string> saveParams(
    "save-params", cl::cat(category), cl::value_desc("DIR"),
    cl::desc("Write the trained parameters as DIR/<parameter>.pb"));
static cl::opt<std::string> checkpoint("checkpoint", cl::cat(category),
                                       cl::value_desc("DIR"),
                                       cl::desc("Checkpoint directory"));
static cl::opt<int64_t> saveEvery("save-every", cl::init(0), cl::cat(category),
                                  cl::desc("Checkpoint every K steps (and at "
                                           "the end)"));
static cl::opt<std::string> initSafetensors(
    "init-safetensors", cl::cat(category), cl::value_desc("FILE"),
    cl::desc("Start from the parameters in FILE (every parameter of the "
             "model, by name, in the model's shapes: an export of kiln or a "
             "Hugging Face model.safetensors)"));
static cl::opt<std::string> resume("resume", cl::cat(category),
                                   cl::value_desc("DIR"),
                                   cl::desc("Continue from a checkpoint"));
static cl::opt<std::string> exportSafetensors(
    "export-safetensors", cl::cat(category), cl::value_desc("FILE"),
    cl::desc("Write the trained parameters as safetensors"));
static cl::opt<std::string> exportOnnx(
    "export-onnx", cl::cat(category), cl::value_desc("FILE"),
    cl::desc("Write the model with its trained initializers"));
static cl::opt<std::string> logFile("log", cl::cat(category),
                                    cl::value_desc("FILE.jsonl"),
                                    cl::desc("One JSON object per step"));

bool trainingRequested() { return train.getNumOccurrences() > 0; }

bool trainingSelectsParameters() { return !train.empty(); }

cl::OptionCategory &trainingOptions() { return category; }

static int fail(const Twine &message) {
  errs() << "kiln-run: error: " << message << "\n";
  return 1;
}

/// The training spec from the options; an error message on bad values.
static Expected<TrainingSpec> readSpec() {
  auto bad = [](const Twine &message) {
    return createStringError(inconvertibleErrorCode(), message);
  };
  TrainingSpec spec;
  Expected<TrainingPipelineConfig> pipeline = pipelineConfigFromOptions();
  if (!pipeline)
    return pipeline.takeError();
  spec.pipeline = *pipeline;
  spec.initialAccumulator = initialAccumulatorFromOptions();
  LearningRateSchedule &s = spec.schedule;
  if (schedule == "constant")
    s.kind = ScheduleKind::Constant;
  else if (schedule == "linear")
    s.kind = ScheduleKind::Linear;
  else if (schedule == "cosine")
    s.kind = ScheduleKind::Cosine;
  else
    return bad("unknown --schedule '" + schedule + "' (constant, linear or "
               "cosine)");
  if (lr <= 0 || warmup < 0 || minLr < 0)
    return bad("--lr must be positive, --warmup and --min-lr not negative");
  s.lr = lr;
  s.warmup = warmup;
  s.minLr = minLr;
  if (steps < 1)
    return bad("--steps must be at least 1");
  spec.totalSteps = steps;
  spec.seed = seed;
  spec.pipeline.autodiff.train = train;
  return spec;
}

/// Everything that must match for a checkpoint to resume: all options that
/// change the numbers, except the total number of steps.
static std::string specIdentity() {
  return formatv("{0}|{1:e16}|{2}|{3}|{4:e16}|{5}|{6}|{7}|{8}|{9}|{10}",
                 pipelineOptionsIdentity(), double(lr), schedule, warmup,
                 double(minLr), seed, data, labels, batch, seq, train)
      .str();
}

/// The vocabulary of the token input: the table its first lookup reads.

namespace {
/// Where each step's inputs come from.
class BatchSource {
public:
  virtual ~BatchSource() = default;
  virtual SmallVector<Tensor> batchOf(int64_t step) = 0;
};

/// Token windows from a file.
class TokenSource : public BatchSource {
public:
  TokenSource(TokenDataset dataset, int64_t windows, int64_t length)
      : dataset(std::move(dataset)), windows(windows), length(length) {}
  SmallVector<Tensor> batchOf(int64_t step) override {
    Tensor inputs, targets;
    dataset.batch(seed, step, windows, length, labels == "next", inputs,
                  targets);
    return {std::move(inputs), std::move(targets)};
  }

private:
  TokenDataset dataset;
  int64_t windows, length;
};

/// --input tensors: one batch, or several stacked along the first
/// dimension, used in turn.
class TensorSource : public BatchSource {
public:
  TensorSource(SmallVector<Tensor> tensors, SmallVector<int64_t> rows,
               int64_t count)
      : tensors(std::move(tensors)), rows(std::move(rows)), count(count) {}
  SmallVector<Tensor> batchOf(int64_t step) override {
    int64_t which = (step - 1) % count;
    SmallVector<Tensor> batch;
    for (auto [tensor, size] : llvm::zip(tensors, rows)) {
      SmallVector<int64_t> shape(tensor.getShape());
      shape[0] = size;
      Tensor slice(tensor.getDType(), shape);
      int64_t n = slice.getNumElements();
      for (int64_t i = 0; i < n; ++i) {
        if (slice.isFloat())
          slice.floats()[i] = tensor.floats()[which * n + i];
        else
          slice.ints()[i] = tensor.ints()[which * n + i];
      }
      batch.push_back(std::move(slice));
    }
    return batch;
  }

private:
  SmallVector<Tensor> tensors;
  SmallVector<int64_t> rows;
  int64_t count;
};
} // namespace

static Expected<std::unique_ptr<BatchSource>>
makeSource(const StepRunner &runner, const StringMap<Tensor> &inputs,
           int64_t microBatches) {
  auto bad = [](const Twine &message) {
    return createStringError(inconvertibleErrorCode(), message);
  };
  const std::vector<InputSpec> &specs = runner.inputs();
  if (!data.empty()) {
    if (specs.size() != 2)
      return bad("--data feeds models with two inputs (tokens and labels); "
                 "this one has " + Twine(specs.size()));
    const std::vector<int64_t> &tokens = specs[0].shape;
    if (tokens.size() != 2)
      return bad("--data needs a [batch, seq] token input");
    int64_t windows = tokens[0], length = tokens[1];
    if ((batch && batch * microBatches != windows) || (seq && seq != length))
      return bad(formatv("--batch {0} --seq {1} do not match the model's "
                         "compiled input {2}x{3} (use --dim to choose them)",
                         batch, seq, windows / microBatches, length));
    if (labels != "inputs" && labels != "next")
      return bad("--labels must be 'inputs' or 'next'");
    unsigned width = dataDtype == "uint16" ? 2 : dataDtype == "uint32" ? 4 : 0;
    if (!width)
      return bad("--data-dtype must be uint16 or uint32");
    Expected<TokenDataset> dataset =
        TokenDataset::open(data, width, length, runner.vocabulary());
    if (!dataset)
      return dataset.takeError();
    return std::make_unique<TokenSource>(std::move(*dataset), windows, length);
  }
  SmallVector<Tensor> tensors;
  SmallVector<int64_t> rows;
  int64_t count = 0;
  for (const InputSpec &spec : specs) {
    auto it = inputs.find(spec.name);
    if (it == inputs.end())
      return bad("input '" + spec.name + "' is missing; give it with --input " +
                 spec.name + "=FILE, or give --data");
    const Tensor &given = it->second;
    ArrayRef<int64_t> shape = given.getShape(), expected = spec.shape;
    bool fits = given.getDType() == spec.type && !expected.empty() &&
                shape.size() == expected.size() &&
                shape.drop_front() == expected.drop_front() &&
                shape[0] % expected[0] == 0 && shape[0] > 0;
    if (!fits)
      return bad(formatv("input '{0}' must be {1}[{2}] (or several such "
                         "batches stacked along the first dimension)",
                         spec.name, dtypeName(spec.type),
                         make_range(expected.begin(), expected.end())));
    int64_t batches = shape[0] / expected[0];
    if (count && batches != count)
      return bad("inputs hold different numbers of batches");
    count = batches;
    tensors.push_back(given);
    rows.push_back(expected[0]);
  }
  return std::make_unique<TensorSource>(std::move(tensors), std::move(rows),
                                        count);
}

static Error writeTensors(StringRef directory, const NamedTensors &tensors) {
  if (std::error_code error = sys::fs::create_directories(directory))
    return createStringError(error, "cannot create " + directory);
  for (const auto &[name, tensor] : tensors) {
    SmallString<256> path(directory);
    sys::path::append(path, name + ".pb");
    if (Error error = writeTensorProtoFile(tensor, name, path))
      return error;
  }
  return Error::success();
}

static std::string clock(double seconds) {
  int64_t s = static_cast<int64_t>(seconds);
  return s >= 3600 ? formatv("{0}:{1:2}:{2:2}", s / 3600, (s / 60) % 60, s % 60)
                   : formatv("{0}:{1:2}", s / 60, s % 60).str();
}

/// Writes the parameters and exports asked for after training.
static int writeResults(StringRef modelPath, ArrayRef<std::string> order,
                        StringMap<Tensor> &values) {
  NamedTensors parameters;
  for (const std::string &name : order)
    parameters.emplace_back(name, values[name]);
  if (!saveParams.empty())
    if (Error error = writeTensors(saveParams, parameters))
      return fail(toString(std::move(error)));
  if (!exportSafetensors.empty())
    if (Error error = writeSafetensors(exportSafetensors, parameters,
                                       {{"format", "pt"}}))
      return fail(toString(std::move(error)));
  if (!exportOnnx.empty()) {
    if (!StringRef(modelPath).ends_with(".onnx"))
      return fail("--export-onnx needs an ONNX model");
    if (Error error = exportONNXWithInitializers(modelPath, exportOnnx, values))
      return fail(toString(std::move(error)));
  }
  return 0;
}

/// A model whose TrainingInfoProto defines its own step: the imported
/// function returns the updated initializers (`kiln.update_of`); each step
/// runs it on the --input tensors and feeds the updates back.
static int runONNXTrainingGraph(mlir::func::FuncOp function,
                                StringRef modelPath,
                                const StringMap<Tensor> &inputs) {
  StringMap<Tensor> parameters;
  std::vector<std::string> order;
  function.walk([&](ParameterOp op) {
    if (parameters.count(op.getName()) || !op.getInitialValue())
      return;
    parameters[op.getName()] = *tensorFromAttr(*op.getInitialValue());
    order.push_back(op.getName().str());
  });
  SmallVector<Tensor> arguments;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    auto name = function.getArgAttrOfType<mlir::StringAttr>(i, "kiln.name");
    auto it = name ? inputs.find(name.getValue()) : inputs.end();
    if (it == inputs.end())
      return fail("input '" + (name ? name.str() : std::to_string(i)) +
                  "' is missing; give it with --input");
    arguments.push_back(it->second);
  }
  InterpreterOptions options;
  options.parameters = &parameters;
  for (int64_t step = 1; step <= steps; ++step) {
    mlir::FailureOr<SmallVector<Tensor>> results =
        interpret(function, arguments, options);
    if (mlir::failed(results))
      return 1;
    std::string line = formatv("step {0}/{1}", step, steps).str();
    for (unsigned r = 0; r < function.getNumResults(); ++r) {
      if (auto target =
              function.getResultAttrOfType<mlir::StringAttr>(r, kUpdateOfAttr)) {
        parameters[target.getValue()] = std::move((*results)[r]);
      } else if ((*results)[r].getNumElements() == 1) {
        line += formatv("  {0} {1:f4}", resultName(function, r),
                        (*results)[r].getAsDouble(0));
      }
    }
    outs() << line << "\n";
  }
  return writeResults(modelPath, order, parameters);
}

namespace {
/// Steps on the reference interpreter.
class InterpreterRunner : public StepRunner {
public:
  InterpreterRunner(Trainer &trainer, mlir::func::FuncOp forward)
      : trainer(trainer), tokens(tokenVocabulary(forward)) {
    mlir::func::FuncOp step = trainer.stepFunction();
    for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
      auto type = cast<mlir::RankedTensorType>(step.getArgumentTypes()[i]);
      auto name = forward.getArgAttrOfType<mlir::StringAttr>(i, "kiln.name");
      specs.push_back({name ? name.str() : "arg" + std::to_string(i),
                       *dtypeOf(type.getElementType()),
                       {type.getShape().begin(), type.getShape().end()}});
    }
  }
  const std::vector<InputSpec> &inputs() const override { return specs; }
  int64_t vocabulary() const override { return tokens; }
  Expected<std::optional<StepReport>> step(ArrayRef<Tensor> batch,
                                           bool) override {
    mlir::FailureOr<StepReport> report = trainer.step(batch);
    if (mlir::failed(report)) // the interpreter reported the error
      return createStringError(inconvertibleErrorCode(), "");
    return std::optional<StepReport>(*report);
  }
  int64_t completedSteps() const override { return trainer.completedSteps(); }
  Expected<CheckpointContents> contents() override {
    return checkpointContents(trainer);
  }
  Error restore(const CheckpointContents &contents) override {
    restoreCheckpointContents(trainer, contents);
    return Error::success();
  }
  Expected<NamedTensors> gradients(ArrayRef<Tensor> batch) override {
    mlir::FailureOr<NamedTensors> grads = trainer.gradients(batch);
    if (mlir::failed(grads))
      return createStringError(inconvertibleErrorCode(), "");
    return std::move(*grads);
  }
  bool hasOnnxModel() const override { return true; }

private:
  Trainer &trainer;
  std::vector<InputSpec> specs;
  int64_t tokens;
};
} // namespace

Expected<TrainingSpec> trainingSpecFromOptions() { return readSpec(); }

std::string trainingSpecIdentity() { return specIdentity(); }

int64_t trainingSteps() { return steps; }

/// Reports an error that may already have been printed (empty message).
static int failWith(Error error) {
  std::string message = toString(std::move(error));
  return message.empty() ? 1 : fail(message);
}

/// Replaces the runner's parameters by those in the safetensors file
/// `path`, which must hold every one of them, in the model's shapes.
static Error initializeFrom(StringRef path, StepRunner &runner) {
  Expected<SafetensorsFile> file = readSafetensors(path);
  if (!file)
    return file.takeError();
  Expected<CheckpointContents> contents = runner.contents();
  if (!contents)
    return contents.takeError();
  auto bad = [&](const Twine &why) {
    return createStringError(inconvertibleErrorCode(), path + ": " + why);
  };
  for (auto &[name, value] : contents->parameters) {
    auto it = llvm::find_if(file->tensors, [&](auto &t) { return t.first == name; });
    if (it == file->tensors.end())
      return bad("has no tensor '" + name + "', a parameter of the model");
    if (it->second.getShape() != value.getShape() ||
        it->second.isFloat() != value.isFloat())
      return bad(formatv("'{0}' is {1}[{2}]; the model's is {3}[{4}]", name,
                         dtypeName(it->second.getDType()),
                         make_range(it->second.getShape().begin(),
                                    it->second.getShape().end()),
                         dtypeName(value.getDType()),
                         make_range(value.getShape().begin(), value.getShape().end())));
    // Values of another float type (a bf16 checkpoint) are converted.
    for (int64_t i = 0; i < value.getNumElements(); ++i) {
      if (value.isFloat())
        value.setFromDouble(i, it->second.floats()[i]);
      else
        value.ints()[i] = it->second.ints()[i];
    }
  }
  return runner.restore(*contents);
}

int runTrainingLoop(StepRunner &runner, StringRef modelPath,
                    const CheckpointIdentity &identity,
                    const StringMap<Tensor> &inputs, int64_t microBatches,
                    int64_t reportEvery) {
  Expected<std::unique_ptr<BatchSource>> source =
      makeSource(runner, inputs, microBatches);
  if (!source)
    return fail(toString(source.takeError()));
  if (!initSafetensors.empty()) {
    if (!resume.empty())
      return fail("--init-safetensors and --resume both choose the starting "
                  "parameters: give one");
    if (Error error = initializeFrom(initSafetensors, runner))
      return failWith(std::move(error));
  }
  if (!resume.empty()) {
    Expected<CheckpointContents> expected = runner.contents();
    if (!expected)
      return failWith(expected.takeError());
    Expected<CheckpointContents> restored =
        readCheckpoint(resume, *expected, identity);
    if (!restored)
      return fail(toString(restored.takeError()));
    if (Error error = runner.restore(*restored))
      return failWith(std::move(error));
    if (runner.completedSteps() >= steps)
      return fail(formatv("checkpoint {0} is at step {1}; --steps {2} leaves "
                          "nothing to run",
                          resume, runner.completedSteps(), steps));
  }
  auto save = [&]() -> Error {
    Expected<CheckpointContents> contents = runner.contents();
    if (!contents)
      return contents.takeError();
    return writeCheckpoint(checkpoint, *contents, identity);
  };

  std::unique_ptr<raw_fd_ostream> log;
  if (!logFile.empty()) {
    std::error_code error;
    log = std::make_unique<raw_fd_ostream>(
        logFile, error, resume.empty() ? sys::fs::OF_None : sys::fs::OF_Append);
    if (error)
      return fail("cannot write " + logFile + ": " + error.message());
  }
  bool terminal = sys::Process::StandardOutIsDisplayed();
  // Throughput counts what the first input holds per step: tokens when it
  // holds integers (a language model's ids), samples (its batch dimension)
  // when it holds floats (images, audio), whose elements are no tokens.
  int64_t unitsPerStep = 0;
  bool countsTokens = true;
  if (!runner.inputs().empty()) {
    const InputSpec &first = runner.inputs()[0];
    countsTokens = !isFloat(first.type);
    unitsPerStep = 1;
    if (countsTokens)
      for (int64_t size : first.shape)
        unitsPerStep *= size;
    else if (!first.shape.empty())
      unitsPerStep = first.shape[0];
  }
  StringRef unit = countsTokens ? "tok/s" : "samples/s";
  StringRef unitKey = countsTokens ? "tokens_per_s" : "samples_per_s";
  auto start = std::chrono::steady_clock::now();
  int64_t first = runner.completedSteps() + 1;
  int64_t lastCheckpoint = runner.completedSteps();
  for (int64_t step = first; step <= steps; ++step) {
    SmallVector<Tensor> batchInputs = (*source)->batchOf(step);
    if (step == steps && !saveGradients.empty()) {
      Expected<NamedTensors> grads = runner.gradients(batchInputs);
      if (!grads)
        return failWith(grads.takeError());
      if (Error error = writeTensors(saveGradients, *grads))
        return fail(toString(std::move(error)));
    }
    bool periodic = saveEvery > 0 && step % saveEvery == 0;
    bool saving = !checkpoint.empty() && (periodic || step == steps);
    // Checkpoints and the last step read the loss back, and so does every
    // `reportEvery`-th step.
    bool reporting = step == first || step == steps || saving ||
                     (step - first + 1) % reportEvery == 0;
    Expected<std::optional<StepReport>> report = runner.step(batchInputs, reporting);
    if (!report) {
      if (!checkpoint.empty() && lastCheckpoint > 0)
        errs() << "kiln-run: the last good checkpoint, of step "
               << lastCheckpoint << ", is in " << checkpoint << "\n";
      return failWith(report.takeError());
    }
    if (*report) {
      double elapsed = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      int64_t done = step - first + 1;
      double unitsPerSecond = unitsPerStep * done / std::max(elapsed, 1e-9);
      double eta = elapsed / done * (steps - step);
      std::string speed =
          unitsPerStep
              ? formatv(unitsPerSecond >= 100 ? "  {0:f0} {1}" : "  {0:f2} {1}",
                        unitsPerSecond, unit)
                    .str()
              : std::string();
      // fp16's loss scaler skips a step whose gradients overflow.
      const StepReport &r = **report;
      std::string scaling =
          r.lossScale ? formatv("  scale {0}{1}", r.lossScale,
                                r.skipped ? " (overflow: step skipped)" : "")
                            .str()
                      : std::string();
      std::string line = formatv(
          "step {0}/{1}  loss {2:f4}  lr {3:e2}{4}{5}  elapsed {6}  ETA {7}",
          step, steps, r.loss, r.lr, speed, scaling, clock(elapsed), clock(eta));
      if (terminal)
        outs() << "\r" << line << "\x1b[K" << (step == steps ? "\n" : "");
      else if (step == first || step == steps ||
               step % std::max<int64_t>(1, steps / 10) == 0)
        outs() << line << "\n";
      outs().flush();
      if (log) {
        json::Object entry{{"step", step},
                           {"loss", r.loss},
                           {"lr", r.lr},
                           {unitKey, unitsPerSecond},
                           {"elapsed_s", elapsed}};
        // A skipped step's norm is not finite, which JSON cannot hold.
        entry["grad_norm"] =
            r.skipped ? json::Value(nullptr) : json::Value(r.gradNorm);
        if (r.lossScale) {
          entry["loss_scale"] = r.lossScale;
          entry["skipped"] = r.skipped;
        }
        *log << json::Value(std::move(entry)) << "\n";
        log->flush();
      }
    }
    if (saving) {
      if (Error error = save())
        return fail(toString(std::move(error)));
      lastCheckpoint = step;
    }
  }

  // Exports hold the model's shapes, without tensor-core padding.
  Expected<CheckpointContents> final = runner.contents();
  if (!final)
    return failWith(final.takeError());
  if (!exportOnnx.empty() && !runner.hasOnnxModel())
    return fail("--export-onnx rewrites the initializers of the model's "
                ".onnx file; an artifact has none (use --export-safetensors)");
  StringMap<Tensor> values;
  std::vector<std::string> order;
  for (auto &[name, tensor] : final->parameters) {
    order.push_back(name);
    values[name] = tensor;
  }
  return writeResults(modelPath, order, values);
}

int runTraining(mlir::ModuleOp module, mlir::func::FuncOp forward,
                StringRef modelPath, StringRef importIdentity,
                const StringMap<Tensor> &inputs) {
  for (unsigned r = 0; r < forward.getNumResults(); ++r)
    if (forward.getResultAttr(r, kUpdateOfAttr))
      return runONNXTrainingGraph(forward, modelPath, inputs);
  Expected<TrainingSpec> spec = readSpec();
  if (!spec)
    return fail(toString(spec.takeError()));
  mlir::FailureOr<std::unique_ptr<Trainer>> created =
      Trainer::create(module, forward, *spec);
  if (mlir::failed(created))
    return 1;
  InterpreterRunner runner(**created, forward);
  ErrorOr<std::unique_ptr<MemoryBuffer>> modelBytes = MemoryBuffer::getFile(modelPath);
  CheckpointIdentity identity{
      digest((modelBytes ? (*modelBytes)->getBuffer() : StringRef()).str() +
             "|" + importIdentity.str()),
      digest(specIdentity())};
  return runTrainingLoop(runner, modelPath, identity, inputs,
                         spec->pipeline.optimizer.microBatches, /*reportEvery=*/1);
}

} // namespace kiln
