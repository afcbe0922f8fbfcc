//===- RecurrentImporters.cpp - ONNX RNN, GRU and LSTM --------------------===//
//
// kiln compiles static shapes, so a recurrent op is unrolled over its
// sequence: one product of the whole input with W for all steps, then per
// step and direction the product of the hidden state with R and the gates'
// elementwise ops, which autodiff differentiates like any others (backward
// through time). Every attribute of the specification is followed:
// directions (forward, reverse, bidirectional), layout, the activation
// functions with their alphas and betas, clip (bounding the activations'
// inputs), per-batch sequence lengths (a batch entry keeps its state and
// outputs zeros past its length, so a reverse pass starts at its last
// valid step), initial states, LSTM's peepholes and coupled input and
// forget gates (input_forget: f = 1 - i, as onnxruntime computes it) and
// GRU's linear_before_reset.
//
//===----------------------------------------------------------------------===//

#include "Activations.h"

using namespace mlir;

namespace kiln {

namespace {
enum class Cell { RNN, GRU, LSTM };

/// One activation function of a recurrent op.
struct Activation {
  std::string name;
  double alpha, beta;
};

/// Builds one recurrent node; every helper fails (with the node's error)
/// where a kiln op cannot be built.
class Recurrence {
public:
  Recurrence(NodeContext &node, Cell cell)
      : node(node), cell(cell), ops(node, node.inputType(0).getElementType()) {}
  LogicalResult import();

private:
  int64_t gates() const {
    return cell == Cell::LSTM ? 4 : cell == Cell::GRU ? 3 : 1;
  }
  /// Activations per direction: LSTM's f, g, h; GRU's f, g; RNN's f.
  int64_t activationsPerDirection() const {
    return gates() == 4 ? 3 : gates() == 3 ? 2 : 1;
  }

  LogicalResult readAttributes();
  LogicalResult readActivations();
  LogicalResult checkShapes();
  /// Per-step validity from sequence_lens, unless every length is known to
  /// cover the sequence.
  LogicalResult readLengths();
  /// Runs direction `d` over the sequence; `outputs` receives H at every
  /// time index (in time order), `lastH` and `lastC` the final states.
  LogicalResult runDirection(int64_t d, SmallVectorImpl<Value> &outputs,
                             Value &lastH, Value &lastC);

  /// Input `i` for direction `d`: [dirs, ...] sliced to [...].
  Value perDirection(unsigned i, int64_t d);
  /// The initial state input `i` for direction `d` as [B, H], or zeros.
  Value initialState(unsigned i, int64_t d);
  /// Columns [gate * H, (gate + 1) * H) of `x` (gates last).
  Value columns(Value x, int64_t gate);
  /// `f` of `x`, bounded by `clip` first.
  Value activate(const Activation &f, Value x);

  /// One step's new hidden state from its gates' inputs `xt` (x W^T + bias)
  /// and `hr` (h R^T); LSTM's also updates `cellState`.
  Value rnnStep(ArrayRef<Activation> fs, Value xt, Value hr);
  Value gruStep(ArrayRef<Activation> fs, Value xt, Value hr, Value state,
                Value r, Value recurrentBias);
  Value lstmStep(ArrayRef<Activation> fs, Value xt, Value hr,
                 ArrayRef<Value> peepholes, Value &cellState);

