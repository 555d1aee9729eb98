"""`inferlab perplexity` against an independent PyTorch computation, and its KL divergence.

1. PPL of the demo model (assets/demo-model, bf16 weights run at f32) on a held-out slice: the CLI's
   figure equals llama-perplexity's method computed here in float64 PyTorch (tokens from the Node
   reference tokenizer, logits from tests/model/parity.py's Qwen2 forward), relative difference <= 1e-4.
2. KL divergence of a format against a reference made by the same format is exactly 0 (same top token
   everywhere, ΔPPL 0); q4 against the f32 reference is not (the check can fail); `bench engine
   --kld-text` prints the same q4 figure beside its speed.
3. Bad input: a missing file, a text too short for two chunks, a base file of another ctx: clear errors.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "model"))
from parity import llama_logits  # noqa: E402  (the Qwen2 float64 reference of the parity test)

torch.set_grad_enabled(False)
failures = []
checks = [0]


def check(ok, what):
    checks[0] += 1
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = torch.frombuffer(bytearray(data[a:b]), dtype={"BF16": torch.int16, "F32": torch.float32}[t["dtype"]])
        if t["dtype"] == "BF16":
            raw = raw.view(torch.bfloat16)
        out[name] = raw.to(torch.float64).reshape(t["shape"])
    return out


def node_tokenize(model, text):
    p = subprocess.run(["node", os.path.join(ROOT, "scripts", "tokenize_lines.mjs"), os.path.join(model, "tokenizer.json")],
                       input=json.dumps([text]).encode(), capture_output=True, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.decode())
    return json.loads(p.stdout)[0]


def cli(args, *rest, expect_ok=True):
    p = subprocess.run([args.cli, "perplexity", *rest], capture_output=True, text=True)
    if expect_ok and p.returncode != 0:
        raise RuntimeError(f"inferlab perplexity {' '.join(rest)} failed ({p.returncode}): {p.stderr}")
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", default=os.path.join(ROOT, "assets", "demo-model"))
    ap.add_argument("--text", default=os.path.join(ROOT, "assets", "brown-heldout.txt"))
    ap.add_argument("--workdir", default=tempfile.mkdtemp())
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    ctx, chunks = 64, 3
    with open(args.text, encoding="utf-8") as f:
        text = f.read()[:4000]  # ~900 tokens: 14 chunks of 64 exist, 3 are scored
    sample = os.path.join(args.workdir, "sample.txt")
    with open(sample, "w", encoding="utf-8") as f:
        f.write(text)

    # 1. PPL equal to the PyTorch computation.
    out = json.loads(cli(args, args.model, "--file", sample, "--ctx", str(ctx), "--chunks", str(chunks), "--weights", "f32",
                         "--threads", "1", "--json", "-q").stdout)
    with open(os.path.join(args.model, "config.json")) as f:
        cfg = json.load(f)
    W = read_safetensors(os.path.join(args.model, "model.safetensors"))
    tokens = node_tokenize(args.model, text)
    check(out["text_tokens"] == len(tokens), f"token count: CLI {out['text_tokens']}, Node reference {len(tokens)}")
    nll, count = 0.0, 0
    for c in range(chunks):
        ids = tokens[c * ctx:(c + 1) * ctx]  # this tokenizer adds no BOS
        logp = torch.log_softmax(llama_logits(W, cfg, ids, qkv_bias=True), -1)
        for j in range(ctx // 2, ctx - 1):
            nll -= float(logp[j, ids[j + 1]])
            count += 1
    ppl = math.exp(nll / count)
    rel = abs(out["ppl"] - ppl) / ppl
    check(out["scored"] == count, f"scored positions: CLI {out['scored']}, reference {count}")
    check(rel <= 1e-4, f"PPL: CLI {out['ppl']:.6f}, PyTorch float64 {ppl:.6f}, relative difference {rel:.2e} <= 1e-4")

    # 2. KL divergence: a format against itself is 0; q4 against f32 is not.
    for fmt in ("int8", "f32"):
        base = os.path.join(args.workdir, f"{fmt}.kld")
        cli(args, args.model, "--file", sample, "--ctx", str(ctx), "--chunks", str(chunks), "--weights", fmt, "--threads", "1",
            "--kl-divergence-base", base, "-q")
        same = json.loads(cli(args, args.model, "--file", sample, "--ctx", str(ctx), "--weights", fmt, "--threads", "1",
                              "--kl-divergence", base, "--json", "-q").stdout)["kl_divergence"]
        check(same["mean"] == 0 and same["max"] == 0 and same["same_top"] == 1 and same["delta_ppl"] == 0,
              f"{fmt} against its own reference: mean KLD {same['mean']}, max {same['max']}, same top {same['same_top']}, "
              f"ΔPPL {same['delta_ppl']}")
    q4 = json.loads(cli(args, args.model, "--file", sample, "--ctx", str(ctx), "--weights", "q4", "--threads", "1",
                        "--kl-divergence", os.path.join(args.workdir, "f32.kld"), "--json", "-q").stdout)["kl_divergence"]
    check(q4["mean"] > 0 and q4["max"] >= q4["p99"] >= q4["median"] >= 0,
          f"q4 against f32: mean KLD {q4['mean']:.3g} > 0, median {q4['median']:.3g} <= p99 {q4['p99']:.3g} <= max {q4['max']:.3g}")

    # bench engine --kld-text: the same measurement beside the speed (q4 against f32, the same chunks).
    p = subprocess.run([args.cli, "bench", "engine", args.model, "-p", "16", "-n", "4", "-r", "1", "-t", "1", "--weights", "q4",
                        "--kld-text", sample, "--kld-ctx", str(ctx), "--kld-chunks", str(chunks), "--json"],
                       capture_output=True, text=True)
    quality = json.loads(p.stdout).get("quality", {}) if p.returncode == 0 else {}
    check(abs(quality.get("mean_kld", -1) - q4["mean"]) <= 1e-9 * max(1.0, q4["mean"]) + 1e-12,
          f"bench engine --kld-text: q4 mean KLD {quality.get('mean_kld')} equals perplexity's {q4['mean']}")

    # 3. Bad input.
    p = cli(args, args.model, "--file", os.path.join(args.workdir, "missing.txt"), expect_ok=False)
    check(p.returncode != 0 and "missing.txt" in p.stderr, f"missing file: exit {p.returncode}, {p.stderr.strip()}")
    p = cli(args, args.model, "--file", sample, "--ctx", "4096", expect_ok=False)
    check(p.returncode != 0 and "needs at least" in p.stderr, f"text too short: exit {p.returncode}, {p.stderr.strip()}")
    p = cli(args, args.model, "--file", sample, "--ctx", "32", "--kl-divergence", os.path.join(args.workdir, "f32.kld"),
            expect_ok=False)
    check(p.returncode != 0 and "--ctx 64" in p.stderr, f"base of another ctx: exit {p.returncode}, {p.stderr.strip()}")
    p = cli(args, args.model, "--file", sample, "--ctx", str(ctx), "--kl-divergence", sample, expect_ok=False)
    check(p.returncode != 0 and "not a KL base file" in p.stderr, f"not a base file: exit {p.returncode}, {p.stderr.strip()}")

    print(f"{checks[0] - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
