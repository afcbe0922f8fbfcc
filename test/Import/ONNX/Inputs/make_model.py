"""Writes small ONNX models for kiln's importer tests.

Usage: make_model.py NAME OUTPUT.onnx
Each NAME below builds one model; the lit tests import it and check the IR
or the error message.
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs, outputs, initializers=(), opset=17, domain_opsets=()):
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [
        helper.make_opsetid(d, v) for d, v in domain_opsets]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def tensor(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, values, dtype=np.int64):
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.array(values, dtype=dtype)))


def gemm():
    w = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
    b = numpy_helper.from_array(np.zeros((3,), np.float32), "b")
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc",
                            transB=1, alpha=2.0, beta=0.5)
    return model([node], [tensor("x", F, [2, 4])], [tensor("y", F, [2, 3])], [w, b])


def top_k():
    """A router: the 2 best of 6 scores a parameter computes, their sum the
    loss (so that its gradient runs back through the values)."""
    w = numpy_helper.from_array(
        np.arange(24, dtype=np.float32).reshape(4, 6) / 24.0, "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["scores"]),
        const("k", [2]),
        helper.make_node("TopK", ["scores", "k"], ["values", "indices"],
                         name="router", axis=-1),
        helper.make_node("ReduceSum", ["values"], ["loss"], keepdims=0),
    ]
    return model(nodes, [tensor("x", F, [3, 4])],
                 [tensor("loss", F, []), tensor("indices", TensorProto.INT64, [3, 2])],
                 [w])


def shape_folding():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        const("zero", 0), const("one", 1),
        helper.make_node("Gather", ["s", "zero"], ["batch"], axis=0),
        helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
        const("axes", [0]),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["b1"]),
        helper.make_node("Unsqueeze", ["seq", "axes"], ["s1"]),
        const("heads", [4]), const("minus", [-1]),
        helper.make_node("Concat", ["b1", "s1", "heads", "minus"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    return model(nodes, [tensor("x", F, ["batch", "seq", 64])],
                 [tensor("y", F, ["batch", "seq", 4, 16])])


def dropout(ratio, training):
    nodes = [
        const("ratio", ratio, np.float32), const("training", training, np.bool_),
        helper.make_node("Dropout", ["x", "ratio", "training"], ["y", "mask"],
                         name="drop"),
    ]
    return model(nodes, [tensor("x", F, [2, 8])],
                 [tensor("y", F, [2, 8]), tensor("mask", TensorProto.BOOL, [2, 8])])


def random_draws():
    """Stochastic depth's draws (HF's drop_path: rand of [B, 1, 1]), noise
    like x, and Bernoulli samples as integers."""
    nodes = [
        helper.make_node("RandomUniform", [], ["r"], shape=[2, 1, 1], seed=3.0),
        helper.make_node("RandomNormalLike", ["x"], ["n"], scale=2.0),
        helper.make_node("Bernoulli", ["p"], ["b"], dtype=TensorProto.INT64),
    ]
    return model(nodes, [tensor("x", F, [2, 4, 8]), tensor("p", F, [2, 8])],
                 [tensor("r", F, [2, 1, 1]), tensor("n", F, [2, 4, 8]),
                  tensor("b", TensorProto.INT64, [2, 8])])


def lstm_bad_activations():
    node = helper.make_node("LSTM", ["x", "w", "r"], ["y"], name="lstm",
                            hidden_size=2, activations=["Sigmoid", "Tanh"])
    return model([node], [tensor("x", F, [3, 1, 2]), tensor("w", F, [1, 8, 2]),
                          tensor("r", F, [1, 8, 2])], [tensor("y", F, None)])


def if_on_input():
    then_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y1"])], "then", [],
        [tensor("y1", F, None)])
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["y2"])], "else", [],
        [tensor("y2", F, None)])
    node = helper.make_node("If", ["c"], ["y"], name="branch",
                            then_branch=then_branch, else_branch=else_branch)
    return model([node], [tensor("c", TensorProto.BOOL, []), tensor("x", F, [2])],
                 [tensor("y", F, None)])


def compress_folded(condition_from_input):
    """Compress by a condition the graph computes: from the input's shape
    (folds to a constant), or from its values (cannot)."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             const("limit", [3], np.int64),
             helper.make_node("Range", ["zero", "columns", "one"], ["positions"]),
             helper.make_node("Less", ["positions", "limit"], ["keep"]),
             helper.make_node("Compress", ["x", "keep"], ["y"], name="select", axis=1)]
    nodes[1:1] = [const("zero", 0, np.int64), const("one", 1, np.int64),
                  const("axis1", [1], np.int64),
                  helper.make_node("Gather", ["shape", "axis1"], ["columns_1d"]),
                  helper.make_node("Squeeze", ["columns_1d"], ["columns"])]
    if condition_from_input:
        nodes[-2] = helper.make_node("Greater", ["x_row", "limit_f"], ["keep"])
        nodes[-2:-2] = [const("limit_f", 0.0, np.float32),
                        helper.make_node("ReduceMax", ["x"], ["x_row"], axes=[0],
                                         keepdims=0)]
    return model(nodes, [tensor("x", F, [2, 5])], [tensor("y", F, None)])


