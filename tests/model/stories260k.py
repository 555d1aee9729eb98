"""stories260K (llama2.c checkpoint, a real trained TinyStories Llama) through inferlab vs an
independent PyTorch run written here with llama2.c model.py semantics (interleaved complex RoPE,
repeat_kv, RMSNorm, SwiGLU, shared classifier). Exit 77 (skip) when the checkpoint is missing."""
import argparse
import os
import struct
import sys

import numpy as np
import torch

from parity_common import run_generate

torch.set_grad_enabled(False)
STEPS = 120
TOL = 1e-4


def load(path):
    with open(path, "rb") as f:
        dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", f.read(28))
        data = np.frombuffer(f.read(), dtype="<f4").astype(np.float64)
    shared = vocab > 0
    vocab = abs(vocab)
    hs = dim // heads
    kv_dim = hs * kv_heads
    pos = 0

    def take(*shape):
        nonlocal pos
        n = int(np.prod(shape))
        t = torch.from_numpy(data[pos:pos + n].copy()).reshape(*shape)
        pos += n
        return t

    W = {"emb": take(vocab, dim), "rms_att": take(layers, dim), "wq": take(layers, dim, dim),
         "wk": take(layers, kv_dim, dim), "wv": take(layers, kv_dim, dim), "wo": take(layers, dim, dim),
         "rms_ffn": take(layers, dim), "w1": take(layers, hidden, dim), "w2": take(layers, dim, hidden),
         "w3": take(layers, hidden, dim), "rms_final": take(dim)}
    take(seq_len, hs // 2)
    take(seq_len, hs // 2)
    W["cls"] = W["emb"] if shared else take(vocab, dim)
    assert pos == len(data), "file size does not match the llama2.c header"
    return dict(dim=dim, layers=layers, heads=heads, kv_heads=kv_heads, vocab=vocab, seq_len=seq_len), W


def forward(cfg, W, ids):
    T, dim, nh, nkv = len(ids), cfg["dim"], cfg["heads"], cfg["kv_heads"]
    hd = dim // nh
    freqs = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64)[: hd // 2] / hd))
    angles = torch.outer(torch.arange(T, dtype=torch.float64), freqs)
    cos, sin = angles.cos(), angles.sin()

    def rope(x):  # x: [T, heads, hd], rotating the pairs (2i, 2i+1) as complex numbers
        r, i = x.reshape(T, x.shape[1], hd // 2, 2).unbind(-1)
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.stack([r * c - i * s, r * s + i * c], dim=-1).reshape(T, x.shape[1], hd)

    def rms(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w

    x = W["emb"][torch.tensor(ids)]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(cfg["layers"]):
        h = rms(x, W["rms_att"][l])
        q = rope((h @ W["wq"][l].T).reshape(T, nh, hd))
        k = rope((h @ W["wk"][l].T).reshape(T, nkv, hd))
        v = (h @ W["wv"][l].T).reshape(T, nkv, hd)
        rep = nh // nkv
        k = k[:, :, None, :].expand(T, nkv, rep, hd).reshape(T, nh, hd)
        v = v[:, :, None, :].expand(T, nkv, rep, hd).reshape(T, nh, hd)
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))
        scores = q @ k.transpose(1, 2) / hd ** 0.5 + mask
        a = (torch.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(T, dim)
        x = x + a @ W["wo"][l].T
        h = rms(x, W["rms_ffn"][l])
        x = x + (torch.nn.functional.silu(h @ W["w1"][l].T) * (h @ W["w3"][l].T)) @ W["w2"][l].T
    return rms(x, W["rms_final"]) @ W["cls"].T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    if not os.path.exists(args.checkpoint):
        print(f"SKIP: {args.checkpoint} not found (shared data missing)")
        return 77
    os.makedirs(args.workdir, exist_ok=True)
    cfg, W = load(args.checkpoint)

    seq, ref_tokens, ref_rows = [1], [], []  # id 1 = BOS
    for _ in range(STEPS):
        last = forward(cfg, W, seq)[-1]
        ref_rows.append(last.numpy())
        ref_tokens.append(int(torch.argmax(last)))
        seq.append(ref_tokens[-1])
    ref_rows = np.stack(ref_rows)

    dump = os.path.join(args.workdir, "logits")
    failures = []
    runs = {}
    for no_cache in (False, True):
        result, logits = run_generate(args.cli, args.checkpoint, [1], STEPS, no_cache=no_cache, dump=dump)
        rows = logits.reshape(-1, cfg["vocab"])[1:]  # row 0: the prompt position, also step 1's row
        diff = float(np.abs(rows - ref_rows).max())
        label = "no-cache" if no_cache else "cache"
        runs[label] = result["tokens"]
        print(f"stories260K {label}: {STEPS} greedy tokens {'same' if result['tokens'] == ref_tokens else 'DIFFER'}, "
              f"max|logit diff| {diff:.2e}")
        if result["tokens"] != ref_tokens:
            failures.append(f"{label}: tokens {result['tokens']} != reference {ref_tokens}")
        if not diff <= TOL:
            failures.append(f"{label}: logits differ by {diff:.3e} > {TOL}")
    again, _ = run_generate(args.cli, args.checkpoint, [1], STEPS)
    if again["tokens"] != runs["cache"]:
        failures.append("two runs gave different tokens (not deterministic)")
    print("tokens:", ",".join(map(str, ref_tokens)))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("stories260K matches the PyTorch reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
