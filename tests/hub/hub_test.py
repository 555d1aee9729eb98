"""`inferlab pull` and the pull-if-missing of serve / generate / bench engine, end to end against the
loopback hub of fixture_hub.py (the real hub cannot be reached from the test machines), with the real
huggingface_hub library reading the cache we write and writing the cache we read.

usage: hub_test.py --python VENV_PYTHON --cli INFERLAB --model-dir DEMO_MODEL --workdir DIR CASE

Runs under the project's virtual environment (huggingface_hub); exits 77 (skipped) when it is absent.
"""
import argparse
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
REPO = "inferlab-test/demo"
GATED = "inferlab-test/gated"
NESTED = "extra/notes.md"  # a file in a folder: its snapshot link needs one more ../


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("case")
    return ap.parse_args()


ARGS = parse_args()
if not os.path.exists(ARGS.python):
    print(f"SKIP: {ARGS.python} is absent (scripts/setup creates the project's .venv with huggingface_hub)")
    sys.exit(77)
# CTest starts this with the system python; go on under the venv's (a symlink to the same binary, so
# compare by the marker, not by path: the venv is told by the path it is started through).
if not os.environ.get("HUB_TEST_REEXEC"):
    os.environ["HUB_TEST_REEXEC"] = "1"
    os.execv(ARGS.python, [ARGS.python, __file__, *sys.argv[1:]])

sys.path.insert(0, str(HERE))
import fixture_hub  # noqa: E402

FAILURES = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        FAILURES.append(what)
    return condition


def demo_repo(repo_id=REPO, gated=False):
    return fixture_hub.repo_from_folder(repo_id, pathlib.Path(ARGS.model_dir), gated=gated,
                                        extra={NESTED: b"a file in a folder of the repo\n"})


def fresh_dir(name):
    path = pathlib.Path(ARGS.workdir) / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def hub_env(cache, hub=None, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "MODELSCOPE_"))}
    env["HF_HUB_CACHE"] = str(cache)
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    env["HF_HUB_DISABLE_XET"] = "1"
    env["HF_HOME"] = str(pathlib.Path(cache).parent / "hf_home")  # no saved login token of this machine
    if hub is not None:
        env["HF_ENDPOINT"] = hub.url
        env["MODELSCOPE_ENDPOINT"] = hub.url
    env.update(extra)
    return env


