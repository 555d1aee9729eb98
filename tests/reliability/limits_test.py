#!/usr/bin/python3
"""Server limits end to end: each configured limit answers with its HTTP status and an OpenAI
error body that names the limit; requests inside the limits are served.

  limits_test.py CLI MODEL
"""
import json
import sys

from auth_test import request
from serve_helper import Server
from checks import check, failures


def error_of(body):
    try:
        e = json.loads(body)["error"]
        return e if isinstance(e.get("message"), str) and "type" in e and "param" in e and "code" in e else None
    except Exception:
        return None


def main():
    cli, model = sys.argv[1], sys.argv[2]
    user = [{"role": "user", "content": "Hi"}]
    args = ["--max-body-bytes", "4096", "--max-messages", "4", "--max-prompt-tokens", "64", "--max-tokens-limit", "8",
            "--max-queue", "1", "--max-batch", "1"]
    with Server(cli, model, args) as server:
        b = server.base
        status, body, _ = request(b, "POST", "/v1/chat/completions", {"messages": user, "max_tokens": 4, "temperature": 0})
        check(status == 200, f"inside the limits: 200 (got {status} {body[:100]})")
        status, body, _ = request(b, "POST", "/v1/chat/completions", {"messages": user, "junk": "x" * 5000})
        e = error_of(body)
        check(status == 413 and e and "--max-body-bytes" in e["message"], f"body over --max-body-bytes: 413 (got {status} {body[:160]})")
        status, body, _ = request(b, "POST", "/v1/chat/completions", {"messages": user * 5, "max_tokens": 2})
        e = error_of(body)
        check(status == 400 and e and e["param"] == "messages" and "--max-messages" in e["message"],
              f"5 messages over --max-messages 4: 400 (got {status} {body[:160]})")
        status, body, _ = request(b, "POST", "/v1/chat/completions", {"messages": user, "max_tokens": 9})
        e = error_of(body)
        check(status == 400 and e and e["param"] == "max_tokens" and "--max-tokens-limit" in e["message"],
              f"max_tokens 9 over --max-tokens-limit 8: 400 (got {status} {body[:160]})")
        status, body, _ = request(b, "POST", "/v1/completions", {"prompt": "word " * 100, "max_tokens": 2})
        e = error_of(body)
        check(status == 400 and e and e["code"] == "context_length_exceeded" and "--max-prompt-tokens" in e["message"],
              f"100-token prompt over --max-prompt-tokens 64: 400 (got {status} {body[:160]})")
        status, body, _ = request(b, "POST", "/v1/completions", {"prompt": "Hello", "temperature": 0})
        usage = json.loads(body).get("usage", {}) if status == 200 else {}
        check(status == 200 and usage.get("completion_tokens", 99) <= 8,
              f"no max_tokens: the default is capped at --max-tokens-limit (got {status} {usage})")
    if failures:
        sys.exit(f"{len(failures)} limit checks failed")
    print("limits: all checks passed")


if __name__ == "__main__":
    main()
