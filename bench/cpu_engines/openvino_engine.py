#!/usr/bin/env python3
"""OpenVINO GenAI, driven for bench/cpu_engines.sh (runs in out/engine-venvs/openvino).

The formats come from OpenVINO's own converter, `optimum-cli export openvino` (optimum-intel, with
NNCF's weight compression), from the same HF folder, once into the cache:
  bf16: fp16 weights in the IR, run with INFERENCE_PRECISION_HINT bf16
  int8: --weight-format int8 (per-channel int8 weights)
  q4:   --weight-format int4 --sym --group-size 32 --ratio 1.0 (every layer 4-bit in blocks of 32,
        as GGUF Q4_0 and our q4; NNCF keeps the embedding / lm_head 8-bit, as our q4 keeps its lm_head)
LLMPipeline on "CPU" with INFERENCE_NUM_THREADS T and one stream; greedy with ignore_eos and
min_new_tokens. Prefix caching off, given explicitly: LLMPipeline on CPU runs the continuous-batching
backend and, left to itself, keeps the KV of earlier prompts (measured with openvino-genai 2026.4.1:
the same 128-token prompt again took 0.033 s instead of 0.43 s), which would time the warm-up's cache
hit instead of a prefill. Timed by driver.py.
"""
import os
import subprocess
import sys

import driver  # this folder's driver.py (the script's folder comes first on sys.path)

ENGINE = "OpenVINO GenAI"
VARIANTS = {"bf16": ["fp16-ir-bf16"], "int8": ["int8"], "q4": ["int4-sym-g32"]}
EXPORT_ARGS = {"fp16-ir-bf16": ["--weight-format", "fp16"], "int8": ["--weight-format", "int8"],
               "int4-sym-g32": ["--weight-format", "int4", "--sym", "--group-size", "32", "--ratio", "1.0"]}


def version():
    from importlib.metadata import version as package_version
    return (f"openvino-genai {package_version('openvino-genai')}, openvino {package_version('openvino')}, "
            f"optimum-intel {package_version('optimum-intel')}, nncf {package_version('nncf')}")


def prepare(hf_dir, variant, cache):
    out = os.path.join(cache, variant)
    done = os.path.join(out, "openvino_model.xml")
    if os.path.exists(done) and os.path.exists(os.path.join(out, "openvino_tokenizer.xml")) and \
            os.path.getmtime(done) >= os.path.getmtime(os.path.join(hf_dir, "config.json")):
        return out
    cli = os.path.join(os.path.dirname(sys.executable), "optimum-cli")
    r = subprocess.run([cli, "export", "openvino", "--model", hf_dir, "--task", "text-generation-with-past",
                        *EXPORT_ARGS[variant], out], capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(done):
        tail = " / ".join([line for line in r.stderr.splitlines() if line.strip()][-3:])
        raise RuntimeError(f"optimum-cli export openvino exit {r.returncode}: {tail}")
    return out


def load(path, variant, threads):
    driver.env_threads(threads)
    import numpy as np
    import openvino as ov
    import openvino_genai as ov_genai
    scheduler = ov_genai.SchedulerConfig()
    scheduler.enable_prefix_caching = False
    config = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "CACHE_DIR": "", "scheduler_config": scheduler}
    if variant == "fp16-ir-bf16":
        config["INFERENCE_PRECISION_HINT"] = "bf16"
    pipe = ov_genai.LLMPipeline(path, "CPU", **config)

    def generate(prompt_ids, k):
        ids = np.array([list(prompt_ids)], dtype=np.int64)
        inputs = ov_genai.TokenizedInputs(ov.Tensor(ids), ov.Tensor(np.ones_like(ids)))
        gc = ov_genai.GenerationConfig()
        gc.max_new_tokens = k
        gc.ignore_eos = True
        gc.do_sample = False
        result = pipe.generate(inputs, gc)
        return list(result.tokens[0])

    return generate


if __name__ == "__main__":
    driver.main(globals())
