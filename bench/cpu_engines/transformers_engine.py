#!/usr/bin/env python3
"""transformers on PyTorch (CPU), driven for bench/cpu_engines.sh (runs in out/engine-venvs/transformers).

The bf16 reference: AutoModelForCausalLM in bfloat16 on the HF folder, model.generate greedy with
min_new_tokens = max_new_tokens (EOS never ends it early). torch.set_num_threads(T) and one
inter-op thread. Timed by driver.py. int8 and 4-bit are not offered: PyTorch has no int8 / 4-bit
CPU linear that transformers loads from bf16 weights without another quantization library.
"""
import os
import sys

import driver  # this folder's driver.py (the script's folder comes first on sys.path)

ENGINE = "transformers"
VARIANTS = {"bf16": ["bf16"], "int8": [], "q4": []}
NOT_OFFERED = {"int8": "measured as the bf16 reference only", "q4": "measured as the bf16 reference only"}


def version():
    from importlib.metadata import version as package_version
    return f"transformers {package_version('transformers')}, torch {package_version('torch')}"


def prepare(hf_dir, variant, cache):
    return hf_dir


def load(path, variant, threads):
    driver.env_threads(threads)
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    model.eval()

    @torch.inference_mode()
    def generate(prompt_ids, k):
        ids = torch.tensor([list(prompt_ids)], dtype=torch.long)
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=k, min_new_tokens=k, do_sample=False,
                             pad_token_id=model.generation_config.eos_token_id if isinstance(model.generation_config.eos_token_id, int) else 0)
        return out[0, ids.shape[1]:].tolist()

    return generate


if __name__ == "__main__":
    driver.main(globals())
