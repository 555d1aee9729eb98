#!/usr/bin/python3
"""API keys end to end on the real server: with --api-key (or INFERLAB_API_KEY) every endpoint
but /health answers 401 in OpenAI's error shape without the right `Authorization: Bearer KEY`,
200 with it; the key never appears in the server's output (with --log-requests) nor in /metrics;
without a key the server says it binds 127.0.0.1, and warns when told to bind another address.

  auth_test.py CLI MODEL
"""
import json
import secrets
import sys
import urllib.error
import urllib.request

from serve_helper import Server
from checks import check, failures


def request(base, method, path, body=None, key=None, raw_auth=None):
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if raw_auth is not None:
        headers["Authorization"] = raw_auth
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode("utf-8", "replace"), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace"), dict(e.headers)


def is_auth_error(status, body):
    try:
        e = json.loads(body)["error"]
    except Exception:
        return False
    return (status == 401 and isinstance(e.get("message"), str) and e.get("code") == "invalid_api_key"
            and e.get("type") in ("invalid_request_error", "authentication_error") and "param" in e and e["param"] is None)


def main():
    cli, model = sys.argv[1], sys.argv[2]
    key = "sk-inferlab-" + secrets.token_hex(16)
    wrong = "sk-wrong-" + secrets.token_hex(16)
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0}
    routes = [("GET", "/v1/models", None), ("POST", "/v1/chat/completions", chat),
              ("POST", "/v1/chat/completions", dict(chat, stream=True)),
              ("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 4}), ("GET", "/metrics", None),
              ("POST", "/tokenize", {"prompt": "Hello"}), ("POST", "/detokenize", {"tokens": [9707]})]
    seen_text = []
    with Server(cli, model, ["--api-key", key, "--log-requests"]) as server:
        status, body, _ = request(server.base, "GET", "/health")
        check(status == 200, f"/health without a key: 200 (got {status})")
        for method, path, payload in routes:
            for label, kwargs in [("no key", {}), ("wrong key", {"key": wrong}), ("not Bearer", {"raw_auth": key}),
                                  ("key with a suffix", {"key": key + "x"}), ("prefix of the key", {"key": key[:-1]})]:
                status, body, headers = request(server.base, method, path, payload, **kwargs)
                seen_text.append(body)
                check(is_auth_error(status, body), f"{method} {path} with {label}: 401 invalid_api_key (got {status} {body[:120]})")
            status, body, _ = request(server.base, method, path, payload, key=key)
            seen_text.append(body)
            check(status == 200, f"{method} {path} with the right key: 200 (got {status} {body[:120]})")
        status, metrics, _ = request(server.base, "GET", "/metrics", key=key)
        check(key not in metrics and wrong not in metrics, "the key is not in /metrics")
        check("status=\"401\"" in metrics, "/metrics counts the 401 answers")
    log = server.log()
    check(key not in log and key[12:] not in log, "the key is not in the server's output")
    check(wrong not in log, "a wrong key is not echoed in the server's output")
    check(all(key not in t and wrong not in t for t in seen_text), "no answer echoes a key")

    with Server(cli, model, ["--log-requests"], env={"INFERLAB_API_KEY": key}) as server:
        status, body, _ = request(server.base, "GET", "/v1/models")
        check(is_auth_error(status, body), f"INFERLAB_API_KEY: no key -> 401 (got {status})")
        status, body, _ = request(server.base, "GET", "/v1/models", key=key)
        check(status == 200, f"INFERLAB_API_KEY: right key -> 200 (got {status})")
    check(key not in server.log(), "INFERLAB_API_KEY: the key is not in the server's output")

    with Server(cli, model, [], host=None) as server:
        status, _, _ = request(server.base, "GET", "/v1/models")
        check(status == 200, f"no key configured: requests are served (got {status})")
        log = server.log()
        check("127.0.0.1" in log and "no API key" in log, "without a key the server says it binds 127.0.0.1 only")
    with Server(cli, model, [], host="0.0.0.0") as server:
        log = server.log()
        check("warning" in log.lower() and "no API key" in log, "binding 0.0.0.0 without a key prints a warning")

    if failures:
        sys.exit(f"{len(failures)} auth checks failed")
    print("auth: all checks passed")


if __name__ == "__main__":
    main()
