"""What the thinking-model tests share (reasoning_test.py: Qwen3's <think>; harmony_test.py: gpt-oss's
channels; reasoning_apis_test.py): the check that raises, a chat template rendered by inferlab against
transformers, and chat requests through the openai SDK with the sampler's tokens named
(`test_forced_output`, honoured by `inferlab serve --test-hooks`)."""
import json
import os
import subprocess
import tempfile
import urllib.request


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def compare_chat_template(cli, folder, cases, family):
    """Renders each case ({"messages", "add_generation_prompt", "kwargs"}) with `inferlab tokenize FOLDER
    --chat-cases` and with transformers' apply_chat_template of the same folder; prints where any two
    differ and fails unless every one is byte-identical. Returns ours, for the callers' own checks."""
    from transformers import AutoTokenizer
    with tempfile.TemporaryDirectory() as work:
        cases_file = os.path.join(work, "cases.json")
        with open(cases_file, "w") as f:
            json.dump(cases, f)
        ours = json.loads(subprocess.run([cli, "tokenize", folder, "--chat-cases", cases_file],
                                         check=True, capture_output=True, text=True).stdout)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    bad = 0
    for i, case in enumerate(cases):
        reference = tokenizer.apply_chat_template(case["messages"], add_generation_prompt=case["add_generation_prompt"],
                                                  tokenize=False, **case["kwargs"])
        if ours[i] != reference:
            bad += 1
            at = next((k for k, (a, b) in enumerate(zip(ours[i], reference)) if a != b), min(len(ours[i]), len(reference)))
            print(f"DIFF case {i} at byte {at}:\n  ours:         {ours[i][max(0, at - 60):at + 60]!r}\n"
                  f"  transformers: {reference[max(0, at - 60):at + 60]!r}")
    print(f"{len(cases) - bad} of {len(cases)} {family} conversations render byte-identically to transformers")
    check(bad == 0, f"{bad} conversations differ")
    return ours


def forced_chat(client, model, messages, forced, max_tokens):
    """chat(**kw): client.chat.completions.create at temperature 0 with these defaults; `forced=` names
    other tokens to pick, `messages=` another chat, `extra_body=` more fields."""
    def chat(**kw):
        kw.setdefault("max_tokens", max_tokens)
        kw.setdefault("temperature", 0)
        extra = dict(kw.pop("extra_body", {}), test_forced_output=kw.pop("forced", forced))
        return client.chat.completions.create(model=model, messages=kw.pop("messages", messages), extra_body=extra, **kw)
    return chat


def token_count(base, text):
    """How many tokens the server's /tokenize makes of `text`, no special tokens added."""
    request = urllib.request.Request(base + "/tokenize", data=json.dumps({"prompt": text, "add_special_tokens": False}).encode(),
                                     headers={"Content-Type": "application/json"})
    return len(json.load(urllib.request.urlopen(request))["tokens"])


def read_reasoning_stream(chunks, reasoning_tokens):
    """A streamed chat's reasoning and content texts and its deltas' order ("r" reasoning, "c" content),
    checking that the usage chunk counts `reasoning_tokens`."""
    reasoning, content, order = "", "", []
    for chunk in chunks:
        if chunk.usage:
            check(chunk.usage.completion_tokens_details.reasoning_tokens == reasoning_tokens, "streamed usage")
        for choice in chunk.choices:
            d = choice.delta
            piece = (d.model_extra or {}).get("reasoning_content")
            if piece:
                reasoning += piece
                order.append("r")
            if d.content:
                content += d.content
                order.append("c")
    return reasoning, content, order
