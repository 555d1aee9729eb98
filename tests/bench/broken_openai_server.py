#!/usr/bin/env python3
"""A deliberately wrong OpenAI-compatible server (stdlib only) for the conformance suite's own test:
it lists a model and answers chat and completions, but its streams break the SSE framing (events
end with one newline, no blank line, no [DONE]; the role chunk has content null; chunks change
id) and its errors are plain text with status 200 or {"detail": ...}. Its /v1/responses answers a
right response object, but its stream numbers events from 1 and never completes, and an unknown
previous_response_id is answered 200. `inferlab conform` must
fail those checks and exit non-zero, while passing what it does right (the model list).
Prints "PORT <n>" on stdout once listening on 127.0.0.1 (any free port).
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "broken-model"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/models":
            self.send(200, json.dumps({"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 1, "owned_by": "test"}]}))
        else:  # wrong: a bare text 404
            self.send(404, "not found", "text/plain")

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            body = json.loads(raw)
        except ValueError:
            return self.send(200, "bad json", "text/plain")  # wrong: a 200 for malformed JSON
        if not isinstance(body, dict):
            return self.send(422, json.dumps({"detail": "not an object"}))  # wrong: FastAPI's shape
        if self.path.endswith("/v1/responses"):
            return self.answer_responses(body)
        chat = self.path.endswith("/chat/completions")
        n = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else 4
        words = ["Hello", " there", " little", " cache", " friend", " of", " mine", " today"]
        pieces = [words[i % len(words)] for i in range(max(1, min(n, 16)))]
        if not body.get("stream"):
            text = "".join(pieces)
            choice = {"index": 0, "finish_reason": "length", "logprobs": None}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            return self.send(200, json.dumps({
                "id": "x-1", "object": "chat.completion" if chat else "text_completion", "created": 1,
                "model": MODEL, "choices": [choice],
                "usage": {"prompt_tokens": 3, "completion_tokens": len(pieces), "total_tokens": 3 + len(pieces)}}))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        obj = "chat.completion.chunk" if chat else "text_completion"
        events = []
        if chat:
            events.append({"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None})
        for p in pieces:
            events.append({"index": 0, "delta": {"content": p}, "finish_reason": None} if chat
                          else {"index": 0, "text": p, "finish_reason": None})
        events.append({"index": 0, "delta": {}, "finish_reason": "length"} if chat
                      else {"index": 0, "text": "", "finish_reason": "length"})
        for i, item in enumerate(events):  # wrong: a new id per chunk, one newline per event
            chunk = {"id": f"x-{i}", "object": obj, "created": 1, "model": MODEL, "choices": [item]}
            self.wfile.write(("data: " + json.dumps(chunk) + "\n").encode())
        self.wfile.flush()
        self.close_connection = True

    def answer_responses(self, body):
        text = "Hello there"
        response = {"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": MODEL,
                    "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                                "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                    "tools": [], "tool_choice": "auto", "parallel_tool_calls": True,
                    "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}}
        if not body.get("stream"):  # wrong: any previous_response_id is taken, known or not
            return self.send(200, json.dumps(response))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        events = [{"type": "response.created", "response": dict(response, status="in_progress", output=[])},
                  {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
                   "delta": text}]
        for i, event in enumerate(events):  # wrong: numbered from 1, no in_progress, no completed
            event["sequence_number"] = i + 1
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("PORT", server.server_address[1], flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    pass
sys.exit(0)
