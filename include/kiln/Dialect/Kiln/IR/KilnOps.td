//===- KilnOps.td - kiln dialect operations ----------------*- tablegen -*-===//
//
// Every op states its semantics precisely enough to implement the reference
// interpreter from; lib/Interpreter is that implementation.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNOPS_TD
#define KILN_DIALECT_KILN_IR_KILNOPS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints and op families
//===----------------------------------------------------------------------===//

def Kiln_FloatTensor : RankedTensorOf<[AnyFloat]>;
def Kiln_IntegerTensor : RankedTensorOf<[AnyInteger]>;
def Kiln_BoolTensor : RankedTensorOf<[I1]>;
def Kiln_Tensor : RankedTensorOf<[AnyFloat, AnyInteger]>;

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, traits>;

/// Elementwise ops of one operand whose result has the operand's type.
class Kiln_UnaryOp<string mnemonic, Type tensorType, list<Trait> traits = []>
    : Kiln_Op<mnemonic, traits # [Pure, Elementwise, SameOperandsAndResultType]> {
  let arguments = (ins tensorType:$input);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

class Kiln_FloatUnaryOp<string mnemonic, string formula, list<Trait> traits = []>
    : Kiln_UnaryOp<mnemonic, Kiln_FloatTensor, traits> {
  let summary = "elementwise " # formula;
  let description = "Computes `" # formula # "` for every element of a "
    # "floating-point tensor, in the tensor's own precision (the interpreter "
    # "computes in fp64 and rounds once).\n\n```mlir\n%y = kiln." # mnemonic
    # " %x : tensor<4x8xf32>\n```";
}

/// Elementwise ops of two operands with NumPy broadcasting: shapes are aligned
/// at their last dimension and every pair of sizes must be equal or contain 1.
class Kiln_BroadcastingBinaryOp<string mnemonic, Type tensorType,
                                list<Trait> traits = []>
    : Kiln_Op<mnemonic, traits # [Pure, SameOperandsElementType,
                                  InferTypeOpAdaptor]> {
  let arguments = (ins tensorType:$lhs, tensorType:$rhs);
  let results = (outs tensorType:$result);
  let assemblyFormat =
    "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::kiln::inferBroadcastResultType(
          location, {adaptor.getLhs().getType(), adaptor.getRhs().getType()},
          /*elementType=*/nullptr, inferred);
    }
  }];
}

class Kiln_ArithmeticOp<string mnemonic, string formula,
                        list<Trait> traits = []>
    : Kiln_BroadcastingBinaryOp<mnemonic, Kiln_Tensor, traits> {
  let summary = "elementwise " # formula # " with broadcasting";
  let description = "Computes `" # formula # "` elementwise after NumPy "
    # "broadcasting of both operands, which share one element type. Integer "
    # "arithmetic wraps; integer division truncates toward zero.\n\n```mlir\n"
    # "%z = kiln." # mnemonic # " %x, %y : (tensor<2x8xf32>, tensor<8xf32>) "
    # "-> tensor<2x8xf32>\n```";
}

class Kiln_BitwiseOp<string mnemonic, string formula>
    : Kiln_BroadcastingBinaryOp<mnemonic, Kiln_IntegerTensor, [Commutative]> {
  let summary = "elementwise bitwise " # formula # " with broadcasting";
  let description = "Computes `" # formula # "` of the bits of two integer "
    # "tensors of one type after NumPy broadcasting: on `i1` tensors, the "
    # "logical operation.";
}

class Kiln_ShiftOp<string mnemonic, string formula>
    : Kiln_BroadcastingBinaryOp<mnemonic, Kiln_IntegerTensor> {
  let summary = "elementwise bit shift " # formula # " with broadcasting";
}