def declared_parameters():
    w = TensorProto(name="w", data_type=F, dims=[4, 3])  # no values
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    return model([node], [tensor("x", F, ["n", 4])], [tensor("y", F, ["n", 3])], [w])


def matmul_vector():
    return model([helper.make_node("MatMul", ["v", "m"], ["y"])],
                 [tensor("v", F, [4]), tensor("m", F, [2, 4, 3])],
                 [tensor("y", F, [2, 3])])


def split_num_outputs():
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)
    return model([node], [tensor("x", F, [2, 8])],
                 [tensor(n, F, None) for n in "abc"], opset=18)


def reduce_mean_axes_input():
    nodes = [const("axes", [-1]),
             helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=0)]
    return model(nodes, [tensor("x", F, [2, 8])], [tensor("y", F, [2])], opset=18)


def cross_entropy_log_prob():
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["loss", "logp"],
                            ignore_index=-100, reduction="sum")
    return model([node], [tensor("x", F, [2, 5]), tensor("t", I64, [2])],
                 [tensor("loss", F, []), tensor("logp", F, [2, 5])])


def external_data():
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    node = helper.make_node("Add", ["x", "w"], ["y"])
    return model([node], [tensor("x", F, [2, 3])], [tensor("y", F, [2, 3])], [w])


def unknown_op():
    return model([helper.make_node("FancyAttention", ["x"], ["y"], name="attn")],
                 [tensor("x", F, [2])], [tensor("y", F, [2])])


def unknown_domain():
    return model([helper.make_node("ATen", ["x"], ["y"], name="act",
                                   domain="org.pytorch.aten", operator="gelu")],
                 [tensor("x", F, [2])], [tensor("y", F, [2])],
                 domain_opsets=[("org.pytorch.aten", 1)])


def unknown_contrib_op():
    return model([helper.make_node("Inverse", ["x"], ["y"], name="inv",
                                   domain="com.microsoft")],
                 [tensor("x", F, [2, 2])], [tensor("y", F, [2, 2])],
                 domain_opsets=[("com.microsoft", 1)])


def bad_attribute():
    return model([helper.make_node("Gelu", ["x"], ["y"], name="act",
                                   approximate="fast")],
                 [tensor("x", F, [2])], [tensor("y", F, [2])], opset=20)


def inconsistent_shapes():
    return model([helper.make_node("Add", ["x", "z"], ["y"], name="residual")],
                 [tensor("x", F, [2, 3]), tensor("z", F, [4])], [tensor("y", F, [2, 3])])


def old_opset():
    return model([helper.make_node("Relu", ["x"], ["y"])],
                 [tensor("x", F, [2])], [tensor("y", F, [2])], opset=10)


def scatter_nd_shapes():
    """ScatterND whose updates do not have the shape its indices give."""
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], name="assign")
    index = numpy_helper.from_array(np.array([[0], [2]], dtype=np.int64), "i")
    return model([node], [tensor("x", F, [4, 3]), tensor("u", F, [2, 4])],
                 [tensor("y", F, [4, 3])], initializers=[index])


def conv_groups():
    """A Conv whose group count does not divide its channels."""
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="stem", group=2)
    return model([node], [tensor("x", F, [1, 3, 8, 8]), tensor("w", F, [4, 1, 3, 3])],
                 [tensor("y", F, None)])


def batch_norm_saved_statistics():
    """BatchNormalization in opset 13's training mode: its optional outputs
    (running and saved statistics) are asked for."""
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                            ["y", "mean", "var"], name="bn")
    channels = [tensor(n, F, [3]) for n in "sbmv"]
    return model([node], [tensor("x", F, [2, 3, 4])] + channels,
                 [tensor("y", F, None), tensor("mean", F, None)], opset=13)


