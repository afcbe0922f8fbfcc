//===- NumpyTensors.h - interpreter tensors as NumPy arrays -----*- C++ -*-===//
//
// Values cross between Python and kiln as NumPy arrays. NumPy has no bf16,
// so bf16 (and tf32) values come out as float32, which holds them exactly.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PYTHON_NUMPYTENSORS_H
#define KILN_PYTHON_NUMPYTENSORS_H

#include "kiln/Interpreter/Tensor.h"
#include "kiln/Training/StepRunner.h"

#include <pybind11/numpy.h>

namespace kiln::python {

/// `tensor`'s values as a new array.
pybind11::array toNumpy(const Tensor &tensor);

/// `value` (an array or anything NumPy turns into one) as the tensor of
/// `dtype` and `shape` that `name` is: its shape must match, and its
/// elements be of the same kind (floating-point, integer or boolean),
/// converted to the type's precision. Raises kiln.Error naming `name`
/// otherwise.
Tensor fromNumpy(pybind11::handle value, DType dtype,
                 llvm::ArrayRef<int64_t> shape, const std::string &name);

/// The tensors of `specs` from `feeds`, a dict of every one by name and of
/// nothing else (fromNumpy converts each).
std::vector<Tensor> tensorsFrom(const pybind11::dict &feeds,
                                llvm::ArrayRef<InputSpec> specs);

/// A dict of named tensors as a Python dict of arrays.
template <typename Named> pybind11::dict toDict(const Named &tensors) {
  pybind11::dict result;
  for (const auto &[name, tensor] : tensors)
    result[pybind11::str(name)] = toNumpy(tensor);
  return result;
}

} // namespace kiln::python

#endif // KILN_PYTHON_NUMPYTENSORS_H
