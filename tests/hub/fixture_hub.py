"""A loopback model hub for the `inferlab pull` tests: answers as huggingface.co and modelscope.cn do.

Hugging Face:
  GET  /api/models/{org}/{name}/revision/{rev}     -> {"id", "sha", "siblings": [{"rfilename"}], ...}
  HEAD/GET /{org}/{name}/resolve/{rev}/{path}      -> small files: 200, ETag "<git blob sha1>";
                                                      LFS files: 302 to /cdn/{sha256} with X-Linked-Etag
                                                      "<sha256>" and X-Linked-Size; X-Repo-Commit always
  GET  /api/models/{org}/{name}/tree/{rev}         -> [{"type": "file", "oid", "size", "path", "lfs"}, ...]
  GET  {cdn}/cdn/{sha256}  (another port)          -> the bytes, Range honoured (206 + Content-Range)
  errors: 404 X-Error-Code RepoNotFound / RevisionNotFound / EntryNotFound,
          401 X-Error-Code GatedRepo for a gated repo asked without "Authorization: Bearer <token>"
ModelScope:
  GET /api/v1/models/{org}/{name}                  -> {"Code": 200, "Data": {...}} or 404
  GET /api/v1/models/{org}/{name}/repo/files?Revision=R&Recursive=true
                                                   -> {"Code": 200, "Data": {"Files": [{"Path", "Name",
                                                      "Type": "blob"|"tree", "Size", "Sha256", ...}]}}
  GET /api/v1/models/{org}/{name}/repo?Revision=R&FilePath=P  -> the bytes, Range honoured

Knobs (attributes of FixtureHub, set by the test between runs):
  cut_once[path] = n     the next transfer of that file sends its headers for the whole file, then n
                         bytes, then closes the connection (once)
  corrupt.add(path)      that file's bytes are served with one byte changed (size unchanged)
Every request is logged as (method, path, range header) in `requests`.
"""
import hashlib
import json
import pathlib
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_THRESHOLD = 10_000  # files this large are LFS files, as the hub stores weights and tokenizers
TOKEN = "hf_fixture_token"


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, repo_id: str, files: dict, gated: bool = False, tags=("v1.0",)):
        self.repo_id = repo_id
        self.files = dict(sorted(files.items()))
        self.gated = gated
        digest = hashlib.sha1(repo_id.encode())
        for path, data in self.files.items():
            digest.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
        self.commit = digest.hexdigest()
        self.revisions = {"main": self.commit, "master": self.commit, self.commit: self.commit}
        self.revisions.update({tag: self.commit for tag in tags})

    def is_lfs(self, path: str) -> bool:
        return len(self.files[path]) >= LFS_THRESHOLD or path.endswith(".safetensors")

    def etag(self, path: str) -> str:
        data = self.files[path]
        return hashlib.sha256(data).hexdigest() if self.is_lfs(path) else git_blob_sha1(data)

    def folders(self) -> list:
        """Every folder that holds a file, sorted (both hubs list them beside the files)."""
        found = set()
        for path in self.files:
            parent = path.rpartition("/")[0]
            while parent:
                found.add(parent)
                parent = parent.rpartition("/")[0]
        return sorted(found)


def repo_from_folder(repo_id: str, folder: pathlib.Path, gated: bool = False, extra: dict | None = None) -> Repo:
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    files.update(extra or {})
    return Repo(repo_id, files, gated)