def undefined_input():
    return model([helper.make_node("Relu", ["nowhere"], ["y"], name="act")],
                 [tensor("x", F, [2])], [tensor("y", F, [2])])


def reshape_mismatch():
    nodes = [const("shape", [5, -1]),
             helper.make_node("Reshape", ["x", "shape"], ["y"], name="view")]
    return model(nodes, [tensor("x", F, [2, 8])], [tensor("y", F, None)])


def runtime_shape():
    return model([helper.make_node("Reshape", ["x", "s"], ["y"], name="view")],
                 [tensor("x", F, [2, 8]), tensor("s", I64, [2])], [tensor("y", F, None)])


def local_function():
    # A "ScaledGelu" function of a custom domain, called twice, with an
    # attribute reference and an internal value name used by both calls.
    body = [
        helper.make_node("Gelu", ["x"], ["g"]),
        helper.make_node("Constant", [], ["alpha"], value_float=2.0),
        helper.make_node("Mul", ["g", "alpha"], ["y"]),
        helper.make_node("Softmax", ["y"], ["out"]),
    ]
    body[3].attribute.append(onnx.AttributeProto(name="axis", ref_attr_name="axis",
                                                 type=onnx.AttributeProto.INT))
    function = helper.make_function("custom", "ScaledGelu", ["x"], ["out"], body,
                                    [helper.make_opsetid("", 20)], ["axis"])
    calls = [
        helper.make_node("ScaledGelu", ["a"], ["b"], name="first", domain="custom", axis=0),
        helper.make_node("ScaledGelu", ["b"], ["c"], name="second", domain="custom", axis=1),
    ]
    m = model(calls, [tensor("a", F, [2, 3])], [tensor("c", F, [2, 3])], opset=20,
              domain_opsets=[("custom", 1)])
    m.functions.append(function)
    return m


def gradient():
    # d = sin(a * b) + a; Gradient of d's sum with respect to a and b.
    nodes = [
        helper.make_node("Mul", ["a", "b"], ["c"]),
        helper.make_node("Sin", ["c"], ["s"]),
        helper.make_node("Add", ["s", "a"], ["d"]),
        helper.make_node("Gradient", ["a", "b"], ["da", "db"], name="grad",
                         domain="ai.onnx.preview.training", xs=["a", "b"], y="d"),
    ]
    return model(nodes, [tensor("a", F, [3]), tensor("b", F, [3])],
                 [tensor("da", F, [3]), tensor("db", F, [3])],
                 domain_opsets=[("ai.onnx.preview.training", 1)])


def training_info():
    # Inference: loss = mean((x W - t)^2). Algorithm: W_new = W - R dloss/dW,
    # bound to update W.
    w = numpy_helper.from_array(np.array([[1.0, -1.0], [0.5, 2.0]], np.float32), "W")
    inference = [
        helper.make_node("MatMul", ["x", "W"], ["y"]),
        helper.make_node("Sub", ["y", "t"], ["e"]),
        helper.make_node("Mul", ["e", "e"], ["e2"]),
        helper.make_node("ReduceMean", ["e2"], ["loss"], keepdims=0),
    ]
    m = model(inference, [tensor("x", F, [3, 2]), tensor("t", F, [3, 2])],
              [tensor("loss", F, [])], [w],
              domain_opsets=[("ai.onnx.preview.training", 1)])
    algorithm = helper.make_graph(
        [helper.make_node("Gradient", ["W"], ["dW"], domain="ai.onnx.preview.training",
                          xs=["W"], y="loss"),
         helper.make_node("Mul", ["R", "dW"], ["step"]),
         helper.make_node("Sub", ["W", "step"], ["W_new"])],
        "algorithm", [tensor("R", F, [])], [tensor("W_new", F, [2, 2])])
    info = onnx.TrainingInfoProto()
    info.algorithm.CopyFrom(algorithm)
    binding = info.update_binding.add()
    binding.key, binding.value = "W", "W_new"
    m.training_info.append(info)
    return m


def einsum_diagonal():
    """A trace of a matrix that is not square."""
    node = helper.make_node("Einsum", ["x"], ["y"], name="trace", equation="ii->")
    return model([node], [tensor("x", F, [3, 4])], [tensor("y", F, [])])


