#!/usr/bin/env python3
"""The series recorded during `bench serve` and `bench sweep`, through the real CLI.

usage: series_sweep_test.py CASE INFERLAB_CLI
  serve_series  bench serve against the scripted server's /sched path, whose /metrics values follow a
                known schedule (tests/bench/sse_server.py, scripted_metrics): every scraped value equals
                the schedule at the server's own clock, each scrape's time matches that clock, the rates,
                histogram figures and host rows of the series CSV, the summary and `report --json` agree;
                a server without /metrics is run without its part, --no-scrape writes none, bad flags
  sweep_demo    bench sweep over two --max-batch values at one concurrency against `inferlab serve` on
                INFERLAB_TEST_MODEL: two server starts, each point's files, figures equal to its
                summary.json, the Pareto flags recomputed; bad arguments refused by name
Exit 77 = skipped.
"""
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

from scripted_server import ScriptedServer

HERE = os.path.dirname(os.path.abspath(__file__))
CASE, CLI = sys.argv[1], sys.argv[2]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def run(args, timeout=120):
    return subprocess.run([CLI] + args, capture_output=True, text=True, timeout=timeout)


def read_series(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["time_ms"] = float(r["time_ms"])
        r["value"] = float(r["value"].replace("+Inf", "inf").replace("-Inf", "-inf"))
    return rows


def schedule(c):
    """The scripted server's values at c seconds after its first streamed request (sse_server.py)."""
    step = int(c / 0.4)
    return {"inferlab_running_requests": 1 + step % 3 if c > 0 else 0, "inferlab_queue_length": step % 2 if c > 0 else 0,
            "inferlab_kv_cache_usage_ratio": 0.25 * (step % 4), "inferlab_generation_tokens_total": 200 * c}


def test_serve_series():
    with ScriptedServer() as server, tempfile.TemporaryDirectory() as d:
        out, summary = os.path.join(d, "run.csv"), os.path.join(d, "s.json")
        r = run(["bench", "serve", "--base-url", server.url + "/sched", "--num-requests", "4", "--concurrency", "2",
                 "--input-len", "8", "--output-len", "10", "--scrape-interval", "100ms", "--output", out, "--summary", summary])
        check(r.returncode == 0, f"bench serve exit {r.returncode}: {r.stderr}")
        series_path = os.path.join(d, "run.series.csv")
        check(os.path.exists(series_path), "the series is written beside the CSV as run.series.csv")
        if failures:
            return
        rows = read_series(series_path)
        by_time = {}
        for row in rows:
            if row["source"] == "server":
                by_time.setdefault(row["time_ms"], {})[(row["name"], row["labels"])] = row
        scrapes = [row for row in rows if row["source"] == "scrape" and row["name"] == "up"]
        durations = {row["time_ms"]: row["value"] for row in rows if row["name"] == "scrape_duration_seconds"}
        check(len(scrapes) >= 12 and all(s["value"] == 1 for s in scrapes), f"~20 scrapes of 100 ms, all up: {len(scrapes)}")
        check(len(by_time) == len(scrapes), f"one set of server rows per scrape: {len(by_time)} vs {len(scrapes)}")
        with open(out) as f:
            first_start = min(float(x["start_ms"]) for x in csv.DictReader(f))
        started = 0
        for t, values in sorted(by_time.items()):
            c = values[("scripted_clock_seconds", "")]["value"]
            expected = schedule(c)
            for name, v in expected.items():
                got = values[(name, "")]
                check(abs(got["value"] - v) < 1e-9, f"t={t:.1f} ms, c={c}: {name} = {got['value']}, the schedule says {v}")
            check(values[("inferlab_running_requests", "")]["type"] == "gauge"
                  and values[("inferlab_generation_tokens_total", "")]["type"] == "counter"
                  and values[("inferlab_time_to_first_token_seconds_bucket", '{le="0.1"}')]["type"] == "histogram",
                  f"the families' types kept: {values}")
            note = values.get(("scripted_note", '{text="a \\"quoted\\", \\\\ value"}'))
            check(note is not None and math.isnan(note["value"]), f"the escaped label and NaN round trip: {list(values)}")
            if c > 0:
                started += 1
                # The scrape's time is the middle of its request; the server read its clock inside it.
                slack = durations[t] * 1000 / 2 + 30
                check(abs((t - first_start) - c * 1000) <= slack,
                      f"scrape at {t:.1f} ms (first request at {first_start:.1f}) but the server's clock said {c * 1000:.1f} ms (slack {slack:.1f})")
        check(started >= 10, f"at least 10 scrapes during the run: {started}")
        host = [row for row in rows if row["source"] == "host" and row["name"] == "cpu_utilization_ratio" and row["labels"] == ""]
        check(len(host) >= len(scrapes) - 1 and all(0 <= h["value"] <= 1 for h in host), f"host utilisation per sample: {len(host)}")
        info = [row for row in rows if row["name"] == "cpu_frequency_info"]
        mhz = [row for row in rows if row["name"] == "cpu_frequency_mhz"]
        readable = any(line.startswith("cpu MHz") for line in open("/proc/cpuinfo")) or os.path.exists(
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
        check(len(info) == 1 and (('not readable' not in info[0]["labels"]) == readable) and (len(mhz) > 0) == readable,
              f"frequency rows where readable ({readable}): {info}, {len(mhz)} rows")

        # The summary's figures recomputed from the CSV.
        with open(summary) as f:
            s = json.load(f)["server_series"]
        check(s["scrapes"] == len(scrapes) and s["failed_scrapes"] == 0 and abs(s["interval_s"] - 0.1) < 1e-12,
              f"scrapes in the summary: {s['scrapes']} {s['failed_scrapes']} {s['interval_s']}")
        gen = [(t, v[("inferlab_generation_tokens_total", "")]["value"]) for t, v in sorted(by_time.items())]
        increase = gen[-1][1] - gen[0][1]
        role = s["roles"]["generation_tokens"]
        check(abs(role["increase"] - increase) < 1e-6, f"generation increase {role['increase']} vs {increase}")
        check(abs(role["mean_rate_per_s"] - increase / ((gen[-1][0] - gen[0][0]) / 1000)) < 1e-6, "mean rate = increase / time")
        check(abs(role["mean_rate_per_s"] - 200) < 200 * 0.08, f"the server's 200 tokens/s seen: {role['mean_rate_per_s']}")
        running = [v[("inferlab_running_requests", "")]["value"] for _, v in sorted(by_time.items())]
        check(s["roles"]["running"]["max"] == max(running) and abs(s["roles"]["running"]["mean"] - sum(running) / len(running)) < 1e-9,
              f"running's max and mean: {s['roles']['running']}")
        hist = [h for h in s["histograms"] if h["name"] == "inferlab_time_to_first_token_seconds"]
        counts = [v[("inferlab_time_to_first_token_seconds_count", "")]["value"] for _, v in sorted(by_time.items())]
        check(len(hist) == 1 and hist[0]["count_increase"] == counts[-1] - counts[0], f"histogram observations: {hist}")
        if hist and hist[0]["count_increase"] > 0:
            h = hist[0]
            # All observations are 0.05 s in the (0.01, 0.1] bucket: histogram_quantile interpolates inside it.
            check(abs(h["mean"] - 0.05) < 1e-9 and abs(h["p50"] - 0.055) < 1e-9 and abs(h["p95"] - 0.0955) < 1e-9,
                  f"histogram mean / p50 / p95: {h}")
        check(any(g["name"] == "scripted_note" and g["mean"] is None for g in s["gauges"]), "an all-NaN gauge has no mean")
        # report reads the series beside the CSV and gives the same summary.
        r = run(["report", out, "--json"])
        rep = json.loads(r.stdout)["server_series"] if r.returncode == 0 else {}
        check({k: v for k, v in rep.items() if k != "file"} == {k: v for k, v in s.items() if k != "file"},
              f"report --json's server_series equals the run's: {r.stderr}")
        r = run(["report", out])
        check("Server and machine during the run" in r.stdout and "inferlab_generation_tokens_total" in r.stdout,
              f"the text report's series lines: {r.stdout}")

        # A server whose /metrics is 404: the run goes on, the machine's part recorded, the reason said.
        r = run(["bench", "serve", "--base-url", server.url + "/ok", "--num-requests", "2", "--concurrency", "2",
                 "--input-len", "8", "--output", os.path.join(d, "ok.csv"), "--scrape-interval", "0.2"])
        check(r.returncode == 0 and "Server metrics not scraped: GET " in r.stdout and "HTTP 404" in r.stdout,
              f"no /metrics: {r.returncode} {r.stdout} {r.stderr}")
        rows = read_series(os.path.join(d, "ok.series.csv")) if os.path.exists(os.path.join(d, "ok.series.csv")) else []
        check(rows and {row["source"] for row in rows} == {"host"}, f"only the host rows: {set(r['source'] for r in rows)}")
        r = run(["bench", "serve", "--base-url", server.url + "/ok", "--num-requests", "1", "--concurrency", "1",
                 "--output", os.path.join(d, "none.csv"), "--no-scrape"])
        check(r.returncode == 0 and not os.path.exists(os.path.join(d, "none.series.csv")), "--no-scrape writes no series")
        for args, needle in [(["--scrape-interval", "fast"], "--scrape-interval: 'fast' is not a duration"),
                             (["--scrape-interval", "1ms"], "--scrape-interval: 1ms is below 10ms"),
                             (["--metrics-url", server.url + "/ok/metrics"], "--metrics-url: GET " + server.url + "/ok/metrics: HTTP 404")]:
            r = run(["bench", "serve", "--base-url", server.url + "/ok", "--num-requests", "1", "--concurrency", "1",
                     "--output", os.path.join(d, "bad.csv")] + args)
            check(r.returncode != 0 and needle in r.stderr, f"{args}: exit {r.returncode}: {r.stderr}")
        with open(os.path.join(d, "broken.series.csv"), "w") as f:
            f.write("time_ms,source,type,name,labels,value\n1,server,gauge,x,,1\n2,server,gauge,x,,high\n")
        r = run(["report", out, "--series", os.path.join(d, "broken.series.csv")])
        check(r.returncode == 1 and "broken.series.csv line 3: value is not a number: 'high'" in r.stderr,
              f"a bad series row is named: {r.stderr}")


def test_sweep_demo():
    model = os.environ.get("INFERLAB_TEST_MODEL")
    if not model or not os.path.exists(os.path.join(model, "config.json")):
        print("skipped: INFERLAB_TEST_MODEL names no model")
        return 77
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "sweep")
        r = run(["bench", "sweep", model, "--serve-args", "--max-batch 1 --threads 1", "--serve-args", "--max-batch 4 --threads 1",
                 "--concurrency", "4", "--bench-args", "--num-requests 4 --input-len 8 --output-len 6 --ignore-eos --scrape-interval 200ms",
                 "--output-dir", out, "--json"], timeout=240)
        check(r.returncode == 0, f"bench sweep exit {r.returncode}: {r.stderr}")
        if r.returncode != 0:
            return
        sweep = json.loads(r.stdout)
        with open(os.path.join(out, "sweep.json")) as f:
            check(json.load(f) == sweep, "sweep.json holds what --json printed")
        points = sweep["points"]
        check([p["serve"] for p in points] == ["max-batch-1-threads-1", "max-batch-4-threads-1"], f"two points: {points}")
        for p in points:
            folder = os.path.join(out, p["dir"])
            for name in ("requests.csv", "requests.series.csv", "summary.json", "report.html", "server.log", "bench.log"):
                check(os.path.exists(os.path.join(folder, name)), f"{p['dir']}/{name}")
            with open(os.path.join(folder, "summary.json")) as f:
                summary = json.load(f)
            fig = p["figures"]
            check(p["error"] is None and fig["successful"] == 4, f"point {p['index']}: {p.get('error')} {fig}")
            check(fig["output_throughput_token_per_s"] == summary["output_throughput_token_per_s"]
                  and fig["ttft_ms"]["p50"] == summary["ttft_ms"]["p50"] and fig["users"] == 4
                  and abs(fig["tokens_per_user_per_s"] - summary["output_throughput_token_per_s"] / 4) < 1e-9,
                  f"point {p['index']}'s figures from its summary: {fig}")
            info = summary["environment"]["target"].get("server_info", {}).get("flags", {})
            check(info.get("max_batch") == (1 if p["index"] == 1 else 4), f"point {p['index']} ran its own server: {info}")
            check(summary["server_series"]["scrapes"] > 0 and "inferlab_running_requests" == summary["server_series"]["roles"]["running"]["metric"],
                  f"point {p['index']} scraped its server: {summary['server_series'].get('scrapes')}")
            check(p["server_exit_status"] == 0, f"point {p['index']}'s server stopped cleanly: {p['server_exit_status']}")
        xy = [(p["figures"]["tokens_per_user_per_s"], p["figures"]["output_throughput_token_per_s"]) for p in points]
        for i, p in enumerate(points):
            dominated = any(j != i and xy[j][0] >= xy[i][0] and xy[j][1] >= xy[i][1] and xy[j] != xy[i] for j in range(len(xy)))
            check(p["pareto"] == (not dominated), f"point {p['index']}'s Pareto flag: {p['pareto']} {xy}")
        check(os.path.exists(os.path.join(out, "pareto.svg")), "pareto.svg written")
        # Bad arguments, refused before any server starts.
        for args, needle in [(["--concurrency", "4", "--serve-args", "--port 9"], "--serve-args must not set --port"),
                             (["--concurrency", "4", "--bench-args", "--num-requests 2 --concurrency 3"], "--bench-args must not set --concurrency"),
                             (["--concurrency", "4,x"], "--concurrency: 'x' is not a positive whole number"),
                             (["--serve-args", "--max-batch '4"], "a single quote is never closed"),
                             ([], "give the load axis"),
                             (["--concurrency", "2", "--serve-args", "--max-batch 2", "--serve-args", "--max-batch 2"],
                              "two server variants are both named 'max-batch-2'")]:
            extra = [] if "--bench-args" in args else ["--bench-args", "--num-requests 2"]
            r = run(["bench", "sweep", model, "--output-dir", os.path.join(d, "bad")] + args + extra)
            check(r.returncode != 0 and needle in r.stderr, f"{args}: exit {r.returncode}: {r.stderr}")
        r = run(["bench", "sweep", model, "--serve-args", "--no-prefix-caching", "--concurrency", "1,2", "--bench-args",
                 "--num-requests 2", "--dry-run"])
        check(r.returncode == 0 and r.stderr.count(f" serve {model} --host 127.0.0.1 --port PORT --no-prefix-caching\n") == 2
              and r.stderr.count("--concurrency 2 --num-requests 2\n") == 1,
              f"--dry-run prints two points' commands, a lone flag taken as the variant: {r.stderr}")


if __name__ == "__main__":
    result = {"serve_series": test_serve_series, "sweep_demo": test_sweep_demo}[CASE]()
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    sys.exit(result or 0)
