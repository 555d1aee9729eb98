#!/usr/bin/env python3
"""The tables of bench/cpu_engines.sh, from the records it wrote (results.jsonl, one JSON per line).

  table.py RESULTS.jsonl [--models-dir DIR] [--machine TEXT] [--load BEFORE AFTER] [--settings TEXT]

Per model: every engine x format x threads row with its prefill and decode tokens/s (the median of
the rounds; lowest-highest when there were several) or the error / reason it gave; then per format and
thread count inferlab beside the best peer and their ratio; each engine's version; and the first greedy
tokens each engine gave on the smoke prompt, beside the reference's (transformers bf16, else inferlab bf16).
"""
import argparse
import json
import os
import statistics
import sys

ENGINE_ORDER = ["inferlab", "llama.cpp", "vllm", "openvino", "ctranslate2", "transformers"]
FORMAT_ORDER = ["bf16", "int8", "q4"]
OURS = "inferlab"


def load_records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def cell(values):
    if not values:
        return "-"
    mid = statistics.median(values)
    text = f"{mid:.1f}" if mid >= 100 else f"{mid:.2f}"
    if len(values) > 1:
        lo, hi = min(values), max(values)
        text += f" ({lo:.1f}-{hi:.1f})" if mid >= 100 else f" ({lo:.2f}-{hi:.2f})"
    return text


def ratio(ours, theirs):
    return f"{statistics.median(ours) / statistics.median(theirs):.2f}x" if ours and theirs else "-"


def sort_key(engine, variant):
    return (ENGINE_ORDER.index(engine) if engine in ENGINE_ORDER else len(ENGINE_ORDER), variant)


def summarize(records):
    """model -> {"rows": {(threads, format, engine, variant): {...}}, "not_offered": {(format, engine): reason},
    "broken": {(format, engine, variant): error}, "smoke": [...], "versions": {engine: text}, "names": {engine: name}}"""
    models = {}
    for rec in records:
        m = models.setdefault(rec["model"], {"rows": {}, "not_offered": {}, "broken": {}, "smoke": [], "versions": {}, "names": {},
                                             "serve": {}})
        res = rec.get("result", {})
        engine = rec["engine_key"]
        if rec["stage"] == "serve":
            level = m["serve"].setdefault((rec["threads"], rec["format"], engine, rec["variant"]), {})
            level.setdefault(rec.get("concurrency"), []).append(res)
            continue
        if res.get("engine"):
            m["names"][engine] = res["engine"]
        if res.get("version") and (rec["stage"] == "run" or engine not in m["versions"]):
            m["versions"][engine] = res["version"]
        if rec["stage"] == "not-offered":
            m["not_offered"][(rec["format"], engine)] = res.get("not_offered", "")
            continue
        if rec["stage"] == "prepare":
            if "error" in res:
                m["broken"][(rec["format"], engine, rec["variant"])] = "conversion / setup: " + res["error"]
            continue
        row = m["rows"].setdefault((rec["threads"], rec["format"], engine, rec["variant"]),
                                   {"pp": [], "tg": [], "errors": [], "detail": ""})
        if "error" in res:
            row["errors"].append(f"round {rec['round']}: {res['error']}")
            continue
        row["pp"].append(res["pp_ts"])
        row["tg"].append(res["tg_ts"])
        row["detail"] = res.get("format_detail", "")
        if "smoke_tokens" in res:
            m["smoke"].append({"format": rec["format"], "engine": engine, "variant": rec["variant"], "tokens": res["smoke_tokens"]})
    return models


def decode_text(models_dir, model, tokens):
    path = os.path.join(models_dir or "", model, "hf", "tokenizer.json")
    try:
        from tokenizers import Tokenizer
        return Tokenizer.from_file(path).decode(tokens)
    except Exception:  # noqa: BLE001 - the ids are printed either way
        return None


