#!/usr/bin/env python3
"""CTranslate2, driven for bench/cpu_engines.sh (runs in out/engine-venvs/ctranslate2).

The formats come from its own converter, ct2-transformers-converter, from the same HF folder, once
into the cache: weights stored bfloat16 (run as compute_type bfloat16) or int8 (run as int8, i.e.
int8 weights with float32 activations, and as int8_bfloat16). It has no 4-bit CPU type.
Generator on "cpu" with intra_threads T, inter_threads 1; greedy (sampling_topk 1) with
min_length = max_length, so EOS never ends a run early. Timed by driver.py.
"""
import json
import os
import subprocess
import sys

import driver  # this folder's driver.py (the script's folder comes first on sys.path)

ENGINE = "CTranslate2"
VARIANTS = {"bf16": ["bfloat16"], "int8": ["int8_float32", "int8_bfloat16"], "q4": []}
NOT_OFFERED = {"q4": "CTranslate2 has no 4-bit type on CPU (its int4 AWQ runs on CUDA only)"}
STORED = {"bfloat16": "bfloat16", "int8_float32": "int8", "int8_bfloat16": "int8"}


def version():
    from importlib.metadata import version as package_version
    return f"ctranslate2 {package_version('ctranslate2')} (converter on transformers {package_version('transformers')})"


def prepare(hf_dir, variant, cache):
    out = os.path.join(cache, STORED[variant])
    done = os.path.join(out, "model.bin")
    if os.path.exists(done) and os.path.getmtime(done) >= os.path.getmtime(os.path.join(hf_dir, "config.json")):
        return out
    cli = os.path.join(os.path.dirname(sys.executable), "ct2-transformers-converter")
    r = subprocess.run([cli, "--model", hf_dir, "--output_dir", out, "--quantization", STORED[variant], "--force"],
                       capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(done):
        tail = " / ".join([line for line in r.stderr.splitlines() if line.strip()][-3:])
        raise RuntimeError(f"ct2-transformers-converter exit {r.returncode}: {tail}")
    return out


def load(path, variant, threads):
    driver.env_threads(threads)
    import ctranslate2
    with open(os.path.join(path, "vocabulary.json")) as f:
        vocabulary = json.load(f)  # CTranslate2 takes the prompt as token strings
    generator = ctranslate2.Generator(path, device="cpu", compute_type=variant, intra_threads=threads, inter_threads=1)

    def generate(prompt_ids, k):
        tokens = [vocabulary[i] for i in prompt_ids]
        (result,) = generator.generate_batch([tokens], max_length=k, min_length=k, sampling_topk=1, beam_size=1,
                                             include_prompt_in_result=False)
        return list(result.sequences_ids[0])

    return generate


if __name__ == "__main__":
    driver.main(globals())