def attention(inputs, outputs, **attributes):
    """An opset-23 Attention node over 4-D f32 q, k, v and `inputs` more."""
    names = ["q", "k", "v"] + [n for n, _, _ in inputs]
    node = helper.make_node("Attention", names, outputs, name="attn",
                            **attributes)
    values = [tensor(n, F, [1, 2, 4, 8]) for n in "qkv"]
    values += [tensor(n, elem, shape) for n, elem, shape in inputs]
    return model([node], values, [tensor(o, F, None) for o in outputs],
                 opset=23)


def quantize_bad_scale():
    """A scale of 3 values for an axis of 4."""
    s = numpy_helper.from_array(np.full(3, 0.1, np.float32), "s")
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], name="q", axis=0)
    return model([node], [tensor("x", F, [4, 2])],
                 [tensor("y", TensorProto.UINT8, [4, 2])], [s])


def quantize_to_int32():
    s = numpy_helper.from_array(np.array(0.1, np.float32), "s")
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], name="q",
                            output_dtype=TensorProto.INT32)
    return model([node], [tensor("x", F, [4, 2])],
                 [tensor("y", TensorProto.INT32, [4, 2])], [s], opset=21)


def sequence_output():
    """A sequence returned by the graph."""
    node = helper.make_node("SplitToSequence", ["x"], ["s"], name="split")
    outputs = [helper.make_tensor_sequence_value_info("s", F, None)]
    return model([node], [tensor("x", F, [2, 3])], outputs)


def sequence_to_add():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], name="split"),
             helper.make_node("Add", ["s", "x"], ["y"], name="add")]
    return model(nodes, [tensor("x", F, [2, 3])], [tensor("y", F, [2, 3])])


def one_node(op, inputs, shapes, initializers=(), opset=17, domain="",
             **attributes):
    """One node of `op` reading `inputs` (those named "" left out);
    `shapes` declares the graph inputs."""
    node = helper.make_node(op, inputs, ["y"], name="n", domain=domain,
                            **attributes)
    domains = [(domain, 1)] if domain else []
    return model([node], [tensor(n, t, s) for n, t, s in shapes],
                 [tensor("y", F, None)], initializers, opset, domains)


def recurrent_without_x():
    w = numpy_helper.from_array(np.ones((1, 8, 3), np.float32), "w")
    r = numpy_helper.from_array(np.ones((1, 8, 2), np.float32), "r")
    return one_node("LSTM", ["", "w", "r"], [], [w, r], hidden_size=2)


def adagrad_double_rate():
    """Adagrad with R in double and its tensors in float, as its schema
    allows (R is T1, the tensors T3)."""
    shapes = [("r", TensorProto.DOUBLE, []), ("t", I64, []), ("x", F, [3]),
              ("g", F, [3]), ("h", F, [3])]
    return one_node("Adagrad", ["r", "t", "x", "g", "h"], shapes,
                       domain="ai.onnx.preview.training")


def huge_pool_input():
    """An average pool of an input with 2^40 columns: nothing of that size
    is built at import."""
    node = helper.make_node("AveragePool", ["x"], ["y"], name="pool",
                            kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    return model([node], [tensor("x", F, [1, 1, 4, 2**40])],
                 [tensor("y", F, None)])


def window_node(op, **attributes):
    """One op of a 1x1x4x4 input (a pool, DepthToSpace)."""
    node = helper.make_node(op, ["x"], ["y"], name="n", **attributes)
    return model([node], [tensor("x", F, [1, 1, 4, 4])], [tensor("y", F, None)])


def filled(shape):
    """ConstantOfShape of a constant shape, plus the input."""
    nodes = [const("shape", shape),
             helper.make_node("ConstantOfShape", ["shape"], ["c"], name="fill"),
             helper.make_node("Add", ["c", "x"], ["y"], name="add")]
    return model(nodes, [tensor("x", F, [1])], [tensor("y", F, None)])


def huge_declared_parameter():
    """A graph-only initializer (no values) of 2^60 elements."""
    w = TensorProto(name="w", data_type=F, dims=[2**30, 2**30])
    node = helper.make_node("Add", ["x", "w"], ["y"], name="add")
    return model([node], [tensor("x", F, [1])], [tensor("y", F, None)], [w])


def huge_window():
    """A Hann window of 2^40 samples, a table kiln would compute at import."""
    nodes = [const("size", 2**40),
             helper.make_node("HannWindow", ["size"], ["y"], name="window")]
    return model(nodes, [], [tensor("y", F, None)])


def huge_resize():
    nodes = [const("sizes", [1, 1, 4, 2**62]),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"],
                              name="up", mode="nearest")]
    return model(nodes, [tensor("x", F, [1, 1, 4, 4])], [tensor("y", F, None)])


