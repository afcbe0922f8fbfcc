//===- TargetTest.cpp - the CUDA target against the interpreter -----------===//
//
// Compiles training steps of real exported models to artifacts, runs them
// (Executor.h: in the CPU emulation, or on a GPU) and compares every result
// of one step with the interpreter's. The kernels compute in double and
// round where the interpreter rounds, so steps agree to a few f32 ulps
// (2e-6 relative, beyond which a kernel computes something else); attention
// runs on such kernels here, the tensor-core ones, whose rounding differs,
// are checked alone at their bound (KernelTest.cpp). On a GPU,
// cuBLAS accumulates products in f32 where the interpreter uses f64: over
// the K <= 256 terms of these models that is at most K * 2^-24 of the sum
// of |products|, and 1e-4 bounds what reaches the results.
//
//===----------------------------------------------------------------------===//

#include "ExampleStep.h"
#include "Executor.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Interpreter/Interpreter.h"
#include "kiln/Target/CUDATarget.h"
#include "kiln/TensorIO/TensorFiles.h"
#include "kiln/Tools/ModelLoading.h"
#include "kiln/Training/Trainer.h"
#include "kiln/Transforms/MemoryPlan.h"

#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>

using namespace kiln;

namespace {

/// The largest |a - b| / max(1, |b|) over all elements.
double relativeError(const Tensor &a, const Tensor &b) {
  double worst = 0.0;
  for (int64_t i = 0; i < b.getNumElements(); ++i) {
    double x = isFloat(a.getDType()) ? a.getAsDouble(i) : a.ints()[i];
    double y = isFloat(b.getDType()) ? b.getAsDouble(i) : b.ints()[i];
    worst = std::max(worst, std::fabs(x - y) / std::max(1.0, std::fabs(y)));
  }
  return worst;
}

/// The largest |x| over all elements.
double largestMagnitude(const Tensor &tensor) {
  double largest = 0.0;
  for (int64_t i = 0; i < tensor.getNumElements(); ++i)
    largest = std::max(largest, std::fabs(tensor.getAsDouble(i)));
  return largest;
}

/// What a step compares beyond its precision: 16-bit norms,
/// recomputation, the bias gradients GEMMs sum summed by kernels instead,
/// the ablation's baseline (the exported attention, no fusion, a launch per
/// parameter update, no CUDA graph).
struct StepOptions {
  bool narrowNorms = false;
  bool recompute = false;
  bool gemmBiasGradients = true;
  bool rewriteAttention = true;
  bool fuse = true;
  bool batchLaunches = true;
  bool cudaGraph = true;
  /// Grid-strided kernels in as many blocks as the device holds at once.
  bool deviceGrids = true;
  /// At most this many blocks for those kernels (0: no limit).
  unsigned gridLimit = 0;
  /// Every kernel's indices in 64 bits (`--wide-indices`).
  bool wideIndices = false;
  /// Attention by cuDNN where it applies (the artifact must then have some).
  bool cudnnAttention = false;
  /// Attention by the kernels that round where the interpreter does, or on
  /// tensor cores, whose query gradient as `queryGradient` says.
  bool exactAttention = true;
  cuda::QueryGradient queryGradient = cuda::QueryGradient::Recomputed;
};

class TargetTest : public ::testing::Test {
protected:
  TargetTest() { registerKilnDialects(context); }