  NodeContext &node;
  Cell cell;
  OpChain ops;
  Type element;
  int64_t hidden = 0, directions = 1, steps = 0, batch = 0, inputSize = 0;
  bool reverse = false, batchFirst = false, inputForget = false,
       linearBeforeReset = false;
  double clip = 0.0;
  SmallVector<Activation> activations;
  /// X as [T, B, I]; per step, whether each batch entry is within its
  /// length ([B, 1] booleans), absent where all are.
  Value x;
  SmallVector<Value> valid;
};
} // namespace

LogicalResult Recurrence::readAttributes() {
  FailureOr<int64_t> size = node.intAttr("hidden_size", std::nullopt);
  FailureOr<int64_t> layout = node.intAttr("layout", 0);
  FailureOr<double> clipAttr = node.floatAttr("clip", 0.0);
  FailureOr<std::string> direction = node.stringAttr("direction", "forward");
  FailureOr<int64_t> coupled = node.intAttr("input_forget", 0);
  FailureOr<int64_t> beforeReset = node.intAttr("linear_before_reset", 0);
  if (failed(size) || failed(layout) || failed(clipAttr) || failed(direction) ||
      failed(coupled) || failed(beforeReset))
    return failure();
  if (*size <= 0)
    return node.error("hidden_size must be positive, got ") << *size;
  if (*layout != 0 && *layout != 1)
    return node.error("layout must be 0 or 1, got ") << *layout;
  if (*clipAttr < 0.0)
    return node.error("clip must not be negative, got ") << *clipAttr;
  if (*direction != "forward" && *direction != "reverse" &&
      *direction != "bidirectional")
    return node.error("unknown direction '") << *direction << "'";
  hidden = *size;
  batchFirst = *layout == 1;
  clip = *clipAttr;
  reverse = *direction == "reverse";
  directions = *direction == "bidirectional" ? 2 : 1;
  inputForget = *coupled != 0;
  linearBeforeReset = *beforeReset != 0;
  return readActivations();
}

LogicalResult Recurrence::readActivations() {
  static const char *const defaults[] = {"Sigmoid", "Tanh", "Tanh"};
  const char *const *first = cell == Cell::RNN ? defaults + 1 : defaults;
  SmallVector<std::string> names;
  if (const onnx::AttributeProto *given = node.attribute("activations"))
    for (const std::string &name : given->strings())
      names.push_back(name);
  else
    for (int64_t d = 0; d < directions; ++d)
      names.append(first, first + activationsPerDirection());
  if (static_cast<int64_t>(names.size()) !=
      directions * activationsPerDirection())
    return node.error("needs ") << directions * activationsPerDirection()
                                << " activations (per direction: "
                                << (cell == Cell::LSTM  ? "f, g, h"
                                    : cell == Cell::GRU ? "f, g"
                                                        : "f")
                                << "), got " << names.size();
  auto list = [&](StringRef name) {
    SmallVector<double> values;
    if (const onnx::AttributeProto *given = node.attribute(name))
      values.append(given->floats().begin(), given->floats().end());
    return values;
  };
  SmallVector<double> alphas = list("activation_alpha"),
                      betas = list("activation_beta");
  size_t nextAlpha = 0, nextBeta = 0;
  // Each function that takes an alpha (a beta) consumes the next one given,
  // else its ONNX operator's default.
  for (const std::string &name : names) {
    struct Parameters {
      const char *name;
      std::optional<double> alpha, beta;
    };
    static const Parameters known[] = {
        {"Relu", {}, {}},         {"Tanh", {}, {}},
        {"Sigmoid", {}, {}},      {"Softsign", {}, {}},
        {"Softplus", {}, {}},     {"Affine", 1.0, 0.0},
        {"LeakyRelu", 0.01, {}},  {"ThresholdedRelu", 1.0, {}},
        {"ScaledTanh", 1.0, 1.0}, {"HardSigmoid", 0.2, 0.5},
        {"Elu", 1.0, {}}};
    const Parameters *found = llvm::find_if(
        known, [&](const Parameters &p) { return name == p.name; });
    if (found == std::end(known))
      return node.error("unsupported activation '") << name << "'";
    Activation activation{name, 0.0, 0.0};
    if (found->alpha)
      activation.alpha =
          nextAlpha < alphas.size() ? alphas[nextAlpha++] : *found->alpha;
    if (found->beta)
      activation.beta =
          nextBeta < betas.size() ? betas[nextBeta++] : *found->beta;
    activations.push_back(activation);
  }
  return success();
}

LogicalResult Recurrence::checkShapes() {
  RankedTensorType xType = node.inputType(0);
  element = xType.getElementType();
  if (!isa<FloatType>(element) || xType.getRank() != 3)
    return node.error("X must be a 3-D float tensor, got ") << xType;
  steps = xType.getDimSize(batchFirst ? 1 : 0);
  batch = xType.getDimSize(batchFirst ? 0 : 1);
  inputSize = xType.getDimSize(2);
  int64_t rows = gates() * hidden;
  auto expect = [&](unsigned i, StringRef what,
                    ArrayRef<int64_t> shape) -> LogicalResult {
    if (!node.hasInput(i) || node.inputType(i).getShape() == shape)
      return success();
    std::string expected;
    llvm::raw_string_ostream os(expected);
    llvm::interleave(shape, os, "x");
    return node.error(what)
           << " must be " << expected << ", got " << node.inputType(i);
  };
  SmallVector<int64_t> state =
      batchFirst ? SmallVector<int64_t>{batch, directions, hidden}
                 : SmallVector<int64_t>{directions, batch, hidden};
  if (failed(expect(1, "W", {directions, rows, inputSize})) ||
      failed(expect(2, "R", {directions, rows, hidden})) ||
      failed(expect(3, "B", {directions, 2 * rows})) ||
      failed(expect(4, "sequence_lens", {batch})) ||
      failed(expect(5, "initial_h", state)))
    return failure();
  if (cell == Cell::LSTM && (failed(expect(6, "initial_c", state)) ||
                             failed(expect(7, "P", {directions, 3 * hidden}))))
    return failure();
  return success();
}

Value Recurrence::perDirection(unsigned i, int64_t d) {
  RankedTensorType type = node.inputType(i);
  SmallVector<int64_t> start(type.getRank(), 0), stride(type.getRank(), 1),
      shape(type.getShape());
  start[0] = d;
  shape[0] = 1;
  return ops.reshape(ops.slice(node.input(i), start, stride, shape),
                     type.getShape().drop_front());
}

Value Recurrence::initialState(unsigned i, int64_t d) {
  if (!node.hasInput(i))
    return node.splat(0.0, RankedTensorType::get({batch, hidden}, element));
  if (!batchFirst)
    return perDirection(i, d);
  return ops.reshape(
      ops.slice(node.input(i), {0, d, 0}, {1, 1, 1}, {batch, 1, hidden}),
      {batch, hidden});
}

Value Recurrence::columns(Value x, int64_t gate) {
  if (!x)
    return {};
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> start(rank, 0), stride(rank, 1), shape(type.getShape());
  start.back() = gate * hidden;
  shape.back() = hidden;
  return ops.slice(x, start, stride, shape);
}

Value Recurrence::activate(const Activation &f, Value x) {
  if (clip != 0.0)
    x = ops.build<MaxOp>(
        {ops.build<MinOp>({x, ops.constant(clip)}), ops.constant(-clip)});
  using namespace activations;
  StringRef name = f.name;
  if (name == "Relu")
    return ops.unary<ReluOp>(x);
  if (name == "Tanh")
    return ops.unary<TanhOp>(x);
  if (name == "Sigmoid")
    return ops.unary<SigmoidOp>(x);
  if (name == "Affine")
    return ops.add(ops.mul(x, ops.constant(f.alpha)), ops.constant(f.beta));
  if (name == "LeakyRelu")
    return leakyRelu(ops, x, f.alpha);
  if (name == "ThresholdedRelu")
    return thresholdedRelu(ops, x, f.alpha, /*keepAlpha=*/true);
  if (name == "ScaledTanh")
    return ops.mul(ops.unary<TanhOp>(ops.mul(x, ops.constant(f.beta))),
                   ops.constant(f.alpha));
  if (name == "HardSigmoid")
    return hardSigmoid(ops, x, f.alpha, f.beta);
  if (name == "Elu")
    return elu(ops, x, f.alpha);
  if (name == "Softsign")
    return softsign(ops, x);
  return softplus(ops, x);
}

Value Recurrence::rnnStep(ArrayRef<Activation> fs, Value xt, Value hr) {
  return activate(fs[0], ops.add(xt, hr));
}

Value Recurrence::gruStep(ArrayRef<Activation> fs, Value xt, Value hr,
                          Value state, Value r, Value recurrentBias) {
  // Gates z, r, h.
  Value z = activate(fs[0], ops.add(columns(xt, 0), columns(hr, 0)));
  Value reset = activate(fs[0], ops.add(columns(xt, 1), columns(hr, 1)));
  Value recurrent;
  if (linearBeforeReset) {
    // r * (h Rh^T + Rbh)
    Value linear = columns(hr, 2);
    if (recurrentBias)
      linear = ops.add(linear, columns(recurrentBias, 2));
    recurrent = ops.mul(reset, linear);
  } else {
    // (r * h) Rh^T, Rh the hidden gate's rows of R.
    Value rows = ops.slice(r, {2 * hidden, 0}, {1, 1}, {hidden, hidden});
    recurrent = ops.productTransposed(ops.mul(reset, state), rows);
  }
  Value candidate = activate(fs[1], ops.add(columns(xt, 2), recurrent));
  // (1 - z) * candidate + z * h = candidate + z * (h - candidate)
  return ops.add(candidate, ops.mul(z, ops.sub(state, candidate)));
}

Value Recurrence::lstmStep(ArrayRef<Activation> fs, Value xt, Value hr,
                           ArrayRef<Value> peepholes, Value &cellState) {
  // Gates i, o, f, c; peepholes i, o, f, reading the cell state.
  auto gate = [&](int64_t index, std::optional<int64_t> peephole = {},
                  Value cell = {}) {
    Value sum = ops.add(columns(xt, index), columns(hr, index));
    if (!peephole || peepholes.empty())
      return sum;
    return ops.add(sum, ops.mul(cell, peepholes[*peephole]));
  };
  Value input = activate(fs[0], gate(0, 0, cellState));
  Value forget = inputForget ? ops.sub(ops.constant(1.0), input)
                             : activate(fs[0], gate(2, 2, cellState));
  Value candidate = activate(fs[1], gate(3));
  cellState = ops.add(ops.mul(forget, cellState), ops.mul(input, candidate));
  Value output = activate(fs[0], gate(1, 1, cellState));
  return ops.mul(output, activate(fs[2], cellState));
}

LogicalResult Recurrence::runDirection(int64_t d,
                                       SmallVectorImpl<Value> &outputs,
                                       Value &lastH, Value &lastC) {
  ArrayRef<Activation> fs =
      ArrayRef(activations)
          .slice(d * activationsPerDirection(), activationsPerDirection());
  Value r = perDirection(2, d);
  // x W^T + Wb + Rb for every step at once: [T, B, G * H].
  Value inputs = ops.productTransposed(x, perDirection(1, d));
  Value recurrentBias;
  if (node.hasInput(3)) {
    Value biases = perDirection(3, d);
    int64_t rows = gates() * hidden;
    Value wb = ops.slice(biases, {0}, {1}, {rows});
    Value rb = ops.slice(biases, {rows}, {1}, {rows});
    Value both = ops.add(wb, rb);
    // GRU's hidden gate with linear_before_reset keeps Rbh inside the reset:
    // its columns of the summed bias are Wbh alone.
    if (both && cell == Cell::GRU && linearBeforeReset) {
      recurrentBias = rb;
      Value zr = ops.slice(both, {0}, {1}, {2 * hidden});
      Value wbh = columns(wb, 2);
      both = ops.concat({zr, wbh}, 0);
    }
    inputs = ops.add(inputs, both);
  }
  SmallVector<Value> peepholes;
  if (cell == Cell::LSTM && node.hasInput(7)) {
    Value p = perDirection(7, d);
    for (int64_t gate = 0; gate < 3; ++gate)
      peepholes.push_back(columns(p, gate));
  }
  Value state = initialState(5, d);
  Value cellState = cell == Cell::LSTM ? initialState(6, d) : Value();
  if (!r || !inputs || !state || (cell == Cell::LSTM && !cellState) ||
      llvm::is_contained(peepholes, Value()))
    return failure();
  outputs.assign(steps, Value());
  bool backward = reverse || d == 1;
  for (int64_t i = 0; i < steps; ++i) {
    int64_t t = backward ? steps - 1 - i : i;
    Value xt = ops.reshape(
        ops.slice(inputs, {t, 0, 0}, {1, 1, 1}, {1, batch, gates() * hidden}),
        {batch, gates() * hidden});
    Value hr = ops.productTransposed(state, r);
    Value newCell = cellState;
    Value newState = cell == Cell::RNN ? rnnStep(fs, xt, hr)
                     : cell == Cell::GRU
                         ? gruStep(fs, xt, hr, state, r, recurrentBias)
                         : lstmStep(fs, xt, hr, peepholes, newCell);
    // Past its length a batch entry keeps its state and outputs zeros.
    Value out = newState;
    if (!valid.empty()) {
      out = ops.select(valid[t], newState, ops.constant(0.0));
      newState = ops.select(valid[t], newState, state);
      if (cell == Cell::LSTM)
        newCell = ops.select(valid[t], newCell, cellState);
    }
    if (!out || !newState || (cell == Cell::LSTM && !newCell))
      return failure();
    state = newState;
    cellState = newCell;
    outputs[t] = out;
  }
  lastH = state;
  lastC = cellState;
  return success();
}

LogicalResult Recurrence::readLengths() {
  std::optional<Tensor> lengths = node.constantValue(node.input(4));
  if (lengths) {
    ArrayRef<int64_t> known = lengths->ints();
    if (llvm::all_of(known, [&](int64_t length) { return length == steps; }))
      return success(); // every entry covers the sequence
    for (auto [b, length] : llvm::enumerate(known))
      if (length < 0 || length > steps)
        return node.error("sequence_lens[")
               << b << "] = " << length << " is outside [0, " << steps << "]";
  }
  Value column = ops.reshape(node.input(4), {batch, 1});
  Type lengthType = node.inputType(4).getElementType();
  for (int64_t t = 0; t < steps; ++t)
    valid.push_back(ops.compare(ComparePredicate::LT,
                                node.scalar(static_cast<double>(t), lengthType),
                                column));
  return success(!llvm::is_contained(valid, Value()));
}

LogicalResult Recurrence::import() {
  if (failed(readAttributes()) || failed(checkShapes()))
    return failure();
  x = batchFirst ? ops.transpose(node.input(0), {1, 0, 2}) : node.input(0);
  if (!x || (node.hasInput(4) && failed(readLengths())))
    return failure();
  // Y [T, dirs, B, H]; Y_h and Y_c [dirs, B, H] (layout 1: [B, T, dirs, H]
  // and [B, dirs, H]).
  SmallVector<Value> ys, lastHs, lastCs;
  for (int64_t d = 0; d < directions; ++d) {
    SmallVector<Value> outputs;
    Value lastH, lastC;
    if (failed(runDirection(d, outputs, lastH, lastC)))
      return failure();
    for (Value &y : outputs)
      y = ops.reshape(y, {1, 1, batch, hidden});
    ys.push_back(ops.concat(outputs, 0));
    lastHs.push_back(ops.reshape(lastH, {1, batch, hidden}));
    if (cell == Cell::LSTM)
      lastCs.push_back(ops.reshape(lastC, {1, batch, hidden}));
  }
  SmallVector<ArrayRef<Value>> results = {ys, lastHs, lastCs};
  for (auto [i, parts] : llvm::enumerate(results)) {
    if (parts.empty())
      continue;
    Value joined = ops.concat(parts, i == 0 ? 1 : 0);
    if (joined && batchFirst)
      joined = i == 0 ? ops.transpose(joined, {2, 0, 1, 3})
                      : ops.transpose(joined, {1, 0, 2});
    if (!joined)
      return failure();
    node.setOutput(i, joined);
  }
  return success();
}

template <Cell cell> static LogicalResult importRecurrence(NodeContext &node) {
  // Recurrence takes its element type from X.
  if (failed(node.requireInputs(3)))
    return failure();
  return Recurrence(node, cell).import();
}

void registerRecurrentImporters(OpImporterTable &table) {
  table.add("RNN", importRecurrence<Cell::RNN>);
  table.add("GRU", importRecurrence<Cell::GRU>);
  table.add("LSTM", importRecurrence<Cell::LSTM>);
}

} // namespace kiln
