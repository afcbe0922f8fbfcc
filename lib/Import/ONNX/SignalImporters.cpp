//===- SignalImporters.cpp - ONNX DFT, STFT, windows and mel weights ------===//
//
// Audio front-ends computed in the graph (a log-mel spectrogram before an
// encoder). Windows and mel weights are constants of their constant sizes.
// A DFT of static length n is two products with constant n x k matrices of
// cosines and sines (k = n, or n / 2 + 1 one-sided), on the real and
// imaginary parts, which autodiff differentiates like any product; STFT
// gathers the frames at constant offsets, multiplies the window and takes
// their DFT.
//
//===----------------------------------------------------------------------===//

#include "OpChain.h"

#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;

namespace kiln {

/// The element type of `output_datatype` (FLOAT by default).
static FailureOr<Type> outputType(NodeContext &node) {
  return node.typeAttr("output_datatype", node.builder.getF32Type());
}

/// A constant scalar input as a number.
static FailureOr<double> scalarInput(NodeContext &node, unsigned i,
                                     StringRef what) {
  FailureOr<Tensor> value = node.constantInput(i, what);
  if (failed(value))
    return failure();
  if (value->getNumElements() != 1)
    return node.error(what) << " must be a scalar";
  return value->getAsDouble(0);
}

/// Hann, Hamming and Blackman windows: sum_j a_j cos(2 pi j n / N) with
/// N = size (periodic) or size - 1 (symmetric).
template <int terms>
static LogicalResult importWindow(NodeContext &node,
                                  std::array<double, terms> coefficients) {
  FailureOr<double> size = scalarInput(node, 0, "the window size");
  FailureOr<int64_t> periodic = node.intAttr("periodic", 1);
  FailureOr<Type> element = outputType(node);
  if (failed(size) || failed(periodic) || failed(element))
    return failure();
  if (!(*size >= 1 && *size <= double(INT64_MAX / 2)))
    return node.error("the window size must be positive, got ") << *size;
  std::optional<DType> dtype = dtypeOf(*element);
  auto length = static_cast<int64_t>(*size);
  if (failed(node.requireTableSize({length}, "the window")))
    return failure();
  double period = *periodic ? length : length - 1;
  Tensor window(*dtype, {length});
  for (int64_t n = 0; n < length; ++n) {
    double value = 0.0;
    for (int j = 0; j < terms; ++j)
      value += coefficients[j] *
               (period == 0.0 ? 1.0 : std::cos(2 * M_PI * j * n / period));
    window.setFromDouble(n, value);
  }
  node.setOutput(0, node.constant(window));
  return success();
}

/// MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangular filters
/// of peak 1 between mel-spaced frequencies, snapped to DFT bins as the
/// ONNX reference implementation does.
static LogicalResult importMelWeightMatrix(NodeContext &node) {
  if (failed(node.requireInputs(5)))
    return failure();
  FailureOr<double> melBins = scalarInput(node, 0, "num_mel_bins");
  FailureOr<double> dftLength = scalarInput(node, 1, "dft_length");
  FailureOr<double> sampleRate = scalarInput(node, 2, "sample_rate");
  FailureOr<double> lower = scalarInput(node, 3, "lower_edge_hertz");
  FailureOr<double> upper = scalarInput(node, 4, "upper_edge_hertz");
  FailureOr<Type> element = outputType(node);
  if (failed(melBins) || failed(dftLength) || failed(sampleRate) ||
      failed(lower) || failed(upper) || failed(element))
    return failure();
  auto inRange = [](double x) { return x >= 1 && x <= double(INT64_MAX / 2); };
  if (!inRange(*melBins) || !inRange(*dftLength) || !(*sampleRate > 0))
    return node.error("needs positive num_mel_bins, dft_length and "
                      "sample_rate");
  auto bands = static_cast<int64_t>(*melBins);
  auto length = static_cast<int64_t>(*dftLength);
  if (failed(node.requireTableSize({length / 2 + 1, bands}, "the matrix")))
    return failure();
  auto mel = [](double hertz) { return 2595 * std::log10(1 + hertz / 700); };
  double low = mel(*lower), step = (mel(*upper) - low) / (bands + 2);
  int64_t spectrum = length / 2 + 1;
  SmallVector<int64_t> edges; // the DFT bin of each band's edges
  for (int64_t i = 0; i < bands + 2; ++i) {
    double hertz = 700 * (std::pow(10, (low + i * step) / 2595) - 1);
    edges.push_back(
        static_cast<int64_t>(std::floor((length + 1) * hertz / *sampleRate)));
  }
  Tensor weights(*dtypeOf(*element), {spectrum, bands});
  auto set = [&](int64_t bin, int64_t band, double value) {
    if (bin < 0 || bin >= spectrum)
      return false;
    weights.setFromDouble(bin * bands + band, value);
    return true;
  };
  for (int64_t band = 0; band < bands; ++band) {
    int64_t left = edges[band], centre = edges[band + 1],
            right = edges[band + 2];
    bool inside = true;
    if (centre == left)
      inside &= set(centre, band, 1.0);
    for (int64_t bin = left; centre > left && bin <= centre; ++bin)
      inside &= set(bin, band, double(bin - left) / double(centre - left));
    for (int64_t bin = centre; bin < right; ++bin)
      inside &= set(bin, band, double(right - bin) / double(right - centre));
    if (!inside)
      return node.error("band ")
             << band << " reaches past the " << spectrum
             << " DFT bins (upper_edge_hertz above half the sample rate?)";
  }
  node.setOutput(0, node.constant(weights));
  return success();
}

namespace {
/// A DFT along the last axis of real and imaginary parts (imaginary null
/// for a real signal) of length n.
struct Spectrum {
  Value real, imaginary;
};
} // namespace

/// The DFT (or, `inverse`, its inverse, divided by n) of `signal` along its
/// last axis of length n; k = n / 2 + 1 frequencies if `onesided`.
static Spectrum transform(NodeContext &node, OpChain &ops,
                          const Spectrum &signal, int64_t n, bool inverse,
                          bool onesided) {
  if (!signal.real)
    return {};
  int64_t k = onesided ? n / 2 + 1 : n;
  if (failed(node.requireTableSize({n, k}, "the DFT's matrix")))
    return {};
  Type element = getElementTypeOrSelf(signal.real);
  std::optional<DType> dtype = dtypeOf(element);
  Tensor cosines(*dtype, {n, k}), sines(*dtype, {n, k});
  double scale = inverse ? 1.0 / n : 1.0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) {
      // (i j) mod n keeps the angle small, so that it rounds the same for
      // every product.
      double angle = 2 * M_PI * static_cast<double>((i * j) % n) / n;
      cosines.setFromDouble(i * k + j, scale * std::cos(angle));
      sines.setFromDouble(i * k + j, scale * std::sin(angle));
    }
  Value c = node.constant(cosines), s = node.constant(sines);
  auto product = [&](Value x, Value m) { return ops.build<MatmulOp>({x, m}); };
  // Forward: e^{-i angle}; inverse: e^{+i angle}.
  Value real = product(signal.real, c);
  Value imaginary = inverse ? product(signal.real, s)
                            : ops.unary<NegOp>(product(signal.real, s));
  if (signal.imaginary) {
    Value ic = product(signal.imaginary, c), is = product(signal.imaginary, s);
    real = inverse ? ops.sub(real, is) : ops.add(real, is);
    imaginary = ops.add(imaginary, ic);
  }
  return {real, imaginary};
}

