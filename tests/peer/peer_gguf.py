#!/usr/bin/python3
"""The llama.cpp peer's inputs and the strongest cross-check we have of them.

  peer_gguf.py convert INFERLAB OUT_DIR TOKENIZER_DIR   writes two tiny random qwen2 models (tied and
      untied embeddings) with `inferlab make-model` and converts each with bench/hf_to_gguf.py to
      bf16/q8_0/q4_0 GGUF files (read back by the peer_gguf_tests GoogleTest cases)
  peer_gguf.py greedy INFERLAB OUT_DIR                  llama.cpp (node-llama-cpp) greedy tokens on the
      bf16 GGUF must equal `inferlab generate --weights bf16` on the safetensors, for several prompts;
      exits 77 (skip) when node-llama-cpp is not installed.
      Random-weight models have flat logits (max |logit| ~ 1), so two tokens can tie to within bf16
      rounding: a divergence is accepted only where our own two candidates are within NEAR_TIE of
      the row's largest |logit| (after it the sequences differ, so the rest is not compared), and at
      least MIN_EQUAL of all steps must agree. A converter or engine error diverges at once, by far more.
"""
import json
import os
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONVERTER = os.path.join(REPO, "bench", "hf_to_gguf.py")
GREEDY = os.path.join(REPO, "bench", "llama_cpp_greedy.mjs")
SKIP = 77
VOCAB = 151936
PEER_ABSENT = 3  # bench/llama_cpp_peer.mjs EXIT_PEER_ABSENT

# Small qwen2 shapes with the real 151936-token Qwen vocabulary (llama.cpp needs a real tokenizer).
MODELS = {
    "tied": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 128, "tie_word_embeddings": True, "seed": 0},
    "untied": {"hidden_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
               "intermediate_size": 256, "tie_word_embeddings": False, "seed": 7},
}
PROMPTS = [[9707, 11, 1879, 0, 151643, 42, 3000, 12, 77], [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198],
           [4340, 653, 4128, 4119, 23583, 30]]
STEPS = 24
NEAR_TIE = 0.0025
MIN_EQUAL = 0.75


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"failed ({result.returncode}): {' '.join(cmd)}")
    return result.stdout


def convert(inferlab, out_dir, tokenizer_dir):
    for name, shape in MODELS.items():
        folder = os.path.join(out_dir, name)
        config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 151936,
                  "max_position_embeddings": 4096, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
                  "hidden_act": "silu", "bos_token_id": 151643, "eos_token_id": 151645}
        config.update({k: v for k, v in shape.items() if k != "seed"})
        os.makedirs(out_dir, exist_ok=True)
        config_file = os.path.join(out_dir, f"{name}-config.json")
        with open(config_file, "w") as f:
            json.dump(config, f)
        run([inferlab, "make-model", "--config", config_file, "--dtype", "bf16", "--seed", str(shape["seed"]),
             "--tokenizer", tokenizer_dir, "--out", folder])
        for gguf_type in ("bf16", "q8_0", "q4_0"):
            print(run([sys.executable, CONVERTER, folder, "--type", gguf_type,
                       "--out", os.path.join(folder, f"{gguf_type}.gguf")]), end="")


def greedy(inferlab, out_dir):
    failures, equal_steps, total_steps = 0, 0, 0
    for name in MODELS:
        folder = os.path.join(out_dir, name)
        for prompt in PROMPTS:
            ids = ",".join(map(str, prompt))
            peer = subprocess.run(["node", GREEDY, os.path.join(folder, "bf16.gguf"), "--prompt-ids", ids,
                                   "-n", str(STEPS), "-t", "1"], capture_output=True, text=True, cwd=REPO)
            if peer.returncode == PEER_ABSENT:
                print(f"SKIP: node-llama-cpp is not installed: {peer.stderr.strip()}")
                return SKIP
            if peer.returncode != 0:
                sys.stderr.write(peer.stderr)
                raise SystemExit(f"llama_cpp_greedy.mjs failed ({peer.returncode})")
            peer = json.loads(peer.stdout)
            theirs = peer["tokens"]
            logits_file = os.path.join(folder, "greedy-logits.bin")
            ours = json.loads(run([inferlab, "generate", folder, "--prompt-ids", ids, "--max-new-tokens", str(STEPS),
                                   "--ignore-eos", "--json", "-t", "1", "--weights", "bf16",
                                   "--dump-logits", logits_file]))["tokens"]
            same = len(list(iter_equal_prefix(ours, theirs)))
            equal_steps += same
            total_steps += STEPS
            line = f"{name} prompt {ids}: {same}/{STEPS} greedy tokens equal (llama.cpp CPU backend {peer['cpu_backend']})"
            if same == STEPS:
                print("ok: " + line)
                continue
            # rows: each prompt position, then one per step (step k's row is len(prompt) + k)
            row = np.fromfile(logits_file, dtype=np.float32).reshape(-1, VOCAB)[len(prompt) + same]
            gap = float(row[ours[same]] - row[theirs[same]])
            scale = float(np.abs(row).max())
            near_tie = gap <= NEAR_TIE * scale
            print(("ok (near tie): " if near_tie else "MISMATCH: ") + line +
                  f"; at step {same} our logits give {ours[same]} {row[ours[same]]:.5f} and llama.cpp's {theirs[same]} "
                  f"{row[theirs[same]]:.5f} (gap {gap:.5f} = {100 * gap / scale:.3f}% of max |logit| {scale:.3f}, "
                  f"near-tie threshold {100 * NEAR_TIE:.2f}%)")
            if not near_tie:
                print(f"  inferlab : {ours}\n  llama.cpp: {theirs}")
                failures += 1
    print(f"{equal_steps}/{total_steps} steps equal overall (need {100 * MIN_EQUAL:.0f}%)")
    if equal_steps < MIN_EQUAL * total_steps:
        failures += 1
    return 1 if failures else 0


def iter_equal_prefix(a, b):
    for x, y in zip(a, b):
        if x != y:
            return
        yield x


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("convert", "greedy"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "convert":
        if len(sys.argv) != 5:
            raise SystemExit(__doc__)
        convert(sys.argv[2], sys.argv[3], sys.argv[4])
        return 0
    return greedy(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    sys.exit(main())
