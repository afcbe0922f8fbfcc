"""Tokenizes a text file to bytes (ids 0 to 255, which fit the tiny GPT-2's
512-entry vocabulary) as a flat little-endian uint16 file, nanoGPT style, and
writes its first 64 tokens as a [2, 32] int64 sample batch (.npy) for
evaluating the model on text.

Usage: tokenize.py INPUT.txt OUTPUT.bin SAMPLE.npy
"""

import sys

import numpy as np

text = np.frombuffer(open(sys.argv[1], "rb").read(), dtype=np.uint8)
text.astype("<u2").tofile(sys.argv[2])
np.save(sys.argv[3], text[:64].astype(np.int64).reshape(2, 32))
