"""Compares kiln-run's outputs (DIR/loss.pb, DIR/logits.pb) with PyTorch's.

Tolerances as for the shared fixtures: the loss within 1e-5 relative, the
logits within 1e-4 of their largest magnitude. Prints PASS or the errors.
"""

import os
import sys

import numpy as np
from onnx import TensorProto, numpy_helper


def read(path):
    proto = TensorProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    return numpy_helper.to_array(proto)


here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1]
loss, logits = read(os.path.join(out, "loss.pb")), read(os.path.join(out, "logits.pb"))
ref_loss = np.load(os.path.join(here, "loss.npy"))
ref_logits = np.load(os.path.join(here, "logits.npy"))
loss_error = abs(float(loss) - float(ref_loss)) / abs(float(ref_loss))
logits_error = np.abs(logits - ref_logits).max() / np.abs(ref_logits).max()
if loss_error <= 1e-5 and logits_error <= 1e-4:
    print("PASS")
else:
    print("FAIL loss error %g, logits error %g" % (loss_error, logits_error))