  /// One training step of `model` on `inputs`, on the interpreter and in
  /// the emulated artifact; expects every result within `tolerance`.
  void compareStep(const std::string &model,
                   const std::vector<std::string> &inputs, Precision precision,
                   double tolerance, const ImportOptions &import = {},
                   StepOptions stepOptions = {}) {
    bool narrowNorms = stepOptions.narrowNorms;
    llvm::SourceMgr sources;
    module = loadModel(model, &context, import, sources);
    ASSERT_TRUE(module);
    auto forward = findFunction(*module, "");
    ASSERT_TRUE(mlir::succeeded(forward));
    TrainingSpec spec;
    spec.pipeline.precision = precision;
    spec.pipeline.narrowNorms = narrowNorms;
    spec.pipeline.recompute = stepOptions.recompute;
    spec.pipeline.rewriteAttention = stepOptions.rewriteAttention;
    spec.pipeline.fuse = stepOptions.fuse;
    spec.schedule.lr = 1e-2;
    auto trainer = Trainer::create(*module, *forward, spec);
    ASSERT_TRUE(mlir::succeeded(trainer));
    mlir::func::FuncOp step = (*trainer)->stepFunction();
    // Narrow norms reach the step: its norms read 16-bit inputs.
    int norms = 0, narrow = 0;
    step.walk([&](mlir::Operation *op) {
      if (!mlir::isa<LayerNormOp, RmsNormOp>(op))
        return;
      ++norms;
      narrow += !mlir::getElementTypeOrSelf(op->getOperand(0)).isF32();
    });
    if (narrowNorms) {
      EXPECT_GT(norms, 0);
    }
    EXPECT_EQ(narrow, narrowNorms ? norms : 0);

    cuda::TargetOptions options;
    options.archs = kiln::testing::executorArchitectures();
    options.exactAttention = stepOptions.exactAttention;
    options.queryGradient = stepOptions.queryGradient;
    options.batchLaunches = stepOptions.batchLaunches;
    options.wideIndices = stepOptions.wideIndices;
    if (stepOptions.cudnnAttention)
      options.attention = cuda::AttentionBackend::Cudnn;
    auto compiled = cuda::compileFunction(step, options);
    ASSERT_TRUE(mlir::succeeded(compiled));
    // Results the artifact computes over an operand's memory, other than
    // views and the updates of parameters and state.
    MemoryPlan plan = planMemory(step, cuda::overwritesOperand);
    overwrites = 0;
    for (mlir::Operation &op : step.getBody().front())
      for (mlir::Value result : op.getResults()) {
        auto it = plan.bufferOf.find(result);
        if (it == plan.bufferOf.end() || plan.computedElsewhere(result) ||
            mlir::isa<ReshapeOp>(op) ||
            (plan.buffers[it->second].kind != BufferKind::Activation &&
             plan.buffers[it->second].kind != BufferKind::Gradient))
          continue;
        overwrites += llvm::any_of(op.getOperands(), [&](mlir::Value operand) {
          auto other = plan.bufferOf.find(operand);
          return other != plan.bufferOf.end() && other->second == it->second;
        });
      }
    if (stepOptions.cudnnAttention) {
      EXPECT_GT(artifact::summarize(**compiled).libraryAttentions, 0u);
    }
    llvm::StringRef kernels = (*compiled)->source;
    narrowKernels = kernels.count("  typedef int idx;\n");
    wideKernels = kernels.count("  typedef i64 idx;\n");
    launches = 0;
    fewerBlocks = 0;
    for (const auto &operation : (*compiled)->operations) {
      launches += operation->kernel != nullptr;
      fewerBlocks +=
          operation->kernel && operation->kernel->grid_strided &&
          operation->kernel->grid > kiln::testing::kEmulatedResidentBlocks;
    }
    for (const auto &operation : (*compiled)->operations)
      if (operation->gemm &&
          operation->gemm->output_type != artifact::ElementType::F32)
        ++narrowGemms[operation->gemm->epilogue];
    std::string error;
    kiln::testing::ExecutorOptions executorOptions;
    executorOptions.gemmBiasGradients = stepOptions.gemmBiasGradients;
    executorOptions.cudaGraph = stepOptions.cudaGraph;
    executorOptions.deviceGrids = stepOptions.deviceGrids;
    executorOptions.gridLimit = stepOptions.gridLimit;
    auto executor =
        kiln::testing::makeExecutor(**compiled, error, executorOptions);
    ASSERT_TRUE(executor) << error;

    // The step's arguments: the batch, lr, the step number, the state.
    llvm::SmallVector<Tensor> arguments;
    for (const std::string &file : inputs) {
      auto tensor = readTensorFile(file);
      ASSERT_TRUE(bool(tensor)) << llvm::toString(tensor.takeError());
      arguments.push_back(*tensor);
    }
    Tensor lr(DType::F32, {}), number(DType::I64, {});
    lr.setFromDouble(0, 1e-2);
    number.ints()[0] = 1;
    arguments.push_back(lr);
    arguments.push_back(number);
    for (auto &[name, value] : (*trainer)->state())
      arguments.push_back(value);
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (!step.getArgAttr(i, "kiln.state_of"))
        executor->write(
            step.getArgAttrOfType<mlir::StringAttr>(i, "kiln.name").str(),
            arguments[i]);
    for (auto &[name, value] : (*trainer)->state())
      executor->write(name, value);
    for (auto &entry : (*trainer)->parameters())
      if (executor->has(entry.getKey().str()))
        executor->write(entry.getKey().str(), entry.getValue());

    InterpreterOptions interpreterOptions;
    interpreterOptions.parameters = &(*trainer)->parameters();
    auto expected = interpret(step, arguments, interpreterOptions);
    ASSERT_TRUE(mlir::succeeded(expected));
    executor->run();

    bool exactGemms = !kiln::testing::gemmsAccumulateInF32();
    if (!exactGemms)
      tolerance = std::max(tolerance, 1e-4);
    EXPECT_LE(relativeError(executor->read("loss"), (*expected)[0]), tolerance);
    EXPECT_LE(relativeError(executor->read("grad_norm"), (*expected)[1]),
              tolerance);
    // Adam's first update is lr * g / (|g| + eps): wherever the exact
    // gradient is 0 (a key bias, to which softmax is invariant), the computed
    // one is rounding noise and its update lr * sign(noise). Updated
    // parameters are compared where |g| > 1e-6, far above the noise of f32
    // sums this size, and where the GEMMs accumulate in f64 as the
    // interpreter does and attention rounds where it does (cuDNN's and the
    // tensor-core kernels' rounding moves gradients by more than 1e-6); the
    // first moment, 0.1 * g, everywhere.
    unsigned next = 2;
    size_t stateStart = 2 + (*trainer)->trainedParameters().size();
    auto firstMoment = [&](const std::string &name) -> const Tensor & {
      NamedTensors &state = (*trainer)->state();
      auto it = llvm::find_if(
          state, [&](auto &e) { return e.first == name + ".exp_avg"; });
      EXPECT_NE(it, state.end()) << "these steps use AdamW";
      return (*expected)[stateStart + (it - state.begin())];
    };
    for (const std::string &name : (*trainer)->trainedParameters()) {
      const Tensor &moment = firstMoment(name);
      Tensor got = executor->read(name);
      const Tensor &want = (*expected)[next++];
      if (!exactGemms || stepOptions.cudnnAttention ||
          !stepOptions.exactAttention)
        continue;
      for (int64_t i = 0; i < want.getNumElements(); ++i)
        if (std::fabs(moment.getAsDouble(i)) > 1e-7) {
          ASSERT_LE(std::fabs(got.getAsDouble(i) - want.getAsDouble(i)),
                    tolerance * std::max(1.0, std::fabs(want.getAsDouble(i))))
              << name << " at " << i;
        }
    }
    // GEMMs that accumulate in f32 rather than f64 move a product by about
    // 1e-7 of itself, which flips some 16-bit roundings of a bf16 or fp16
    // step by one unit; the gradients summed from those elements move by a
    // unit's share of their scale (the multi-query step's c_attn gradient
    // by 0.8 of a bf16 unit of its largest element, as on the CPU when the
    // emulation's GEMMs accumulate in f32). The state is then held to two
    // such units of its largest element.
    double unit = exactGemms                      ? 0.0
                  : precision == Precision::BF16 ? 0x1p-8
                  : precision == Precision::FP16 ? 0x1p-11
                                                  : 0.0;
    for (auto &[name, value] : (*trainer)->state()) {
      const Tensor &want = (*expected)[next++];
      EXPECT_LE(relativeError(executor->read(name), want),
                std::max(tolerance, 2 * unit * largestMagnitude(want)))
          << name;
    }
  }

