//===- Profile.h - where a step's time goes -------------------*- C++ -*-===//
//
// What Session::profile measures, and the report kiln-run --profile prints
// from it: the operations of the step grouped by kernel (GEMMs by shape),
// their share of the step, and their distance from the floor that the
// device's measured ceilings set (the larger of bytes over bandwidth and
// products' operations over the GEMM rate). No CUDA here, so that the
// report is tested without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_PROFILE_H
#define KILN_RUNTIME_PROFILE_H

#include "kiln/Artifact/Artifact.h"

#include <string>
#include <vector>

namespace kiln::runtime {

struct StepProfile {
  /// Per operation of the artifact, in order: the median time of its
  /// launch when the step runs operation by operation.
  std::vector<double> milliseconds;
  /// Per operation: whether the step skips it (Session::runs), so that it
  /// has no row.
  std::vector<bool> skipped;
  /// The median time of a whole step as the session runs it: replayed as
  /// its CUDA graph, or launched operation by operation without events
  /// when `launchedEachStep` (SessionOptions::cudaGraph off).
  double stepMilliseconds = 0;
  bool launchedEachStep = false;
  /// The device's ceilings as measured: a device-to-device copy (bytes
  /// read plus written per second) and a large GEMM of the step's operand
  /// type (operations per second); 0 where not measured.
  double bytesPerSecond = 0, flopsPerSecond = 0;
};

/// One line of the report: operations that run one kernel, or GEMMs of
/// one shape.
struct ProfileRow {
  /// What the row's operations are: the step's floor and its time by kind
  /// say which of them a faster step must come from.
  enum class Kind { Gemm, Attention, Kernel };
  Kind kind = Kind::Kernel;
  std::string what;
  /// The kiln IR op of the first of them.
  std::string origin;
  int launches = 0;
  /// Per step: their time, their bytes and operations, and the floor.
  double milliseconds = 0, bytes = 0, flops = 0, floorMilliseconds = 0;
};

/// The rows of `profile`, the most time first.
std::vector<ProfileRow> profileRows(const artifact::Artifact &artifact,
                                    const StepProfile &profile);

/// The report: a summary line, the time and floor of GEMMs, attention and
/// other kernels, then the `top` first rows as a table (share of the
/// operations' time, milliseconds per step, launches, achieved rate, floor,
/// time over floor), and a line for the rows left out together.
std::string formatProfile(const artifact::Artifact &artifact,
                          const StepProfile &profile, size_t top);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_PROFILE_H