def inferlab(*args, env, cwd=None, timeout=180):
    r = subprocess.run([ARGS.cli, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    print(f"$ inferlab {' '.join(args)}  -> exit {r.returncode}\n{r.stderr.strip()}", flush=True)
    return r


def repo_dir(cache, repo_id=REPO):
    org, name = repo_id.split("/")
    return pathlib.Path(cache) / f"models--{org}--{name}"


def check_layout(cache, repo, snapshot_name, ref_name, blob_of):
    """The exact huggingface_hub layout: blobs named by `blob_of(path)`, relative links, the ref."""
    base = repo_dir(cache, repo.repo_id)
    snapshot = base / "snapshots" / snapshot_name
    for path, data in repo.files.items():
        link = snapshot / path
        expected_target = "../" * (path.count("/") + 2) + "blobs/" + blob_of(path)
        check(link.is_symlink() and os.readlink(link) == expected_target,
              f"{path}: relative link to {expected_target} (is {os.readlink(link) if link.is_symlink() else 'missing'})")
        check(link.is_file() and link.read_bytes() == data, f"{path}: the linked blob has the repo's bytes")
    blobs = sorted(p.name for p in (base / "blobs").iterdir())
    check(blobs == sorted({blob_of(p) for p in repo.files}), f"blobs/ holds exactly the blobs, nothing partial: {blobs}")
    if ref_name:
        ref = base / "refs" / ref_name
        check(ref.is_file() and ref.read_text() == snapshot_name, f"refs/{ref_name} holds {snapshot_name}")


def hf_blob(repo):
    return lambda path: repo.etag(path)


# --- the cases --------------------------------------------------------------------------------------

def case_pull_layout():
    repo = demo_repo()
    cache = fresh_dir("pull_layout") / "cache"
    with fixture_hub.FixtureHub([repo]) as hub:
        r = inferlab("pull", REPO, env=hub_env(cache, hub))
        check(r.returncode == 0, "pull succeeds")
        snapshot = repo_dir(cache) / "snapshots" / repo.commit
        check(r.stdout.strip() == str(snapshot), f"stdout is the snapshot folder: {r.stdout.strip()}")
        check_layout(cache, repo, repo.commit, "main", hf_blob(repo))
        check(repo.etag("model.safetensors") == hashlib.sha256(repo.files["model.safetensors"]).hexdigest()
              and len(repo.etag("config.json")) == 40, "LFS blobs are named by sha256, small files by git sha1")
        lfs_heads = [q for q in hub.requests if q[0] == "HEAD" and q[1].endswith("/model.safetensors")]
        cdn_gets = [q for q in hub.requests if q[0] == "GET" and q[1].startswith("/cdn/")]
        check(len(lfs_heads) == 1 and len(cdn_gets) == 2,
              f"HEAD on the hub, GET of LFS files from the CDN the redirect names: {lfs_heads} {cdn_gets}")

        hub.requests.clear()
        r = inferlab("pull", REPO, env=hub_env(cache, hub))
        file_requests = [q for q in hub.requests if "/resolve/" in q[1] or q[1].startswith("/cdn/")]
        check(r.returncode == 0 and "0 files downloaded" in r.stderr and not file_requests,
              f"a second pull lists the repo and transfers nothing: {file_requests}")

        r = inferlab("pull", REPO, "--revision", "v1.0", env=hub_env(cache, hub))
        check(r.returncode == 0 and (repo_dir(cache) / "refs" / "v1.0").read_text() == repo.commit,
              "--revision v1.0 (a tag) writes refs/v1.0 with the commit")
        r = inferlab("pull", REPO, "--revision", repo.commit, env=hub_env(cache, hub))
        check(r.returncode == 0 and not (repo_dir(cache) / "refs" / repo.commit).exists(),
              "--revision COMMIT writes no ref")
        check(not list(cache.rglob("*.incomplete")), "no .incomplete file is left")


def case_pull_include():
    repo = demo_repo()
    cache = fresh_dir("pull_include") / "cache"
    with fixture_hub.FixtureHub([repo]) as hub:
        r = inferlab("pull", REPO, "--include", "*.json", env=hub_env(cache, hub))
        snapshot = repo_dir(cache) / "snapshots" / repo.commit
        got = sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file())
        want = sorted(p for p in repo.files if p.endswith(".json"))
        check(r.returncode == 0 and got == want, f"--include '*.json' pulls the JSON files only: {got}")
        r = inferlab("pull", REPO, "--include", "extra/", "model.*", env=hub_env(cache, hub))
        check(r.returncode == 0 and (snapshot / NESTED).is_file() and (snapshot / "model.safetensors").is_file(),
              "--include with a folder ('extra/') and a second glob adds those files")
        r = inferlab("pull", REPO, "--include", "*.gguf", env=hub_env(cache, hub))
        check(r.returncode != 0 and "no file of inferlab-test/demo at revision main matches --include *.gguf" in r.stderr,
              "an --include that matches nothing is an error")


def run_python(code, env):
    r = subprocess.run([ARGS.python, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
    return r


def case_hf_reads_ours():
    """huggingface_hub, offline, finds and lists the snapshot `inferlab pull` wrote."""
    repo = demo_repo()
    cache = fresh_dir("hf_reads_ours") / "cache"
    with fixture_hub.FixtureHub([repo]) as hub:
        r = inferlab("pull", REPO, env=hub_env(cache, hub))
        check(r.returncode == 0, "pull succeeds")
    snapshot = repo_dir(cache) / "snapshots" / repo.commit
    code = f"""
import json
from huggingface_hub import hf_hub_download, snapshot_download, scan_cache_dir
out = {{}}
out["config"] = hf_hub_download({REPO!r}, "config.json", local_files_only=True)
out["nested"] = hf_hub_download({REPO!r}, {NESTED!r}, local_files_only=True)
out["snapshot"] = snapshot_download({REPO!r}, local_files_only=True)
info = scan_cache_dir()
out["warnings"] = [str(w) for w in info.warnings]
out["repos"] = [dict(id=r.repo_id, files=r.nb_files, size=r.size_on_disk, refs=sorted(r.refs),
                     revisions=[v.commit_hash for v in r.revisions]) for r in info.repos]
print(json.dumps(out))
"""
    r = run_python(code, hub_env(cache, HF_HUB_OFFLINE="1"))
    if not check(r.returncode == 0, "huggingface_hub reads the cache offline"):
        return
    out = json.loads(r.stdout.strip().splitlines()[-1])
    check(out["config"] == str(snapshot / "config.json"), f"hf_hub_download(local_files_only) finds config.json: {out['config']}")
    check(out["nested"] == str(snapshot / NESTED), "hf_hub_download finds the nested file")
    check(out["snapshot"] == str(snapshot), f"snapshot_download(local_files_only) returns our snapshot: {out['snapshot']}")
    check(out["warnings"] == [], f"scan_cache_dir has no warnings: {out['warnings']}")
    size = sum(len(d) for d in {repo.etag(p): d for p, d in repo.files.items()}.values())
    want = [dict(id=REPO, files=len(repo.files), size=size, refs=["main"], revisions=[repo.commit])]
    check(out["repos"] == want, f"scan_cache_dir lists the repo: {out['repos']} (want {want})")


class Server:
    """`inferlab serve` on 127.0.0.1, any free port; stopped with SIGINT."""

    def __init__(self, args, env):
        self.proc = subprocess.Popen([ARGS.cli, "serve", *args, "--host", "127.0.0.1", "--port", "0"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()
        self.port = None

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line)

    def log(self):
        return "".join(self.lines)

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline and self.proc.poll() is None:
            m = re.search(r"listening on http://[^:\s]+:(\d+)", self.log())
            if m and "inferlab serve: ready" in self.log():
                self.port = int(m.group(1))
                return True
            time.sleep(0.1)
        time.sleep(0.2)
        return False

    def get(self, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        print(self.log())


def check_serves(server, what):
    if not check(server.wait_ready(), f"{what}: the server gets ready"):
        return
    models = server.get("/v1/models")
    check([m["id"] for m in models["data"]] == [REPO], f"{what}: /v1/models names the repo id: {models}")
    answer = server.get("/v1/completions", {"model": REPO, "prompt": "Once upon a time", "max_tokens": 4})
    check(answer["choices"] and answer["usage"]["completion_tokens"] >= 1, f"{what}: one short completion")


def case_serve_hf_snapshot():
    """A snapshot written by huggingface_hub's own snapshot_download is served with --offline."""
    repo = demo_repo()
    cache = fresh_dir("serve_hf_snapshot") / "cache"
    with fixture_hub.FixtureHub([repo]) as hub:
        r = run_python(f"from huggingface_hub import snapshot_download; print(snapshot_download({REPO!r}))",
                       hub_env(cache, hub))
        check(r.returncode == 0, "huggingface_hub's snapshot_download against the loopback hub")
        hub.requests.clear()
        server = Server([REPO, "--offline"], hub_env(cache, hub))
        try:
            check_serves(server, "serve REPO --offline")
        finally:
            server.stop()
        check(hub.requests == [], f"--offline sent no request: {hub.requests}")


def case_serve_pulls_missing():
    repo = demo_repo()
    cache = fresh_dir("serve_pulls_missing") / "cache"
    with fixture_hub.FixtureHub([repo]) as hub:
        server = Server([REPO], hub_env(cache, hub))
        try:
            check_serves(server, "serve REPO with an empty cache")
        finally:
            server.stop()
        check("not in the Hugging Face cache: pulling it" in server.log(), "serve says it pulls")
        check_layout(cache, repo, repo.commit, "main", hf_blob(repo))
        hub.requests.clear()
        r = inferlab("generate", REPO, "--prompt", "Hello", "--max-new-tokens", "3", "--offline", env=hub_env(cache, hub))
        check(r.returncode == 0, "generate REPO --offline runs from the pulled snapshot")
        check(hub.requests == [], "a cached repo is not asked for again")
    # generate and bench engine pull too (each on an empty cache of its own).
    for name, args in (("generate", ["generate", REPO, "--prompt", "Hello", "--max-new-tokens", "2"]),
                       ("bench engine", ["bench", "engine", REPO, "-p", "8", "-n", "2", "-r", "1", "-t", "1"])):
        cache = fresh_dir("serve_pulls_missing_" + name.replace(" ", "_")) / "cache"
        with fixture_hub.FixtureHub([repo]) as hub:
            r = inferlab(*args, env=hub_env(cache, hub))
            check(r.returncode == 0 and (repo_dir(cache) / "snapshots" / repo.commit / "model.safetensors").is_file(),
                  f"{name} pulls a missing repo, then runs")


def case_offline_refused():
    repo = demo_repo()
    work = fresh_dir("offline_refused")
    cache = work / "cache"
    with fixture_hub.FixtureHub([repo]) as hub:
        commands = {
            "serve --offline": (["serve", REPO, "--offline"], {}),
            "generate --offline": (["generate", REPO, "--prompt", "hi", "--offline"], {}),
            "bench engine --offline": (["bench", "engine", REPO, "--offline"], {}),
            "serve, HF_HUB_OFFLINE=1": (["serve", REPO], {"HF_HUB_OFFLINE": "1"}),
            "generate, HF_HUB_OFFLINE=true": (["generate", REPO, "--prompt", "hi"], {"HF_HUB_OFFLINE": "true"}),
        }
        for what, (args, extra) in commands.items():
            r = inferlab(*args, env=hub_env(cache, hub, **extra), timeout=60)
            check(r.returncode != 0 and f"model {REPO} is not cached and pulling is forbidden" in r.stderr
                  and f"inferlab pull {REPO}" in r.stderr, f"{what}: refused, saying why")
        for what, (args, extra) in {"pull --offline": (["pull", REPO, "--offline"], {}),
                                    "pull, HF_HUB_OFFLINE=1": (["pull", REPO], {"HF_HUB_OFFLINE": "1"})}.items():
            r = inferlab(*args, env=hub_env(cache, hub, **extra))
            check(r.returncode != 0 and "network access is forbidden" in r.stderr, f"{what}: refused")
        check(hub.requests == [], f"offline: not one request reached the hub: {hub.requests}")
        check(not cache.exists() or not any(cache.iterdir()), "offline: nothing written to the cache")

        # A folder named like the repo id is the local folder, pulled or not.
        local = work / REPO
        shutil.copytree(ARGS.model_dir, local)
        r = inferlab("generate", REPO, "--prompt", "Hello", "--max-new-tokens", "2", "--offline",
                     env=hub_env(cache, hub), cwd=work)
        check(r.returncode == 0 and hub.requests == [], "a local folder named ORG/NAME wins over the repo id")


def case_repo_not_found():
    cache = fresh_dir("repo_not_found") / "cache"
    with fixture_hub.FixtureHub([demo_repo()]) as hub:
        r = inferlab("pull", "nobody/missing", env=hub_env(cache, hub))
        check(r.returncode != 0 and f"repository nobody/missing not found on {hub.url}" in r.stderr,
              "an unknown repo: 'repository X not found on ENDPOINT'")
        check(not repo_dir(cache, "nobody/missing").exists(), "nothing written for it")
        r = inferlab("pull", "not-a-repo-id", env=hub_env(cache, hub))
        check(r.returncode != 0 and "is not a repository id" in r.stderr, "a malformed repo id")


def case_gated():
    repo = demo_repo(GATED, gated=True)
    work = fresh_dir("gated")
    with fixture_hub.FixtureHub([repo]) as hub:
        r = inferlab("pull", GATED, env=hub_env(work / "c1", hub))
        check(r.returncode != 0 and "needs authentication" in r.stderr and "GatedRepo" in r.stderr
              and "set HF_TOKEN" in r.stderr, "a gated repo without a token: says to set HF_TOKEN")
        check(not repo_dir(work / "c1", GATED).exists(), "nothing written for it")
        r = inferlab("pull", GATED, env=hub_env(work / "c1", hub, HF_TOKEN="hf_wrong"))
        check(r.returncode != 0 and "refused the token" in r.stderr, "a wrong token: says the token was refused")
        r = inferlab("pull", GATED, env=hub_env(work / "c2", hub, HF_TOKEN=fixture_hub.TOKEN))
        check(r.returncode == 0, "HF_TOKEN opens it")
        check_layout(work / "c2", repo, repo.commit, "main", hf_blob(repo))
        cdn = [q for q in hub.requests if q[1].startswith("/cdn/")]
        check(cdn, "LFS files came from the CDN origin (which is never sent the token)")
        r = inferlab("pull", GATED, "--token", fixture_hub.TOKEN, env=hub_env(work / "c3", hub))
        check(r.returncode == 0, "--token opens it")
        (work / "hf_home").mkdir(exist_ok=True)
        (work / "hf_home" / "token").write_text(fixture_hub.TOKEN + "\n")
        r = inferlab("pull", GATED, env=hub_env(work / "c4", hub))
        check(r.returncode == 0, "the token file huggingface-cli login writes (HF_HOME/token) opens it")


def case_revision_not_found():
    cache = fresh_dir("revision_not_found") / "cache"
    with fixture_hub.FixtureHub([demo_repo()]) as hub:
        r = inferlab("pull", REPO, "--revision", "no-such-branch", env=hub_env(cache, hub))
        check(r.returncode != 0 and f"revision no-such-branch not found in repository {REPO}" in r.stderr,
              "an unknown revision: 'revision R not found'")
        check(not repo_dir(cache).exists(), "nothing written for it")


def case_resume():
    repo = demo_repo()
    cache = fresh_dir("resume") / "cache"
    sha = repo.etag("model.safetensors")
    cut = 5_000_000
    with fixture_hub.FixtureHub([repo]) as hub:
        hub.cut_once["model.safetensors"] = cut
        r = inferlab("pull", REPO, env=hub_env(cache, hub))
        partial = repo_dir(cache) / "blobs" / f"{sha}.incomplete"
        check(r.returncode != 0 and "transfer of model.safetensors was cut" in r.stderr
              and "run the same command again to resume" in r.stderr, "a cut transfer fails, saying to run again")
        check(partial.is_file() and partial.stat().st_size == cut, f"the {cut} bytes received are kept in {partial.name}")
        check(not (repo_dir(cache) / "blobs" / sha).exists(), "no whole-looking blob of the cut file")
        snapshot = repo_dir(cache) / "snapshots" / repo.commit
        check(not snapshot.exists() or not any(snapshot.iterdir()), "no snapshot file appears while one is missing")
        check(not (repo_dir(cache) / "refs" / "main").exists(), "no ref to a half snapshot")

        hub.requests.clear()
        r = inferlab("pull", REPO, env=hub_env(cache, hub))
        ranges = [q[2] for q in hub.requests if q[1].startswith(f"/cdn/{sha}")]
        check(r.returncode == 0 and ranges == [f"bytes={cut}-"], f"the next run resumes with a Range request: {ranges}")
        check("already partly there: resuming" in r.stderr, "and says it resumes")
        check_layout(cache, repo, repo.commit, "main", hf_blob(repo))

        # ModelScope's file API resumes the same way.
        ms_cache = fresh_dir("resume_modelscope") / "cache"
        hub.cut_once["model.safetensors"] = cut
        r = inferlab("pull", REPO, "--source", "modelscope", env=hub_env(ms_cache, hub))
        check(r.returncode != 0 and "was cut" in r.stderr, "ModelScope: a cut transfer fails")
        hub.requests.clear()
        r = inferlab("pull", REPO, "--source", "modelscope", env=hub_env(ms_cache, hub))
        ranges = [q[2] for q in hub.requests if "FilePath=model.safetensors" in q[1]]
        check(r.returncode == 0 and ranges == [f"bytes={cut}-"], f"ModelScope: resumed with Range: {ranges}")


def case_sha_mismatch():
    repo = demo_repo()
    cache = fresh_dir("sha_mismatch") / "cache"
    sha = repo.etag("model.safetensors")
    with fixture_hub.FixtureHub([repo]) as hub:
        hub.corrupt.add("model.safetensors")
        r = inferlab("pull", REPO, env=hub_env(cache, hub))
        check(r.returncode != 0 and f"sha256 mismatch for model.safetensors: expected {sha}" in r.stderr
              and "deleted" in r.stderr, "wrong bytes for an LFS file: a sha256 mismatch error")
        blobs = repo_dir(cache) / "blobs"
        check(not (blobs / sha).exists() and not (blobs / f"{sha}.incomplete").exists(), "the corrupt file is deleted")
        snapshot = repo_dir(cache) / "snapshots" / repo.commit
        check(not (snapshot / "model.safetensors").exists() and not (repo_dir(cache) / "refs" / "main").exists(),
              "no snapshot link to it, no ref")
        hub.corrupt.clear()
        r = inferlab("pull", REPO, env=hub_env(cache, hub))
        check(r.returncode == 0, "with good bytes the next pull succeeds")
        check_layout(cache, repo, repo.commit, "main", hf_blob(repo))


def case_no_space():
    repo = demo_repo()
    work = fresh_dir("no_space")
    mount_point = work / "small_disk"
    mount_point.mkdir()
    # 4 MiB: the small files fit, model.safetensors (14 MB) does not.
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)], capture_output=True, text=True)
    if m.returncode != 0:
        print(f"SKIP: cannot mount a small tmpfs to fill ({m.stderr.strip()}); the disk-full path is not tested here")
        sys.exit(77)
    try:
        cache = mount_point / "cache"
        with fixture_hub.FixtureHub([repo]) as hub:
            r = inferlab("pull", REPO, env=hub_env(cache, hub))
            check(r.returncode != 0 and "no space left writing" in r.stderr and str(cache) in r.stderr
                  and "No space left on device" in r.stderr, "a full disk: an error naming the cache path")
            blobs = repo_dir(cache) / "blobs"
            sha = repo.etag("model.safetensors")
            check(not (blobs / sha).exists(), "no whole-looking blob of the file that did not fit")
            snapshot = repo_dir(cache) / "snapshots" / repo.commit
            check(not snapshot.exists() or not any(snapshot.iterdir()), "no snapshot appears")
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


def case_modelscope():
    repo = demo_repo()
    cache = fresh_dir("modelscope") / "cache"
    with fixture_hub.FixtureHub([repo]) as hub:
        r = inferlab("pull", REPO, "--source", "modelscope", env=hub_env(cache, hub))
        check(r.returncode == 0, "pull --source modelscope succeeds")
        check_layout(cache, repo, "master", "master", lambda path: hashlib.sha256(repo.files[path]).hexdigest())
        check(all("/api/v1/models/" in q[1] for q in hub.requests), "only ModelScope's API was used")
        r = inferlab("generate", REPO, "--prompt", "Hello", "--max-new-tokens", "3", "--offline", env=hub_env(cache, hub))
        check(r.returncode == 0, "generate --offline runs the ModelScope snapshot")
        r = inferlab("pull", "nobody/missing", "--source", "modelscope", env=hub_env(cache, hub))
        check(r.returncode != 0 and f"repository nobody/missing not found on {hub.url}" in r.stderr,
              "ModelScope: an unknown repo")
        r = inferlab("pull", REPO, "--source", "modelscope", "--revision", "v9", env=hub_env(cache, hub))
        check(r.returncode != 0 and f"revision v9 not found in repository {REPO}" in r.stderr,
              "ModelScope: an unknown revision")
        hub.corrupt.add("tokenizer.json")
        r = inferlab("pull", REPO, "--source", "modelscope", env=hub_env(cache.parent / "cache2", hub))
        check(r.returncode != 0 and "sha256 mismatch for tokenizer.json" in r.stderr, "ModelScope: the sha256 is checked")


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    if ARGS.case not in CASES:
        sys.exit(f"unknown case {ARGS.case}; known: {', '.join(CASES)}")
    CASES[ARGS.case]()
    print(f"{ARGS.case}: {len(FAILURES)} failure(s)")
    sys.exit(1 if FAILURES else 0)