class FixtureHub:
    def __init__(self, repos):
        self.repos = {repo.repo_id: repo for repo in repos}
        self.blobs = {}  # sha256 -> (repo, path) for /cdn/
        for repo in repos:
            for path in repo.files:
                if repo.is_lfs(path):
                    self.blobs[repo.etag(path)] = (repo, path)
        self.cut_once = {}
        self.corrupt = set()
        self.requests = []
        self.lock = threading.Lock()
        hub = self

        class Handler(_Handler):
            fixture = hub

        # The hub, and the "CDN" its LFS redirects point at: another origin (port), as the real hub's
        # storage is another host, so clients stop following at the redirect and read its headers.
        self.servers = [ThreadingHTTPServer(("127.0.0.1", 0), Handler) for _ in range(2)]
        for server in self.servers:
            server.daemon_threads = True
        self.url, self.cdn_url = (f"http://127.0.0.1:{server.server_address[1]}" for server in self.servers)
        self.threads = [threading.Thread(target=server.serve_forever, daemon=True) for server in self.servers]

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        for server in self.servers:
            server.shutdown()
            server.server_close()

    def log(self, method, path, range_header):
        with self.lock:
            self.requests.append((method, path, range_header))

    def served_bytes(self, repo: Repo, path: str) -> bytes:
        data = repo.files[path]
        if path in self.corrupt:
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        return data


