"""The lab's pure functions and the KV-size calculator equal the CLI's --json answers; `python -m
inferlab` runs the CLI itself."""
import json
import random
import subprocess
import sys

import pytest

import inferlab
from conftest import CLI, SMOLLM2, cli_json


def write_requests_csv(path, seed, ttft_scale):
    """A requests.csv of 40 requests (the course's seven columns), seeded."""
    rng = random.Random(seed)
    lines = ["request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms"]
    for i in range(40):
        start = i * 50 + rng.uniform(0, 20)
        ttft = rng.uniform(20, 80) * ttft_scale
        output = rng.randint(8, 64)
        status = "ok" if i % 13 else "timeout"
        lines.append(f"r{i},{status},{start:.3f},{start + ttft + output * rng.uniform(8, 12):.3f},"
                     f"{rng.randint(16, 128)},{output},{ttft:.3f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_report_equals_the_clis(tmp_path):
    csv = write_requests_csv(tmp_path / "requests.csv", 1, 1.0)
    summary = inferlab.report(csv)
    assert summary == cli_json("report", str(csv))
    assert inferlab.report(csv, slo="ttft_ms=50", percentiles="linear") == cli_json(
        "report", str(csv), "--slo", "ttft_ms=50", "--percentiles", "linear")


def test_compare_equals_the_clis(tmp_path):
    a = write_requests_csv(tmp_path / "a.csv", 1, 1.0)
    b = write_requests_csv(tmp_path / "b.csv", 2, 2.0)
    assert inferlab.compare(a, b, seed=3) == cli_json("report", "--compare", str(a), str(b), "--seed", "3")


def test_lab_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="csv_path"):
        inferlab.report(tmp_path / "missing.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms\n")
    with pytest.raises(inferlab.Error, match="No requests recorded."):
        inferlab.report(empty)
    summary = tmp_path / "summary.json"
    summary.write_text("{}")
    with pytest.raises(ValueError, match="is a CSV but"):
        inferlab.compare(empty, summary)


def test_kv_size_equals_the_clis():
    sized = inferlab.kv_size(layers=32, kv_heads=8, head_dim=128, dtype="bf16", tokens=[4096, 32768])
    assert sized["bytes_per_token"] == 131072
    cli = subprocess.run([CLI, "kv-size", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--dtype", "bf16",
                          "--tokens", "4096,32768"], capture_output=True, text=True, check=True).stdout
    assert f"{sized['bytes_per_token']:,} bytes / token" in cli
    assert f"4,096 tokens: {sized['bytes'][4096] // 2**20:,} MiB" in cli
    of_model = inferlab.kv_size(SMOLLM2, dtype="f16", tokens=[8192])
    cli = subprocess.run([CLI, "kv-size", SMOLLM2, "--dtype", "f16", "--tokens", "8192"], capture_output=True,
                         text=True, check=True).stdout
    assert f"{of_model['layers']} layers, {of_model['kv_heads']} kv heads, head_dim {of_model['head_dim']}" in cli
    assert f"{of_model['bytes_per_token']:,} bytes / token" in cli


def test_python_m_inferlab_runs_the_cli():
    version = subprocess.run([sys.executable, "-m", "inferlab", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip() == f"inferlab {inferlab.__version__}"
    bad = subprocess.run([sys.executable, "-m", "inferlab", "kv-size", "--dtype", "q9", "--layers", "1", "--kv-heads",
                          "1", "--head-dim", "1"], capture_output=True, text=True)
    assert bad.returncode == 1 and "--dtype 'q9' is not one of" in bad.stderr
