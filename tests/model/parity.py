"""Parity of inferlab's GPT-2 / Qwen2 / Qwen3 / Llama / Mistral forward against an independent PyTorch implementation.

Builds deterministic random tiny models in the exact HF tensor layout (safetensors written by hand,
fp32 and bf16, single-file and sharded), computes logits here in float64, and compares with the C++
CLI: logits for prompt lengths 1..64 (max abs diff <= 1e-4) and 32 greedy tokens with and without
the KV cache. Qwen3 adds per-head q/k RMSNorm; Mistral a sliding window shorter than the 64-token
prompt, so both the prompt pass and the cached steps must mask positions older than the window.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

from parity_common import run_generate, stored_values, write_safetensors

TOL = 1e-4
torch.set_grad_enabled(False)


# ---------------- reference implementations (float64) ----------------

def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def causal_attention(q, k, v, window=None):
    """q: [heads, T, d], k/v: [heads, T, d] -> [T, heads*d]. window: key j is visible to query i
    when i - window < j <= i (transformers' sliding-window mask)."""
    T, d = q.shape[1], q.shape[2]
    scores = q @ k.transpose(1, 2) / math.sqrt(d)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    if window:
        mask |= torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-window)
    scores = scores.masked_fill(mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(0, 1).reshape(T, -1)


def gpt2_logits(W, cfg, ids, prefix):
    H, nh = cfg["n_embd"], cfg["n_head"]
    hd = H // nh
    eps = cfg["layer_norm_epsilon"]
    T = len(ids)
    g = lambda name: W[prefix + name]
    x = g("wte.weight")[ids] + g("wpe.weight")[:T]
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        h = layer_norm(x, g(p + "ln_1.weight"), g(p + "ln_1.bias"), eps)
        qkv = h @ g(p + "attn.c_attn.weight") + g(p + "attn.c_attn.bias")  # Conv1D: x @ W[in, out]
        q, k, v = qkv.split(H, dim=-1)
        heads = lambda t: t.reshape(T, nh, hd).transpose(0, 1)
        a = causal_attention(heads(q), heads(k), heads(v))
        x = x + a @ g(p + "attn.c_proj.weight") + g(p + "attn.c_proj.bias")
        h = layer_norm(x, g(p + "ln_2.weight"), g(p + "ln_2.bias"), eps)
        m = h @ g(p + "mlp.c_fc.weight") + g(p + "mlp.c_fc.bias")
        m = 0.5 * m * (1 + torch.tanh(math.sqrt(2 / math.pi) * (m + 0.044715 * m ** 3)))
        x = x + m @ g(p + "mlp.c_proj.weight") + g(p + "mlp.c_proj.bias")
    x = layer_norm(x, g("ln_f.weight"), g("ln_f.bias"), eps)
    head = W["lm_head.weight"] if not cfg.get("tie_word_embeddings", True) else g("wte.weight")
    return x @ head.T


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def llama_logits(W, cfg, ids, qkv_bias, qk_norm=False):
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", H // nh)
    eps = cfg["rms_norm_eps"]
    T = len(ids)
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat([angles, angles], dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x = W["model.embed_tokens.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        def proj(name):
            y = h @ W[p + f"self_attn.{name}.weight"].T
            if qkv_bias:
                y = y + W[p + f"self_attn.{name}.bias"]
            return y
        q = proj("q_proj").reshape(T, nh, hd).transpose(0, 1)
        k = proj("k_proj").reshape(T, nkv, hd).transpose(0, 1)
        v = proj("v_proj").reshape(T, nkv, hd).transpose(0, 1)
        if qk_norm:  # Qwen3: RMSNorm over each head's vector, before RoPE
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(nh // nkv, dim=0)
        v = v.repeat_interleave(nh // nkv, dim=0)
        a = causal_attention(q, k, v, cfg.get("sliding_window"))
        x = x + a @ W[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        gate = h @ W[p + "mlp.gate_proj.weight"].T
        up = h @ W[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ W[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else W["lm_head.weight"]
    return x @ head.T


# ---------------- random models in HF layout ----------------

def randn(gen, *shape, scale=1.0):
    return torch.randn(*shape, generator=gen, dtype=torch.float32) * scale


def make_gpt2(gen, cfg, prefix, with_buffers):
    H, I, V, P = cfg["n_embd"], 4 * cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
    t = {prefix + "wte.weight": randn(gen, V, H), prefix + "wpe.weight": randn(gen, P, H, scale=0.3)}
    for l in range(cfg["n_layer"]):
        p = prefix + f"h.{l}."
        t[p + "ln_1.weight"] = 1 + randn(gen, H, scale=0.1)
        t[p + "ln_1.bias"] = randn(gen, H, scale=0.1)
        if with_buffers:  # real checkpoints carry these causal-mask buffers; the engine ignores them
            t[p + "attn.bias"] = torch.tril(torch.ones(P, P)).reshape(1, 1, P, P)
            t[p + "attn.masked_bias"] = torch.tensor(-1e4)
        t[p + "attn.c_attn.weight"] = randn(gen, H, 3 * H, scale=H ** -0.5)
        t[p + "attn.c_attn.bias"] = randn(gen, 3 * H, scale=0.1)
        t[p + "attn.c_proj.weight"] = randn(gen, H, H, scale=H ** -0.5)
        t[p + "attn.c_proj.bias"] = randn(gen, H, scale=0.1)
        t[p + "ln_2.weight"] = 1 + randn(gen, H, scale=0.1)
        t[p + "ln_2.bias"] = randn(gen, H, scale=0.1)
        t[p + "mlp.c_fc.weight"] = randn(gen, H, I, scale=H ** -0.5)
        t[p + "mlp.c_fc.bias"] = randn(gen, I, scale=0.1)
        t[p + "mlp.c_proj.weight"] = randn(gen, I, H, scale=I ** -0.5)
        t[p + "mlp.c_proj.bias"] = randn(gen, H, scale=0.1)
    t[prefix + "ln_f.weight"] = 1 + randn(gen, H, scale=0.1)
    t[prefix + "ln_f.bias"] = randn(gen, H, scale=0.1)
    if not cfg.get("tie_word_embeddings", True):
        t["lm_head.weight"] = randn(gen, V, H)
    return t


def make_llama(gen, cfg, qkv_bias, qk_norm=False):
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", H // nh)
    t = {"model.embed_tokens.weight": randn(gen, V, H)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = 1 + randn(gen, H, scale=0.1)
        for name, rows in (("q_proj", nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd)):
            t[p + f"self_attn.{name}.weight"] = randn(gen, rows, H, scale=H ** -0.5)
            if qkv_bias:
                t[p + f"self_attn.{name}.bias"] = randn(gen, rows, scale=0.1)
        if qk_norm:
            t[p + "self_attn.q_norm.weight"] = 1 + randn(gen, hd, scale=0.2)
            t[p + "self_attn.k_norm.weight"] = 1 + randn(gen, hd, scale=0.2)
        t[p + "self_attn.o_proj.weight"] = randn(gen, H, nh * hd, scale=(nh * hd) ** -0.5)
        t[p + "post_attention_layernorm.weight"] = 1 + randn(gen, H, scale=0.1)
        t[p + "mlp.gate_proj.weight"] = randn(gen, I, H, scale=H ** -0.5)
        t[p + "mlp.up_proj.weight"] = randn(gen, I, H, scale=H ** -0.5)
        t[p + "mlp.down_proj.weight"] = randn(gen, H, I, scale=I ** -0.5)
    t["model.norm.weight"] = 1 + randn(gen, H, scale=0.1)
    if not cfg.get("tie_word_embeddings", False):
        t["lm_head.weight"] = randn(gen, V, H)
    return t


MODELS = [
    # name, config, dtype, builder, reference, shards
    ("gpt2-f32", {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 32, "n_layer": 2, "n_head": 4,
                  "n_positions": 128, "n_ctx": 128, "vocab_size": 96, "layer_norm_epsilon": 1e-5,
                  "activation_function": "gelu_new"}, "F32", "gpt2:transformer.:buffers", 1),
    ("gpt2-noprefix-untied", {"architectures": ["GPT2LMHeadModel"], "n_embd": 24, "n_layer": 3, "n_head": 2,
                              "n_positions": 100, "vocab_size": 80, "layer_norm_epsilon": 1e-5,
                              "tie_word_embeddings": False}, "F32", "gpt2::", 1),
    ("qwen2-f32", {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 32,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "intermediate_size": 64, "vocab_size": 96, "max_position_embeddings": 256, "rope_theta": 1e6,
                   "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": True}, "F32", "qwen2", 1),
    ("qwen2-bf16", {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 48,
                    "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2,
                    "intermediate_size": 96, "vocab_size": 120, "max_position_embeddings": 256, "rope_theta": 1e6,
                    "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False}, "BF16", "qwen2", 1),
    ("llama-f32-sharded", {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 48,
                           "num_hidden_layers": 3, "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 8,
                           "intermediate_size": 80, "vocab_size": 100, "max_position_embeddings": 256,
                           "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "hidden_act": "silu",
                           "tie_word_embeddings": False}, "F32", "llama", 2),
    ("qwen3-f32", {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 32,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                   "intermediate_size": 64, "vocab_size": 96, "max_position_embeddings": 256, "rope_theta": 1e6,
                   "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": True}, "F32", "qwen3", 1),
    ("qwen3-bf16-untied", {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 48,
                           "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 16,
                           "intermediate_size": 96, "vocab_size": 120, "max_position_embeddings": 256,
                           "rope_theta": 1e6, "rms_norm_eps": 1e-6, "hidden_act": "silu",
                           "tie_word_embeddings": False}, "BF16", "qwen3", 1),
    ("mistral-f32-window13", {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 32,
                              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                              "intermediate_size": 64, "vocab_size": 96, "max_position_embeddings": 256,
                              "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "hidden_act": "silu",
                              "sliding_window": 13, "tie_word_embeddings": False}, "F32", "mistral", 1),
    ("mistral-bf16-window20", {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 64,
                               "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
                               "intermediate_size": 96, "vocab_size": 100, "max_position_embeddings": 256,
                               "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "hidden_act": "silu",
                               "sliding_window": 20, "tie_word_embeddings": False}, "BF16", "mistral", 1),
]


def build(name, cfg, dtype, kind, shards, workdir, seed):
    gen = torch.Generator().manual_seed(seed)
    if kind.startswith("gpt2"):
        _, prefix, buffers = kind.split(":")
        tensors = make_gpt2(gen, cfg, prefix, buffers == "buffers")
        ref = lambda W, ids: gpt2_logits(W, cfg, ids, prefix)
    else:
        tensors = make_llama(gen, cfg, qkv_bias=(kind == "qwen2"), qk_norm=(kind == "qwen3"))
        ref = lambda W, ids: llama_logits(W, cfg, ids, qkv_bias=(kind == "qwen2"), qk_norm=(kind == "qwen3"))
    folder = os.path.join(workdir, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    names = list(tensors)
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), tensors, dtype)
    else:
        weight_map = {}
        per = math.ceil(len(names) / shards)
        for s in range(shards):
            file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
            write_safetensors(os.path.join(folder, file), part, dtype)
            weight_map.update({n: file for n in part})
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    W = {n: stored_values(t, dtype) for n, t in tensors.items()}
    return folder, (lambda ids: ref(W, torch.tensor(ids)))


def reference_greedy(ref, prompt, steps):
    seq, tokens, rows, gaps = list(prompt), [], [], []
    for _ in range(steps):
        last = ref(seq)[-1]
        top = torch.topk(last, 2).values
        gaps.append(float(top[0] - top[1]))
        nxt = int(torch.argmax(last))
        rows.append(last.numpy())
        tokens.append(nxt)
        seq.append(nxt)
    return tokens, np.stack(rows), min(gaps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only", help="run only the models whose name starts with this")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    failures = []
    for index, (name, cfg, dtype, kind, shards, *rest) in enumerate(MODELS):
        if args.only and not name.startswith(args.only):
            continue
        weights = rest[0] if rest else "f32"
        folder, ref = build(name, cfg, dtype, kind, shards, args.workdir, seed=1234 + index)
        vocab = cfg["vocab_size"]
        gen = torch.Generator().manual_seed(99 + index)
        prompt = torch.randint(0, vocab, (64,), generator=gen).tolist()
        dump = os.path.join(args.workdir, name + ".logits")

        # Prompt lengths 1..64 in one pass (row i = the logits after prompt[:i+1]), then each length alone.
        expected_prompt = ref(prompt).numpy()
        result, logits = run_generate(args.cli, folder, prompt, 32, dump=dump, weights=weights)
        logits = logits.reshape(-1, vocab)
        got_prompt, got_steps = logits[:64], logits[64:]
        prompt_diff = float(np.abs(got_prompt - expected_prompt).max())
        alone_diff = 0.0
        for length in range(1, 65):
            r, l = run_generate(args.cli, folder, prompt[:length], 1, dump=dump, weights=weights)
            alone_diff = max(alone_diff, float(np.abs(l.reshape(-1, vocab)[-1] - expected_prompt[length - 1]).max()))

        ref_tokens, ref_rows, min_gap = reference_greedy(ref, prompt, 32)
        step_diff = float(np.abs(got_steps - ref_rows).max())
        no_cache, nc_logits = run_generate(args.cli, folder, prompt, 32, no_cache=True, dump=dump, weights=weights)
        nc_diff = float(np.abs(nc_logits.reshape(-1, vocab)[64:] - ref_rows).max())
        same_cache = result["tokens"] == ref_tokens
        same_nocache = no_cache["tokens"] == ref_tokens
        fed_ok = result["positions_fed"] == [64] + [1] * 31 and no_cache["positions_fed"] == list(range(64, 96))
        print(f"{name:22s} {dtype}: prompt 1..64 max|diff| {prompt_diff:.2e} (each length alone {alone_diff:.2e}); "
              f"32 greedy steps: cache {step_diff:.2e} tokens {'same' if same_cache else 'DIFFER'}, "
              f"no-cache {nc_diff:.2e} tokens {'same' if same_nocache else 'DIFFER'}; min top-2 gap {min_gap:.3f}")
        for label, value in (("prompt", prompt_diff), ("alone", alone_diff), ("cache steps", step_diff),
                             ("no-cache steps", nc_diff)):
            if not value <= TOL:
                failures.append(f"{name}: {label} logits differ by {value:.3e} > {TOL}")
        if not same_cache:
            failures.append(f"{name}: cached greedy tokens {result['tokens']} != reference {ref_tokens}")
        if not same_nocache:
            failures.append(f"{name}: no-cache greedy tokens {no_cache['tokens']} != reference {ref_tokens}")
        if not fed_ok:
            failures.append(f"{name}: positions fed {result['positions_fed']} / {no_cache['positions_fed']}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("all parity checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
