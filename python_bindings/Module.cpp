//===- Module.cpp - the kiln Python module --------------------------------===//
//
// `import kiln`: kiln.Model imports a model and runs it forward,
// kiln.Trainer trains it on the reference interpreter, kiln.compile writes
// its step as a CUDA artifact, kiln.GpuTrainer trains that on a GPU,
// kiln.Error is every failure (docs/python.md).
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "PyCompile.h"
#include "PyGpuTrainer.h"
#include "PyModel.h"
#include "PyTrainer.h"

#include "kiln/Training/Checkpoint.h"

#include <pybind11/stl.h>

namespace py = pybind11;
using namespace kiln::python;

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "kiln: a compiler for Transformer training";
  m.attr("__version__") = kiln::kKilnVersion;
  py::register_exception<KilnError>(m, "Error", PyExc_RuntimeError);

  py::class_<Model>(m, "Model", R"(A model imported from ONNX (.onnx) or
parsed from kiln IR (.mlir), its symbolic dimensions bound by `dims`.)")
      .def(py::init<const std::string &, const std::map<std::string, int64_t> &,
                    const std::string &>(),
           py::arg("path"), py::arg("dims") = std::map<std::string, int64_t>(),
           py::arg("function") = "")
      .def_property_readonly("inputs", &Model::inputs,
                             "(name, element type, shape) of each input")
      .def_property_readonly("outputs", &Model::outputs,
                             "(name, element type, shape) of each output")
      .def("run", &Model::run, py::arg("feeds"),
           "The outputs by name for a dict of every input, on the reference "
           "interpreter.")
      .def("ir", &Model::ir, "The model as kiln IR.");

  py::class_<PyTrainer>(m, "Trainer", R"(Trains a Model on the reference
interpreter with kiln's training pipeline. The keyword arguments are
kiln-run's training options with underscores (docs/python.md): loss,
optimizer, precision, lr, schedule, warmup, min_lr, steps, weight_decay,
betas, eps, momentum, dampening, nesterov, lr_decay,
initial_accumulator_value, no_decay_biases_norms, clip_grad_norm, train,
freeze, micro_batches, seed, narrow_norms, rewrite_attention,
merge_projections, fuse, pad_max_overhead, recompute.)")
      .def(py::init([](Model &model, const py::kwargs &options) {
             return std::make_unique<PyTrainer>(
                 model, trainerOptions(options, OptionKinds::Both));
           }),
           py::arg("model"), py::keep_alive<1, 2>())
      .def("step", &PyTrainer::step, py::arg("feeds"),
           "Runs the next step; returns its loss, grad_norm and lr (and, "
           "with loss scaling, skipped and loss_scale).")
      .def("gradients", &PyTrainer::gradients, py::arg("feeds"),
           "d(loss)/d(parameter) at the current parameters, by name.")
      .def_property_readonly("parameters", &PyTrainer::parameters)
      .def_property_readonly("state", &PyTrainer::state)
      .def_property_readonly("completed_steps", &PyTrainer::completedSteps)
      .def("save_checkpoint", &PyTrainer::saveCheckpoint, py::arg("directory"))
      .def("load_checkpoint", &PyTrainer::loadCheckpoint, py::arg("directory"))
      .def("export_onnx", &PyTrainer::exportOnnx, py::arg("path"))
      .def("export_safetensors", &PyTrainer::exportSafetensors,
           py::arg("path"));

  py::class_<PyGpuTrainer>(m, "GpuTrainer", R"(Trains a compiled artifact
(kiln.compile, kiln-compile --target=cuda) on a GPU as kiln-run does. The
keyword arguments are the run's options (lr, schedule, warmup, min_lr,
steps, seed) and the session's (tune_gemms, gemm_bias_gradients,
cuda_graph, device_grids), as kiln-run's.)")
      .def(py::init<const std::string &, int, const py::kwargs &>(),
           py::arg("artifact"), py::arg("device") = 0)
      .def("step", &PyGpuTrainer::step, py::arg("feeds"),
           py::arg("report") = true,
           "Runs the next step; with report (which waits for the GPU) "
           "returns its loss, grad_norm and lr, else None.")
      .def_property_readonly("parameters", &PyGpuTrainer::parameters)
      .def_property_readonly("state", &PyGpuTrainer::state)
      .def_property_readonly("completed_steps", &PyGpuTrainer::completedSteps)
      .def_property_readonly("device_name", &PyGpuTrainer::deviceName)
      .def_property_readonly("device_bytes", &PyGpuTrainer::deviceBytes)
      .def("save_checkpoint", &PyGpuTrainer::saveCheckpoint,
           py::arg("directory"))
      .def("load_checkpoint", &PyGpuTrainer::loadCheckpoint,
           py::arg("directory"))
      .def("export_safetensors", &PyGpuTrainer::exportSafetensors,
           py::arg("path"));

  m.def("compile", &compileStep, py::arg("model"), py::arg("output"),
        py::kw_only(), py::arg("arch") = std::vector<std::string>{"sm_90"},
        py::arg("exact_attention") = false, py::arg("batch_launches") = true,
        py::arg("wide_indices") = false, py::arg("attention") = "kiln",
        py::arg("attention_query_gradient") = "auto",
        py::arg("attention_query_tile") = 128,
        R"(Writes the training step of `model` as a CUDA artifact for
kiln-run (kiln-compile --target=cuda); `attention` is "kiln" or "cudnn";
`attention_query_gradient` is "auto", "atomic", "recompute" or "stored"
(kiln-compile --attention-query-gradient); `attention_query_tile` is 128
or 64 (kiln-compile --attention-query-tile);
more keyword arguments are the pipeline options of kiln.Trainer. Needs no
GPU. `wide_indices` computes every kernel's indices in 64 bits
(kiln-compile --wide-indices). Returns what the step runs: operations,
gemms, kernel_launches, fallback_launches, kernels, cudnn_attentions,
arena_bytes, kept_attention (why each attention --attention=cudnn left to
kiln) and kernel_resources (per architecture, what ptxas allotted each
kernel, as kiln-compile --report-kernels lists it).)");
}
