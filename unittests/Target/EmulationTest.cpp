//===- EmulationTest.cpp - the CPU emulation runs blocks as a GPU does ----===//
//
// The emulation is what checks the generated kernels in CI, so it must fail
// where a GPU would: threads of a block share memory across barriers, a
// read of another thread's write with no barrier between sees the write in
// some blocks, an asynchronous copy is there only once its thread waited
// for it and a barrier followed, and a barrier that only some threads of a
// block reach, a failed kiln_expect (what a kernel's structure
// guarantees) or a copy never waited for is reported.
//
//===----------------------------------------------------------------------===//

#include "CudaEmulation.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;

namespace {

/// An artifact of one launch of `body` with `block` threads in 2 blocks,
/// over a 1 KiB arena whose first 16 floats are the tensor "x".
std::unique_ptr<artifact::ArtifactT> oneKernel(const std::string &body,
                                               int64_t block) {
  auto a = std::make_unique<artifact::ArtifactT>();
  a->arena_bytes = 1024;
  a->kernel_names = {"kiln_kernel_0"};
  a->source = "extern \"C\" void kiln_kernel_0(void *const *args) {\n"
              "  float *x = (float *)args[0];\n" +
              body + "}\n";
  auto tensor = std::make_unique<artifact::TensorT>();
  tensor->name = "x";
  tensor->element_type = artifact::ElementType::F32;
  tensor->shape = {16};
  a->tensors.push_back(std::move(tensor));
  auto launch = std::make_unique<artifact::OperationT>();
  launch->kernel = std::make_unique<artifact::KernelLaunchT>();
  launch->kernel->grid = 2;
  launch->kernel->block = block;
  launch->kernel->args = {0};
  launch->origin = "test";
  a->operations.push_back(std::move(launch));
  return a;
}

/// "x" after `body` ran in 2 blocks of 8 threads.
Tensor runEightThreads(const std::string &body) {
  auto a = oneKernel(body, 8);
  std::string error;
  auto emulation = kiln::testing::CudaEmulation::create(*a, {}, error);
  if (!emulation) {
    ADD_FAILURE() << error;
    return Tensor(DType::F32, {16});
  }
  emulation->run();
  return emulation->read("x");
}

TEST(EmulationTest, ThreadsShareMemoryAcrossBarriers) {
  // Each thread writes its slot, and after the barrier reads its
  // neighbour's: correct only if all threads reached the barrier first.
  Tensor x = runEightThreads(R"(
  __shared__ float slots[8];
  slots[threadIdx.x] = (float)(blockIdx.x * 8 + threadIdx.x);
  __syncthreads();
  x[blockIdx.x * 8 + threadIdx.x] = slots[(threadIdx.x + 1) % 8];
)");
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(x.floats()[i], (i / 8) * 8 + (i % 8 + 1) % 8) << i;
}

TEST(EmulationTest, ThreadOrderAlternatesBetweenBlocks) {
  // Each thread writes its slot, then reads its neighbour's with no
  // barrier: block 0 (ascending) finds the neighbour's slot unwritten,
  // block 1 (descending) finds it written, so a missing barrier shows.
  Tensor x = runEightThreads(R"(
  __shared__ float slots[8];
  slots[threadIdx.x] = -1.0f;
  __syncthreads();
  slots[threadIdx.x] = (float)threadIdx.x;
  x[blockIdx.x * 8 + threadIdx.x] = slots[(threadIdx.x + 1) % 8];
)");
  for (int64_t t = 0; t < 7; ++t) {
    EXPECT_EQ(x.floats()[t], -1.0) << t;
    EXPECT_EQ(x.floats()[8 + t], t + 1) << t;
  }
}

TEST(EmulationTest, BatchedLaunchesRunEachBatchAsARowOfTheGrid) {
  // Two batches of 2 blocks of 4 threads, each batch's table naming its
  // own half of "x": every thread of every row writes its block and row.
  auto a = oneKernel(R"(
  x[blockIdx.x * 4 + threadIdx.x] = (float)(blockIdx.y * 10 + blockIdx.x +
                                            gridDim.y * 100);
)",
                     4);
  a->source = "extern \"C\" void kiln_kernel_0(void *const *tables) {\n"
              "  void *const *args = tables + blockIdx.y;\n" +
              a->source.substr(a->source.find('\n') + 1);
  a->operations[0]->kernel->batches = 2;
  a->operations[0]->kernel->args = {0, 32};
  std::string error;
  auto emulation = kiln::testing::CudaEmulation::create(*a, {}, error);
  ASSERT_TRUE(emulation) << error;
  emulation->run();
  Tensor x = emulation->read("x");
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(x.floats()[i], 200 + (i / 8) * 10 + (i % 8) / 4) << i;
}

/// A kernel body in which each of 8 threads starts copying 4 floats (its
/// value and the next three) to its slot of shared memory, and after a
/// barrier does `afterCopy` and stores the first float of its neighbour's
/// slot.
std::string copyToNeighbour(const std::string &afterCopy) {
  return R"(
  alignas(16) __shared__ float slots[8][4];
  alignas(16) float values[4];
  for (int i = 0; i < 4; ++i) values[i] = (float)(threadIdx.x + i);
  __syncthreads();
  cp_async16(slots[threadIdx.x], values);
  __syncthreads();
)" + afterCopy +
         R"(
  x[blockIdx.x * 8 + threadIdx.x] = slots[(threadIdx.x + 1) % 8][0];
)";
}

TEST(EmulationTest, AsynchronousCopiesLandWhenAwaited) {
  Tensor x = runEightThreads(copyToNeighbour(R"(
  cp_async_wait_all();
  __syncthreads();
)"));
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(x.floats()[i], (i % 8 + 1) % 8) << i;
}

TEST(EmulationTest, AsynchronousCopiesAreNaNUntilAwaited) {
  // Without a barrier after the wait, the thread that runs first finds its
  // neighbour's copy not landed; without the wait, every thread does.
  Tensor early = runEightThreads(copyToNeighbour("  cp_async_wait_all();\n"));
  EXPECT_TRUE(std::isnan(early.floats()[0]));
  EXPECT_TRUE(std::isnan(early.floats()[15]));
  auto a = oneKernel(copyToNeighbour(""), 8);
  std::string error;
  auto emulation = kiln::testing::CudaEmulation::create(*a, {}, error);
  ASSERT_TRUE(emulation) << error;
  EXPECT_NONFATAL_FAILURE(emulation->run(), "kiln_expect failed");
  Tensor never = emulation->read("x");
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_TRUE(std::isnan(never.floats()[i])) << i;
}

TEST(EmulationTest, ReportsABarrierOnlySomeThreadsReach) {
  auto a = oneKernel("  if (threadIdx.x == 0) __syncthreads();\n", 4);
  std::string error;
  auto emulation = kiln::testing::CudaEmulation::create(*a, {}, error);
  ASSERT_TRUE(emulation) << error;
  EXPECT_NONFATAL_FAILURE(emulation->run(), "only some threads");
}

TEST(EmulationTest, ReportsAFailedExpectation) {
  auto a = oneKernel("  kiln_expect(threadIdx.x != 2);\n", 4);
  std::string error;
  auto emulation = kiln::testing::CudaEmulation::create(*a, {}, error);
  ASSERT_TRUE(emulation) << error;
  EXPECT_NONFATAL_FAILURE(emulation->run(), "kiln_expect failed");
}

} // namespace
