"""Long context against transformers' own model classes: YaRN (and dynamic) RoPE scaling and Qwen2 /
Qwen3 sliding windows. Each case builds a tiny random Qwen2ForCausalLM / Qwen3ForCausalLM from its
config, saves it with save_pretrained (safetensors, f32), and compares inferlab's f32 logits with the
same model run by transformers in float64: every prompt position in one pass, then 32 greedy steps
with and without the KV cache (tokens identical to transformers' generate). Each case also checks
that its feature matters: the logits without it differ by far more than the tolerance. Configs the
engine refuses get their error checked for the key's name.

Usage: long_context_test.py --cli build/tools/inferlab/inferlab --workdir DIR
"""
import argparse
import copy
import json
import os
import subprocess
import sys

import numpy as np
import torch

try:
    import transformers
except ImportError:  # the .venv's transformers is the reference; without it there is nothing to compare with
    print("SKIP: transformers is not installed in this Python")
    sys.exit(77)

from parity_common import run_generate

TOL = 2e-5  # max |logit difference|, f32 engine against the float64 reference (measured: <= 4e-6)
PROMPT, STEPS = 96, 32

BASE = {"hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 64, "vocab_size": 96, "rms_norm_eps": 1e-6, "hidden_act": "silu",
        "tie_word_embeddings": False}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}

