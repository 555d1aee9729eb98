"""Rows of random logits and what transformers keeps of them under typical_p: each line is
"T typical_p V logit_1..logit_V p_1..p_V", the probabilities after TemperatureLogitsWarper(T) and
TypicalLogitsWarper(typical_p), softmaxed (0 for the tokens it filters out)."""
import sys

import numpy as np
import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TypicalLogitsWarper

rng = np.random.default_rng(20261207)
for row in range(400):
    vocab = int(rng.integers(2, 3000))
    scale = rng.uniform(0.5, 8.0)
    logits = (rng.standard_normal(vocab) * scale).astype(np.float32)
    for spike in rng.integers(0, vocab, size=int(rng.integers(0, 5))):
        logits[spike] += np.float32(rng.uniform(2, 8))
    temperature = float(np.float32(rng.choice([0.5, 0.8, 1.0, 1.0, 1.3])))
    typical_p = float(np.float32(rng.choice([0.05, 0.2, 0.5, 0.9, 0.95, rng.uniform(0.01, 0.99)])))
    scores = torch.from_numpy(logits).unsqueeze(0)
    scores = TemperatureLogitsWarper(temperature)(None, scores)
    scores = TypicalLogitsWarper(mass=typical_p)(None, scores)
    probs = torch.softmax(scores.double(), dim=-1)[0].numpy()
    fields = [repr(temperature), repr(typical_p), str(vocab)]
    fields += [repr(float(x)) for x in logits]
    fields += ["%.17g" % p for p in probs]
    sys.stdout.write(" ".join(fields) + "\n")
