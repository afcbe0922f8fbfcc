"""Random training data for a benchmark: WORK/input_ids.npy, 4 batches of
BATCH x SEQ token ids below VOCAB, and WORK/labels.npy, the same ids
(LABELS `tokens`: a language model shifts its inputs into labels itself)
or one class below LABELS per sample.

    python3 bench/random_batches.py WORK BATCH SEQ VOCAB LABELS
"""
import sys

import numpy as np

work, batch, seq, vocab, labels = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5]
rng = np.random.default_rng(0)
ids = rng.integers(0, vocab, size=(4 * batch, seq), dtype=np.int64)
np.save(f"{work}/input_ids.npy", ids)
np.save(f"{work}/labels.npy", ids if labels == "tokens" else
        rng.integers(0, int(labels), size=(4 * batch,), dtype=np.int64))
