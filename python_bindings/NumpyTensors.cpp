//===- NumpyTensors.cpp - interpreter tensors as NumPy arrays -------------===//

#include "NumpyTensors.h"

#include "Errors.h"

#include "llvm/ADT/StringExtras.h"

#include <cstring>

namespace py = pybind11;

namespace kiln::python {

/// The NumPy type that holds `type` exactly.
static const char *numpyType(DType type) {
  switch (type) {
  case DType::F64:
    return "float64";
  case DType::F16:
    return "float16";
  case DType::F32:
  case DType::BF16:
  case DType::TF32:
    return "float32";
  case DType::I64:
    return "int64";
  case DType::I32:
    return "int32";
  case DType::I16:
    return "int16";
  case DType::I8:
    return "int8";
  case DType::U64:
    return "uint64";
  case DType::U32:
    return "uint32";
  case DType::U16:
    return "uint16";
  case DType::U8:
    return "uint8";
  case DType::Bool:
    return "bool";
  }
  return "float64";
}

py::array toNumpy(const Tensor &tensor) {
  std::vector<py::ssize_t> shape(tensor.getShape().begin(),
                                 tensor.getShape().end());
  py::array wide =
      tensor.isFloat()
          ? py::array(py::array_t<double>(shape, tensor.floats().data()))
          : py::array(py::array_t<int64_t>(shape, tensor.ints().data()));
  return wide.attr("astype")(numpyType(tensor.getDType()));
}

/// "i64[2x32]", as kiln-run writes a type: `element` and `shape`.
static std::string describe(const std::string &element,
                            llvm::ArrayRef<int64_t> shape) {
  std::string text = element + "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? "x" : "") + std::to_string(shape[d]);
  return text + "]";
}

static std::string describe(DType dtype, llvm::ArrayRef<int64_t> shape) {
  return describe(dtypeName(dtype).str(), shape);
}

Tensor fromNumpy(py::handle value, DType dtype, llvm::ArrayRef<int64_t> shape,
                 const std::string &name) {
  // NumPy makes an array of objects of anything else.
  py::array array = py::array::ensure(value);
  if (!array || !std::strchr("fiub", array.dtype().kind()))
    raise("input '" + name + "' must be a NumPy array (" +
          describe(dtype, shape) + ")");
  char kind = array.dtype().kind();
  bool floating = kind == 'f', integer = kind == 'i' || kind == 'u',
       boolean = kind == 'b';
  bool wanted = dtype == DType::Bool ? boolean
                : isFloat(dtype)     ? floating
                                     : integer;
  std::vector<int64_t> given(array.shape(), array.shape() + array.ndim());
  if (!wanted || llvm::ArrayRef<int64_t>(given) != shape)
    raise("input '" + name + "' must be " + describe(dtype, shape) + ", got " +
          describe(py::str(array.dtype()).cast<std::string>(), given));
  Tensor tensor(dtype, shape);
  if (tensor.isFloat()) {
    auto values =
        py::array_t<double, py::array::c_style | py::array::forcecast>(array);
    for (int64_t i = 0; i < tensor.getNumElements(); ++i)
      tensor.setFromDouble(i, values.data()[i]);
  } else {
    auto values =
        py::array_t<int64_t, py::array::c_style | py::array::forcecast>(array);
    for (int64_t i = 0; i < tensor.getNumElements(); ++i) {
      int64_t element = values.data()[i];
      if (wrapToElementType(dtype, element) != element)
        raise("input '" + name + "' holds " + std::to_string(element) +
              ", which " + describe(dtype, shape) + " cannot");
      tensor.ints()[i] = element;
    }
  }
  return tensor;
}

std::vector<Tensor> tensorsFrom(const py::dict &feeds,
                                llvm::ArrayRef<InputSpec> specs) {
  std::vector<std::string> names;
  for (const InputSpec &spec : specs)
    names.push_back(spec.name);
  for (const auto &[key, value] : feeds) {
    std::string name = py::str(key);
    if (!llvm::is_contained(names, name))
      raise("the model has no input named '" + name +
            "'; its inputs are: " + llvm::join(names, ", "));
  }
  std::vector<Tensor> tensors;
  for (const InputSpec &spec : specs) {
    if (!feeds.contains(spec.name))
      raise("input '" + spec.name + "' is missing");
    tensors.push_back(
        fromNumpy(feeds[py::str(spec.name)], spec.type, spec.shape, spec.name));
  }
  return tensors;
}

} // namespace kiln::python
