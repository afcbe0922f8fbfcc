//===- PyCompile.h - kiln.compile: a step as a CUDA artifact ----*- C++ -*-===//
//
// The training step of a kiln.Model compiled for the GPU, as kiln-compile
// --target=cuda writes it: kernels compiled by NVRTC, no GPU needed.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PYTHON_PYCOMPILE_H
#define KILN_PYTHON_PYCOMPILE_H

#include "PyModel.h"

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::python {

/// Writes the artifact of `model`'s training step, compiled with the
/// pipeline options in `keywords`, to `output`; returns what it runs
/// (kiln-compile's summary) as a dict.
pybind11::dict compileStep(Model &model, const std::string &output,
                           const std::vector<std::string> &archs,
                           bool exactAttention, bool batchLaunches,
                           bool wideIndices, const std::string &attention,
                           const std::string &attentionQueryGradient,
                           int64_t attentionQueryTile,
                           const pybind11::kwargs &keywords);

} // namespace kiln::python

#endif // KILN_PYTHON_PYCOMPILE_H
