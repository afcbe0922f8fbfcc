#!/usr/bin/python3
"""Mutation fuzz of the ONNX importer: imports mutated copies of the ONNX
backend node tests' models with kiln-translate and reports every run that
does not end with exit code 0 or 1 (a crash, an abort) or that runs out of
time. Not a test: a tool for looking (docs/importer.md, "Errors").

Usage: scripts/fuzz-import.py [--seed S] [--runs N] [--build DIR]
Each reported model is kept in /tmp/kiln-fuzz/ for a reproduction.
"""
import argparse
import glob
import os
import random
import subprocess

import onnx
from onnx import AttributeProto, TensorProto, helper

NODE_TESTS = "/usr/share/libonnx-testdata/data/node"
EXTREMES = [0, 1, -1, 2, -2, 3, 7, -9, 100, 2**31, -2**31 - 5, 2**40]
ODD_TYPES = [TensorProto.STRING, TensorProto.COMPLEX64, TensorProto.UINT64,
             TensorProto.FLOAT16, TensorProto.BOOL, 0, 99]
ODD_VALUES = [5, -3, 2.5, "x", [1, 2], [0.5], [9, -9]]


def change_int_attribute(graph, node):
    ints = [a for a in node.attribute
            if a.type in (AttributeProto.INT, AttributeProto.INTS)]
    if not ints:
        return None
    a = random.choice(ints)
    if a.type == AttributeProto.INT:
        a.i = random.choice(EXTREMES)
    elif a.ints:
        a.ints[random.randrange(len(a.ints))] = random.choice(EXTREMES)
    else:
        a.ints.append(random.choice(EXTREMES))
    return f"attribute {node.op_type}.{a.name}"


def retype_attribute(graph, node):
    if not node.attribute:
        return None
    a = random.choice(node.attribute)
    node.attribute.remove(a)
    node.attribute.append(helper.make_attribute(a.name, random.choice(ODD_VALUES)))
    return f"attribute {node.op_type}.{a.name} retyped"


def empty_input(graph, node):
    if not node.input:
        return None
    i = random.randrange(len(node.input))
    node.input[i] = ""
    return f"input {i} of {node.op_type} emptied"


def extra_input(graph, node):
    node.input.append(graph.input[0].name if graph.input else "nowhere")
    return f"input added to {node.op_type}"


def resize_input(graph, node):
    dims = [d for v in graph.input for d in v.type.tensor_type.shape.dim]
    if not dims:
        return None
    random.choice(dims).dim_value = random.choice([0, 1, 3, 2**40])
    return "a graph input resized"


def retype_value(graph, node):
    values = list(graph.input) + list(graph.output)
    if not values:
        return None
    random.choice(values).type.tensor_type.elem_type = random.choice(ODD_TYPES)
    return "a graph input or output retyped"


MUTATIONS = [change_int_attribute, retype_attribute, empty_input,
             extra_input, resize_input, retype_value]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--build", default="build")
    args = parser.parse_args()
    random.seed(args.seed)
    translate = os.path.join(args.build, "bin", "kiln-translate")
    models = sorted(glob.glob(os.path.join(NODE_TESTS, "*", "model.onnx")))
    os.makedirs("/tmp/kiln-fuzz", exist_ok=True)
    found = 0
    for run in range(args.runs):
        path = random.choice(models)
        model = onnx.load(path)
        if not model.graph.node:
            continue
        what = random.choice(MUTATIONS)(model.graph,
                                        random.choice(model.graph.node))
        if what is None:
            continue
        mutated = f"/tmp/kiln-fuzz/{args.seed}-{run}.onnx"
        onnx.save(model, mutated)
        try:
            result = subprocess.run([translate, "--import-onnx", mutated],
                                    capture_output=True, text=True, timeout=60)
            outcome = result.returncode
        except subprocess.TimeoutExpired:
            outcome = "timeout"
        if outcome in (0, 1):
            os.remove(mutated)
            continue
        found += 1
        test = os.path.basename(os.path.dirname(path))
        print(f"{outcome}: {test}, {what}: {mutated}", flush=True)
    print(f"{args.runs} runs, {found} ended otherwise than with 0 or 1")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
