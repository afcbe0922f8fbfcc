//===- CUDATarget.h - compiling a planned step for NVIDIA GPUs --*- C++ -*-===//
//
// Lowers a function after the training pipeline (memory planned, fused)
// into an artifact: generated kernels compiled by NVRTC for each requested
// architecture, cuBLASLt GEMM descriptions, the arena layout and the tensor
// table. Needs no GPU.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDATARGET_H
#define KILN_TARGET_CUDATARGET_H

#include "kiln/Artifact/Artifact.h"
#include "kiln/Transforms/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cuda {

/// Who computes attention and its gradient: kiln's kernels, or cuDNN's
/// fused flash attention where it has kiln.attention's meaning (16-bit, no
/// mask but the causal one, no dropout, as many key/value heads as query
/// heads, head dimension a multiple of 8 up to 128).
enum class AttentionBackend { Kiln, Cudnn };

/// How kiln's tensor-core kernels compute attention's query gradient dQ:
/// summed by the key/value kernel, which has dS already, with f32 atomics
/// (FlashAttention-2's five products; the order of dQ's additions varies
/// from run to run); by a query kernel of its own that computes the
/// scores again (seven products; the same bits every run); or by a query
/// kernel multiplying the dS that the key/value kernel stores, 16-bit, in
/// scratch (five products and the same bits every run, for 2 bytes per
/// score that some query may attend to, at head dimensions up to 64).
/// On an H200 GPT-2's step ran 3.6% faster recomputing than with atomics
/// (docs/benchmarks.md), the atomics' contention costing more than the
/// two products they save. Auto, the default, stores dS where the step's
/// memory plan holds it in memory no value needs while attention's
/// gradient runs, and recomputes where storing it would grow the arena
/// (long sequences): resolveTargetOptions decides.
enum class QueryGradient { Atomic, Recomputed, Stored, Auto };

struct TargetOptions {
  /// Architectures to compile cubins for ("sm_80", "sm_90"); PTX is added
  /// for the newest, so that later GPUs can run the artifact. Empty: no
  /// compilation (the source alone, for tests and the CPU emulation).
  std::vector<std::string> archs = {"sm_90"};
  /// Recorded in the artifact: the compile options and the model's hash.
  std::string optionsText, modelHash;
  /// The initial value of every Adagrad accumulator (state fill).
  double initialAccumulator = 0.0;
  /// Attention by the kernels that round exactly as the interpreter does
  /// (CUDA cores, in double) rather than on tensor cores: slow, for checking.
  bool exactAttention = false;
  /// Consecutive launches of one kernel (the multi-tensor optimizer's
  /// updates of equal-shaped parameters) become one launch walking their
  /// argument tables; off, each is a launch of its own.
  bool batchLaunches = true;
  /// Every generated kernel computes its indices in 64 bits, as those
  /// over tensors of 2^30 or more elements do (the others use 32 bits):
  /// for checking the 64-bit form on small models.
  bool wideIndices = false;
  AttentionBackend attention = AttentionBackend::Kiln;
  QueryGradient queryGradient = QueryGradient::Auto;
  /// Query rows per block of attention's forward pass on tensor cores at
  /// head dimensions up to 64 without dropout: 128 (two tiles of 16 per
  /// warp) or 64 (one, as at larger head dimensions and with dropout).
  int64_t attentionQueryTile = 128;
  /// The bytes of streamed operands (keys and values; queries and output
  /// gradients for the key/value gradient) that the blocks of attention's
  /// tensor-core kernels running at once should share in L2: blocks take
  /// heads in groups of that many bytes, each head's longest tile first.
  /// 8 MiB is what the 264 blocks of GPT-2's forward pass in one H100 wave
  /// stream taking heads one by one.
  int64_t attentionL2Bytes = 8 << 20;
};

