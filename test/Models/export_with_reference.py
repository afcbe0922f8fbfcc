"""What the test models' export.py scripts share: export a model the way
the shared fixtures are exported (TorchScript, opset 17 unless told,
training mode, no constant folding) and save what compare_with_pytorch.py reads: the inputs
as <name>.npy and PyTorch's loss, logits, parameter values and gradients
as reference.npz. Run by each export.py from its own folder."""
import numpy as np
import torch


def export(model, inputs, dynamic_axes, opset_version=17):
    """`inputs` maps each input name to its tensor, in the model's order;
    the model returns (loss, logits)."""
    loss, logits = model(*inputs.values())
    loss.backward()
    torch.onnx.export(model, tuple(inputs.values()), "model.onnx",
                      input_names=list(inputs), output_names=["loss", "logits"],
                      opset_version=opset_version, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, dynamic_axes=dynamic_axes)
    for name, tensor in inputs.items():
        np.save(f"{name}.npy", tensor.numpy())
    reference = {"loss": loss.detach().numpy(), "logits": logits.detach().numpy()}
    for name, parameter in model.named_parameters():
        reference["value:" + name] = parameter.detach().numpy()
        reference["grad:" + name] = parameter.grad.numpy()
    np.savez("reference.npz", **reference)
