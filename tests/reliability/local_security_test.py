#!/usr/bin/python3
"""A local server against browser pages, end to end on the real server (127.0.0.1 only):
- DNS rebinding: bound to loopback it answers only Host localhost, 127.0.0.1, [::1] (with its port
  or none) and --allowed-hosts names; any other Host gets 403 host_not_allowed in OpenAI's error
  shape, before the API key check and routing; `--allowed-hosts '*'` and a non-loopback --host
  without the flag turn the check off;
- CORS: no Access-Control-* header by default and a request carrying an Origin is refused (403
  origin_not_allowed); with --allowed-origins a listed origin's preflight is answered 204 with the
  headers a browser needs (no key needed), its requests get the origin echoed (errors too),
  another origin gets 403 and no header.

  local_security_test.py CLI MODEL
"""
import http.client
import json
import sys

from serve_helper import Server
from checks import check, failures


def call(port, method, path, headers=None, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        hdrs = {"Content-Type": "application/json"} if data else {}
        hdrs.update(headers or {})
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def error_code(body):
    try:
        e = json.loads(body)["error"]
        return e["code"] if isinstance(e.get("message"), str) and "type" in e and e.get("param", 0) is None else None
    except Exception:
        return None


def no_cors_headers(headers):
    return not any(k.startswith("access-control-") for k in headers)


CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0}


