"""Writes the tiny vision-Transformer-style test model, built with ONNX's
helper (no exporter): a 3x3 convolution with padding (the general
patches-and-matmul path) and ReLU, a depthwise 3x3 convolution (one
product per group), a 4x4 stride-4 patch embedding (patches
that tile the image), position embeddings, a pre-norm residual MLP, mean
pooling and a classifier with the cross-entropy loss, at opset 17.

Run with /usr/bin/python3 in this folder; it writes model.onnx and the
inputs pixel_values.npy and labels.npy. Weights are random (seed 0).
"""
import numpy as np
from onnx import TensorProto, helper, numpy_helper, save_model

rng = np.random.default_rng(0)


def weight(name, *shape, scale=0.2):
    return numpy_helper.from_array(
        (scale * rng.standard_normal(shape)).astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


BATCH, CHANNELS, SIZE, WIDTH, PATCH, CLASSES = 2, 3, 8, 16, 4, 5
TOKENS = (SIZE // PATCH) ** 2
initializers = [
    weight("stem.weight", 4, CHANNELS, 3, 3), weight("stem.bias", 4),
    weight("depthwise.weight", 4, 1, 3, 3),
    weight("patch.weight", WIDTH, 4, PATCH, PATCH), weight("patch.bias", WIDTH),
    weight("position", TOKENS, WIDTH),
    weight("norm.weight", WIDTH, scale=1.0), weight("norm.bias", WIDTH),
    weight("fc1.weight", WIDTH, 2 * WIDTH), weight("fc1.bias", 2 * WIDTH),
    weight("fc2.weight", 2 * WIDTH, WIDTH), weight("fc2.bias", WIDTH),
    weight("head.weight", CLASSES, WIDTH), weight("head.bias", CLASSES),
    ints("tokens_shape", [BATCH, WIDTH, TOKENS]),
]
nodes = [
    helper.make_node("Conv", ["pixel_values", "stem.weight", "stem.bias"], ["s"],
                     pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["s"], ["sr"]),
    helper.make_node("Conv", ["sr", "depthwise.weight"], ["d"], group=4,
                     pads=[1, 1, 1, 1]),
    helper.make_node("Conv", ["d", "patch.weight", "patch.bias"], ["p"],
                     kernel_shape=[PATCH, PATCH], strides=[PATCH, PATCH]),
    helper.make_node("Reshape", ["p", "tokens_shape"], ["pf"]),
    helper.make_node("Transpose", ["pf"], ["t"], perm=[0, 2, 1]),
    helper.make_node("Add", ["t", "position"], ["h"]),
    helper.make_node("LayerNormalization", ["h", "norm.weight", "norm.bias"],
                     ["n"], axis=-1),
    helper.make_node("MatMul", ["n", "fc1.weight"], ["f1"]),
    helper.make_node("Add", ["f1", "fc1.bias"], ["f1b"]),
    helper.make_node("Relu", ["f1b"], ["a"]),
    helper.make_node("MatMul", ["a", "fc2.weight"], ["f2"]),
    helper.make_node("Add", ["f2", "fc2.bias"], ["f2b"]),
    helper.make_node("Add", ["h", "f2b"], ["r"]),
    helper.make_node("ReduceMean", ["r"], ["pooled"], axes=[1], keepdims=0),
    helper.make_node("Gemm", ["pooled", "head.weight", "head.bias"], ["logits"],
                     transB=1),
    helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"]),
]
graph = helper.make_graph(
    nodes, "vit_tiny",
    [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT,
                                   [BATCH, CHANNELS, SIZE, SIZE]),
     helper.make_tensor_value_info("labels", TensorProto.INT64, [BATCH])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, []),
     helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                   [BATCH, CLASSES])],
    initializers)
save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
           "model.onnx")
np.save("pixel_values.npy",
        rng.standard_normal((BATCH, CHANNELS, SIZE, SIZE)).astype(np.float32))
np.save("labels.npy", np.array([1, 3], dtype=np.int64))