  /// Expects the compared step to store products in 16 bits after each of
  /// cuBLASLt's epilogues (a 16-bit bias, a GELU and its 16-bit input, a
  /// 16-bit GELU input for DGELU), so that the comparison covers them.
  void expectNarrowEpilogues() {
    for (artifact::Epilogue epilogue :
         {artifact::Epilogue::None, artifact::Epilogue::Bias,
          artifact::Epilogue::GeluAuxBias, artifact::Epilogue::DGelu})
      EXPECT_GT(narrowGemms[epilogue], 0)
          << artifact::EnumNameEpilogue(epilogue);
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// The compared artifact's GEMMs with a 16-bit result, by epilogue.
  std::map<artifact::Epilogue, int> narrowGemms;
  /// The compared artifact's kernel launches, and those an emulated device
  /// runs in fewer blocks than their grids (ExecutorOptions::deviceGrids).
  int launches = 0, fewerBlocks = 0;
  /// Kernels that compute their indices in 32 bits, and in 64.
  size_t narrowKernels = 0, wideKernels = 0;
  /// The compared step's results the memory plan puts over an operand.
  int overwrites = 0;
};

/// A directory the build recorded, unless the environment moves it (the
/// tests run from a copy of the tree on a GPU machine).
std::string directory(const char *variable, const char *built) {
  const char *moved = std::getenv(variable);
  return moved ? moved : built;
}

std::string source(const std::string &path) {
  return directory("KILN_SOURCE_DIR", KILN_SOURCE_DIR) + "/" + path;
}

TEST_F(TargetTest, Gpt2StepMatchesInterpreterInFp32) {
  compareStep(source("examples/gpt2_tiny/model.onnx"),
              {source("examples/gpt2_tiny/input_ids.pb"),
               source("examples/gpt2_tiny/labels.pb")},
              Precision::FP32, 2e-6);
  // The loss gradient over the logits (GPT-2 124M: 1.5 GiB less at the
  // step's peak), checked with the rest of the step.
  EXPECT_EQ(overwrites, 1);
}

// bf16 GEMM operands and attention, GEMM results stored in bf16 after
// their epilogues, an f32 attention output with a bf16 gradient: the
// kernels round where the interpreter rounds, so the bound is the fp32
// steps' one.
TEST_F(TargetTest, Gpt2StepMatchesInterpreterInBf16) {
  compareStep(source("examples/gpt2_tiny/model.onnx"),
              {source("examples/gpt2_tiny/input_ids.pb"),
               source("examples/gpt2_tiny/labels.pb")},
              Precision::BF16, 2e-6);
  expectNarrowEpilogues();
  EXPECT_EQ(overwrites, 1);
}

// cuDNN's fused attention for the forward and backward passes of both
// layers (emulated in double here; on a GPU, cuDNN itself). Neither rounds
// where the interpreter does: cuDNN, as kiln's tensor-core kernels, rounds
// unnormalized probabilities to 16 bits before P V, the emulation rounds
// only the results; both stay within 2^-7 of the largest attention output
// and gradient (KernelTest's tensor-core bound, whose argument holds for
// either), and the loss, gradient norm and updates of one step, sums of
// terms each changed by at most that fraction, within it too.
TEST_F(TargetTest, Gpt2StepWithCudnnAttentionMatchesInterpreter) {
  StepOptions cudnn;
  cudnn.cudnnAttention = true;
  compareStep(source("examples/gpt2_tiny/model.onnx"),
              {source("examples/gpt2_tiny/input_ids.pb"),
               source("examples/gpt2_tiny/labels.pb")},
              Precision::BF16, 0x1p-7, {}, cudnn);
}

// Attention on tensor cores, its query gradient from the dS that the
// key/value kernel stores in scratch, which the memory plan places among
// the buffers (in memory that no value holds while the gradient runs):
// within the tensor-core bound, 2^-7, as the cuDNN step above.
TEST_F(TargetTest, Gpt2StepWithStoredScoreGradientsMatchesInterpreter) {
  StepOptions stored;
  stored.exactAttention = false;
  stored.queryGradient = cuda::QueryGradient::Stored;
  compareStep(source("examples/gpt2_tiny/model.onnx"),
              {source("examples/gpt2_tiny/input_ids.pb"),
               source("examples/gpt2_tiny/labels.pb")},
              Precision::BF16, 0x1p-7, {}, stored);
}

// The default query gradient (auto) stores the score gradients where the
// step's memory plan holds them in memory freed by then (the example's
// step: its arena grows by under 1%), recomputes them where they would
// add to the arena (a lone attention gradient: nothing else to free) and
// with cuDNN's attention; a form the options name stays.
TEST(QueryGradientTest, AutoStoresScoreGradientsWhereThePlanHoldsThem) {
  mlir::MLIRContext context;
  registerKilnDialects(context);
  kiln::testing::ExampleStep example(context);
  mlir::func::FuncOp step = example.step;
  ASSERT_TRUE(step);
  cuda::TargetOptions options;
  EXPECT_EQ(options.queryGradient, cuda::QueryGradient::Auto);
  EXPECT_EQ(cuda::resolveTargetOptions(step, options).queryGradient,
            cuda::QueryGradient::Stored);
  options.attention = cuda::AttentionBackend::Cudnn;
  EXPECT_EQ(cuda::resolveTargetOptions(step, options).queryGradient,
            cuda::QueryGradient::Recomputed);
  options.attention = cuda::AttentionBackend::Kiln;
  options.queryGradient = cuda::QueryGradient::Atomic;
  EXPECT_EQ(cuda::resolveTargetOptions(step, options).queryGradient,
            cuda::QueryGradient::Atomic);

  auto lone = mlir::parseSourceString<mlir::ModuleOp>(R"(
    func.func @main(%q: tensor<1x2x128x64xbf16>, %o: tensor<1x2x128x64xbf16>,
                    %l: tensor<1x2x128xf32>)
        -> (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>) {
      %dq, %dk, %dv = kiln.attention_grad %q, %q, %q output %o, %l, %o {causal, scale = 0.125 : f64}
          : (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>,
             tensor<1x2x128x64xbf16>, tensor<1x2x128xf32>, tensor<1x2x128x64xbf16>)
          -> (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>)
      return %dq, %dk, %dv : tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>
    })",
                                                      &context);
  ASSERT_TRUE(lone);
  options.queryGradient = cuda::QueryGradient::Auto;
  EXPECT_EQ(cuda::resolveTargetOptions(
                *lone->getOps<mlir::func::FuncOp>().begin(), options)
                .queryGradient,
            cuda::QueryGradient::Recomputed);
}

// fp16: 16-bit operands and the loss scale, decided inside the step.
TEST_F(TargetTest, Gpt2StepMatchesInterpreterInFp16) {
  compareStep(source("examples/gpt2_tiny/model.onnx"),
              {source("examples/gpt2_tiny/input_ids.pb"),
               source("examples/gpt2_tiny/labels.pb")},
              Precision::FP16, 2e-6);
  expectNarrowEpilogues();
}

// RMS norm, SiLU, rotary embeddings, grouped-query attention, in fp32 and
// in bf16.
class LlamaTargetTest : public TargetTest,
                        public ::testing::WithParamInterface<Precision> {};

TEST_P(LlamaTargetTest, StepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  import.dimensions["seq"] = 12;
  compareStep(source("test/Models/llama_tiny/model.onnx"),
              {source("test/Models/llama_tiny/input_ids.npy"),
               source("test/Models/llama_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

INSTANTIATE_TEST_SUITE_P(Precisions, LlamaTargetTest,
                         ::testing::Values(Precision::FP32, Precision::BF16));

// Convolutions (patches sliced from the padded input, grouped, and patches
// that tile it), in fp32 and in bf16.
class VitTargetTest : public TargetTest,
                      public ::testing::WithParamInterface<Precision> {};

TEST_P(VitTargetTest, StepMatchesInterpreter) {
  compareStep(source("test/Models/vit_tiny/model.onnx"),
              {source("test/Models/vit_tiny/pixel_values.npy"),
               source("test/Models/vit_tiny/labels.npy")},
              GetParam(), 2e-6);
}

INSTANTIATE_TEST_SUITE_P(Precisions, VitTargetTest,
                         ::testing::Values(Precision::FP32, Precision::BF16));

// The test models of other families (test/Models), in fp32 and bf16. An
// encoder-decoder: a learned relative position bias (attention's mask,
// trained through the mask kernel), cross-attention from 8 to 12 positions with a padding mask,
// the tied embedding read by a lookup and the output projection.
class ModelTargetTest : public TargetTest,
                        public ::testing::WithParamInterface<Precision> {};

TEST_P(ModelTargetTest, T5StepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  import.dimensions["source"] = 12;
  import.dimensions["target"] = 8;
  compareStep(source("test/Models/t5_tiny/model.onnx"),
              {source("test/Models/t5_tiny/input_ids.npy"),
               source("test/Models/t5_tiny/attention_mask.npy"),
               source("test/Models/t5_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// ALiBi over flattened heads, masked_fill with the padding, a fused
// query-key-value projection read head by head.
TEST_P(ModelTargetTest, BloomStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  import.dimensions["seq"] = 10;
  compareStep(source("test/Models/bloom_tiny/model.onnx"),
              {source("test/Models/bloom_tiny/input_ids.npy"),
               source("test/Models/bloom_tiny/attention_mask.npy"),
               source("test/Models/bloom_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// Attention rewritten from 3-D bmm over flattened heads, with the mask the
// graph builds from the attention mask.
TEST_P(ModelTargetTest, OptStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/opt_tiny/model.onnx"),
              {source("test/Models/opt_tiny/input_ids.npy"),
               source("test/Models/opt_tiny/attention_mask.npy"),
               source("test/Models/opt_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// Random draws in a step (stochastic depth, noise, a Bernoulli mask): the
// kernels draw what the interpreter draws, from the step's number.
TEST_P(ModelTargetTest, DropPathStepMatchesInterpreter) {
  compareStep(source("test/Models/droppath_tiny/model.onnx"),
              {source("test/Models/droppath_tiny/x.npy"),
               source("test/Models/droppath_tiny/labels.npy")},
              GetParam(), 2e-6);
}

// Recurrent layers unrolled: many small products and gate kernels per step.
TEST_P(ModelTargetTest, RecurrentStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/rnn_tiny/model.onnx"),
              {source("test/Models/rnn_tiny/input_ids.npy"),
               source("test/Models/rnn_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// Sampling at points the model computes: gathers of the flattened image at
// computed indices, and their gradients' scatters.
TEST_P(ModelTargetTest, GridSampleStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/gridsample_tiny/model.onnx"),
              {source("test/Models/gridsample_tiny/x.npy"),
               source("test/Models/gridsample_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// Quantization-aware training: fake quantizations of weights per channel
// and of products per tensor, and their straight-through gradients.
TEST_P(ModelTargetTest, FakeQuantizedStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/qat_tiny/model.onnx"),
              {source("test/Models/qat_tiny/input_ids.npy"),
               source("test/Models/qat_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// A selective scan unrolled into long chains of small elementwise ops
// (exponentials, outer products, a running state) and a causal depthwise
// convolution.
TEST_P(ModelTargetTest, SelectiveScanStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/mamba_tiny/model.onnx"),
              {source("test/Models/mamba_tiny/input_ids.npy"),
               source("test/Models/mamba_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// A sliding window of 4 keys (Mistral's mask, constant): attention's
// window, forward and backward.
TEST_P(ModelTargetTest, SlidingWindowStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/mistral_tiny/model.onnx"),
              {source("test/Models/mistral_tiny/input_ids.npy"),
               source("test/Models/mistral_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// Gemma 2's soft-capped attention logits, a sliding window and a global
// layer, and soft-capped final logits.
TEST_P(ModelTargetTest, SoftcapStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/gemma2_tiny/model.onnx"),
              {source("test/Models/gemma2_tiny/input_ids.npy"),
               source("test/Models/gemma2_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// Layer norms without weight or bias, and of each head's queries and keys
// (head dimension 8) before a rotary embedding of half of each head; the
// tied output projection's logits scaled.
TEST_P(ModelTargetTest, HeadNormsStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/olmo_tiny/model.onnx"),
              {source("test/Models/olmo_tiny/input_ids.npy"),
               source("test/Models/olmo_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// GPTBigCode's multi-query attention from its row layout: queries split
// from the rows of the 3-D products and moved heads first, one key and
// value head for four query heads, a padding mask moved heads first, the
// output moved back to its rows; the head-dimension-16 tensor-core kernels.
TEST_P(ModelTargetTest, MultiQueryRowsStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/bigcode_tiny/model.onnx"),
              {source("test/Models/bigcode_tiny/input_ids.npy"),
               source("test/Models/bigcode_tiny/attention_mask.npy"),
               source("test/Models/bigcode_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// Speech from the raw waveform: strided 1-D convolutions, GroupNorm's
// normalization over each channel's frames, a weight-normed grouped
// convolution, a trained vector selected by Where.
TEST_P(ModelTargetTest, WaveformStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/wav2vec2_tiny/model.onnx"),
              {source("test/Models/wav2vec2_tiny/samples.npy"),
               source("test/Models/wav2vec2_tiny/frame_mask.npy"),
               source("test/Models/wav2vec2_tiny/time_mask.npy"),
               source("test/Models/wav2vec2_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// Segmentation: overlapping strided 2-D convolutions, keys reduced by a
// convolution, bilinear upsampling and its gradient, BatchNorm in training
// mode, a per-pixel loss ignoring a label.
TEST_P(ModelTargetTest, SegmentationStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/segformer_tiny/model.onnx"),
              {source("test/Models/segformer_tiny/pixel_values.npy"),
               source("test/Models/segformer_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// An encoder-decoder whose decoder inputs the step shifts from the labels
// (integer slices, scatters and selections on the device) and whose
// label-smoothed loss is spelled out: log-softmax, a gather of the labels,
// sums over the kept tokens.
TEST_P(ModelTargetTest, LabelSmoothedSeq2SeqStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/bart_tiny/model.onnx"),
              {source("test/Models/bart_tiny/input_ids.npy"),
               source("test/Models/bart_tiny/attention_mask.npy"),
               source("test/Models/bart_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

// Position ids the step computes from the padding (an integer cumsum), an
// MLM head and a binary cross-entropy with logits over the kept tokens.
TEST_P(ModelTargetTest, PaddingPositionsStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/roberta_tiny/model.onnx"),
              {source("test/Models/roberta_tiny/input_ids.npy"),
               source("test/Models/roberta_tiny/token_type_ids.npy"),
               source("test/Models/roberta_tiny/attention_mask.npy"),
               source("test/Models/roberta_tiny/labels.npy"),
               source("test/Models/roberta_tiny/replaced.npy")},
              GetParam(), 2e-6, import);
}

// Relative positional attention spelled out: Einsum products in time-first
// layouts, the relative shift's concatenation, view and slice, a softmax
// over a middle axis.
TEST_P(ModelTargetTest, RelativeShiftStepMatchesInterpreter) {
  ImportOptions import;
  import.dimensions["batch"] = 2;
  compareStep(source("test/Models/transfoxl_tiny/model.onnx"),
              {source("test/Models/transfoxl_tiny/input_ids.npy"),
               source("test/Models/transfoxl_tiny/labels.npy")},
              GetParam(), 2e-6, import);
}

INSTANTIATE_TEST_SUITE_P(Precisions, ModelTargetTest,
                         ::testing::Values(Precision::FP32, Precision::BF16));

// 16-bit norms in a whole step: GPT-2's layer norms read a bf16 input and
// write a bf16 output, their gradients f32 from the same bf16 copy (the
// Llama test model spells its RMS norm out, so KernelTest's NarrowNorms
// covers kiln.rms_norm).
TEST_F(TargetTest, NarrowNormsMatchInterpreter) {
  compareStep(source("examples/gpt2_tiny/model.onnx"),
              {source("examples/gpt2_tiny/input_ids.pb"),
               source("examples/gpt2_tiny/labels.pb")},
              Precision::BF16, 2e-6, {}, {/*narrowNorms=*/true});
}

// Recomputation in a whole step: what the backward pass recomputes reads
// what the forward pass kept, attention's output where the output
// projection's input holds it.
TEST_F(TargetTest, RecomputedStepMatchesInterpreter) {
  compareStep(source("examples/gpt2_tiny/model.onnx"),
              {source("examples/gpt2_tiny/input_ids.pb"),
               source("examples/gpt2_tiny/labels.pb")},
              Precision::BF16, 2e-6, {},
              {/*narrowNorms=*/false, /*recompute=*/true});
}

// The ablation's baseline: the exported attention ops, no fusion (every op
// a kernel, products stored before their bias), a launch per parameter
// update instead of one per shape, and on a GPU no CUDA graph; fusing, then
// batching, launches fewer kernels.
TEST_F(TargetTest, UnfusedStepMatchesInterpreter) {
  std::vector<std::string> batch = {source("examples/gpt2_tiny/input_ids.pb"),
                                    source("examples/gpt2_tiny/labels.pb")};
  StepOptions baseline;
  baseline.rewriteAttention = false;
  baseline.fuse = false;
  baseline.batchLaunches = false;
  baseline.cudaGraph = false;
  compareStep(source("examples/gpt2_tiny/model.onnx"), batch, Precision::BF16,
              2e-6, {}, baseline);
  int unfused = launches;
  for (bool *on : {&baseline.fuse, &baseline.batchLaunches}) {
    *on = true;
    int previous = launches;
    compareStep(source("examples/gpt2_tiny/model.onnx"), batch, Precision::BF16,
                2e-6, {}, baseline);
    EXPECT_LT(launches, previous);
  }
  EXPECT_GT(unfused, 2 * launches);
}

// ptxas's -v report, as NVRTC's log gives it: each kernel's registers,
// shared memory, stack frame and spills.
TEST(KernelResourcesTest, ParsesPtxasReport) {
  std::vector<cuda::KernelResources> kernels = cuda::parsePtxasInfo(
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'kiln_kernel_44' for "
      "'sm_90'\n"
      "ptxas info    : Function properties for kiln_kernel_44\n"
      "    64 bytes stack frame, 64 bytes spill stores, 48 bytes spill "
      "loads\n"
      "ptxas info    : Used 255 registers, used 0 barriers, 64 bytes "
      "cumulative stack size\n"
      "ptxas info    : Compile time = 28.692 ms\n"
      "ptxas info    : Compiling entry function 'kiln_kernel_9' for "
      "'sm_90'\n"
      "ptxas info    : Function properties for kiln_kernel_9\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 126 registers, used 1 barriers, 18432 bytes "
      "smem\n");
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].kernel, "kiln_kernel_44");
  EXPECT_EQ(kernels[0].registers, 255);
  EXPECT_EQ(kernels[0].stackBytes, 64);
  EXPECT_EQ(kernels[0].spillStoreBytes, 64);
  EXPECT_EQ(kernels[0].spillLoadBytes, 48);
  EXPECT_EQ(kernels[0].sharedBytes, 0);
  EXPECT_EQ(kernels[1].kernel, "kiln_kernel_9");
  EXPECT_EQ(kernels[1].registers, 126);
  EXPECT_EQ(kernels[1].stackBytes, 0);
  EXPECT_EQ(kernels[1].sharedBytes, 18432);
}

// Blocks per SM by CUDA's occupancy rules: registers are allotted per warp
// in units of 256 within each of an SM's four 16K-register partitions, and
// each block takes 1 KiB of shared memory beside its own.
TEST(KernelResourcesTest, ResidentBlocks) {
  auto blocks = [](const char *arch, int64_t block, int64_t registers,
                   int64_t shared) {
    cuda::KernelResources kernel;
    kernel.registers = registers;
    kernel.sharedBytes = shared;
    return cuda::residentBlocks(arch, block, kernel);
  };
  // Attention's kernels: four warps of 128, 168 and 242 registers.
  EXPECT_EQ(blocks("sm_90", 128, 128, 36864), 4);
  EXPECT_EQ(blocks("sm_90", 128, 168, 36864), 3);
  EXPECT_EQ(blocks("sm_90", 128, 242, 37888), 2);
  // Three warps of 56 registers: 9 warps per partition, 12 blocks.
  EXPECT_EQ(blocks("sm_90", 96, 56, 64), 12);
  // Threads bound 32-register blocks of 256 (2048 per SM).
  EXPECT_EQ(blocks("sm_90", 256, 32, 0), 8);
  // Shared memory: blocks of 40 KiB (41 with the reserved), five on an
  // H100 (228 KiB per SM), four on an A100 (164 KiB).
  EXPECT_EQ(blocks("sm_90", 128, 32, 40 << 10), 5);
  EXPECT_EQ(blocks("sm_80", 128, 32, 40 << 10), 4);
  // No limits known for other architectures.
  EXPECT_EQ(blocks("sm_75", 128, 32, 0), 0);
}

// Kernels over small tensors compute their indices in 32 bits; the 64-bit
// form, which kernels over tensors of 2^30 elements or more take, computes
// the same step.
TEST_F(TargetTest, WideIndexStepMatchesInterpreter) {
  std::vector<std::string> batch = {source("examples/gpt2_tiny/input_ids.pb"),
                                    source("examples/gpt2_tiny/labels.pb")};
  StepOptions options;
  for (bool wide : {false, true}) {
    options.wideIndices = wide;
    compareStep(source("examples/gpt2_tiny/model.onnx"), batch, Precision::BF16,
                2e-6, {}, options);
    EXPECT_GT(narrowKernels + wideKernels, 10u);
    if (wide)
      EXPECT_EQ(narrowKernels, 0u);
    else // attention's and the templates' kernels index in 64 bits
      EXPECT_GT(narrowKernels, wideKernels);
  }
}

// A kernel whose loops stride over its grid computes the same results in
// fewer blocks (the runtime launches no more than the GPU holds at once,
// the emulation kEmulatedResidentBlocks): row kernels whose blocks add up
// sums over rows (the loss, a norm's parameter gradients) store a partial
// per block of their grid, those a smaller grid lacks their sums' initial
// values. Both ways match the interpreter at the other steps' bound (the
// partials, added in another order, are doubles). A GPU holds all of this
// model's blocks at once, so a third step limits every such grid to 3
// blocks, there and in the emulation.
TEST_F(TargetTest, StepInFewerBlocksMatchesInterpreter) {
  std::vector<std::string> batch = {source("examples/gpt2_tiny/input_ids.pb"),
                                    source("examples/gpt2_tiny/labels.pb")};
  StepOptions options;
  for (auto [deviceGrids, limit] :
       {std::pair(true, 0u), std::pair(false, 0u), std::pair(true, 3u)}) {
    options.deviceGrids = deviceGrids;
    options.gridLimit = limit;
    compareStep(source("examples/gpt2_tiny/model.onnx"), batch, Precision::BF16,
                2e-6, {}, options);
  }
  // The loss's kernel and each of the five norms' forward and gradient
  // kernels, at least, have a grid of a block per row (64).
  EXPECT_GE(fewerBlocks, 11);
}

#ifdef KILN_FIXTURES_DIR
// Every fixture of both exporters: BERT's padding mask and erf GELU, SDPA
// attention, the dynamo exports' folded constants.
class FixtureTargetTest : public TargetTest,
                          public ::testing::WithParamInterface<const char *> {};

TEST_P(FixtureTargetTest, StepMatchesInterpreter) {
  std::string file =
      directory("KILN_FIXTURES_DIR", KILN_FIXTURES_DIR) + "/hf/" + GetParam();
  std::string directory = file.substr(0, file.rfind('/'));
  compareStep(file,
              {directory + "/ref/input_ids.pb", directory + "/ref/labels.pb"},
              Precision::FP32, 2e-6);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTargetTest,
                         ::testing::Values("gpt2_tiny/model.onnx",
                                           "gpt2_tiny/model.dynamo.onnx",
                                           "gpt2_tiny_sdpa/model.onnx",
                                           "gpt2_tiny_sdpa/model.dynamo.onnx",
                                           "bert_tiny_cls/model.onnx",
                                           "bert_tiny_cls/model.dynamo.onnx"));

// BERT in bf16 with its bias gradients summed by the kernels that run where
// cuBLASLt has no algorithm for that (the GEMMs sum them in the tests
// above): the query, key and value gradients' sums, peeled out of the
// fusions that put those gradients in token order.
TEST_F(TargetTest, BiasGradientsByKernelsMatchInterpreter) {
  std::string bert =
      directory("KILN_FIXTURES_DIR", KILN_FIXTURES_DIR) + "/hf/bert_tiny_cls";
  StepOptions byKernels;
  byKernels.gemmBiasGradients = false;
  compareStep(bert + "/model.onnx",
              {bert + "/ref/input_ids.pb", bert + "/ref/labels.pb"},
              Precision::BF16, 2e-6, {}, byKernels);
}
#endif

} // namespace