# name, class, config kwargs, how config.json is written ("v5": as save_pretrained writes it;
# "legacy": top-level rope_theta and rope_scaling, as 4.x configs on the Hub), the same config
# without the feature under test (its logits must differ).
CASES = [
    ("qwen2-yarn", "Qwen2", {**BASE, "max_position_embeddings": 128, "rope_theta": 10000.0, "rope_scaling": YARN},
     "v5", {"rope_scaling": None}),
    ("qwen2-yarn-legacy", "Qwen2", {**BASE, "max_position_embeddings": 128, "rope_theta": 10000.0, "rope_scaling": YARN},
     "legacy", {"rope_scaling": None}),
    # Qwen3's long-context setting, and YaRN's optional keys: no truncation, other betas, and a
    # max_position_embeddings left at the original (the context is factor x original).
    ("qwen3-yarn", "Qwen3", {**BASE, "head_dim": 16, "max_position_embeddings": 32, "rope_theta": 1e6,
                             "rope_scaling": YARN}, "legacy", {"rope_scaling": None}),
    # No original_max_position_embeddings: transformers takes max_position_embeddings (32 here).
    ("qwen2-yarn-no-original", "Qwen2", {**BASE, "max_position_embeddings": 32, "rope_theta": 10000.0,
                                         "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "legacy",
     {"rope_scaling": None}),
    ("qwen3-yarn-options", "Qwen3", {**BASE, "head_dim": 16, "max_position_embeddings": 128, "rope_theta": 10000.0,
                                     "rope_scaling": {**YARN, "truncate": False, "beta_fast": 16, "beta_slow": 2,
                                                      "attention_factor": 1.3}}, "v5", {"rope_scaling": None}),
    # Windowed layers: i >= max_window_layers (1), so layer 0 full, layers 1 and 2 a window of 8.
    ("qwen2-window", "Qwen2", {**BASE, "max_position_embeddings": 128, "rope_theta": 1e6, "use_sliding_window": True,
                               "sliding_window": 8, "max_window_layers": 1}, "legacy", {"use_sliding_window": False}),
    ("qwen3-window", "Qwen3", {**BASE, "head_dim": 16, "max_position_embeddings": 128, "rope_theta": 1e6,
                               "use_sliding_window": True, "sliding_window": 8, "max_window_layers": 2}, "v5",
     {"use_sliding_window": False}),
    # transformers 5's layer_types (here windowing layers 0 and 2, which max_window_layers cannot say).
    ("qwen3-window-layer-types", "Qwen3", {**BASE, "head_dim": 16, "max_position_embeddings": 128, "rope_theta": 1e6,
                                           "use_sliding_window": True, "sliding_window": 8,
                                           "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]},
     "v5", {"use_sliding_window": False, "layer_types": None}),
    ("qwen2-window-yarn", "Qwen2", {**BASE, "max_position_embeddings": 128, "rope_theta": 10000.0, "rope_scaling": YARN,
                                    "use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1}, "v5",
     {"rope_scaling": None, "use_sliding_window": False}),
    # dynamic NTK: within max_position_embeddings transformers keeps the default frequencies (the
    # engine refuses positions past it, where transformers would change them with the length).
    ("qwen2-dynamic", "Qwen2", {**BASE, "max_position_embeddings": 128, "rope_theta": 10000.0,
                                "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "legacy", None),
]


def model_classes(family):
    return getattr(transformers, f"{family}Config"), getattr(transformers, f"{family}ForCausalLM")


def randomize(model, seed):
    """Weights of unit-scale activations (transformers' init of std 0.02 leaves logits near zero,
    where attention and positions hardly show)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * noise)
            elif name.endswith("bias"):
                p.copy_(0.1 * noise)
            elif "embed_tokens" in name:
                p.copy_(noise)
            else:
                p.copy_(noise * p.shape[-1] ** -0.5)


def build(name, family, kwargs, style, workdir, seed):
    config_class, model_class = model_classes(family)
    config = config_class(**copy.deepcopy(kwargs))  # transformers fills rope_scaling's dict in place
    model = model_class(config).to(torch.float64).eval()
    randomize(model, seed)
    folder = os.path.join(workdir, name)
    model.to(torch.float32).save_pretrained(folder, safe_serialization=True)
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        saved = json.load(f)
    if style == "legacy":  # as a 4.x config.json: rope_theta beside rope_scaling, no layer_types
        params = saved.pop("rope_parameters", None) or {}
        saved["rope_theta"] = params.pop("rope_theta", kwargs.get("rope_theta"))
        if params.get("rope_type", "default") != "default":
            # the keys as given (transformers' standardization fills some in when it saves)
            given = kwargs.get("rope_scaling") or {}
            saved["rope_scaling"] = {"type" if k == "rope_type" else k: v for k, v in params.items()
                                     if k in given or k == "rope_type"}
        saved.pop("layer_types", None)
        if not kwargs.get("use_sliding_window"):
            saved.pop("sliding_window", None)
        with open(path, "w") as f:
            json.dump(saved, f, indent=2)
    # The reference reads the config.json the engine reads, back through transformers.
    reference = model_class.from_pretrained(folder, dtype=torch.float64).eval()
    return folder, reference, saved


def reference_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids]), use_cache=False).logits[0].numpy()


def reference_greedy(model, prompt, steps):
    with torch.no_grad():
        ids = torch.tensor([prompt])
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=steps, do_sample=False,
                             output_logits=True, return_dict_in_generate=True, pad_token_id=None, eos_token_id=None)
    tokens = out.sequences[0, len(prompt):].tolist()
    rows = np.stack([l[0].numpy() for l in out.logits])
    top2 = np.sort(rows, axis=1)[:, -2:]
    return tokens, rows, float((top2[:, 1] - top2[:, 0]).min())


def without_feature(family, kwargs, off, seed, folder):
    """The same weights under the config without the feature: its logits, to show the feature matters."""
    config_class, model_class = model_classes(family)
    changed = {**kwargs, **off}
    changed = {k: v for k, v in changed.items() if v is not None}
    model = model_class.from_pretrained(folder, config=config_class(**copy.deepcopy(changed)), dtype=torch.float64).eval()
    return model


def check_refusals(cli, workdir, failures):
    """Configs the engine cannot run: the error names the key."""
    base = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], **BASE, "max_position_embeddings": 128}
    cases = [
        ("longrope", {"rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [1.0] * 4}},
         "rope_scaling type 'longrope' is not supported"),
        ("sliding-without-window", {"use_sliding_window": False, "sliding_window": None,
                                    "layer_types": ["full_attention", "sliding_attention", "full_attention"]},
         "layer_types[1] is sliding_attention but there is no sliding_window"),
        ("layer-type-unknown", {"layer_types": ["full_attention", "chunked_attention", "full_attention"]},
         "layer_types[1] 'chunked_attention' is not supported"),
        ("window-zero", {"use_sliding_window": True, "sliding_window": 0, "max_window_layers": 1},
         "key \"sliding_window\" = 0 is out of range"),
        ("max-window-layers-negative", {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": -1},
         "key \"max_window_layers\" must be an integer >= 0, got -1"),
        ("rope-per-layer-type", {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e4},
                                                     "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
         "rope_parameters given per layer type (\"full_attention\") is not supported"),
        ("partial-rotary", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}},
         "partial_rotary_factor 0.5 is not supported"),
        ("dynamic-no-factor", {"rope_scaling": {"rope_type": "dynamic"}},
         "rope_scaling of type dynamic needs a number \"factor\""),
    ]
    for name, extra, expected in cases:
        folder = os.path.join(workdir, "refused-" + name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({**base, **extra}, f)
        r = subprocess.run([cli, "generate", folder, "--prompt-ids", "1,2,3", "--max-new-tokens", "1"],
                           capture_output=True, text=True)
        ok = r.returncode != 0 and expected in r.stderr
        print(f"refused {name:24s}: {'ok' if ok else 'WRONG'} ({r.stderr.strip().splitlines()[-1] if r.stderr else ''})")
        if not ok:
            failures.append(f"refusal {name}: rc {r.returncode}, stderr {r.stderr!r} lacks {expected!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only", help="run only the cases whose name starts with this")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(1)
    failures = []
    for index, (name, family, kwargs, style, off) in enumerate(CASES):
        if args.only and not name.startswith(args.only):
            continue
        folder, model, saved = build(name, family, kwargs, style, args.workdir, seed=4321 + index)
        vocab = kwargs["vocab_size"]
        gen = torch.Generator().manual_seed(77 + index)
        prompt = torch.randint(0, vocab, (PROMPT,), generator=gen).tolist()
        dump = os.path.join(args.workdir, name + ".logits")

        expected_prompt = reference_logits(model, prompt)
        ref_tokens, ref_rows, min_gap = reference_greedy(model, prompt, STEPS)
        result, logits = run_generate(args.cli, folder, prompt, STEPS, dump=dump)
        logits = logits.reshape(-1, vocab)
        prompt_diff = float(np.abs(logits[:PROMPT] - expected_prompt).max())
        step_diff = float(np.abs(logits[PROMPT:] - ref_rows).max())
        no_cache, nc_logits = run_generate(args.cli, folder, prompt, STEPS, no_cache=True, dump=dump)
        nc_diff = float(np.abs(nc_logits.reshape(-1, vocab)[PROMPT:] - ref_rows).max())
        line = (f"{name:26s} ({style} config): prompt {PROMPT} positions max|diff| {prompt_diff:.2e}; 32 greedy steps: "
                f"cache {step_diff:.2e} tokens {'same' if result['tokens'] == ref_tokens else 'DIFFER'}, no-cache "
                f"{nc_diff:.2e} tokens {'same' if no_cache['tokens'] == ref_tokens else 'DIFFER'}; min top-2 gap {min_gap:.3f}")
        if off is not None:
            plain = reference_logits(without_feature(family, kwargs, off, 4321 + index, folder), prompt)
            feature_effect = float(np.abs(plain - expected_prompt).max())
            line += f"; without it the logits move {feature_effect:.2f}"
            if not feature_effect > 100 * TOL:
                failures.append(f"{name}: the feature changes the logits by only {feature_effect:.2e}; the case tests nothing")
        print(line)
        for label, value in (("prompt", prompt_diff), ("cache steps", step_diff), ("no-cache steps", nc_diff)):
            if not value <= TOL:
                failures.append(f"{name}: {label} logits differ by {value:.3e} > {TOL}")
        if result["tokens"] != ref_tokens:
            failures.append(f"{name}: cached greedy tokens {result['tokens']} != transformers' {ref_tokens}")
        if no_cache["tokens"] != ref_tokens:
            failures.append(f"{name}: no-cache greedy tokens {no_cache['tokens']} != transformers' {ref_tokens}")
    if not args.only:
        check_refusals(args.cli, args.workdir, failures)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("all long-context checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
