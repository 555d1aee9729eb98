#!/usr/bin/env python3
"""A GGUF file as an HF folder (bf16 safetensors, config.json, tokenizer), through transformers' own
GGUF loader (`from_pretrained(..., gguf_file=...)` with `GgufConfig(dequantize=True)`, which
dequantizes every tensor and undoes
llama.cpp's q / k row permutation), so the engines that load only HF weights run the same model.
Run with the project's .venv (transformers, gguf, accelerate; requirements.txt).

  gguf_to_hf.py FILE.gguf OUT_DIR
"""
import os
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gguf_to_hf.py FILE.gguf OUT_DIR")
    source, out = sys.argv[1], sys.argv[2]
    if not os.path.isfile(source):
        sys.exit(f"gguf_to_hf.py: {source}: no such file")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
    folder, name = os.path.dirname(os.path.abspath(source)), os.path.basename(source)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    # dequantize=True: every weight unpacked into a plain dense bf16 model (transformers 5 otherwise
    # keeps GGUF blocks packed, a model save_pretrained refuses to write).
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16,
                                                 quantization_config=GgufConfig(dequantize=True))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    print(f"wrote {out} ({model.config.model_type}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, bf16)")


if __name__ == "__main__":
    main()
