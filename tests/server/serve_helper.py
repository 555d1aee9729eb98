"""`inferlab serve` on 127.0.0.1 for the Python end-to-end tests: a context manager that starts it on
a free port, waits for /health 200, yields the base URL and stops it (SIGTERM, then SIGKILL)."""
import contextlib
import re
import subprocess
import threading
import time
import urllib.request


@contextlib.contextmanager
def serve(cli, model, extra_args=(), timeout_s=120):
    proc = subprocess.Popen([cli, "serve", model, "--host", "127.0.0.1", "--port", "0", "--threads", "2", *extra_args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + timeout_s
        port, log = None, []
        while time.time() < deadline and port is None:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise SystemExit(f"inferlab serve exited early ({proc.returncode}):\n{''.join(log)}")
            log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
        if port is None:
            raise SystemExit("inferlab serve did not start:\n" + "".join(log))
        # Keep reading its log, or a full pipe would stall the server.
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
        base = f"http://127.0.0.1:{port}"
        while True:
            try:
                if urllib.request.urlopen(base + "/health").status == 200:
                    break
            except Exception:
                if time.time() > deadline:
                    raise SystemExit("inferlab serve did not become ready")
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