/// Reductions over a set of axes; reduced axes are removed, or kept with size
/// 1 when `keep_dims` is set. Reducing over no axes returns the input.
class Kiln_ReductionOp<string mnemonic, string formula>
    : Kiln_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = formula # " over axes";
  let description = "Reduces `input` with " # formula # " over `axes` "
    # "(distinct, non-negative, each below the rank). Floating-point sums "
    # "accumulate in fp64 on the interpreter.\n\n```mlir\n%s = kiln."
    # mnemonic # " %x {axes = array<i64: 1>, keep_dims} : "
    # "(tensor<4x8xf32>) -> tensor<4x1xf32>\n```";
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keep_dims);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::kiln::inferReductionResultType(
          location, ::llvm::cast<::mlir::RankedTensorType>(
                        adaptor.getInput().getType()),
          adaptor.getAxes(), adaptor.getKeepDims(), /*elementType=*/nullptr,
          inferred);
    }
    ::mlir::OpFoldResult $cppClass::fold(FoldAdaptor) {
      return ::kiln::foldEmptyReduction(*this);
    }
  }];
}

//===----------------------------------------------------------------------===//
// Values: constants, parameters, ranges, dropout
//===----------------------------------------------------------------------===//

def Kiln_ConstantOp : Kiln_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "a tensor known at compile time";
  let description = [{
    Produces `value`. Shape arithmetic and other constant subgraphs of an
    imported model fold into this op.

    ```mlir
    %c = kiln.constant dense<[1, 32, 4, 16]> : tensor<4xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Kiln_ParameterOp : Kiln_Op<"parameter", [Pure]> {
  let summary = "a named model parameter (an ONNX initializer)";
  let description = [{
    Reads the model parameter `name`. `initial_value`, when present, is the
    value the model was exported with; a parameter without it is declared
    only (a graph-only export) and must be given a value before it runs.
    Unlike `kiln.constant`, a parameter may be trained, so it is never folded.
    With `logical_shape`, the parameter is stored padded with zeros
    (`--kiln-pad-tensor-cores`): the model's parameter has `logical_shape`
    (which `initial_value` has), the result the larger padded type, whose
    elements outside the logical shape are 0. Checkpoints and exports hold
    the logical shape.

    ```mlir
    %w = kiln.parameter "fc.weight" : tensor<64x256xf32>
    %b = kiln.parameter "fc.bias" = dense<0.0> : tensor<256xf32> : tensor<256xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<ElementsAttr>:$initial_value,
                       OptionalAttr<DenseI64ArrayAttr>:$logical_shape);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat =
    "$name (`=` $initial_value^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kiln_RangeOp : Kiln_Op<"range", [Pure]> {
  let summary = "an arithmetic sequence";
  let description = [{
    A 1-D tensor whose element `i` is `start + i * step`, computed in fp64 and
    converted to the element type (truncating toward zero for integers).

    ```mlir
    %pos = kiln.range {start = 0.0, step = 1.0} : tensor<1024xi64>
    ```
  }];
  let arguments = (ins F64Attr:$start, F64Attr:$step);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kiln_DropoutOp : Kiln_Op<"dropout", [Pure, InferTypeOpAdaptor]> {
  let summary = "inverted dropout with an explicit seed";
  let description = [{
    Zeroes each element with probability `ratio` and scales the kept ones by
    `1 / (1 - ratio)`. `mask` is true where an element was kept. The draw is a
    pure function of `seed`, the optional scalar `offset` and the element's
    linear index, so the op has no hidden state and the same seed and offset
    reproduce the same mask. A training step passes its step number as the
    offset, so that every step draws a new mask. `ratio` is in [0, 1).

    ```mlir
    %y, %mask = kiln.dropout %x {ratio = 0.1, seed = 7} : tensor<2x8xf32>
    %z, %m2 = kiln.dropout %x offset %step : tensor<i64> {ratio = 0.1, seed = 7} : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input,
                       Optional<0DTensorOf<[I64]>>:$offset, F64Attr:$ratio,
                       I64Attr:$seed);
  let results = (outs Kiln_FloatTensor:$output, Kiln_BoolTensor:$mask);
  let assemblyFormat = [{
    $input (`offset` $offset^ `:` type($offset))? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Kiln_RandomUniformOp : Kiln_Op<"random_uniform", [Pure]> {
  let summary = "values drawn uniformly from [low, high)";
  let description = [{
    Element `i` is `low + (high - low) * u(i)`, where `u(i)` in [0, 1) is the
    draw kiln.dropout makes: a pure function of `seed`, the optional scalar
    `offset` (a training step passes its step number) and `i`, computed in
    fp64 and rounded to the element type.

    ```mlir
    %r = kiln.random_uniform offset %step : tensor<i64> {high = 1.0, low = 0.0, seed = 3} : tensor<4x1x1xf32>
    ```
  }];
  let arguments = (ins Optional<0DTensorOf<[I64]>>:$offset, F64Attr:$low,
                       F64Attr:$high, I64Attr:$seed);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    (`offset` $offset^ `:` type($offset))? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_RandomNormalOp : Kiln_Op<"random_normal", [Pure]> {
  let summary = "values drawn from a normal distribution";
  let description = [{
    Element `i` is `mean + scale * z(i)`, `z(i)` a standard normal value
    from two of kiln.random_uniform's draws, `u(2i)` and `u(2i + 1)`, by
    Box-Muller: `sqrt(-2 log(1 - u(2i))) * cos(2 pi u(2i + 1))`.

    ```mlir
    %r = kiln.random_normal {mean = 0.0, scale = 1.0, seed = 3} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Optional<0DTensorOf<[I64]>>:$offset, F64Attr:$mean,
                       F64Attr:$scale, I64Attr:$seed);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    (`offset` $offset^ `:` type($offset))? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise math
//===----------------------------------------------------------------------===//

def Kiln_NegOp : Kiln_UnaryOp<"neg", Kiln_Tensor, [Involution]> {
  let summary = "elementwise negation";
  let description = "Computes `-x`; integers wrap.";
}
def Kiln_AbsOp : Kiln_UnaryOp<"abs", Kiln_Tensor, [Idempotent]> {
  let summary = "elementwise absolute value";
  let description = "Computes `|x|`; integers wrap at the minimum value.";
}
def Kiln_SignOp : Kiln_UnaryOp<"sign", Kiln_Tensor> {
  let summary = "elementwise sign";
  let description = "-1, 0 or 1 according to the sign of `x`; NaN stays NaN.";
}
def Kiln_ExpOp : Kiln_FloatUnaryOp<"exp", "exp(x)">;
def Kiln_LogOp : Kiln_FloatUnaryOp<"log", "log(x)">;
def Kiln_TanhOp : Kiln_FloatUnaryOp<"tanh", "tanh(x)">;
def Kiln_ErfOp : Kiln_FloatUnaryOp<"erf", "erf(x)">;
def Kiln_SigmoidOp : Kiln_FloatUnaryOp<"sigmoid", "1 / (1 + exp(-x))">;
def Kiln_SiluOp : Kiln_FloatUnaryOp<"silu", "x / (1 + exp(-x))">;
def Kiln_ReluOp : Kiln_FloatUnaryOp<"relu", "max(x, 0)", [Idempotent]>;
def Kiln_SinOp : Kiln_FloatUnaryOp<"sin", "sin(x)">;
def Kiln_CosOp : Kiln_FloatUnaryOp<"cos", "cos(x)">;
def Kiln_TanOp : Kiln_FloatUnaryOp<"tan", "tan(x)">;
def Kiln_AsinOp : Kiln_FloatUnaryOp<"asin", "asin(x)">;
def Kiln_AcosOp : Kiln_FloatUnaryOp<"acos", "acos(x)">;
def Kiln_AtanOp : Kiln_FloatUnaryOp<"atan", "atan(x)">;
def Kiln_SinhOp : Kiln_FloatUnaryOp<"sinh", "sinh(x)">;
def Kiln_CoshOp : Kiln_FloatUnaryOp<"cosh", "cosh(x)">;
def Kiln_AsinhOp : Kiln_FloatUnaryOp<"asinh", "asinh(x)">;
def Kiln_AcoshOp : Kiln_FloatUnaryOp<"acosh", "acosh(x)">;
def Kiln_AtanhOp : Kiln_FloatUnaryOp<"atanh", "atanh(x)">;
def Kiln_SqrtOp : Kiln_FloatUnaryOp<"sqrt", "sqrt(x)">;
def Kiln_RsqrtOp : Kiln_FloatUnaryOp<"rsqrt", "1 / sqrt(x)">;
def Kiln_ReciprocalOp : Kiln_FloatUnaryOp<"reciprocal", "1 / x">;
def Kiln_FloorOp : Kiln_FloatUnaryOp<"floor", "floor(x)", [Idempotent]>;
def Kiln_CeilOp : Kiln_FloatUnaryOp<"ceil", "ceil(x)", [Idempotent]>;
def Kiln_RoundOp : Kiln_FloatUnaryOp<"round",
    "x rounded to the nearest integer, halves to even", [Idempotent]>;
def Kiln_NotOp : Kiln_UnaryOp<"not", Kiln_IntegerTensor, [Involution]> {
  let summary = "elementwise bitwise not";
  let description = "Computes `~x`, every bit of an integer flipped within "
    # "its type's width: on an `i1` tensor, the logical `!x`.";
}

def Kiln_GeluOp : Kiln_Op<"gelu",
    [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `none`: `0.5 * x * (1 + erf(x / sqrt(2)))`.
    `tanh`: `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.

    ```mlir
    %y = kiln.gelu %x approximation = tanh : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input,
                       Kiln_GeluApproximation:$approximation);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat =
    "$input `approximation` `=` $approximation attr-dict `:` type($result)";
}

def Kiln_IsNanOp : Kiln_Op<"is_nan", [Pure, Elementwise, InferTypeOpAdaptor]> {
  let summary = "elementwise test for NaN";
  let description = "True where `x` is NaN.";
  let arguments = (ins Kiln_FloatTensor:$input);
  let results = (outs Kiln_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Kiln_IsInfOp : Kiln_Op<"is_inf", [Pure, Elementwise, InferTypeOpAdaptor]> {
  let summary = "elementwise test for infinity";
  let description = [{
    True where `x` is +inf (when `detect_positive`) or -inf (when
    `detect_negative`).
  }];
  let arguments = (ins Kiln_FloatTensor:$input, BoolAttr:$detect_positive,
                       BoolAttr:$detect_negative);
  let results = (outs Kiln_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Kiln_CastOp : Kiln_Op<"cast", [Pure, Elementwise, SameOperandsAndResultShape]> {
  let summary = "elementwise conversion of the element type";
  let description = [{
    Converts each element: float to float rounds to nearest even; float to
    integer truncates toward zero; integer to float rounds to nearest; to `i1`
    gives `x != 0`; from `i1` gives 0 or 1.

    ```mlir
    %f = kiln.cast %ids : tensor<2x32xi64> to tensor<2x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// Whether the cast changes no value: a float widened to f32 or f64.
    bool widensExactly();
  }];
}

def Kiln_AddOp : Kiln_ArithmeticOp<"add", "lhs + rhs", [Commutative]> {
  let hasFolder = 1;
}
def Kiln_SubOp : Kiln_ArithmeticOp<"sub", "lhs - rhs">;
def Kiln_MulOp : Kiln_ArithmeticOp<"mul", "lhs * rhs", [Commutative]> {
  let hasFolder = 1;
}
def Kiln_DivOp : Kiln_ArithmeticOp<"div", "lhs / rhs"> {
  let hasFolder = 1;
}
def Kiln_PowOp : Kiln_ArithmeticOp<"pow", "lhs ^ rhs">;
def Kiln_MaxOp : Kiln_ArithmeticOp<"max", "max(lhs, rhs) (NaN if either is)",
                                   [Commutative]>;
def Kiln_MinOp : Kiln_ArithmeticOp<"min", "min(lhs, rhs) (NaN if either is)",
                                   [Commutative]>;
def Kiln_RemainderOp : Kiln_BroadcastingBinaryOp<"remainder", Kiln_Tensor> {
  let summary = "elementwise remainder with broadcasting";
  let description = [{
    `lhs - q * rhs` for the quotient `q` truncated toward zero (the sign of
    `lhs`, C's `fmod`), or rounded toward negative infinity with `floored`
    (the sign of `rhs`, Python's `%`). An integer remainder by zero is an error
    at run time.

    ```mlir
    %r = kiln.remainder %x, %y {floored} : (tensor<8xi64>, tensor<i64>) -> tensor<8xi64>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$lhs, Kiln_Tensor:$rhs, UnitAttr:$floored);
}

def Kiln_AndOp : Kiln_BitwiseOp<"and", "lhs & rhs">;
def Kiln_OrOp : Kiln_BitwiseOp<"or", "lhs | rhs">;
def Kiln_XorOp : Kiln_BitwiseOp<"xor", "lhs ^ rhs">;

def Kiln_ShiftLeftOp : Kiln_ShiftOp<"shift_left", "lhs << rhs"> {
  let description = [{
    Shifts the bits of each `lhs` element `rhs` places toward the most
    significant, within the element type's width: bits shifted past it are
    lost, and a shift by the width or more (or by a negative amount) gives 0.

    ```mlir
    %y = kiln.shift_left %x, %n : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
    ```
  }];
}

def Kiln_ShiftRightOp : Kiln_ShiftOp<"shift_right", "lhs >> rhs"> {
  let description = [{
    Shifts the bits of each `lhs` element `rhs` places toward the least
    significant: unsigned types fill zeros in, signed and signless ones copy
    the sign bit. A shift by the width or more (or by a negative amount)
    gives 0, or -1 for a negative signed value.

    ```mlir
    %y = kiln.shift_right %x, %n : (tensor<4xui16>, tensor<ui16>) -> tensor<4xui16>
    ```
  }];
}

def Kiln_CompareOp : Kiln_Op<"compare",
    [Pure, SameOperandsElementType, InferTypeOpAdaptor]> {
  let summary = "elementwise comparison with broadcasting";
  let description = [{
    Compares `lhs` and `rhs` after NumPy broadcasting; the result is `i1`.
    Comparisons with NaN are false, except `ne`, which is true.

    ```mlir
    %m = kiln.compare le, %i, %j : (tensor<32x1xi64>, tensor<32xi64>) -> tensor<32x32xi1>
    ```
  }];
  let arguments = (ins Kiln_ComparePredicate:$predicate,
                       AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs Kiln_BoolTensor:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Kiln_WhereOp : Kiln_Op<"where", [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise selection with broadcasting";
  let description = [{
    `condition ? on_true : on_false`, after NumPy broadcasting of all three.

    ```mlir
    %s = kiln.where %mask, %scores, %neg_inf
        : (tensor<1x1x32x32xi1>, tensor<2x4x32x32xf32>, tensor<f32>) -> tensor<2x4x32x32xf32>
    ```
  }];
  let arguments = (ins Kiln_BoolTensor:$condition, AnyRankedTensor:$on_true,
                       AnyRankedTensor:$on_false);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat =
    "$condition `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, results)";
}

def Kiln_FakeQuantizeOp : Kiln_Op<"fake_quantize",
    [Pure, SameOperandsElementType, InferTypeOpAdaptor]> {
  let summary = "quantization to integers and back, with broadcasting";
  let description = [{
    Rounds each element to the integer grid that `scale` and `zero_point`
    define, as PyTorch's FakeQuantize does and ONNX's QuantizeLinear followed
    by DequantizeLinear means:
    `q = clamp(rint(x * (1 / scale)) + zero_point, quant_min, quant_max)`,
    then `(q - zero_point) * scale`. `1 / scale` and the product are each
    rounded to the element type and `rint` rounds half to even, as
    PyTorch computes; QuantizeLinear's `x / scale` can differ from that
    product in its last bit, which decides the level only at an exact tie
    (a symmetric scale puts the largest weight of each channel on one:
    `127.5`). `scale` and `zero_point` broadcast to
    the input's shape (per-tensor: scalars; per-channel: sizes 1 except on
    the channel axis) and share its element type; `zero_point` holds
    integers in [quant_min, quant_max].

    Its gradient is the straight-through estimator of quantization-aware
    training (PyTorch's FakeQuantize): the output's gradient where `q` was
    not clamped, that is where `quant_min <= rint(x * (1 / scale)) +
    zero_point <= quant_max`, and zero elsewhere. `scale` and `zero_point` get none.

    ```mlir
    %y = kiln.fake_quantize %w, %scale, %zero {quant_max = 127.0, quant_min = -128.0}
        : (tensor<64x32xf32>, tensor<64x1xf32>, tensor<f32>) -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$scale,
                       Kiln_FloatTensor:$zero_point, F64Attr:$quant_min,
                       F64Attr:$quant_max);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $zero_point attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Contractions, reductions, normalizations
//===----------------------------------------------------------------------===//

def Kiln_MatmulOp : Kiln_Op<"matmul",
    [Pure, SameOperandsElementType, InferTypeOpAdaptor]> {
  let summary = "batched matrix product with broadcasting batch dimensions";
  let description = [{
    Both operands have rank 2 or more. The last two dimensions are matrices,
    transposed first when `transpose_lhs` / `transpose_rhs` is set; the
    leading dimensions are batch dimensions and broadcast like NumPy's. The
    result is `[batch..., M, N]`, of the operands' element type or, with
    `accumulate`, of that wider float type: the tensor-core form, where bf16
    or f16 operands accumulate and store in f32. The interpreter accumulates
    in fp64 and rounds once to the result type.

    ```mlir
    %s = kiln.matmul %q, %k {transpose_rhs}
        : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x32x32xf32>
    %t = kiln.matmul %a, %b {accumulate = f32}
        : (tensor<64x64xbf16>, tensor<64x256xbf16>) -> tensor<64x256xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$lhs, Kiln_Tensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       OptionalAttr<TypeAttrOf<AnyFloat>>:$accumulate);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat =
    "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasCanonicalizer = 1;
}

def Kiln_ReduceSumOp : Kiln_ReductionOp<"reduce_sum", "the sum">;
def Kiln_ReduceMeanOp : Kiln_ReductionOp<"reduce_mean", "the arithmetic mean">;
def Kiln_ReduceMaxOp : Kiln_ReductionOp<"reduce_max", "the maximum">;
def Kiln_ReduceMinOp : Kiln_ReductionOp<"reduce_min", "the minimum">;
def Kiln_ReduceProdOp : Kiln_ReductionOp<"reduce_prod", "the product">;

class Kiln_ArgReductionOp<string mnemonic, string which>
    : Kiln_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = "index of the " # which # " along an axis";
  let description = "The `i64` index of the " # which # " element along "
    # "`axis`; of several equal ones the first, or the last with "
    # "`select_last_index`. The axis is removed unless `keep_dims` is set.";
  let arguments = (ins Kiln_Tensor:$input, I64Attr:$axis, UnitAttr:$keep_dims,
                       UnitAttr:$select_last_index);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      int64_t axis = adaptor.getAxis();
      return ::kiln::inferReductionResultType(
          location, ::llvm::cast<::mlir::RankedTensorType>(
                        adaptor.getInput().getType()),
          ::llvm::ArrayRef<int64_t>(axis), adaptor.getKeepDims(),
          ::mlir::IntegerType::get(context, 64), inferred);
    }
  }];
}

def Kiln_ArgMaxOp : Kiln_ArgReductionOp<"argmax", "maximum">;
def Kiln_ArgMinOp : Kiln_ArgReductionOp<"argmin", "minimum">;

def Kiln_TopKOp : Kiln_Op<"top_k", [Pure, InferTypeOpAdaptor]> {
  let summary = "indices of the k largest (or smallest) elements along an axis";
  let description = [{
    The `i64` indices along `axis` of its `k` largest elements (smallest
    without `largest`), best first; of equal elements the one with the
    lower index comes first, and NaN counts as larger than every number.
    The result has the input's shape with extent `k` along `axis`; the
    values are `kiln.gather_elements` of the input at these indices (ONNX
    TopK imports as both).

    ```mlir
    %i = kiln.top_k %logits {axis = 1 : i64, k = 2 : i64, largest}
        : (tensor<4x8xf32>) -> tensor<4x2xi64>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, I64Attr:$axis, I64Attr:$k,
                       UnitAttr:$largest);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      auto input = ::llvm::cast<::mlir::RankedTensorType>(
          adaptor.getInput().getType());
      int64_t axis = adaptor.getAxis(), k = adaptor.getK();
      if (axis < 0 || axis >= input.getRank())
        return ::mlir::emitOptionalError(location, "axis ", axis,
                                         " is outside [0, ", input.getRank(),
                                         ")");
      if (k < 1 || k > input.getDimSize(axis))
        return ::mlir::emitOptionalError(location, "k = ", k,
                                         " is outside [1, ",
                                         input.getDimSize(axis), "]");
      ::llvm::SmallVector<int64_t> shape(input.getShape());
      shape[axis] = k;
      inferred.push_back(::mlir::RankedTensorType::get(
          shape, ::mlir::IntegerType::get(context, 64)));
      return ::mlir::success();
    }
  }];
}

class Kiln_SoftmaxFamilyOp<string mnemonic, string formula>
    : Kiln_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = formula # " along one axis";
  let description = "Computes `" # formula # "` along `axis`, subtracting the "
    # "maximum first so that large inputs do not overflow.\n\n```mlir\n%p = kiln."
    # mnemonic # " %scores {axis = 3 : i64} : tensor<2x4x32x32xf32>\n```";
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::verify() {
      return ::kiln::verifyAxis(*this, getAxis(), getType().getRank());
    }
  }];
}

def Kiln_SoftmaxOp : Kiln_SoftmaxFamilyOp<"softmax", "exp(x) / sum(exp(x))">;
def Kiln_LogSoftmaxOp
    : Kiln_SoftmaxFamilyOp<"log_softmax", "x - log(sum(exp(x)))">;

def Kiln_LayerNormOp : Kiln_Op<"layer_norm",
    [Pure, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "layer normalization over the trailing dimensions";
  let description = [{
    Normalizes over dimensions `[axis, rank)`:
    `y = (x - mean) * inv_std_dev * scale + bias`, with
    `inv_std_dev = 1 / sqrt(variance + epsilon)` and the biased variance.
    `scale` and `bias` broadcast to the normalized shape. `mean` and
    `inv_std_dev` keep the input's shape with the normalized dimensions set to
    1 and are always f32 (statistics are computed in fp32 or better), which
    is what the backward pass reuses.

    ```mlir
    %y, %mean, %rstd = kiln.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-5 : f64}
        : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>)
        -> (tensor<2x32x64xf32>, tensor<2x32x1xf32>, tensor<2x32x1xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Optional<Kiln_FloatTensor>:$scale,
                       Optional<Kiln_FloatTensor>:$bias, I64Attr:$axis,
                       F64Attr:$epsilon);
  let results = (outs Kiln_FloatTensor:$output,
                      RankedTensorOf<[F32]>:$mean,
                      RankedTensorOf<[F32]>:$inv_std_dev);
  let assemblyFormat = [{
    $input (`scale` $scale^)? (`bias` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Kiln_RmsNormOp : Kiln_Op<"rms_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "root-mean-square normalization over the trailing dimensions";
  let description = [{
    Normalizes over dimensions `[axis, rank)` without centering:
    `y = x * inv_rms * scale`, `inv_rms = 1 / sqrt(mean(x^2) + epsilon)`, the
    normalization of Llama-style decoders. `scale` broadcasts to the
    normalized shape. `inv_rms` has the input's shape with the normalized
    dimensions set to 1, in f32.

    ```mlir
    %y, %r = kiln.rms_norm %x scale %g {axis = 2 : i64, epsilon = 1.0e-6 : f64}
        : (tensor<2x32x64xf32>, tensor<64xf32>) -> (tensor<2x32x64xf32>, tensor<2x32x1xf32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Optional<Kiln_FloatTensor>:$scale,
                       I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Kiln_FloatTensor:$output, RankedTensorOf<[F32]>:$inv_rms);
  let assemblyFormat = [{
    $input (`scale` $scale^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

class Kiln_ClassificationLossOp<string mnemonic, string inputName,
                                string perElement>
    : Kiln_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let description = "`" # inputName # "` has shape `[N, C, d1, ...]` and "
    # "`labels` (integer) `[N, d1, ...]`. The loss of one element is `"
    # perElement # "`, times `weight[label]` when a class weight is given. "
    # "Elements whose label equals `ignore_index` contribute 0 and are not "
    # "counted. `none` returns the per-element losses; `sum` their sum; `mean` "
    # "their sum divided by the sum of the weights of the counted elements "
    # "(their number without weights). Any other label outside [0, C) is an "
    # "error at run time. With `num_classes`, only the first `num_classes` "
    # "classes exist: the others are padding (`--kiln-pad-tensor-cores`), "
    # "take no part in the softmax, and a label there is an error.";
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_IntegerTensor:$labels,
                       Optional<Kiln_FloatTensor>:$weight,
                       Kiln_LossReduction:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index,
                       OptionalAttr<I64Attr>:$num_classes);
  let hasVerifier = 1;
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $labels (`weight` $weight^)? `reduction` `=` $reduction attr-dict
    `:` functional-type(operands, results)
  }];
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::kiln::inferClassificationLossType(
          location, adaptor.getInput().getType(), adaptor.getLabels().getType(),
          adaptor.getWeight() ? adaptor.getWeight().getType() : ::mlir::Type(),
          adaptor.getReduction(), inferred);
    }
    ::mlir::LogicalResult $cppClass::verify() {
      return ::kiln::verifyClassCount(*this);
    }
  }];
}

def Kiln_CrossEntropyOp : Kiln_ClassificationLossOp<"cross_entropy", "logits",
    "-log_softmax(logits)[label]"> {
  let summary = "softmax cross-entropy over class logits";
}

def Kiln_NllLossOp : Kiln_ClassificationLossOp<"nll_loss", "log_probs",
    "-log_probs[label]"> {
  let summary = "negative log-likelihood of class log-probabilities";
}

include "kiln/Dialect/Kiln/IR/KilnDataMovementOps.td"
include "kiln/Dialect/Kiln/IR/KilnGradientOps.td"
include "kiln/Dialect/Kiln/IR/KilnOptimizerOps.td"
include "kiln/Dialect/Kiln/IR/KilnFusionOps.td"
include "kiln/Dialect/Kiln/IR/KilnAttentionOps.td"

#endif // KILN_DIALECT_KILN_IR_KILNOPS_TD
