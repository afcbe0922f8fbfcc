//===- Profile.cpp - where a step's time goes -----------------------------===//

#include "kiln/Runtime/Profile.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <string_view>

namespace kiln::runtime {

static std::string typeName(artifact::ElementType type) {
  std::string name = artifact::EnumNameElementType(type);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return name;
}

/// GEMMs, attention (kiln's kernels, named by the op they run, or cuDNN's)
/// and the other kernels.
static ProfileRow::Kind kindOf(const artifact::Operation &operation) {
  if (operation.gemm())
    return ProfileRow::Kind::Gemm;
  std::string_view origin =
      operation.origin() ? operation.origin()->string_view() : "";
  if (operation.attention() || origin.rfind("kiln.attention", 0) == 0)
    return ProfileRow::Kind::Attention;
  return ProfileRow::Kind::Kernel;
}

/// What groups an operation with others: its kernel, its GEMM's shape,
/// types and epilogue, or its cuDNN attention's pass and shape.
static std::string describeWork(const artifact::Artifact &artifact,
                                const artifact::Operation &operation) {
  if (const artifact::KernelLaunch *launch = operation.kernel())
    return artifact.kernel_names()->Get(launch->kernel())->str();
  if (const artifact::LibraryAttention *a = operation.attention())
    return std::string("cuDNN attention ") +
           (a->backward() ? "backward " : "forward ") +
           std::to_string(a->batch()) + "x" + std::to_string(a->heads()) + "x" +
           std::to_string(a->rows()) + "x" + std::to_string(a->head_dim()) +
           " " + typeName(a->element_type()) + (a->causal() ? " causal" : "");
  const artifact::Gemm *g = operation.gemm();
  std::string text = "GEMM ";
  if (g->batch() > 1)
    text += std::to_string(g->batch()) + " x ";
  text += std::to_string(g->m()) + "x" + std::to_string(g->n()) + "x" +
          std::to_string(g->k()) + " " + typeName(g->input_type()) + "->" +
          typeName(g->output_type());
  if (g->epilogue() != artifact::Epilogue::None)
    text += std::string(" +") + artifact::EnumNameEpilogue(g->epilogue());
  return text;
}

std::vector<ProfileRow> profileRows(const artifact::Artifact &artifact,
                                    const StepProfile &profile) {
  std::vector<ProfileRow> rows;
  std::map<std::string, size_t> rowOf;
  const auto &operations = *artifact.operations();
  for (size_t i = 0; i < operations.size() && i < profile.milliseconds.size();
       ++i) {
    if (i < profile.skipped.size() && profile.skipped[i])
      continue;
    const artifact::Operation &operation = *operations.Get(i);
    std::string what = describeWork(artifact, operation);
    auto [it, added] = rowOf.try_emplace(what, rows.size());
    if (added) {
      rows.emplace_back();
      rows.back().kind = kindOf(operation);
      rows.back().what = what;
      rows.back().origin = operation.origin() ? operation.origin()->str() : "";
    }
    ProfileRow &row = rows[it->second];
    double bytes = static_cast<double>(operation.bytes());
    double flops = static_cast<double>(operation.flops());
    ++row.launches;
    row.milliseconds += profile.milliseconds[i];
    row.bytes += bytes;
    row.flops += flops;
    double floor = 0;
    if (profile.bytesPerSecond > 0)
      floor = std::max(floor, bytes / profile.bytesPerSecond * 1e3);
    if (profile.flopsPerSecond > 0)
      floor = std::max(floor, flops / profile.flopsPerSecond * 1e3);
    row.floorMilliseconds += floor;
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const ProfileRow &a, const ProfileRow &b) {
                     return a.milliseconds > b.milliseconds;
                   });
  return rows;
}

/// printf into a std::string.
template <typename... Args>
static std::string format(const char *pattern, Args... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), pattern, args...);
  return buffer;
}

std::string formatProfile(const artifact::Artifact &artifact,
                          const StepProfile &profile, size_t top) {
  std::vector<ProfileRow> rows = profileRows(artifact, profile);
  double total = 0, floor = 0;
  int launches = 0;
  for (const ProfileRow &row : rows) {
    total += row.milliseconds;
    floor += row.floorMilliseconds;
    launches += row.launches;
  }
  std::string text =
      format("step: %.3f ms %s; %.3f ms launched operation by operation (%d "
             "operations)\n",
             profile.stepMilliseconds,
             profile.launchedEachStep ? "launched without a CUDA graph"
                                      : "replayed as a CUDA graph",
             total, launches);
  if (profile.bytesPerSecond > 0 && profile.flopsPerSecond > 0)
    text += format("ceilings measured: %.0f GB/s (copy), %.1f TFLOP/s "
                   "(GEMM); the step's floor: %.3f ms\n",
                   profile.bytesPerSecond / 1e9, profile.flopsPerSecond / 1e12,
                   floor);
  // Each kind's time and floor: how far the step could move if that kind
  // alone ran at its floor.
  std::string kinds;
  for (auto [kind, name] : {std::pair(ProfileRow::Kind::Gemm, "GEMMs"),
                            {ProfileRow::Kind::Attention, "attention"},
                            {ProfileRow::Kind::Kernel, "other kernels"}}) {
    double milliseconds = 0, kindFloor = 0;
    for (const ProfileRow &row : rows)
      if (row.kind == kind) {
        milliseconds += row.milliseconds;
        kindFloor += row.floorMilliseconds;
      }
    if (milliseconds <= 0)
      continue;
    kinds += format("%s%s %.3f ms (floor %.3f ms", kinds.empty() ? "" : "; ",
                    name, milliseconds, kindFloor);
    kinds += kindFloor > 0 ? format(", %.2fx)", milliseconds / kindFloor)
                           : std::string(")");
  }
  if (!kinds.empty())
    text += "by kind: " + kinds + "\n";
  text +=
      format("%7s %10s %8s %14s %10s %8s  %s\n", "share", "ms/step", "launches",
             "achieved", "floor ms", "x floor", "what (origin)");
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const ProfileRow &row = rows[i];
    double seconds = row.milliseconds / 1e3;
    std::string achieved =
        seconds <= 0    ? "-"
        : row.flops > 0 ? format("%.1f TFLOP/s", row.flops / seconds / 1e12)
                        : format("%.0f GB/s", row.bytes / seconds / 1e9);
    std::string over =
        row.floorMilliseconds > 0
            ? format("%.2f", row.milliseconds / row.floorMilliseconds)
            : "-";
    text += format("%6.1f%% %10.3f %8d %14s %10.3f %8s  ",
                   total > 0 ? 100 * row.milliseconds / total : 0.0,
                   row.milliseconds, row.launches, achieved.c_str(),
                   row.floorMilliseconds, over.c_str()) +
            row.what + " (" + row.origin + ")\n";
  }
  // What the rows left out take together, so that the table accounts for
  // the whole step.
  if (rows.size() > top) {
    double rest = 0;
    int restLaunches = 0;
    for (size_t i = top; i < rows.size(); ++i) {
      rest += rows[i].milliseconds;
      restLaunches += rows[i].launches;
    }
    text += format("%6.1f%% %10.3f %8d  the other %zu rows\n",
                   total > 0 ? 100 * rest / total : 0.0, rest, restLaunches,
                   rows.size() - top);
  }
  return text;
}

} // namespace kiln::runtime