def main():
    cli, model = sys.argv[1], sys.argv[2]

    with Server(cli, model) as s:
        p = s.port
        for host in ["127.0.0.1", f"127.0.0.1:{p}", "localhost", f"localhost:{p}", f"LOCALHOST:{p}", "[::1]", f"[::1]:{p}"]:
            status, headers, body = call(p, "GET", "/v1/models", {"Host": host})
            check(status == 200 and no_cors_headers(headers), f"Host {host}: 200, no CORS headers (got {status})")
        for host in ["evil.example", f"evil.example:{p}", f"localhost.evil.example:{p}", f"127.0.0.1:{p + 1}", "127.0.0.2",
                     "[::2]", ""]:
            for method, path, payload in [("GET", "/v1/models", None), ("POST", "/v1/chat/completions", CHAT),
                                          ("GET", "/health", None), ("GET", "/no/such/route", None)]:
                status, headers, body = call(p, method, path, {"Host": host}, payload)
                check(status == 403 and error_code(body) == "host_not_allowed" and "--allowed-hosts" in body,
                      f"Host '{host}' {method} {path}: 403 host_not_allowed (got {status} {body[:100]})")
        status, headers, body = call(p, "POST", "/v1/chat/completions", {"Origin": "https://evil.example"}, CHAT)
        check(status == 403 and error_code(body) == "origin_not_allowed" and no_cors_headers(headers)
              and "--allowed-origins" in body, f"a foreign Origin without --allowed-origins: 403 (got {status} {body[:100]})")
        status, headers, body = call(p, "OPTIONS", "/v1/chat/completions",
                                     {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
        check(status == 403 and no_cors_headers(headers), f"a preflight without --allowed-origins: 403, no CORS headers (got {status})")
        status, headers, body = call(p, "POST", "/v1/chat/completions", {}, CHAT)
        check(status == 200 and no_cors_headers(headers), f"a plain client (no Origin): 200, no CORS headers (got {status})")

    key = "sk-local-security"
    app, other = "https://app.example", "https://other.example"
    with Server(cli, model, ["--api-key", key, "--allowed-hosts", "my.box, Inference.LAN", "--allowed-origins",
                             f"{app},http://localhost:5173"]) as s:
        p = s.port
        auth = {"Authorization": f"Bearer {key}"}
        for host in [f"my.box:{p}", "inference.lan", "localhost"]:
            status, _, body = call(p, "GET", "/v1/models", dict(auth, Host=host))
            check(status == 200, f"--allowed-hosts: Host {host} served (got {status} {body[:80]})")
        status, _, body = call(p, "GET", "/v1/models", {"Host": "evil.example"})
        check(status == 403 and error_code(body) == "host_not_allowed", f"a foreign Host is refused before the key check: 403 (got {status})")
        status, headers, _ = call(p, "OPTIONS", "/v1/chat/completions",
                                  {"Origin": app, "Access-Control-Request-Method": "POST",
                                   "Access-Control-Request-Headers": "authorization, content-type"})
        allow_headers = headers.get("access-control-allow-headers", "").lower()
        methods = headers.get("access-control-allow-methods", "")
        check(status == 204 and headers.get("access-control-allow-origin") == app and "authorization" in allow_headers
              and "content-type" in allow_headers and all(m in methods for m in ["GET", "POST", "OPTIONS"]),
              f"preflight of a listed origin without a key: 204 with the CORS headers (got {status} {headers})")
        # Anthropic's SDK in a browser asks for its own headers; they are allowed for a listed origin.
        status, headers, _ = call(p, "OPTIONS", "/v1/messages",
                                  {"Origin": app, "Access-Control-Request-Method": "POST",
                                   "Access-Control-Request-Headers": "x-api-key, anthropic-version, content-type"})
        allow_headers = headers.get("access-control-allow-headers", "").lower()
        check(status == 204 and "x-api-key" in allow_headers and "anthropic-version" in allow_headers,
              f"preflight asking for x-api-key and anthropic-version: allowed (got {status} {headers})")
        status, headers, body = call(p, "POST", "/v1/chat/completions", dict(auth, Origin=app), CHAT)
        check(status == 200 and headers.get("access-control-allow-origin") == app and "origin" in headers.get("vary", "").lower(),
              f"a listed origin's request: 200, origin echoed, Vary: Origin (got {status} {headers})")
        status, headers, body = call(p, "POST", "/v1/chat/completions", {"Origin": app}, CHAT)
        check(status == 401 and headers.get("access-control-allow-origin") == app,
              f"a listed origin without the key: 401 the page can read (got {status} {headers})")
        for method in ["OPTIONS", "POST"]:
            status, headers, body = call(p, method, "/v1/chat/completions",
                                         dict(auth, Origin=other, **{"Access-Control-Request-Method": "POST"}), CHAT)
            check(status == 403 and error_code(body) == "origin_not_allowed" and no_cors_headers(headers)
                  and "not listed" in body, f"an unlisted origin ({method}): 403, no CORS headers (got {status} {body[:100]})")

    with Server(cli, model, ["--allowed-hosts", "*", "--allowed-origins", "*"]) as s:
        status, _, _ = call(s.port, "GET", "/v1/models", {"Host": "evil.example"})
        check(status == 200, f"--allowed-hosts '*': any Host served (got {status})")
        status, headers, _ = call(s.port, "GET", "/v1/models", {"Origin": "https://any.example"})
        check(status == 200 and headers.get("access-control-allow-origin") == "https://any.example",
              f"--allowed-origins '*': any origin echoed (got {status} {headers})")

    with Server(cli, model, [], host="0.0.0.0") as s:
        status, _, _ = call(s.port, "GET", "/v1/models", {"Host": "inference.example"})
        check(status == 200, f"a non-loopback --host without --allowed-hosts: no Host check (got {status})")
    with Server(cli, model, ["--allowed-hosts", "inference.example"], host="0.0.0.0") as s:
        status, _, _ = call(s.port, "GET", "/v1/models", {"Host": "inference.example"})
        check(status == 200, f"a non-loopback --host with --allowed-hosts: the listed name served (got {status})")
        status, _, body = call(s.port, "GET", "/v1/models", {"Host": "evil.example"})
        check(status == 403 and error_code(body) == "host_not_allowed", f"... and another name refused (got {status})")

    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all local security checks passed")


if __name__ == "__main__":
    main()