/// [..., k] real and imaginary parts as [..., k, 2].
static Value interleaved(OpChain &ops, const Spectrum &spectrum) {
  SmallVector<Value> parts;
  for (Value part : {spectrum.real, spectrum.imaginary}) {
    if (!part)
      return {};
    SmallVector<int64_t> shape(
        cast<RankedTensorType>(part.getType()).getShape());
    shape.push_back(1);
    parts.push_back(ops.reshape(part, shape));
  }
  return ops.concat(
      parts, static_cast<int64_t>(
                 cast<RankedTensorType>(parts[0].getType()).getRank() - 1));
}

/// The real and imaginary parts of `input` [..., 1 or 2].
static FailureOr<Spectrum> parts(NodeContext &node, OpChain &ops, Value input) {
  auto type = cast<RankedTensorType>(input.getType());
  int64_t rank = type.getRank();
  int64_t components = type.getShape().back();
  if (rank < 2 || (components != 1 && components != 2) ||
      !isa<FloatType>(type.getElementType()))
    return node.error("the signal must be a float tensor [..., 1] (real) "
                      "or [..., 2] (complex), got ")
           << type;
  SmallVector<int64_t> shape(type.getShape().drop_back());
  auto component = [&](int64_t c) {
    SmallVector<int64_t> start(rank, 0), stride(rank, 1),
        sliceShape(type.getShape());
    start.back() = c;
    sliceShape.back() = 1;
    return ops.reshape(ops.slice(input, start, stride, sliceShape), shape);
  };
  return Spectrum{component(0), components == 2 ? component(1) : Value()};
}