/// What ptxas allotted one compiled kernel (its `-v` report).
struct KernelResources {
  std::string kernel;
  int64_t registers = 0;
  /// Bytes of local memory per thread: the stack frame (arrays indexed by
  /// values the compiler cannot resolve, spilled registers) and the spills.
  int64_t stackBytes = 0, spillStoreBytes = 0, spillLoadBytes = 0;
  /// Bytes of static shared memory per block.
  int64_t sharedBytes = 0;
  /// Threads per block it launches with, and how many of its blocks one
  /// SM holds at once (residentBlocks; 0 where kiln does not know the
  /// architecture's limits).
  int64_t block = 0, blocksPerSM = 0;
};

/// The kernels `ptxasInfo` (ptxas's `-v` report) describes, in its order.
std::vector<KernelResources> parsePtxasInfo(llvm::StringRef ptxasInfo);

/// How many blocks of `block` threads of `kernel` one SM of `arch` holds at
/// once (CUDA's occupancy calculator: registers, shared memory, threads,
/// blocks); 0 for an architecture whose limits kiln does not know (it
/// knows sm_80's and sm_90's).
int64_t residentBlocks(llvm::StringRef arch, int64_t block,
                       const KernelResources &kernel);

/// What compileFunction reports beside the artifact: the attention ops that
/// `--attention=cudnn` left to kiln's kernels, and those that run on the
/// exact kernels rather than on tensor cores (unless asked for), each with
/// the reason.
struct TargetReport {
  std::vector<std::string> keptAttention;
  /// Each reason, with the ops it keeps off tensor cores.
  std::map<std::string, std::vector<std::string>> exactAttention;
  /// What ptxas allotted each kernel, by architecture (for the cubins
  /// compiled).
  std::map<std::string, std::vector<KernelResources>> kernels;
};

/// Lowers `function`, a single-block function whose values the memory plan
/// can place (a training step after the pipeline, or a forward function),
/// into an artifact. Errors are emitted on the op that cannot be compiled.
mlir::FailureOr<std::unique_ptr<artifact::ArtifactT>>
compileFunction(mlir::func::FuncOp function, const TargetOptions &options,
                TargetReport *report = nullptr);

/// Whether the kernels compiled for `op` compute its result `result` over
/// its operand `operand` (the memory plan's Overwrites): a cross-entropy's
/// gradient over the logits it alone reads, a row at a time.
bool overwritesOperand(mlir::Operation *op, unsigned result, unsigned operand);

/// `options` with what they leave to the step decided: the query gradient
/// of QueryGradient::Auto is Stored if planning the step's memory with the
/// stored score gradients' scratch grows the arena by at most 1% over
/// recomputing them, and Recomputed otherwise (and with cuDNN's attention,
/// whose leftovers' scratch the plan does not hold). compileFunction
/// compiles with these.
TargetOptions resolveTargetOptions(mlir::func::FuncOp step,
                                   const TargetOptions &options);

/// The memory plan of `step` as the target places it, `options` resolved:
/// results written over their operands (overwritesOperand), and the
/// scratch of attention's gradient on tensor cores (the rows' deltas, and
/// dQ's sums or the stored dS) a buffer live while the op runs. Other
/// scratch (split reductions' partials; with --attention=cudnn, that of the
/// gradients cuDNN leaves to kiln) follows the plan's buffers in the arena.
MemoryPlan planTargetMemory(mlir::func::FuncOp step,
                            const TargetOptions &options);

/// The options of `options` that change what the artifact computes or how
/// it launches, as its options text records them after the pipeline's
/// ("|exact-attention|cudnn-attention|atomic-query-gradient|attention-query-tile=64";
/// empty for
/// the defaults).
std::string targetOptionsText(const TargetOptions &options);

/// Whether `arch` names a GPU architecture as --arch takes it ("sm_90").
bool isArchitectureName(llvm::StringRef arch);

/// Compiles CUDA C++ `source` with NVRTC to a cubin for `arch` ("sm_90"),
/// or to PTX when `ptx` is set; for a cubin, `ptxasInfo` (if given) receives
/// ptxas's report of each kernel's registers and memory.
llvm::Expected<std::vector<uint8_t>>
compileWithNVRTC(const std::string &source, const std::string &arch, bool ptx,
                 std::string *ptxasInfo = nullptr);

} // namespace kiln::cuda

#endif // KILN_TARGET_CUDATARGET_H
