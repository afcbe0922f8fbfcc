//===- TensorFilesTest.cpp - reading and writing tensor files -------------===//

#include "kiln/TensorIO/TensorFiles.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

std::string temporaryPath(const char *suffix) {
  llvm::SmallString<128> path;
  llvm::sys::fs::createTemporaryFile("kiln-test", suffix, path);
  return std::string(path);
}

void writeBytes(const std::string &path, llvm::StringRef bytes) {
  std::error_code error;
  llvm::raw_fd_ostream out(path, error);
  out << bytes;
}

// A TensorProto written and read back keeps type, shape and values.
TEST(TensorFiles, ProtoRoundTrip) {
  Tensor tensor(DType::BF16, {2, 3});
  for (int64_t i = 0; i < 6; ++i)
    tensor.setFromDouble(i, 0.1 * i - 0.2);
  std::string path = temporaryPath("pb");
  ASSERT_FALSE(llvm::errorToBool(writeTensorProtoFile(tensor, "x", path)));
  llvm::Expected<Tensor> read = readTensorFile(path);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->getDType(), DType::BF16);
  EXPECT_EQ(read->getShape(), tensor.getShape());
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(read->floats()[i], tensor.floats()[i]);
  EXPECT_FALSE(llvm::sys::fs::exists(path + ".partial"));
}

// A version-1 .npy file of little-endian int32 in C order.
TEST(TensorFiles, ReadsNumpy) {
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }";
  header.resize(128 - 10 - 1, ' '); // the data starts 64-byte aligned
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size());
  bytes += '\0';
  bytes += header;
  for (int32_t v : {1, -2, 3, 40000})
    bytes.append(reinterpret_cast<const char *>(&v), 4);
  std::string path = temporaryPath("npy");
  writeBytes(path, bytes);
  llvm::Expected<Tensor> read = readTensorFile(path);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->getDType(), DType::I32);
  EXPECT_EQ(read->getShape(), (llvm::ArrayRef<int64_t>{2, 2}));
  EXPECT_EQ(read->ints()[1], -2);
  EXPECT_EQ(read->ints()[3], 40000);
}

// Damaged files are refused with a message that names the file and reason.
TEST(TensorFiles, RefusesBadFiles) {
  std::string npy = temporaryPath("npy");
  writeBytes(npy, "not numpy at all");
  llvm::Expected<Tensor> bad = readTensorFile(npy);
  ASSERT_FALSE(bool(bad));
  std::string message = llvm::toString(bad.takeError());
  EXPECT_NE(message.find(npy), std::string::npos);
  EXPECT_NE(message.find("bad magic"), std::string::npos);

  onnx::TensorProto proto;
  proto.set_name("short");
  proto.set_data_type(onnx::TensorProto::FLOAT);
  proto.add_dims(4);
  proto.set_raw_data(std::string(12, '\0'));
  llvm::Expected<Tensor> truncated = tensorFromProto(proto, ".");
  ASSERT_FALSE(bool(truncated));
  EXPECT_NE(llvm::toString(truncated.takeError()).find("holds 12 bytes"),
            std::string::npos);

  llvm::Expected<Tensor> missing = readTensorFile("/nonexistent/x.pb");
  EXPECT_FALSE(bool(missing));
  llvm::consumeError(missing.takeError());
}

} // namespace
