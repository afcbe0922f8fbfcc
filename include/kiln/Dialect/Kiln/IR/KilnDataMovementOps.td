//===- KilnDataMovementOps.td - reshaping and indexing ----*- tablegen -*-===//
//
// Ops that move elements without computing new values: reshapes,
// transposes, broadcasts, slices, concatenation, padding, gathers and
// scatters. Included by KilnOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNDATAMOVEMENTOPS_TD
#define KILN_DIALECT_KILN_IR_KILNDATAMOVEMENTOPS_TD

def Kiln_ReshapeOp : Kiln_Op<"reshape", [Pure, SameOperandsAndResultElementType]> {
  let summary = "the same elements in row-major order under a new shape";
  let description = [{
    ```mlir
    %y = kiln.reshape %x : tensor<2x32x64xf32> to tensor<64x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_TransposeOp : Kiln_Op<"transpose", [Pure, InferTypeOpAdaptor]> {
  let summary = "permutation of dimensions";
  let description = [{
    Result dimension `i` is input dimension `permutation[i]`.

    ```mlir
    %y = kiln.transpose %x {permutation = array<i64: 0, 2, 1, 3>}
        : (tensor<2x32x4x16xf32>) -> tensor<2x4x32x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Kiln_BroadcastOp : Kiln_Op<"broadcast", [Pure, SameOperandsAndResultElementType]> {
  let summary = "NumPy broadcast to a larger shape";
  let description = [{
    Aligns the input's shape with the result's at the last dimension; each
    input size must equal the result's or be 1 (then it repeats).

    ```mlir
    %y = kiln.broadcast %x : tensor<1x32xf32> to tensor<4x8x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_SliceOp : Kiln_Op<"slice", [Pure, SameOperandsAndResultElementType]> {
  let summary = "a strided window";
  let description = [{
    Result element `[i0, i1, ...]` is input element
    `[start[0] + i0 * stride[0], start[1] + i1 * stride[1], ...]`. Strides are
    nonzero and may be negative; every index read lies inside the input. The
    result's shape gives the number of elements taken along each dimension.

    ```mlir
    %y = kiln.slice %x {start = array<i64: 0, 1>, stride = array<i64: 1, 2>}
        : tensor<4x9xf32> to tensor<4x4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$stride);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_ConcatOp : Kiln_Op<"concat", [Pure, SameOperandsAndResultElementType,
                                       InferTypeOpAdaptor]> {
  let summary = "concatenation along one axis";
  let description = [{
    ```mlir
    %y = kiln.concat %a, %b {axis = 1 : i64}
        : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Kiln_PadOp : Kiln_Op<"pad", [Pure, SameOperandsAndResultElementType,
                                 InferTypeOpAdaptor]> {
  let summary = "padding (or cropping) at both ends of every dimension";
  let description = [{
    Adds `low[i]` elements before and `high[i]` after dimension `i`; a
    negative amount removes elements. New elements are `value` (`constant`),
    the mirror image without the edge (`reflect`), the edge element (`edge`)
    or the elements from the other end (`wrap`).

    ```mlir
    %y = kiln.pad %x constant {low = array<i64: 0, 0>, high = array<i64: 0, 1>, value = -100.0}
        : (tensor<2x32xi64>) -> tensor<2x33xi64>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Kiln_PadMode:$mode,
                       DenseI64ArrayAttr:$low, DenseI64ArrayAttr:$high,
                       F64Attr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat =
    "$input $mode attr-dict `:` functional-type(operands, results)";
}

def Kiln_TriluOp : Kiln_Op<"trilu", [Pure, SameOperandsAndResultType]> {
  let summary = "upper or lower triangle of the trailing matrices";
  let description = [{
    Keeps element `[..., i, j]` where `j - i >= diagonal` (`upper`) or
    `j - i <= diagonal` (lower) and sets the others to zero.

    ```mlir
    %y = kiln.trilu %x {diagonal = 0 : i64, upper = false} : tensor<32x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, BoolAttr:$upper, I64Attr:$diagonal);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kiln_GatherOp : Kiln_Op<"gather", [Pure, InferTypeOpAdaptor]> {
  let summary = "take slices of `data` along an axis at the given indices";
  let description = [{
    The result's shape is `data[:axis] + indices + data[axis+1:]`. A negative
    index counts from the end; an index out of range is an error at run time.
    An embedding lookup is a gather along axis 0.

    ```mlir
    %e = kiln.gather %wte, %ids {axis = 0 : i64}
        : (tensor<512x64xf32>, tensor<2x32xi64>) -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$data, Kiln_IntegerTensor:$indices,
                       I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasCanonicalizer = 1;
}

def Kiln_GatherElementsOp : Kiln_Op<"gather_elements",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "take single elements along an axis";
  let description = [{
    `result[i][j]...[k] = data[i]...[indices[i][j]...[k]]...[k]` with the index
    replacing the coordinate along `axis`; the result has the indices' shape,
    which may be smaller than `data` in every dimension. Negative indices
    count from the end.

    ```mlir
    %y = kiln.gather_elements %x, %i {axis = 1 : i64}
        : (tensor<2x32xf32>, tensor<2x1xi64>) -> tensor<2x1xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$data, Kiln_IntegerTensor:$indices,
                       I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$data `,` $indices attr-dict `:` functional-type(operands, results)";
}

def Kiln_ScatterElementsOp : Kiln_Op<"scatter_elements",
    [Pure, AllTypesMatch<["data", "result"]>]> {
  let summary = "write or accumulate single elements along an axis";
  let description = [{
    The result starts as `data`; then for every position `p` of `indices`,
    the element at `p` with its coordinate along `axis` replaced by
    `indices[p]` is set to (`none`) or combined with (`add`, `mul`, `max`,
    `min`) `updates[p]`. Negative indices count from the end. With `none`,
    positions that write the same element leave the last write. `indices`
    and `updates` have the same shape, no larger than `data` outside `axis`.
    The scatter-add form is the gradient of an embedding lookup.

    ```mlir
    %y = kiln.scatter_elements %x, %i, %u reduction = add {axis = 0 : i64}
        : (tensor<512x64xf32>, tensor<64x64xi64>, tensor<64x64xf32>) -> tensor<512x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$data, Kiln_IntegerTensor:$indices,
                       AnyRankedTensor:$updates, I64Attr:$axis,
                       Kiln_ScatterReduction:$reduction);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $data `,` $indices `,` $updates `reduction` `=` $reduction attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_CumsumOp : Kiln_Op<"cumsum", [Pure, SameOperandsAndResultType]> {
  let summary = "cumulative sum along an axis";
  let description = [{
    Element `i` along `axis` is the sum of elements `0..i` (`i+1..n-1` and
    so on with `reverse`; the element itself is left out with `exclusive`).
    Position ids of padded batches are a cumulative sum of the mask.

    ```mlir
    %p = kiln.cumsum %mask {axis = 1 : i64} : tensor<2x32xi64>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, I64Attr:$axis, UnitAttr:$exclusive,
                       UnitAttr:$reverse);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::verify() {
      return ::kiln::verifyAxis(*this, getAxis(), getType().getRank());
    }
  }];
}

#endif // KILN_DIALECT_KILN_IR_KILNDATAMOVEMENTOPS_TD