/// DFT (opsets 17 and 20, where the axis became an input).
static LogicalResult importDFT(NodeContext &node) {
  if (failed(node.requireInputs(1)))
    return failure();
  OpChain ops(node, node.inputType(0).getElementType());
  FailureOr<Spectrum> signal = parts(node, ops, node.input(0));
  FailureOr<int64_t> inverse = node.intAttr("inverse", 0);
  FailureOr<int64_t> onesided = node.intAttr("onesided", 0);
  if (failed(signal) || failed(inverse) || failed(onesided))
    return failure();
  int64_t rank = node.inputRank(0), axis = 1;
  if (node.opset >= 20) {
    axis = -2;
    if (node.hasInput(2)) {
      FailureOr<double> given = scalarInput(node, 2, "the axis");
      if (failed(given))
        return failure();
      axis = static_cast<int64_t>(*given);
    }
  } else {
    FailureOr<int64_t> given = node.intAttr("axis", 1);
    if (failed(given))
      return failure();
    axis = *given;
  }
  // The axis counts the signal's dimensions; the last holds the components.
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank - 1)
    return node.error("axis must be a signal dimension (not the last), "
                      "within [")
           << -rank << ", " << rank - 2 << "]";
  if (*onesided && signal->imaginary)
    return node.error("onesided needs a real signal");
  int64_t length = node.inputType(0).getDimSize(axis), n = length;
  if (node.hasInput(1)) {
    FailureOr<double> given = scalarInput(node, 1, "dft_length");
    if (failed(given))
      return failure();
    n = static_cast<int64_t>(*given);
    if (n < 1)
      return node.error("dft_length must be positive, got ") << n;
  }
  // Move the axis last, and pad with zeros or truncate to n.
  SmallVector<int64_t> permutation, inversePermutation(rank - 1);
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != axis)
      permutation.push_back(d);
  permutation.push_back(axis);
  for (auto [i, d] : llvm::enumerate(permutation))
    inversePermutation[d] = i;
  auto prepared = [&](Value part) -> Value {
    if (!part)
      return {};
    Value last = ops.transpose(part, permutation);
    if (n == length || !last)
      return last;
    SmallVector<int64_t> shape(
        cast<RankedTensorType>(last.getType()).getShape());
    if (n < length) {
      SmallVector<int64_t> start(shape.size(), 0), stride(shape.size(), 1);
      shape.back() = n;
      return ops.slice(last, start, stride, shape);
    }
    SmallVector<int64_t> low(shape.size(), 0), high(shape.size(), 0);
    high.back() = n - length;
    return OpChain::orNull(node.padConstant(last, low, high, 0.0));
  };
  Spectrum spectrum = transform(
      node, ops, {prepared(signal->real), prepared(signal->imaginary)}, n,
      *inverse, *onesided);
  Value result =
      interleaved(ops, {ops.transpose(spectrum.real, inversePermutation),
                        ops.transpose(spectrum.imaginary, inversePermutation)});
  if (!result)
    return failure();
  node.setOutput(0, result);
  return success();
}