def print_model(name, m, models_dir, threads_seen, prompt_label):
    print(f"\n## {name}\n")
    pp_label, tg_label = prompt_label
    print(f"| threads | format | engine | variant | {pp_label} t/s | {tg_label} t/s | inferlab / this ({pp_label}, {tg_label}) | note |")
    print("|---|---|---|---|---|---|---|---|")
    engines_seen = sorted({k[2] for k in m["rows"]} | {k[1] for k in m["broken"]} | {k[1] for k in m["not_offered"]},
                          key=lambda e: sort_key(e, ""))
    best = {}
    for t in threads_seen:
        for f in FORMAT_ORDER:
            ours = [r for k, r in m["rows"].items() if k[:3] == (t, f, OURS) and r["pp"]]
            ours = ours[0] if ours else None
            lines = []
            for e in engines_seen:
                label = m["names"].get(e, e)
                if (f, e) in m["not_offered"]:
                    lines.append(f"| {t} | {f} | {label} | - | - | - | - | not offered: {m['not_offered'][(f, e)]} |")
                    continue
                variants = sorted({k[3] for k in m["rows"] if k[:3] == (t, f, e)} | {k[2] for k in m["broken"] if k[:2] == (f, e)})
                for v in variants:
                    if (f, e, v) in m["broken"]:
                        lines.append(f"| {t} | {f} | {label} | {v} | - | - | - | {m['broken'][(f, e, v)]} |")
                        continue
                    r = m["rows"][(t, f, e, v)]
                    note = "; ".join(r["errors"])
                    rel = "-" if e == OURS or not ours or not r["pp"] else f"{ratio(ours['pp'], r['pp'])}, {ratio(ours['tg'], r['tg'])}"
                    detail = f" ({r['detail']})" if r["detail"] else ""
                    lines.append(f"| {t} | {f} | {label} | {v}{detail} | {cell(r['pp'])} | {cell(r['tg'])} | {rel} | {note} |")
                    if e != OURS and r["pp"]:
                        for test in ("pp", "tg"):
                            key = (t, f, test)
                            if key not in best or statistics.median(r[test]) > statistics.median(best[key][1]):
                                best[key] = (f"{label} {v}", r[test])
            if lines:
                print("\n".join(lines))
    print(f"\nOurs / the best peer, per format and thread count (the median of the rounds):\n")
    print(f"| threads | format | inferlab {pp_label} | best peer {pp_label} | ours / best | inferlab {tg_label} | best peer {tg_label} | ours / best |")
    print("|---|---|---|---|---|---|---|---|")
    for t in threads_seen:
        for f in FORMAT_ORDER:
            ours = [r for k, r in m["rows"].items() if k[:3] == (t, f, OURS) and r["pp"]]
            if not ours and (t, f, "pp") not in best:
                continue
            o = ours[0] if ours else {"pp": [], "tg": []}
            parts = [str(t), f]
            for test in ("pp", "tg"):
                peer = best.get((t, f, test))
                parts += [cell(o[test]), f"{cell(peer[1])} ({peer[0]})" if peer else "no peer ran",
                          ratio(o[test], peer[1]) if peer else "-"]
            print("| " + " | ".join(parts) + " |")
    print("\nVersions: " + "; ".join(f"{m['names'].get(e, e)}: {v}" for e, v in sorted(m["versions"].items(), key=lambda x: sort_key(x[0], ""))))
    if m["serve"]:
        print_serve(m)
    if m["smoke"]:
        ref = next((s for s in m["smoke"] if s["engine"] == "transformers"), None) or \
              next((s for s in m["smoke"] if s["engine"] == OURS and s["format"] == "bf16"), None) or m["smoke"][0]
        print(f"\nFirst greedy tokens on the smoke prompt (reference: {m['names'].get(ref['engine'], ref['engine'])} {ref['variant']}):\n")
        print("| format | engine | variant | token ids | text | same as the reference |")
        print("|---|---|---|---|---|---|")
        for s in sorted(m["smoke"], key=lambda s: (FORMAT_ORDER.index(s["format"]), sort_key(s["engine"], s["variant"]))):
            same = 0
            for a, b in zip(s["tokens"], ref["tokens"]):
                if a != b:
                    break
                same += 1
            text = decode_text(models_dir, name, s["tokens"])
            text = "-" if text is None else json.dumps(text, ensure_ascii=False)
            print(f"| {s['format']} | {m['names'].get(s['engine'], s['engine'])} | {s['variant']} | {' '.join(map(str, s['tokens']))} | "
                  f"{text} | first {same} of {len(ref['tokens'])} |")