BUILDERS = {
    "huge_window": huge_window,
    "huge_resize": huge_resize,
    "fill_overflowing": lambda: filled([2**40, 2**40]),
    "fill_beyond_memory": lambda: filled([2**42]),
    "huge_declared_parameter": huge_declared_parameter,
    "huge_input": lambda: model(
        [helper.make_node("Relu", ["x"], ["y"], name="act")],
        [tensor("x", F, [2**40, 2**20])], [tensor("y", F, None)]),
    "depth_to_space_huge_block": lambda: window_node(
        "DepthToSpace", blocksize=2**40),
    "pool_huge_kernel": lambda: window_node(
        "MaxPool", kernel_shape=[2**31, 2], auto_pad="SAME_LOWER"),
    "pool_overflowing_dilation": lambda: window_node(
        "MaxPool", kernel_shape=[3, 3], dilations=[2**62, 1],
        auto_pad="SAME_UPPER"),
    "sum_empty_input": lambda: one_node(
        "Sum", ["a", "", "a"], [("a", F, [2])]),
    "einsum_empty_input": lambda: one_node(
        "Einsum", ["a", ""], [("a", F, [2])], equation="i,i->"),
    "window_empty_size": lambda: one_node("HannWindow", [""], []),
    "adam_empty_input": lambda: one_node(
        "Adam", ["r", "t", "x", "", "v", "h"],
        [("r", F, []), ("t", I64, []), ("x", F, [3]), ("v", F, [3]),
         ("h", F, [3])], domain="ai.onnx.preview.training"),
    "recurrent_without_x": recurrent_without_x,
    "adagrad_double_rate": adagrad_double_rate,
    "huge_pool_input": huge_pool_input,
    "batch_norm_saved_statistics": batch_norm_saved_statistics,
    "top_k": top_k,
    "attention_softcap": lambda: attention([], ["y"], softcap=30.0),
    "attention_scores_output": lambda: attention([], ["y", "", "", "s"]),
    "attention_double_softmax": lambda: attention(
        [], ["y"], softmax_precision=TensorProto.DOUBLE),
    "attention_int_mask": lambda: attention(
        [("m", TensorProto.INT64, [4, 4])], ["y"]),
    "attention_3d_no_heads": lambda: model(
        [helper.make_node("Attention", ["q", "q", "q"], ["y"], name="attn")],
        [tensor("q", F, [1, 4, 16])], [tensor("y", F, None)], opset=23),
    "training_info": training_info,
    "gradient": gradient,
    "local_function": local_function,
    "einsum_diagonal": einsum_diagonal,
    "gemm": gemm,
    "shape_folding": shape_folding,
    "dropout_zero": lambda: dropout(0.0, True),
    "dropout_inference": lambda: dropout(0.5, False),
    "dropout_train": lambda: dropout(0.1, True),
    "random_draws": random_draws,
    "lstm_bad_activations": lstm_bad_activations,
    "if_on_input": if_on_input,
    "compress_folded": lambda: compress_folded(False),
    "compress_on_input": lambda: compress_folded(True),
    "declared_parameters": declared_parameters,
    "matmul_vector": matmul_vector,
    "split_num_outputs": split_num_outputs,
    "reduce_mean_axes_input": reduce_mean_axes_input,
    "cross_entropy_log_prob": cross_entropy_log_prob,
    "unknown_op": unknown_op,
    "unknown_domain": unknown_domain,
    "unknown_contrib_op": unknown_contrib_op,
    "bad_attribute": bad_attribute,
    "inconsistent_shapes": inconsistent_shapes,
    "old_opset": old_opset,
    "undefined_input": undefined_input,
    "scatter_nd_shapes": scatter_nd_shapes,
    "conv_groups": conv_groups,
    "reshape_mismatch": reshape_mismatch,
    "runtime_shape": runtime_shape,
    "quantize_bad_scale": quantize_bad_scale,
    "quantize_to_int32": quantize_to_int32,
    "sequence_output": sequence_output,
    "sequence_to_add": sequence_to_add,
}


def main():
    name, path = sys.argv[1], sys.argv[2]
    if name == "external_data":
        m = external_data()
        onnx.save_model(m, path, save_as_external_data=True,
                        all_tensors_to_one_file=True,
                        location=os.path.basename(path) + ".data",
                        size_threshold=0)
        return
    onnx.save_model(BUILDERS[name](), path)


if __name__ == "__main__":
    main()
