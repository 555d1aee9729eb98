"""Qwen3-MoE parity against transformers' own Qwen3MoeForCausalLM (the .venv's transformers).

Tiny random configs built with transformers' classes and written by save_pretrained (per-expert
safetensors, rope_theta inside rope_parameters), with router weights large enough that the top-k
choice differs from token to token. Two shapes: norm_topk_prob true with one dense layer
(mlp_only_layers) and tied=false; norm_topk_prob false, decoder_sparse_step 2 (every other layer
dense), tied embeddings, 3 of 6 experts.

  fp32 checkpoint, --weights f32: logits for prompts of 1, 7, 33 and 64 tokens (each run alone, every
      prompt row compared) within FP32_TOL of transformers' logits, and 32 greedy steps identical to
      transformers' greedy ids, with the KV cache and without it (--no-cache).
  bf16 checkpoint, --weights f32 (the bf16 values widened exactly): the same checks against transformers
      in fp32 on the same bf16-rounded weights.
  bf16 checkpoint, --weights auto (bf16 kept) / int8 / q4: each row's max |diff| / max |logit| against our
      own exact run above (--weights f32 on the same checkpoint); the median row within MEDIAN_REL of the
      format, and greedy ids with and without the cache identical. The median, not the largest row:
      a format's rounding moves a router logit, and where two experts are within that of each other
      the token takes the other one (the rows after it, through attention, move with it); measured on
      these models: bf16 median 2.2e-2 / 5.0e-3 (largest row 1.7e-1 / 8.8e-3), int8 2.6e-2 / 2.3e-2, q4
      2.9e-1 / 3.2e-1 (a dense Qwen3 of the first shape: bf16 5.9e-3, int8 3.5e-2, q4 3.6e-1).
  fused experts: the fp32 checkpoint rewritten with each layer's experts in transformers' in-memory
      3-D tensors (mlp.experts.gate_up_proj / down_proj) gives the same logits as per-expert tensors.
Exit 77 when the .venv's transformers is missing.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

try:
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
except ImportError as e:  # the project's .venv is not there
    print(f"SKIP: {e}")
    sys.exit(77)

torch.set_grad_enabled(False)

FP32_TOL = 1e-4
MEDIAN_REL = {"auto": 0.04, "int8": 0.06, "q4": 0.5}
LENGTHS = (1, 7, 33, 64)
STEPS = 32

SHAPES = {
    "normed": dict(vocab_size=160, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                   num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                   num_experts=8, num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1,
                   mlp_only_layers=[2], tie_word_embeddings=False),
    "sparse-step": dict(vocab_size=160, hidden_size=64, intermediate_size=80, moe_intermediate_size=24,
                        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                        num_experts=6, num_experts_per_tok=3, norm_topk_prob=False, decoder_sparse_step=2,
                        mlp_only_layers=[], tie_word_embeddings=True),
}


def build(name, shape, workdir, seed):
    config = Qwen3MoeConfig(max_position_embeddings=256, rms_norm_eps=1e-6,
                            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, **shape)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = Qwen3MoeForCausalLM(config).eval()
    for pname, p in model.named_parameters():
        if "norm" in pname:
            p.uniform_(0.7, 1.3)
        elif pname.endswith("mlp.gate.weight"):
            p.normal_(0.0, 0.5)  # decisive routing: the experts' choice varies from token to token
        else:
            p.normal_(0.0, 0.08)
    folders = {}
    for dtype in ("fp32", "bf16"):
        folder = os.path.join(workdir, f"{name}-{dtype}")
        (model if dtype == "fp32" else model.to(torch.bfloat16)).save_pretrained(folder)
        folders[dtype] = folder
    # Each checkpoint read back in fp32 (the bf16 one: its rounded weights, computed in fp32; RoPE's
    # inv_freq made afresh, not the bf16-rounded buffer of the converted model).
    return folders, {dtype: Qwen3MoeForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
                     for dtype, folder in folders.items()}


def write_fused(per_expert_folder, folder, layers, experts):
    """The checkpoint with each sparse layer's experts stacked as transformers holds them in memory."""
    from safetensors.torch import load_file, save_file
    tensors = load_file(os.path.join(per_expert_folder, "model.safetensors"))
    for l in range(layers):
        p = f"model.layers.{l}.mlp.experts."
        if p + "0.gate_proj.weight" not in tensors:
            continue
        take = lambda e, m: tensors.pop(f"{p}{e}.{m}_proj.weight")
        gate_up = [torch.cat([take(e, "gate"), take(e, "up")]) for e in range(experts)]
        tensors[p + "gate_up_proj"] = torch.stack(gate_up).contiguous()
        tensors[p + "down_proj"] = torch.stack([take(e, "down") for e in range(experts)]).contiguous()
    os.makedirs(folder, exist_ok=True)
    save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(per_expert_folder, "config.json"), folder)