/// STFT: the DFT of the signal's frames, each `frame_step` after the last
/// and multiplied by the window.
static LogicalResult importSTFT(NodeContext &node) {
  if (failed(node.requireInputs(2)))
    return failure();
  OpChain ops(node, node.inputType(0).getElementType());
  FailureOr<Spectrum> signal = parts(node, ops, node.input(0));
  FailureOr<double> step = scalarInput(node, 1, "frame_step");
  FailureOr<int64_t> onesided = node.intAttr("onesided", 1);
  if (failed(signal) || failed(step) || failed(onesided))
    return failure();
  RankedTensorType type = node.inputType(0);
  if (type.getRank() != 3)
    return node.error("the signal must be [batch, length, 1 or 2], got ")
           << type;
  int64_t frameLength = -1;
  if (node.hasInput(2)) {
    RankedTensorType window = node.inputType(2);
    if (window.getRank() != 1)
      return node.error("the window must be 1-D, got ") << window;
    frameLength = window.getDimSize(0);
  }
  if (node.hasInput(3)) {
    FailureOr<double> given = scalarInput(node, 3, "frame_length");
    if (failed(given))
      return failure();
    if (frameLength >= 0 && frameLength != static_cast<int64_t>(*given))
      return node.error("frame_length ")
             << *given << " differs from the window's " << frameLength;
    frameLength = static_cast<int64_t>(*given);
  }
  int64_t length = type.getDimSize(1);
  auto hop = static_cast<int64_t>(*step);
  if (frameLength < 1 || frameLength > length || hop < 1)
    return node.error("needs a frame length (a window or frame_length) in "
                      "[1, ")
           << length << "] and a positive frame_step";
  if (*onesided && signal->imaginary)
    return node.error("onesided needs a real signal");
  int64_t frames = (length - frameLength) / hop + 1;
  if (failed(node.requireTableSize({frames, frameLength}, "the frames")))
    return failure();
  SmallVector<int64_t> offsets;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < frameLength; ++j)
      offsets.push_back(f * hop + j);
  Value indices = node.int64Constant({frames, frameLength}, offsets);
  auto framed = [&](Value part) -> Value {
    Value gathered = ops.build<GatherOp>(
        {part, indices},
        {node.builder.getNamedAttr("axis", node.builder.getI64IntegerAttr(1))});
    return node.hasInput(2) ? ops.mul(gathered, node.input(2)) : gathered;
  };
  Spectrum spectrum =
      transform(node, ops,
                {framed(signal->real),
                 signal->imaginary ? framed(signal->imaginary) : Value()},
                frameLength, false, *onesided);
  Value result = interleaved(ops, spectrum);
  if (!result)
    return failure();
  node.setOutput(0, result);
  return success();
}

void registerSignalImporters(OpImporterTable &table) {
  table.add("HannWindow", [](NodeContext &node) {
    return importWindow<2>(node, {0.5, -0.5});
  });
  table.add("HammingWindow", [](NodeContext &node) {
    return importWindow<2>(node, {25.0 / 46.0, -21.0 / 46.0});
  });
  table.add("BlackmanWindow", [](NodeContext &node) {
    return importWindow<3>(node, {0.42, -0.5, 0.08});
  });
  table.add("MelWeightMatrix", importMelWeightMatrix);
  table.add("DFT", importDFT);
  table.add("STFT", importSTFT);
}

} // namespace kiln
