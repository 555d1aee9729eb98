"""The scripted OpenAI-compatible SSE server (sse_server.py) on a free loopback port, as a context
manager for the bench tests: `with ScriptedServer() as server:` gives server.url and server.stats()."""
import json
import os
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


class ScriptedServer:
    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "sse_server.py")], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.proc.kill()
            raise SystemExit("the scripted server did not start")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def stats(self):
        """GET /stats: the request bodies received, the most streams open at once, the timings cells."""
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as r:
            return json.load(r)

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()