def print_serve(m):
    levels = sorted({c for per in m["serve"].values() for c in per if isinstance(c, int)})
    searched = any("capacity" in per for per in m["serve"].values())
    slo = next((r["slo"] for per in m["serve"].values() for r in per.get("capacity", []) if r.get("slo")), "")
    print("\nServing (bench serve, output tokens/s; median TTFT / TPOT ms"
          + (f"; capacity: the highest concurrency meeting {slo}, and its output tokens/s" if searched else "") + "):\n")
    print("| threads | format | engine | variant | " + " | ".join(f"c={c}" for c in levels) + (" | capacity" if searched else "")
          + " | inferlab / this | note |")
    print("|---|---|---|---|" + "---|" * len(levels) + ("---|" if searched else "") + "---|---|")
    tput = {}
    for key in sorted(m["serve"], key=lambda k: (k[0], FORMAT_ORDER.index(k[1]), sort_key(k[2], k[3]))):
        per = m["serve"][key]
        notes = [r.get("not_offered") or r.get("error") for r in per.get(None, [])]
        cells = []
        for c in levels:
            ok = [r for r in per.get(c, []) if "error" not in r]
            notes += [f"c={c}: {r['error']}" for r in per.get(c, []) if "error" in r]
            if ok:
                tput[key + (c,)] = [r["output_tok_s"] for r in ok]
                r = ok[0]
                cells.append(f"{cell(tput[key + (c,)])} ({r['ttft_ms_median']:.0f} / {r['tpot_ms_median']:.1f})"
                             if r.get("ttft_ms_median") is not None and r.get("tpot_ms_median") is not None else cell(tput[key + (c,)]))
            else:
                cells.append("-")
        if searched:
            found = [r for r in per.get("capacity", []) if "error" not in r]
            notes += [f"capacity: {r['error']}" for r in per.get("capacity", []) if "error" in r]
            if found and found[0].get("capacity") is not None:
                r = found[0]
                at_least = ">=" if r.get("outcome") == "above range" else ""  # every level searched met it
                cells.append(f"c{at_least}={r['capacity']:g}" + (f" ({r['output_tok_s']:.1f} tok/s)" if r.get("output_tok_s") is not None else ""))
            elif found:
                cells.append("none (not even c=1 met it)" if found[0].get("outcome") == "below range" else f"none ({found[0].get('outcome')})")
            else:
                cells.append("-")
        t, f, e, v = key
        ours = [k for k in tput if k[:3] == (t, f, OURS)]
        rel = "-"
        if e != OURS and ours:
            rel = ", ".join(ratio(tput[(t, f, OURS, ours[0][3], c)], tput[key + (c,)]) for c in levels
                            if (t, f, OURS, ours[0][3], c) in tput and key + (c,) in tput) or "-"
        print(f"| {t} | {f} | {m['names'].get(e, e)} | {v or '-'} | " + " | ".join(cells) + f" | {rel} | {'; '.join(n for n in notes if n)} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results")
    p.add_argument("--models-dir")
    p.add_argument("--machine", default="")
    p.add_argument("--load", nargs=2, metavar=("BEFORE", "AFTER"))
    p.add_argument("--settings", default="")
    p.add_argument("--threads", help="the thread counts asked for (default: those in the records)")
    a = p.parse_args()
    records = load_records(a.results)
    if not records:
        sys.exit(f"table.py: {a.results} holds no records")
    runs = [r["result"] for r in records if r["stage"] == "run" and "pp_ts" in r.get("result", {})]
    prompt = next((f"pp{r['p']}" for r in runs), "pp")
    gen = next((f"tg{r['n']}" for r in runs), "tg")
    threads_seen = [int(t) for t in a.threads.split(",")] if a.threads else sorted({r["threads"] for r in records if r.get("threads")})
    print("\n# CPU engines side by side, measured in this run")
    if a.machine:
        print(f"\n{a.machine}. {a.settings}.")
    for name, m in summarize(records).items():
        print_model(name, m, a.models_dir, threads_seen or [1], (prompt, gen))
    if a.load:
        print(f"\nLoad average (1/5/15 min) before: {a.load[0]}, after: {a.load[1]} (figures taken under load are noisy).")


if __name__ == "__main__":
    main()
