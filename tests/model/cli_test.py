"""CLI checks for the engine commands: kv-size's exact figures, make-model presets, generate's
trace and cache verification, and clean errors (exit 1, message) on bad input."""
import argparse
import json
import os
import subprocess
import sys


def run(cli, *args):
    return subprocess.run([cli, *args], capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    r = run(a.cli, "kv-size", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--dtype", "bf16",
            "--tokens", "4096,32768")
    check(r.returncode == 0 and r.stdout == "131,072 bytes / token\n4,096 tokens: 512 MiB\n32,768 tokens: 4,096 MiB\n",
          f"kv-size flags: {r.stdout!r}")

    demo = os.path.join(a.workdir, "demo")
    r = run(a.cli, "make-model", "--preset", "demo", "--out", demo)
    check(r.returncode == 0 and os.path.exists(os.path.join(demo, "model.safetensors")), "make-model --preset demo")
    gen_cfg = json.load(open(os.path.join(demo, "generation_config.json")))
    check(gen_cfg["eos_token_id"] == [151645, 151643], f"demo eos ids {gen_cfg['eos_token_id']}")
    r = run(a.cli, "kv-size", demo, "--tokens", "4096")
    check(r.returncode == 0 and "256 bytes / token" in r.stdout and "4,096 tokens: 1 MiB" in r.stdout,
          f"kv-size MODEL: {r.stdout!r}")
    r = run(a.cli, "kv-size", os.path.join(demo, "config.json"), "--tokens", "4096")
    check(r.returncode == 0 and "256 bytes / token" in r.stdout, "kv-size config.json")

    r = run(a.cli, "generate", demo, "--prompt-ids", "9,8,7,6,5", "--max-new-tokens", "6", "--trace", "--ignore-eos")
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and "step 1: 5 positions" in lines and "step 2: 1 position" in lines
          and "input lengths per step (KV cache): [5, 1, 1, 1, 1, 1]" in lines, f"generate --trace: {r.stdout!r}")
    r = run(a.cli, "generate", demo, "--prompt-ids", "9,8,7,6,5", "--max-new-tokens", "6", "--trace", "--no-cache",
            "--ignore-eos")
    check("input lengths per step (no cache): [5, 6, 7, 8, 9, 10]" in r.stdout, f"generate --no-cache --trace: {r.stdout!r}")
    r = run(a.cli, "generate", demo, "--prompt-ids", "9,8,7,6,5", "--max-new-tokens", "12", "--verify-cache")
    check(r.returncode == 0 and "identical: yes" in r.stdout, f"--verify-cache: {r.stdout!r}")

    # bench engine: the bytes one decode step reads, and --bandwidth's share per repetition.
    cfg = json.load(open(os.path.join(demo, "config.json")))
    H, I, L, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    head_dim = H // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * head_dim, cfg["num_key_value_heads"] * head_dim
    params = L * (H * (q + 2 * kv) + q * H + 3 * H * I) + V * H
    r = run(a.cli, "bench", "engine", demo, "--weights", "f32", "-p", "0", "-n", "4", "-r", "3", "-t", "1",
            "--bandwidth", "--json")
    doc = json.loads(r.stdout) if r.returncode == 0 else {}
    check(doc.get("decode_weight_bytes") == 4 * params,
          f"bench engine f32: decode_weight_bytes {doc.get('decode_weight_bytes')} == 4 x {params} params")
    huge = doc.get("huge_pages_after_load_bytes", -1)
    check(huge is None or 0 <= huge <= doc.get("rss_after_load_bytes", 0),
          f"bench engine: huge_pages_after_load_bytes {huge} within the RSS after load")
    tg = doc.get("results", [{}])[0]
    shares, gbs, ts = tg.get("bandwidth_share", []), tg.get("bandwidth_gbs", []), tg.get("samples_ts", [])
    check(len(shares) == len(gbs) == len(ts) == 3 and all(g > 0 for g in gbs) and
          all(abs(s - t * 4 * params / 1e9 / g) <= 1e-9 * s for s, g, t in zip(shares, gbs, ts)) and
          tg.get("median_bandwidth_share") == sorted(shares)[1],
          f"bench engine --bandwidth: a share per repetition, tokens/s x bytes / probe: {tg}")
    # The probe sweeps as many bytes as a decode step reads (whole 256-byte lines of them), so that
    # the L3 holds the same part of both.
    check(4 * params - 256 < doc.get("bandwidth_probe_bytes", 0) <= 4 * params,
          f"bench engine --bandwidth: the probe's array {doc.get('bandwidth_probe_bytes')} is the {4 * params} bytes decode reads")
    r = run(a.cli, "bench", "engine", demo, "--weights", "q4", "-p", "0", "-n", "2", "-r", "1", "-t", "1")
    check(r.returncode == 0 and "bandwidth" not in r.stdout and "MB of weights per token" in r.stdout,
          f"bench engine without --bandwidth probes nothing: {r.stdout!r}")
    # -d: pp and tg after that many cached positions, named as llama-bench names them, with the K/V
    # bytes each tg token reads (kv-size's bytes per token x the positions it attends to, on average).
    kv_per_token = 2 * L * cfg["num_key_value_heads"] * head_dim * 4
    r = run(a.cli, "bench", "engine", demo, "-p", "8", "-n", "4", "-d", "600", "-r", "1", "-t", "1", "--json")
    doc = json.loads(r.stdout) if r.returncode == 0 else {}
    tests = {t["test"]: t for t in doc.get("results", [])}
    check(set(tests) == {"pp8 @ d600", "tg4 @ d600"} and tests["tg4 @ d600"]["n_depth"] == 600
          and tests["tg4 @ d600"]["kv_bytes_per_token"] == int(kv_per_token * (600 + 2.5))
          and doc["kv_cache_bytes"] >= kv_per_token * 608, f"bench engine -d 600: {tests} {r.stderr!r}")
    r = run(a.cli, "bench", "engine", demo, "-p", "0", "-n", "2", "-d", "300", "-r", "1", "-t", "1")
    check(r.returncode == 0 and "| tg2 @ d300 |" in r.stdout and "MB of K/V per token" in r.stdout,
          f"bench engine -d text: {r.stdout!r}")
    max_pos = cfg["max_position_embeddings"]
    r = run(a.cli, "bench", "engine", demo, "-p", "16", "-n", "0", "-d", str(max_pos))
    check(r.returncode == 1 and f"-d {max_pos} + -p 16 exceeds the model's context of {max_pos} positions" in r.stderr,
          f"bench engine -d beyond the context: {r.stderr!r}")
    # -d as a list (llama-bench's -d 0,8192,32768): the tests at each depth, shallow to deep.
    r = run(a.cli, "bench", "engine", demo, "-p", "8", "-n", "4", "-d", "300,0", "-r", "1", "-t", "1", "--json")
    doc_list = json.loads(r.stdout) if r.returncode == 0 else {}
    names = [t["test"] for t in doc_list.get("results", [])]
    check(names == ["pp8", "tg4", "pp8 @ d300", "tg4 @ d300"]
          and doc_list["results"][3]["kv_bytes_per_token"] == int(kv_per_token * (300 + 2.5)),
          f"bench engine -d 300,0: {names} {r.stderr!r}")
    # Depths past max_position_embeddings: refused, unless YaRN makes the context longer (the same
    # tiny model with rope_scaling yarn, factor 4 over its 64 positions).
    for name, scaling in (("ctx64", None), ("ctx64-yarn", {"rope_type": "yarn", "factor": 4.0,
                                                           "original_max_position_embeddings": 64})):
        cfg_dir = os.path.join(a.workdir, name + "-config")
        os.makedirs(cfg_dir, exist_ok=True)
        small = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 32,
                 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "intermediate_size": 64, "vocab_size": 96, "max_position_embeddings": 64, "rope_theta": 10000.0}
        if scaling:
            small["rope_scaling"] = scaling
        json.dump(small, open(os.path.join(cfg_dir, "config.json"), "w"))
        r = run(a.cli, "make-model", "--config", os.path.join(cfg_dir, "config.json"), "--out", os.path.join(a.workdir, name))
        check(r.returncode == 0, f"make-model --config {name}: {r.stderr!r}")
        r = run(a.cli, "bench", "engine", os.path.join(a.workdir, name), "-p", "0", "-n", "8", "-d", "0,200", "-r", "1",
                "-t", "1", "--json")
        if scaling:
            names = [t["test"] for t in json.loads(r.stdout)["results"]] if r.returncode == 0 else []
            check(names == ["tg8", "tg8 @ d200"], f"bench engine -d 0,200 on a YaRN model of 64 positions: {names} {r.stderr!r}")
        else:
            check(r.returncode == 1 and "-d 200 + -n 8 exceeds the model's context of 64 positions" in r.stderr
                  and "rope_scaling of type yarn" in r.stderr, f"bench engine -d 200 past 64 positions: {r.stderr!r}")
    # --kv-type f16: half the cache's bytes, and of the K/V each deep tg token reads.
    r = run(a.cli, "bench", "engine", demo, "-p", "0", "-n", "4", "-d", "600", "-r", "1", "-t", "1", "--kv-type", "f16", "--json")
    half = json.loads(r.stdout) if r.returncode == 0 else {}
    tg = half.get("results", [{}])[0]
    check(half.get("kv_type") == "f16" and doc.get("kv_type") == "f32"
          and half.get("kv_cache_bytes") == doc.get("kv_cache_bytes", 0) // 2
          and tg.get("kv_bytes_per_token") == int(kv_per_token // 2 * (600 + 2.5)),
          f"bench engine --kv-type f16: {half.get('kv_type')} {half.get('kv_cache_bytes')} {tg} {r.stderr!r}")
    r = run(a.cli, "generate", demo, "--prompt-ids", "9,8,7", "--max-new-tokens", "4", "--kv-type", "f16", "--verify-cache",
            "--ignore-eos")
    check(r.returncode == 0 and "identical: yes" in r.stdout, f"generate --kv-type f16 --verify-cache: {r.stdout!r} {r.stderr!r}")
    r = run(a.cli, "generate", demo, "--prompt-ids", "9,8,7", "--kv-type", "bf16")
    check(r.returncode != 0 and "--kv-type: bf16 not in {f32,f16}" in r.stderr, f"generate --kv-type bf16: {r.stderr!r}")
    r = run(a.cli, "bench", "engine", demo, "-d", "-5")
    check(r.returncode == 1 and "-d must be >= 0, got -5" in r.stderr, f"bench engine -d -5: {r.stderr!r}")
    r = run(a.cli, "bench", "engine", demo, "--weights", "q4", "-p", "0", "-n", "2", "-r", "1", "-t", "1", "--json")
    q4_bytes = json.loads(r.stdout)["decode_weight_bytes"] if r.returncode == 0 else 0
    # q4 layers (18 bytes per 32 weights, padded to 16-row panels) and the int8 lm_head (34 per 32).
    check(params * 18 / 32 < q4_bytes < (params - V * H) * 20 / 32 + V * H * 35 / 32,
          f"bench engine q4: decode_weight_bytes {q4_bytes}")

    # bench kernels: one shape, two formats, two row counts, over the rotation asked for.
    r = run(a.cli, "bench", "kernels", "-t", "1", "--quick", "--shapes", "kv", "--rows", "1,3", "--prefill-rows", "0",
            "--weights", "int8,q4", "--rotation-mib", "64", "--json")
    doc = json.loads(r.stdout) if r.returncode == 0 else {}
    cases = [(k["shape"], k["weights"], k["rows"]) for k in doc.get("kernels", [])]
    check(doc.get("rotation_mib") == 64 and cases == [("kv", "int8", 1), ("kv", "int8", 3), ("kv", "q4", 1), ("kv", "q4", 3)]
          and all(k["gbs"] > 0 and k["seconds"] > 0 for k in doc["kernels"]), f"bench kernels --json: {cases} {r.stderr!r}")
    check(doc.get("bandwidth", {}).get("array_bytes") == 64 << 20,
          f"bench kernels: the bandwidth probe reads the rotation's 64 MiB: {doc.get('bandwidth')}")
    # Each case's share of its format's dot peak (int8 and q4: the int8 one), where the CPU has a peak.
    int8_peak = doc.get("peaks", {}).get("int8_gops", 0)
    check(all(abs(k.get("of_dot_peak", -1) - (k["gflops"] / int8_peak if int8_peak > 0 else 0)) < 1e-9 for k in doc.get("kernels", [])),
          f"bench kernels --json: of_dot_peak is gflops over the int8 peak {int8_peak}: {doc.get('kernels')}")

    llama = os.path.join(a.workdir, "llama-bf16")
    r = run(a.cli, "make-model", "--preset", "llama-tiny", "--dtype", "bf16", "--seed", "3", "--out", llama)
    r = run(a.cli, "generate", llama, "--prompt-ids", "1", "--max-new-tokens", "4", "--json", "--ignore-eos")
    check(r.returncode == 0 and len(json.loads(r.stdout)["tokens"]) == 4, "make-model llama-tiny bf16 + generate --json")

    # Qwen3 (bf16, packed weights) and Mistral with a prompt longer than its 32-position window.
    for preset, prompt in (("qwen3-tiny", "1,2,3"), ("mistral-tiny", ",".join(str(i) for i in range(3, 43)))):
        folder = os.path.join(a.workdir, preset)
        r = run(a.cli, "make-model", "--preset", preset, "--dtype", "bf16", "--out", folder)
        check(r.returncode == 0, f"make-model --preset {preset}: {r.stderr!r}")
        r = run(a.cli, "generate", folder, "--prompt-ids", prompt, "--max-new-tokens", "8", "--verify-cache", "--ignore-eos")
        check(r.returncode == 0 and "identical: yes" in r.stdout, f"{preset} --verify-cache: {r.stdout!r} {r.stderr!r}")
    bad = os.path.join(a.workdir, "mistral-bad-window")
    os.makedirs(bad, exist_ok=True)
    cfg = json.load(open(os.path.join(a.workdir, "mistral-tiny", "config.json")))
    cfg["sliding_window"] = 0
    json.dump(cfg, open(os.path.join(bad, "config.json"), "w"))
    r = run(a.cli, "make-model", "--config", os.path.join(bad, "config.json"), "--out", os.path.join(bad, "out"))
    check(r.returncode == 1 and "\"sliding_window\" = 0 is out of range" in r.stderr, f"sliding_window 0: {r.stderr!r}")

    cfg_dir = os.path.join(a.workdir, "from-config")
    os.makedirs(cfg_dir, exist_ok=True)
    with open(os.path.join(cfg_dir, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "n_embd": 16, "n_layer": 1, "n_head": 2, "n_positions": 32,
                   "vocab_size": 50, "eos_token_id": 3}, f)
    out = os.path.join(a.workdir, "gpt2-small")
    r = run(a.cli, "make-model", "--config", os.path.join(cfg_dir, "config.json"), "--out", out)
    check(r.returncode == 0, "make-model --config gpt2")
    r = run(a.cli, "generate", out, "--prompt-ids", "1,2", "--max-new-tokens", "30", "--verify-cache")
    check(r.returncode == 0 and "identical: yes" in r.stdout, "generate on the made gpt2, up to its context")
    r = run(a.cli, "generate", out, "--prompt-ids", "1,2", "--max-new-tokens", "31")
    check(r.returncode == 1 and "exceeds the model's context of 32 positions" in r.stderr, f"beyond context: {r.stderr!r}")

    for args, needle in [
        (["generate", "/no/such/model", "--prompt-ids", "1"], "/no/such/model"),
        (["generate", demo, "--prompt-ids", "1,x"], "'x' is not a token id"),
        (["generate", demo, "--prompt-ids", "999999"], "outside the vocabulary"),
        (["kv-size", "--layers", "2"], "--kv-heads"),
        (["kv-size", "--layers", "2", "--kv-heads", "1", "--head-dim", "4", "--dtype", "q7"], "--dtype 'q7'"),
        (["make-model", "--preset", "nope", "--out", os.path.join(a.workdir, "x")], "unknown preset 'nope'"),
        (["bench", "kernels", "--rotation-mib", "0"], "--rotation-mib: 0 is not a positive size"),
        (["bench", "kernels", "--rows", "1,0"], "--rows: 0 is not a positive row count"),
    ]:
        r = run(a.cli, *args)
        check(r.returncode == 1 and r.stderr.startswith("error: ") and needle in r.stderr,
              f"{' '.join(args[:2])}...: exit {r.returncode}, {r.stderr.strip()!r}")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all CLI checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
