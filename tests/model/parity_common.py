"""Helpers shared by the engine parity tests: a hand-written safetensors writer and CLI calls."""
import json
import os
import struct
import subprocess

import numpy as np
import torch


def tensor_bytes(t, dtype):
    t = t.detach().contiguous()
    if dtype == "F32":
        return t.to(torch.float32).numpy().tobytes()
    if dtype == "BF16":
        return t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
    if dtype == "F16":
        return t.to(torch.float16).numpy().tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors, dtype="F32"):
    """tensors: dict name -> torch tensor (written in order). Format: u64 LE header length, JSON, data."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = tensor_bytes(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * ((8 - (len(text) + 8) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def stored_values(t, dtype):
    """What the C++ side reads back: the tensor rounded to the stored dtype, as float64."""
    if dtype == "BF16":
        return t.to(torch.bfloat16).to(torch.float64)
    if dtype == "F16":
        return t.to(torch.float16).to(torch.float64)
    return t.to(torch.float32).to(torch.float64)


def run_generate(cli, model_dir, prompt, steps, no_cache=False, dump=None, weights="f32"):
    cmd = [cli, "generate", model_dir, "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", str(steps),
           "--ignore-eos", "--json", "--threads", "1", "--weights", weights]
    if no_cache:
        cmd.append("--no-cache")
    if dump:
        cmd += ["--dump-logits", dump]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr}")
    result = json.loads(out.stdout)
    logits = None
    if dump:
        logits = np.fromfile(dump, dtype="<f4")
    return result, logits
