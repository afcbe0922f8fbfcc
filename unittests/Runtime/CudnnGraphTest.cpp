//===- CudnnGraphTest.cpp - cuDNN's attention graphs without a GPU --------===//
//
// cuDNN finalizes tensor and operation descriptors without a GPU, checking
// their attributes, types and matrix shapes; only the operation graph needs
// a handle, which needs a GPU. So every descriptor of the attention graphs
// is checked here up to that point (with a GPU, the graphs are planned);
// the numbers are checked by kiln-gpu-tests.
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::runtime;

namespace {

struct GraphCase {
  bool backward, causal;
  artifact::ElementType type;
};

class CudnnAttentionGraphTest : public ::testing::TestWithParam<GraphCase> {};

/// The flatbuffer of a [2, 4, 32 or 48, 64] attention, heads of query and
/// key interleaved as a packed projection leaves them.
std::vector<uint8_t> attentionBytes(const GraphCase &c) {
  artifact::LibraryAttentionT a;
  a.backward = c.backward;
  a.causal = c.causal;
  a.batch = 2;
  a.heads = 4;
  a.rows = 32;
  a.keys = 48;
  a.head_dim = 64;
  a.scale = 0.125;
  a.element_type = c.type;
  a.query = 0;
  a.key = 1 << 20;
  a.value = 2 << 20;
  a.output = 3 << 20;
  a.logsumexp = 4 << 20;
  if (c.backward) {
    a.output_grad = 5 << 20;
    a.query_grad = 6 << 20;
    a.key_grad = 7 << 20;
    a.value_grad = 8 << 20;
  }
  // [batch, rows, heads, head_dim] in memory, viewed as [b, h, rows, d]; the
  // key, value and their gradients (tensors 1, 2, 6, 7) have `keys` rows.
  for (size_t t = 0; t < (c.backward ? 8u : 4u); ++t) {
    int64_t rows = (t == 1 || t == 2 || t == 6 || t == 7) ? a.keys : a.rows;
    a.strides.insert(a.strides.end(), {rows * 4 * 64, 64, 4 * 64, 1});
  }
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(artifact::LibraryAttention::Pack(builder, &a));
  return {builder.GetBufferPointer(),
          builder.GetBufferPointer() + builder.GetSize()};
}

TEST_P(CudnnAttentionGraphTest, DescriptorsFinalize) {
  std::string error;
  const CudnnLibrary *api = loadCudnn(error);
  ASSERT_NE(api, nullptr) << error;
  cudnnHandle_t handle = nullptr;
  bool gpu = api->create(&handle) == CUDNN_STATUS_SUCCESS;
  std::vector<uint8_t> bytes = attentionBytes(GetParam());
  auto *attention =
      flatbuffers::GetRoot<artifact::LibraryAttention>(bytes.data());
  std::unique_ptr<CudnnAttention> planned =
      CudnnAttention::create(*api, handle, *attention, error);
  if (gpu) {
    EXPECT_NE(planned, nullptr) << error;
    api->destroy(handle);
    return;
  }
  // Everything before the operation graph's handle finalized.
  EXPECT_EQ(planned, nullptr);
  EXPECT_EQ(error.rfind("setting attribute " +
                            std::to_string(CUDNN_ATTR_OPERATIONGRAPH_HANDLE) +
                            ":",
                        0),
            0u)
      << error;
}

INSTANTIATE_TEST_SUITE_P(
    Attention, CudnnAttentionGraphTest,
    ::testing::Values(GraphCase{false, true, artifact::ElementType::BF16},
                      GraphCase{false, false, artifact::ElementType::F16},
                      GraphCase{true, true, artifact::ElementType::BF16},
                      GraphCase{true, false, artifact::ElementType::F16}));

// What finalizing checks: a product whose shapes do not chain is refused
// at its operation, naming it.
TEST(CudnnGraphTest, RefusesAProductOfMismatchedShapes) {
  std::string error;
  const CudnnLibrary *api = loadCudnn(error);
  ASSERT_NE(api, nullptr) << error;
  CudnnGraph graph(*api);
  GraphTensor a = graph.intermediate({2, 4, 32, 16});
  GraphTensor b = graph.intermediate({2, 4, 8, 32});
  GraphTensor y = graph.intermediate({2, 4, 32, 32});
  graph.matmul(a, b, y);
  EXPECT_FALSE(graph.plan(nullptr));
  EXPECT_EQ(
      graph.failure().rfind("a matmul operation: CUDNN_STATUS_BAD_PARAM", 0),
      0u)
      << graph.failure();
}

} // namespace
