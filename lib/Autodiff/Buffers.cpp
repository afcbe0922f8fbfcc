//===- Buffers.cpp - initializers that PyTorch does not train -------------===//
//
// ONNX does not say which initializers are weights: PyTorch's buffers (a
// rotary embedding's inverse frequencies, a normalization's running
// statistics) and the values an exporter folds (an attention mask built
// from constants) are initializers like any weight, and gradients reach
// them. PyTorch's optimizer never sees them, so neither does kiln's unless
// asked (--train): a buffer is recognized by the name PyTorch gives it or
// by values no weight holds. What that leaves out is said once per reason.
//
//===----------------------------------------------------------------------===//

#include "kiln/Autodiff/Autodiff.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "StoredBytes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <cstring>

using namespace mlir;

namespace kiln {

/// The last component of a parameter's name ("model.layers.0.inv_freq").
static StringRef leafName(StringRef name) {
  size_t cut = name.find_last_of("./:");
  return cut == StringRef::npos ? name : name.drop_front(cut + 1);
}

/// Whether `name` is what PyTorch modules call their buffers: rotary
/// embeddings' `inv_freq` and `cos_cached`/`sin_cached`, normalizations'
/// `running_mean` and `running_var`, attention masks (`attn_mask`, a
/// shifted window's; not `mask_token`, a weight), the value masked
/// scores take (GPT-J's `masked_bias`; not wav2vec2's `masked_spec_embed`,
/// a weight) and the zero logit bias of BART,
/// mBART, Pegasus and Marian (`final_logits_bias`).
static bool isBufferName(StringRef name) {
  StringRef leaf = leafName(name);
  return leaf == "inv_freq" || leaf == "running_mean" ||
         leaf == "running_var" || leaf == "final_logits_bias" ||
         leaf == "masked_bias" || leaf.ends_with("_cached") ||
         leaf.ends_with("mask");
}

/// Whether one of `count` values of type T at `bytes` is infinite or of a
/// magnitude no weight has (1e30 and beyond: a float type's lowest).
template <typename T>
static bool holdsMaskValue(const char *bytes, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, bytes + i * sizeof(T), sizeof(T));
    if (std::isinf(value) || std::fabs(value) >= T(1e30))
      return true;
  }
  return false;
}

/// Whether a parameter's stored f32 or f64 value is a mask: it holds -inf
/// or the type's lowest value, which masked_fill and folded masks write.
static bool holdsMaskValues(ParameterOp op) {
  std::optional<ElementsAttr> value = op.getInitialValue();
  if (!value)
    return false;
  ArrayRef<char> bytes = storedBytes(*value);
  Type element = op.getType().getElementType();
  if (element.isF32())
    return holdsMaskValue<float>(bytes.data(), bytes.size() / sizeof(float));
  if (element.isF64())
    return holdsMaskValue<double>(bytes.data(), bytes.size() / sizeof(double));
  return false;
}

/// Whether a parameter's stored f32 or f64 value is a sinusoidal position
/// table [..., positions, D]: the row of position 0, first (or last, where
/// positions descend, as Transformer-XL's relative ones do), is sin 0 = 0
/// in one half of the columns and cos 0 = 1 in the other (interleaved, as
/// the PyTorch tutorial builds it, or sines then cosines, as Marian and
/// fairseq do), and every row satisfies sin^2 + cos^2 = 1 for those pairs
/// (or is zero: fairseq's padding row). No trained or freshly initialized
/// weight does.
static bool holdsPositionTable(ParameterOp op) {
  std::optional<ElementsAttr> value = op.getInitialValue();
  RankedTensorType type = op.getType();
  Type element = type.getElementType();
  if (!value || type.getRank() < 2 || (!element.isF32() && !element.isF64()))
    return false;
  int64_t width = type.getShape().back();
  int64_t rows = type.getNumElements() / std::max<int64_t>(width, 1);
  if (width < 2 || width % 2 != 0 || rows < 2)
    return false;
  ArrayRef<char> bytes = storedBytes(*value);
  int64_t elementBytes = element.isF64() ? sizeof(double) : sizeof(float);
  if (static_cast<int64_t>(bytes.size()) != rows * width * elementBytes)
    return false; // a splat
  auto at = [&](int64_t row, int64_t column) -> double {
    int64_t index = row * width + column;
    if (element.isF64()) {
      double x;
      std::memcpy(&x, bytes.data() + index * sizeof(double), sizeof(double));
      return x;
    }
    float x;
    std::memcpy(&x, bytes.data() + index * sizeof(float), sizeof(float));
    return x;
  };
  int64_t half = width / 2;
  for (bool interleaved : {true, false}) {
    auto sine = [&](int64_t i) { return interleaved ? 2 * i : i; };
    auto cosine = [&](int64_t i) { return interleaved ? 2 * i + 1 : i + half; };
    auto zeroAngles = [&](int64_t row) {
      return llvm::all_of(llvm::seq<int64_t>(0, half), [&](int64_t i) {
        return at(row, sine(i)) == 0.0 && at(row, cosine(i)) == 1.0;
      });
    };
    auto unitPairs = [&](int64_t row) {
      auto unit = [&](int64_t i) {
        double s = at(row, sine(i)), c = at(row, cosine(i));
        return std::fabs(s * s + c * c - 1.0) <= 1e-5;
      };
      auto zero = [&](int64_t column) { return at(row, column) == 0.0; };
      return llvm::all_of(llvm::seq<int64_t>(0, half), unit) ||
             llvm::all_of(llvm::seq<int64_t>(0, width), zero);
    };
    if ((zeroAngles(0) || zeroAngles(rows - 1)) &&
        llvm::all_of(llvm::seq<int64_t>(0, rows), unitPairs))
      return true;
  }
  return false;
}

