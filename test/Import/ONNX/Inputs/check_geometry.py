"""Checks kiln's import of opset 18-20 ops that place values in space, which
Debian's ONNX (1.12) has no test data for, against NumPy transcriptions of
their specification: CenterCropPad (cropping and padding, odd differences,
chosen axes), AffineGrid (2-D and 3-D, with and without align_corners),
Col2Im (strides, dilations and pads in 2-D; 1-D; overlapping blocks) and
DeformConv (offset groups, mask, strides, pads, dilations; groups without a
mask) and RoiAlign (max mode, spatial_scale, output_half_pixel, regions
past the image and below a pixel).

Usage: check_geometry.py WORKDIR
Prints "OK <case>" when kiln-run's output matches within 1e-5 relative +
1e-5.
"""

import itertools
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from kiln_case import close, run


def center_crop_pad(x, shape, axes):
    out = x
    for axis, size in zip(axes, shape):
        dim = out.shape[axis]
        if size < dim:
            start = (dim - size) // 2
            out = np.take(out, range(start, start + size), axis=axis)
        else:
            widths = [(0, 0)] * out.ndim
            widths[axis] = ((size - dim) // 2, size - dim - (size - dim) // 2)
            out = np.pad(out, widths)
    return out


def affine_grid(theta, size, align_corners):
    extent = size[2:]

    def axis(n):
        i = np.arange(n)
        if align_corners:
            return -1 + 2 * i / (n - 1) if n > 1 else np.array([-1.0])
        return -1 + (2 * i + 1) / n

    mesh = np.meshgrid(*[axis(n) for n in extent], indexing="ij")
    points = np.stack([m.ravel() for m in reversed(mesh)] + [np.ones(mesh[0].size)], -1)
    grid = points @ theta.transpose(0, 2, 1)
    return grid.reshape(size[0], *extent, len(extent))


def col2im(data, image, block, strides, dilations, pads):
    n, cols, length = data.shape
    k = int(np.prod(block))
    c = cols // k
    spatial = len(image)
    padded = [image[d] + pads[d] + pads[d + spatial] for d in range(spatial)]
    blocks = [(padded[d] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1
              for d in range(spatial)]
    out = np.zeros((n, c, *padded))
    columns = data.reshape(n, c, k, *blocks)
    for ki, offset in enumerate(itertools.product(*[range(b) for b in block])):
        for position in itertools.product(*[range(b) for b in blocks]):
            at = tuple(p * s + o * d for p, s, o, d
                       in zip(position, strides, offset, dilations))
            out[(slice(None), slice(None)) + at] += columns[(slice(None), slice(None), ki) + position]
    return out[(slice(None), slice(None)) + tuple(
        slice(pads[d], pads[d] + image[d]) for d in range(spatial))]


def bilinear(image, y, x):
    """image [H, W] at (y, x), taps outside reading zeros."""
    h, w = image.shape
    y0, x0 = int(np.floor(y)), int(np.floor(x))
    total = 0.0
    for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            if 0 <= yy < h and 0 <= xx < w:
                total += wy * wx * image[yy, xx]
    return total


def deform_conv(x, w, offset, b, mask, strides, pads, dilations, group, offset_group):
    n, c, _, _ = x.shape
    m, _, kh, kw = w.shape
    _, _, oh, ow = offset.shape
    offset = offset.reshape(n, offset_group, kh, kw, 2, oh, ow)
    mask = mask.reshape(n, offset_group, kh, kw, oh, ow)
    out = np.zeros((n, m, oh, ow)) + b.reshape(1, -1, 1, 1)
    per_group, maps = c // group, m // group
    for ni, mi, ci, i, j, ki, kj in itertools.product(
            range(n), range(m), range(c), range(oh), range(ow), range(kh), range(kw)):
        if ci // per_group != mi // maps:
            continue
        g = ci // (c // offset_group)
        y = i * strides[0] - pads[0] + ki * dilations[0] + offset[ni, g, ki, kj, 0, i, j]
        xx = j * strides[1] - pads[1] + kj * dilations[1] + offset[ni, g, ki, kj, 1, i, j]
        out[ni, mi, i, j] += (w[mi, ci % per_group, ki, kj] * mask[ni, g, ki, kj, i, j]
                              * bilinear(x[ni, ci], y, xx))
    return out


def roi_align(x, rois, batch_indices, oh, ow, ratio, scale, half_pixel, mode):
    """ONNX's RoiAlign: per bin, ratio^2 samples; a sample is the sum (avg)
    or the largest (max) of its four weighted corners."""
    _, c, h, w = x.shape
    out = np.zeros((len(rois), c, oh, ow))
    offset = 0.5 if half_pixel else 0.0
    for r, (roi, b) in enumerate(zip(rois, batch_indices)):
        x1, y1, x2, y2 = roi * scale - offset
        rh, rw = y2 - y1, x2 - x1
        if not half_pixel:
            rh, rw = max(rh, 1.0), max(rw, 1.0)
        for ph, pw in itertools.product(range(oh), range(ow)):
            values = []
            for iy, ix in itertools.product(range(ratio), range(ratio)):
                y = y1 + ph * rh / oh + (iy + 0.5) * rh / oh / ratio
                xx = x1 + pw * rw / ow + (ix + 0.5) * rw / ow / ratio
                if y < -1 or y > h or xx < -1 or xx > w:
                    values.append(np.zeros(c))
                    continue
                y, xx = max(y, 0.0), max(xx, 0.0)
                y0, x0 = int(y), int(xx)
                y0, y1_ = (h - 1, h - 1) if y0 >= h - 1 else (y0, y0 + 1)
                x0, x1_ = (w - 1, w - 1) if x0 >= w - 1 else (x0, x0 + 1)
                y, xx = (float(y0) if y0 == h - 1 else y), (float(x0) if x0 == w - 1 else xx)
                ly, lx = y - y0, xx - x0
                corners = [(1 - ly) * (1 - lx) * x[b, :, y0, x0], (1 - ly) * lx * x[b, :, y0, x1_],
                           ly * (1 - lx) * x[b, :, y1_, x0], ly * lx * x[b, :, y1_, x1_]]
                values.append(sum(corners) if mode == "avg" else np.max(corners, 0))
            out[r, :, ph, pw] = np.mean(values, 0) if mode == "avg" else np.max(values, 0)
    return out


def model(name, op, x, constants, attributes, opset, floats=None):
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in constants.items()]
    inputs = ["x", *constants, *(floats or {})]
    if op == "RoiAlign":  # X, rois, batch_indices
        inputs = ["x", *(floats or {}), *constants]
    inits += [numpy_helper.from_array(v, n) for n, v in (floats or {}).items()]
    node = helper.make_node(op, inputs, ["y"], **attributes)
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def cases(rng):
    normal = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    image = normal(2, 3, 5, 6)
    theta2, theta3 = normal(2, 2, 3), normal(2, 3, 4)
    # Image [2, 3, 5, 6], kernel 2x2, strides (2, 1), pads (1, 0 | 0, 1),
    # dilations (1, 2): output 3 x 5; offsets reach past the edges.
    deform_w, deform_b = normal(4, 3, 2, 2), normal(4)
    deform_offset = (1.5 * normal(2, 3 * 4 * 2, 3, 5)).astype(np.float32)
    deform_mask = rng.uniform(0, 1, (2, 3 * 4, 3, 5)).astype(np.float32)
    grouped_w = normal(4, 2, 2, 2)
    grouped_offset = normal(1, 4 * 2, 3, 3)
    # Regions reaching past the image, one smaller than a pixel.
    rois = np.array([[0.5, 1.0, 4.0, 3.5], [-3.0, -2.0, 7.5, 6.5],
                     [2.0, 2.0, 2.3, 2.2]], np.float32)
    return [
        ("center_crop_pad", "CenterCropPad", image, {"shape": [2, 4, 4, 9]}, {},
         lambda x: center_crop_pad(x, [2, 4, 4, 9], [0, 1, 2, 3]), 18),
        ("center_crop_pad_axes", "CenterCropPad", image, {"shape": [2, 3]},
         {"axes": [-1, 2]}, lambda x: center_crop_pad(x, [2, 3], [3, 2]), 18),
        ("affine_grid_2d", "AffineGrid", theta2, {"size": [2, 3, 4, 5]}, {},
         lambda t: affine_grid(t, [2, 3, 4, 5], False), 20),
        ("affine_grid_3d_corners", "AffineGrid", theta3, {"size": [2, 1, 3, 4, 2]},
         {"align_corners": 1},
         lambda t: affine_grid(t, [2, 1, 3, 4, 2], True), 20),
        ("col2im_2d", "Col2Im", normal(2, 2 * 6, 12),
         {"image_shape": [5, 6], "block_shape": [2, 3]},
         {"strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 0, 2]},
         lambda x: col2im(x, [5, 6], [2, 3], [2, 1], [1, 2], [1, 0, 0, 2]), 18),
        ("col2im_1d_overlapping", "Col2Im", normal(1, 3 * 3, 5),
         {"image_shape": [7], "block_shape": [3]}, {},
         lambda x: col2im(x, [7], [3], [1], [1], [0, 0]), 18),
        ("deform_conv", "DeformConv", image, {},
         {"strides": [2, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2], "group": 1,
          "offset_group": 3}, lambda x: deform_conv(
              x, deform_w, deform_offset, deform_b, deform_mask, [2, 1], [1, 0],
              [1, 2], 1, 3), 19,
         {"w": deform_w, "offset": deform_offset, "b": deform_b, "mask": deform_mask}),
        ("deform_conv_groups_unmasked", "DeformConv", normal(1, 4, 4, 4), {},
         {"group": 2}, lambda x: deform_conv(
             x, grouped_w, grouped_offset, np.zeros(4), np.ones((1, 4, 3, 3)),
             [1, 1], [0, 0], [1, 1], 2, 1), 19,
         {"w": grouped_w, "offset": grouped_offset}),
        ("roi_align_max_scaled", "RoiAlign", image, {"batch_indices": [1, 0, 1]},
         {"mode": "max", "output_height": 2, "output_width": 3, "sampling_ratio": 2,
          "spatial_scale": 0.5},
         lambda x: roi_align(x, rois, [1, 0, 1], 2, 3, 2, 0.5, True, "max"), 16,
         {"rois": rois}),
        ("roi_align_output_half_pixel", "RoiAlign", image, {"batch_indices": [0, 1, 1]},
         {"coordinate_transformation_mode": "output_half_pixel", "output_height": 3,
          "output_width": 2, "sampling_ratio": 3},
         lambda x: roi_align(x, rois, [0, 1, 1], 3, 2, 3, 1.0, False, "avg"), 16,
         {"rois": rois}),
    ]


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, op, x, constants, attributes, reference, opset, *floats in cases(rng):
        expected = reference(x.astype(np.float64))
        actual = run(work, name,
                     model(name, op, x, constants, attributes, opset, *floats),
                     {"x": x})["y"]
        print(("OK " if close(actual, expected) else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
