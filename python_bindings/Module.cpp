//===- Module.cpp - the kiln Python module --------------------------------===//
//
// `import kiln`: kiln.Model imports a model and runs it forward,
// kiln.Trainer trains it on the reference interpreter, kiln.Error is every
// failure (docs/python.md).
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
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
interpreter with kiln's training pipeline; the arguments are kiln-run's
training options (docs/python.md).)")
      .def(
          py::init([](Model &model, const std::string &loss,
                      const std::string &optimizer,
                      const std::string &precision, double lr,
                      const std::string &schedule, int64_t warmup, double minLr,
                      int64_t steps, std::optional<double> weightDecay,
                      std::pair<double, double> betas,
                      std::optional<double> eps, double momentum,
                      double dampening, bool nesterov, double lrDecay,
                      double initialAccumulator, bool noDecayBiasesNorms,
                      double clipGradNorm, const std::string &train,
                      const std::string &freeze, int64_t microBatches,
                      uint64_t seed, bool narrowNorms, bool rewriteAttention,
                      bool fuse, double padMaxOverhead, bool recompute) {
            TrainerOptions o;
            o.loss = loss;
            o.optimizer = optimizer;
            o.precision = precision;
            o.lr = lr;
            o.schedule = schedule;
            o.warmup = warmup;
            o.minLr = minLr;
            o.steps = steps;
            o.weightDecay = weightDecay;
            o.betas = betas;
            o.eps = eps;
            o.momentum = momentum;
            o.dampening = dampening;
            o.nesterov = nesterov;
            o.lrDecay = lrDecay;
            o.initialAccumulator = initialAccumulator;
            o.noDecayBiasesNorms = noDecayBiasesNorms;
            o.clipGradNorm = clipGradNorm;
            o.train = train;
            o.freeze = freeze;
            o.microBatches = microBatches;
            o.seed = seed;
            o.narrowNorms = narrowNorms;
            o.rewriteAttention = rewriteAttention;
            o.fuse = fuse;
            o.padMaxOverhead = padMaxOverhead;
            o.recompute = recompute;
            return std::make_unique<PyTrainer>(model, o);
          }),
          py::arg("model"), py::kw_only(), py::arg("loss") = "",
          py::arg("optimizer") = "adamw", py::arg("precision") = "fp32",
          py::arg("lr") = 1e-3, py::arg("schedule") = "constant",
          py::arg("warmup") = 0, py::arg("min_lr") = 0.0, py::arg("steps") = 1,
          py::arg("weight_decay") = py::none(),
          py::arg("betas") = std::pair<double, double>(0.9, 0.999),
          py::arg("eps") = py::none(), py::arg("momentum") = 0.0,
          py::arg("dampening") = 0.0, py::arg("nesterov") = false,
          py::arg("lr_decay") = 0.0, py::arg("initial_accumulator_value") = 0.0,
          py::arg("no_decay_biases_norms") = false,
          py::arg("clip_grad_norm") = 0.0, py::arg("train") = "",
          py::arg("freeze") = "", py::arg("micro_batches") = 1,
          py::arg("seed") = 0, py::arg("narrow_norms") = false,
          py::arg("rewrite_attention") = true, py::arg("fuse") = true,
          py::arg("pad_max_overhead") = 0.01, py::arg("recompute") = false,
          py::keep_alive<1, 2>())
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
}