/// Whether `name` is one an exporter made up rather than a module's
/// attribute path: the dynamo exporter's `val_12`, TorchScript's
/// `onnx::Mul_12` and node outputs (`/layer/Constant_output_0`).
static bool isGeneratedName(StringRef name) {
  StringRef digits = name;
  if (digits.consume_front("val_") || digits.consume_front("_val_"))
    return !digits.empty() && llvm::all_of(digits, llvm::isDigit);
  return name.contains("::") || name.starts_with("/");
}

/// Whether `name` is what the dynamo exporter calls a `where` it folded
/// into a constant: `where`, `where_2`.
static bool isFoldedWhereName(StringRef name) {
  if (!name.consume_front("where"))
    return false;
  return name.empty() || (name.consume_front("_") && !name.empty() &&
                          llvm::all_of(name, llvm::isDigit));
}

/// Whether `value` is used, through data movement, only as the scale or
/// zero point of kiln.fake_quantize ops.
static bool onlyParameterizesQuantization(Value value) {
  return !value.use_empty() &&
         llvm::all_of(value.getUses(), [](OpOperand &use) {
           Operation *user = use.getOwner();
           if (isa<FakeQuantizeOp>(user))
             return use.getOperandNumber() != 0;
           return isa<ReshapeOp, CastOp, BroadcastOp, SliceOp>(user) &&
                  onlyParameterizesQuantization(user->getResult(0));
         });
}

std::optional<NotAWeight> notAWeight(ParameterOp op) {
  // Exporters lift literals (0.5, an exponent of 3) into scalar initializers
  // with names of their own; a scalar a module owns (CLIP's logit_scale)
  // keeps its name and trains.
  if (op.getType().getRank() == 0 && isGeneratedName(op.getName()))
    return NotAWeight::Literal;
  if (isBufferName(op.getName()))
    return NotAWeight::BufferName;
  if (holdsMaskValues(op) || isFoldedWhereName(op.getName()))
    return NotAWeight::Mask;
  if (onlyParameterizesQuantization(op.getResult()))
    return NotAWeight::Quantization;
  if (holdsPositionTable(op))
    return NotAWeight::PositionTable;
  return std::nullopt;
}

void remarkOnBuffers(func::FuncOp function, const AutodiffOptions &options) {
  if (!options.train.empty())
    return;
  // Why each reason keeps parameters from training, and the names it keeps.
  struct Kept {
    NotAWeight reason;
    const char *why;
    SmallVector<std::string> names;
  };
  Kept kept[] = {
      {NotAWeight::BufferName,
       "PyTorch buffers by name, which its optimizers skip (--train=REGEX "
       "trains them)",
       {}},
      {NotAWeight::Mask,
       "masks by their values (-inf or a float type's lowest) or folded "
       "selections named 'where' (--train=REGEX trains them)",
       {}},
      {NotAWeight::Quantization,
       "scales and zero points of fake quantizations, which PyTorch's "
       "observers set and kiln keeps as exported",
       {}},
      {NotAWeight::PositionTable,
       "sinusoidal position tables by their values (the sine and cosine of "
       "each position), which PyTorch keeps as buffers or frozen embeddings "
       "(--train=REGEX trains them)",
       {}}};
  function.walk([&](ParameterOp op) {
    std::optional<NotAWeight> reason = notAWeight(op);
    for (Kept &entry : kept) {
      if (reason != entry.reason)
        continue;
      std::string quoted = ("'" + op.getName() + "'").str();
      if (!llvm::is_contained(entry.names, quoted)) // imported twice
        entry.names.push_back(quoted);
    }
  });
  constexpr size_t kShown = 3;
  for (const Kept &entry : kept) {
    if (entry.names.empty())
      continue;
    ArrayRef<std::string> names = entry.names;
    std::string listed = llvm::join(names.take_front(kShown), ", ");
    if (names.size() > kShown)
      listed += " and " + std::to_string(names.size() - kShown) + " more";
    function.emitRemark() << "not training " << listed << ": " << entry.why;
  }
}

} // namespace kiln
