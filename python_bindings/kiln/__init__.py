"""kiln: a compiler for Transformer training, from Python.

    import kiln, numpy as np
    model = kiln.Model("examples/gpt2_tiny/model.onnx")
    trainer = kiln.Trainer(model, precision="bf16", lr=1e-3, steps=100)
    report = trainer.step({"input_ids": ids, "labels": ids})

kiln.Model imports a model and runs it forward; kiln.Trainer trains it on
the reference interpreter with kiln-run's options and checkpoint format;
kiln.compile writes its step as a CUDA artifact, which kiln.GpuTrainer
(or kiln-run) trains on a GPU; every failure raises kiln.Error. See
docs/python.md.
"""
from ._kiln import Error, GpuTrainer, Model, Trainer, __version__, compile

__all__ = ["Error", "GpuTrainer", "Model", "Trainer", "__version__", "compile"]
