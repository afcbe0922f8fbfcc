//===- Session.h - a compiled step on one GPU --------------------*- C++
//-*-===//
//
// The runtime: loads a verified `.kiln` artifact, allocates its arena once,
// initializes parameters and optimizer state, and runs steps as replays of
// one captured CUDA graph. It depends on the CUDA runtime, cuBLASLt and the
// artifact format only (no MLIR), and reads nothing back to the host unless
// asked.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SESSION_H
#define KILN_RUNTIME_SESSION_H

#include "kiln/Artifact/Artifact.h"
#include "kiln/Runtime/Profile.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::runtime {

struct SessionOptions {
  int device = 0;
  /// Seeds the GPT-2 style initialization of parameters the artifact holds
  /// no value for: N(0, 0.02) for matrices, 1 for norm scales, 0 otherwise.
  uint64_t seed = 0;
  /// Fills the arena with 0xff bytes (NaN in every float type) before
  /// anything is written, so that tests see any read of an unwritten value.
  bool poison = false;
  /// Chooses each GEMM's algorithm by timing the heuristic's best
  /// candidates at load, instead of taking its first; and for a GEMM that
  /// sums a bias gradient, whether it or the artifact's kernels are faster.
  bool tuneGemms = false;
  /// Lets cuBLASLt sum bias gradients as weight-gradient GEMMs read their
  /// operand (BGRADA/BGRADB) where it has an algorithm for that; off, or
  /// where it has none, the artifact's kernels sum them.
  bool gemmBiasGradients = true;
  /// Captures the step once as a CUDA graph and replays it; off, every
  /// step launches its operations one by one (the ablation's row without
  /// the graph: the host's launch time shows).
  bool cudaGraph = true;
  /// Launches a kernel whose loops stride over its grid in no more blocks
  /// than the GPU holds at once (its SMs times the blocks of that kernel an
  /// SM holds), which then share the work evenly in one wave; off, in the
  /// artifact's grid. The partial sums of a split reduction follow the
  /// grid, so results are reproducible on one kind of GPU.
  bool deviceGrids = true;
  /// At most this many blocks for a kernel that strides over its grid (0:
  /// no limit), as a GPU with fewer SMs would run it: the GPU tests run
  /// grids smaller than their rows, as the emulation does.
  unsigned gridLimit = 0;
};

class Session {
public:
  /// Loads the artifact at `path`. Fails with a message naming the reason:
  /// no GPU (with a hint to use --device=cpu), a GPU the artifact has no
  /// code for, an arena larger than the free memory (before allocating), a
  /// corrupted artifact or one from another kiln version.
  static std::unique_ptr<Session> load(const std::string &path,
                                       const SessionOptions &options,
                                       std::string &error);
  ~Session();

  const artifact::Artifact &artifact() const { return *model; }
  /// The interface tensor `name`, or null.
  const artifact::Tensor *tensor(const std::string &name) const;

  /// Copies `bytes` (the tensor's exact size) into tensor `name`, ordered
  /// after every step already launched. Small tensors (a batch) return
  /// without waiting for those steps.
  bool write(const std::string &name, const void *bytes, size_t size,
             std::string &error);
  /// Waits for the launched steps and copies tensor `name` out. Fails if
  /// a step read an index out of range (a token id or a label), naming the
  /// op.
  bool read(const std::string &name, void *bytes, size_t size,
            std::string &error);
  /// Fails, naming the op, if a kernel flagged an index out of range
  /// (after the steps launched so far; read() checks too).
  bool checkIndices(std::string &error);
  /// Launches one step. The first call captures the step's operations in
  /// a CUDA graph; every later call replays it.
  bool step(std::string &error);
  /// Runs `steps` steps on the inputs last written, operation by operation
  /// (not as the graph) with events around each, then `steps` replays of
  /// the graph, and measures the device's ceilings (StepProfile). The
  /// steps train as step() does.
  bool profile(int steps, StepProfile &profile, std::string &error);
  /// Whether the step runs operation `index` of the artifact: not the
  /// kernels that stand in for an epilogue cuBLASLt computes.
  bool runs(size_t index) const;
  /// How many of the artifact's bias gradient epilogues the GEMMs compute
  /// (the others' fallback kernels run), and how many there are.
  std::pair<int, int> gemmBiasGradients() const;
  /// How many kernel launches run in fewer blocks than the artifact's grid
  /// (SessionOptions::deviceGrids), and how many launches there are.
  std::pair<int, int> launchesInOneWave() const;
  /// A one-line description of the device, for logs.
  const std::string &deviceName() const { return description; }
  /// The GPU memory the session holds: the arena, the GEMM workspace and the
  /// kernels' argument tables.
  size_t deviceBytes() const { return heldBytes; }

private:
  Session() = default;
  struct State;
  bool initialize(const SessionOptions &options, std::string &error);
  bool enqueueOperations(std::string &error);
  /// cuBLASLt's descriptors and algorithm for each of the artifact's GEMMs.
  bool planGemms(const SessionOptions &options, std::string &error);
  bool tuneGemms(std::string &error);
  /// Marks the operations the step skips: the fallbacks of the bias
  /// gradient epilogues that GEMMs compute.
  void skipFallbacks();
  /// The blocks each kernel launch runs (SessionOptions::deviceGrids).
  void sizeGrids(const SessionOptions &options);
  /// Plans cuDNN's graph for each of the artifact's library attentions.
  bool planAttention(std::string &error);
  bool measureCeilings(StepProfile &profile, std::string &error);
  /// Tensor `name` if it holds exactly `size` bytes.
  const artifact::Tensor *sized(const std::string &name, size_t size,
                                std::string &error) const;

  std::vector<uint8_t> bytes;
  const artifact::Artifact *model = nullptr;
  std::unique_ptr<State> state;
  std::string description;
  size_t heldBytes = 0;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SESSION_H
