"""Starts `inferlab serve` on a free port (port 0: the OS picks; the port is read from the
server's "listening on" line) and always stops it. Shared by the reliability end-to-end tests."""
import contextlib
import os
import re
import subprocess
import threading
import time
import urllib.request


class Server:
    def __init__(self, cli, model, extra_args=(), env=None, host="127.0.0.1", wait_ready=True, port=0, threads=2):
        self.log_lines = []
        self._lock = threading.Lock()
        args = [cli, "serve", *([model] if model else []), "--port", str(port), "--threads", str(threads), *extra_args]
        if host is not None:
            args += ["--host", host]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=dict(os.environ, **(env or {})))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.port = None
        deadline = time.time() + 120
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("inferlab serve exited early:\n" + self.log())
            m = re.search(r"listening on http://[^:\s]+:(\d+)", self.log())
            if m:
                self.port = int(m.group(1))
            time.sleep(0.05)
        if self.port is None:
            self.stop()
            raise RuntimeError("inferlab serve printed no port:\n" + self.log())
        self.base = f"http://127.0.0.1:{self.port}"
        while wait_ready and time.time() < deadline:
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.1)

    def _read(self):
        for line in self.proc.stdout:
            with self._lock:
                self.log_lines.append(line)

    def log(self):
        with self._lock:
            return "".join(self.log_lines)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


@contextlib.contextmanager
def serve(cli, model, extra_args=()):
    """A Server as a context manager: yields its base URL, always stops it."""
    server = Server(cli, model, extra_args)
    try:
        yield server.base
    finally:
        server.stop()