def generate(cli, folder, prompt, steps, weights, dump=None, no_cache=False, verify=False):
    cmd = [cli, "generate", folder, "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", str(steps),
           "--ignore-eos", "--json", "--threads", "1", "--weights", weights]
    if dump:
        cmd += ["--dump-logits", dump]
    if no_cache:
        cmd.append("--no-cache")
    if verify:
        cmd.append("--verify-cache")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout)["tokens"], (np.fromfile(dump, dtype="<f4") if dump else None)


def reference_logits(model, ids):
    return model(torch.tensor([ids])).logits[0].double().numpy()


def reference_greedy(model, prompt, steps):
    seq, tokens, gaps = list(prompt), [], []
    for _ in range(steps):
        last = model(torch.tensor([seq])).logits[0, -1]
        top = torch.topk(last, 2).values
        gaps.append(float(top[0] - top[1]))
        tokens.append(int(torch.argmax(last)))
        seq.append(tokens[-1])
    print(f"  transformers' greedy: smallest top-2 gap {min(gaps):.4f}")
    return tokens, gaps


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    failures = []
    for index, (name, shape) in enumerate(SHAPES.items()):
        folders, refs = build(name, shape, args.workdir, seed=4321 + index)
        vocab = shape["vocab_size"]
        prompt = torch.randint(0, vocab, (max(LENGTHS),), generator=torch.Generator().manual_seed(7 + index)).tolist()
        dump = os.path.join(args.workdir, name + ".logits")
        exact_bf16 = {}  # our --weights f32 logits of the bf16 checkpoint, per prompt length
        for dtype, weights in (("fp32", "f32"), ("bf16", "f32"), ("bf16", "auto"), ("bf16", "int8"), ("bf16", "q4")):
            folder, label = folders[dtype], f"{name} {dtype} --weights {weights}"
            worst, row_errors = 0.0, []
            for length in LENGTHS:
                _, logits = generate(args.cli, folder, prompt[:length], 1, weights, dump=dump)
                ours = logits.reshape(-1, vocab)[:length]
                if weights != "f32":
                    base = exact_bf16[length]
                    row_errors += list(np.abs(ours - base).max(axis=1) / np.abs(base).max(axis=1))
                    continue
                expected = reference_logits(refs[dtype], prompt[:length])
                worst = max(worst, float(np.abs(ours - expected).max()))
                if dtype == "bf16":
                    exact_bf16[length] = ours
            cached, _ = generate(args.cli, folder, prompt[:16], STEPS, weights)
            uncached, _ = generate(args.cli, folder, prompt[:16], STEPS, weights, no_cache=True)
            if weights == "f32":
                line = (f"{label}: prompts {list(LENGTHS)} logits max|diff| vs transformers {worst:.2e} "
                        f"(bound {FP32_TOL:g})")
                ok = worst <= FP32_TOL
            else:
                median = float(np.median(row_errors))
                line = (f"{label}: prompts {list(LENGTHS)} rows' max|diff| / max|logit| vs our exact run: median "
                        f"{median:.2e} (bound {MEDIAN_REL[weights]:g}), largest {max(row_errors):.2e}")
                ok = median <= MEDIAN_REL[weights]
            if not ok:
                failures.append(line)
            if cached != uncached:
                failures.append(f"{label}: greedy ids with the cache {cached} != without {uncached}")
            line += f"; {STEPS} greedy steps cache == no-cache: {cached == uncached}"
            if weights == "f32":
                expected, gaps = reference_greedy(refs[dtype], prompt[:16], STEPS)
                at = first_difference(cached, expected)
                line += f"; vs transformers' greedy: {'identical' if at is None else f'differ at step {at}'}"
                if at is not None:
                    failures.append(f"{label}: greedy ids {cached} != transformers' {expected}")
            print(line, flush=True)
        fused = os.path.join(args.workdir, f"{name}-fused")
        write_fused(folders["fp32"], fused, shape["num_hidden_layers"], shape["num_experts"])
        per_expert = generate(args.cli, folders["fp32"], prompt[:33], 1, "f32", dump=dump)[1]
        fused_diff = float(np.abs(generate(args.cli, fused, prompt[:33], 1, "f32", dump=dump)[1] - per_expert).max())
        print(f"{name} fused 3-D experts: logits max|diff| vs per-expert tensors {fused_diff:.2e} (bound 0)")
        if fused_diff != 0:
            failures.append(f"{name}: fused experts' logits differ from per-expert ones by {fused_diff:.2e}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("qwen3_moe parity passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
