"""The course's streaming client, chapter 1, with the official openai Python SDK: ask a served model
one chat question with stream=True, print the content as it arrives, then the end-to-end time and
the time to the first content, as the course prints them.

  .venv/bin/python examples/stream_client.py [--base-url http://127.0.0.1:30000/v1] [--max-tokens 64] [QUESTION]
"""
import argparse
import sys
import time

from openai import OpenAI


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="What is a KV cache? Answer in one sentence.")
    parser.add_argument("--base-url", default="http://127.0.0.1:30000/v1")
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    # A local server takes any key; no retries, so a failure shows as it happened.
    client = OpenAI(base_url=args.base_url, api_key="EMPTY", max_retries=0, timeout=60.0)
    model = client.models.list().data[0].id
    t0 = time.perf_counter()
    t_first = None
    stream = client.chat.completions.create(model=model, stream=True, max_tokens=args.max_tokens, temperature=0,
                                            messages=[{"role": "user", "content": args.question}])
    with stream:
        for chunk in stream:
            text = chunk.choices[0].delta.content if chunk.choices else None
            if not text:
                continue
            t_first = t_first or time.perf_counter()
            sys.stdout.write(text)
            sys.stdout.flush()
    t_end = time.perf_counter()
    print(f"\nE2E: {(t_end - t0) * 1e3:.1f} ms")
    if t_first is not None:
        print(f"First content: {(t_first - t0) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