class _Handler(BaseHTTPRequestHandler):
    fixture: FixtureHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: the test prints what matters
        pass

    # -- answers ---------------------------------------------------------------------------------
    def send(self, status, body=b"", headers=None, content_type="application/json"):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def hub_error(self, status, code, message):
        body = json.dumps({"error": message}).encode()
        self.send(status, body, {"X-Error-Code": code, "X-Error-Message": message})

    def send_file(self, data: bytes, headers: dict, label: str):
        """The bytes with Range support; a cut_once knob closes the connection mid-body."""
        fixture = self.fixture
        start = 0
        range_header = self.headers.get("Range")
        if range_header and range_header.startswith("bytes="):
            first = range_header[len("bytes="):].split("-")[0]
            start = int(first) if first else 0
            if start >= len(data):
                return self.send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
        body = data[start:]
        self.send_response(206 if range_header else 200)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Accept-Ranges", "bytes")
        if range_header:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return
        with fixture.lock:
            cut = fixture.cut_once.pop(label, None)
        if cut is not None:
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    # -- routing ---------------------------------------------------------------------------------
    def do_HEAD(self):
        self.route()

    def do_GET(self):
        self.route()

    def route(self):
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        self.fixture.log(self.command, self.path, self.headers.get("Range"))
        parts = path.strip("/").split("/")
        try:
            if parts[:2] == ["api", "models"]:
                return self.hf_api(parts[2:])
            if parts[:3] == ["api", "v1", "models"]:
                return self.modelscope(parts[3:], query)
            if parts[0] == "cdn" and len(parts) == 2:
                return self.cdn(parts[1])
            if len(parts) >= 5 and parts[2] == "resolve":
                return self.resolve("/".join(parts[:2]), parts[3], "/".join(parts[4:]))
        except BrokenPipeError:
            return
        self.hub_error(404, "EntryNotFound" if "resolve" in parts else "RepoNotFound", f"no route for {path}")

    def find_repo(self, repo_id):
        """The repo, or None after answering the error the hub gives."""
        repo = self.fixture.repos.get(repo_id)
        if repo is None:
            self.hub_error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}.")
            return None
        if repo.gated and self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.hub_error(401, "GatedRepo", f"Access to model {repo_id} is restricted. You must have access to it "
                                             "and be authenticated to access it. Please log in.")
            return None
        return repo

    def hf_api(self, parts):
        # /api/models/{org}/{name}[/revision/{rev}]
        if len(parts) < 2:
            return self.hub_error(404, "RepoNotFound", "no repo")
        repo = self.find_repo("/".join(parts[:2]))
        if repo is None:
            return
        kind = parts[2] if len(parts) > 2 else ""
        revision = parts[3] if len(parts) > 3 and kind in ("revision", "tree") else "main"
        commit = repo.revisions.get(revision)
        if commit is None:
            return self.hub_error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        if kind == "tree":  # huggingface_hub's list_repo_tree (recursive, one page)
            return self.send(200, json.dumps(self.tree_entries(repo)).encode())
        body = {
            "_id": hashlib.md5(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "sha": commit,
            "lastModified": "2025-01-01T00:00:00.000Z",
            "private": False,
            "gated": "manual" if repo.gated else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": [{"rfilename": path} for path in repo.files],
        }
        self.send(200, json.dumps(body).encode())

    @staticmethod
    def tree_entries(repo):
        entries = []
        for path, data in repo.files.items():
            entry = {"type": "file", "oid": git_blob_sha1(data), "size": len(data), "path": path}
            if repo.is_lfs(path):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            entries.append(entry)
        entries += [{"type": "directory", "oid": hashlib.sha1(f.encode()).hexdigest(), "size": 0, "path": f}
                    for f in repo.folders()]
        return entries

    def resolve(self, repo_id, revision, file_path):
        repo = self.find_repo(repo_id)
        if repo is None:
            return
        commit = repo.revisions.get(revision)
        if commit is None:
            return self.hub_error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        if file_path not in repo.files:
            return self.hub_error(404, "EntryNotFound", f"{file_path} does not exist on \"{revision}\"")
        etag = repo.etag(file_path)
        data = repo.files[file_path]
        headers = {"X-Repo-Commit": commit, "ETag": f'"{etag}"'}
        if repo.is_lfs(file_path):
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data)),
                            "Location": f"{self.fixture.cdn_url}/cdn/{etag}?repo={urllib.parse.quote(repo.repo_id)}"})
            return self.send(302, b"", headers, "text/plain")
        self.send_file(self.fixture.served_bytes(repo, file_path), headers, file_path)

    def cdn(self, sha256):
        found = self.fixture.blobs.get(sha256)
        if found is None:
            return self.send(404, b"NoSuchKey", content_type="text/plain")
        repo, path = found
        self.send_file(self.fixture.served_bytes(repo, path), {"ETag": f'"{sha256}"'}, path)

    def modelscope(self, parts, query):
        # /api/v1/models/{org}/{name}[/repo[/files]]
        if len(parts) < 2:
            return self.send(404, json.dumps({"Code": 10010205001, "Message": "not found"}).encode())
        repo_id = "/".join(parts[:2])
        repo = self.fixture.repos.get(repo_id)
        if repo is None or repo.gated:
            return self.send(404, json.dumps({"Code": 10010205001, "Message": f"模型 {repo_id} 不存在",
                                              "Success": False}).encode())
        rest = parts[2:]
        if not rest:
            return self.send(200, json.dumps({"Code": 200, "Data": {"Path": parts[0], "Name": parts[1]},
                                              "Success": True}).encode())
        revision = query.get("Revision", "master")
        if revision not in repo.revisions:
            return self.send(404, json.dumps({"Code": 10010205001, "Message": f"revision {revision} not found",
                                              "Success": False}).encode())
        if rest == ["repo", "files"]:
            files = []
            for path, data in repo.files.items():
                files.append({"Name": path.rpartition("/")[2], "Path": path, "Type": "blob", "Size": len(data),
                              "Sha256": hashlib.sha256(data).hexdigest(), "Revision": revision,
                              "IsLFS": repo.is_lfs(path), "CommittedDate": 1735689600})
            for folder in repo.folders():
                files.append({"Name": folder.rpartition("/")[2], "Path": folder, "Type": "tree", "Size": 0,
                              "Sha256": "", "Revision": revision})
            body = {"Code": 200, "Data": {"Files": files, "LatestCommitter": {}}, "Message": "success",
                    "RequestId": "fixture", "Success": True}
            return self.send(200, json.dumps(body).encode())
        if rest == ["repo"]:
            file_path = query.get("FilePath", "")
            if file_path not in repo.files:
                return self.send(404, json.dumps({"Code": 10010205001, "Message": f"file {file_path} not found",
                                                  "Success": False}).encode())
            return self.send_file(self.fixture.served_bytes(repo, file_path), {}, file_path)
        self.send(404, json.dumps({"Code": 404, "Message": "no route"}).encode())
