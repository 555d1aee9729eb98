"""LLM: a model served in-process. generate / chat / stream go through the same engine, request
parsing and continuous-batching scheduler as `inferlab serve` (no HTTP); forward runs the engine's
model alone, a step at a time, as the course's pages do with transformers."""
from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import numpy as np

from . import _core
from .params import SamplingParams
from .tokenizer import Tokenizer, _token_ids

KVCache = _core.KVCache
Prompt = Union[str, Sequence[int], dict]
Message = dict[str, Any]

_POLL_MS = 50  # how long one wait for the engine lasts: Ctrl-C is seen between two waits


@dataclass
class Logprob:
    """One token's log-probability, as vLLM's: its rank among the reported alternatives (1 is the
    most likely; None when it was not among them) and its text."""
    logprob: float
    rank: Optional[int]
    decoded_token: str


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[list[dict[int, Logprob]]]
    finish_reason: Optional[str] = None  # "stop", "length", "tool_calls"
    stop_reason: Optional[str] = None    # the stop string met, when one was
    tool_calls: list[dict[str, str]] = field(default_factory=list)  # chat with tools: {"id", "name", "arguments"}
    reasoning_content: str = ""          # a thinking model's thoughts, apart from the text

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    request_id: str
    prompt: Optional[str]
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    metrics: list[Optional[dict[str, Any]]] = field(default_factory=list)  # each output's engine timings


@dataclass
class ForwardOutput:
    logits: np.ndarray  # [len(ids), vocab] float32: every position's logits
    past_key_values: Optional[KVCache]  # with use_cache: the sequence so far, for the next call


def _check_type(name: str, value: Any, types: tuple, what: str) -> None:
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise TypeError(f"'{name}' must be {what}, got {type(value).__name__}")


def _prompt_field(prompt: Any) -> Union[str, list[int]]:
    """A prompt as the completions route takes it: text, or token ids ({"prompt_token_ids": [...]} too)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, dict):
        if "prompt_token_ids" in prompt:
            return _token_ids("prompts", prompt["prompt_token_ids"])
        if "prompt" in prompt and isinstance(prompt["prompt"], str):
            return prompt["prompt"]
        raise TypeError("'prompts': a dict prompt needs 'prompt' (text) or 'prompt_token_ids'")
    return _token_ids("prompts", prompt)


def _conversation(name: str, messages: Any) -> list[Message]:
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)) or not all(
            isinstance(m, dict) for m in messages):
        raise TypeError(f"'{name}' must be a list of messages (dicts with 'role' and 'content'), got {type(messages).__name__}")
    return list(messages)


class _Choices:
    """The choices of one in-process request, filled from its poll()s."""

    def __init__(self, n_prompts: int, n: int):
        self.items: list[dict[str, Any]] = [
            {"index": i % n, "prompt_index": i // n, "text": "", "reasoning": "", "token_ids": [], "logprobs": [],
             "finish_reason": None, "stop_reason": None, "tool_calls": [], "timings": None}
            for i in range(n_prompts * n)]

    def absorb(self, update: dict[str, Any]) -> None:
        item = self.items[update["index"]]
        item["text"] += update["text"]
        item["reasoning"] += update["reasoning"]
        item["token_ids"] += update["token_ids"]
        item["logprobs"] += update["logprobs"]
        for key in ("finish_reason", "stop_reason", "tool_calls", "timings"):
            if key in update:
                item[key] = update[key]


def _poll(request: Any) -> list[dict[str, Any]]:
    return json.loads(request.poll(_POLL_MS))


class LLM:
    """A model with the engine `inferlab serve` runs, in this process.

    model: a model folder, a GGUF file or a repo id (pulled into the Hugging Face cache when
    missing, unless offline). weights: auto (as stored), f32, bf16, int8, q4. threads: compute
    threads (0: all cores). The rest are `inferlab serve`'s scheduler options.
    """

    def __init__(self, model: Union[str, os.PathLike], *, weights: str = "auto", threads: int = 0,
                 max_batch: int = 32, kv_tokens: int = 0, kv_type: str = "f32", prefix_caching: bool = True,
                 max_n: int = 1024, chat_template_kwargs: Optional[dict[str, Any]] = None,
                 offline: bool = False) -> None:
        _check_type("model", model, (str, os.PathLike), "a path or a repo id (str)")
        _check_type("weights", weights, (str,), "a str (auto, f32, bf16, int8, q4)")
        for name, value in (("threads", threads), ("max_batch", max_batch), ("kv_tokens", kv_tokens), ("max_n", max_n)):
            _check_type(name, value, (int,), "an int")
        if threads < 0:
            raise ValueError(f"'threads' must be >= 0 (0: all cores), got {threads}")
        if max_batch < 1:
            raise ValueError(f"'max_batch' must be >= 1, got {max_batch}")
        if kv_tokens < 0:
            raise ValueError(f"'kv_tokens' must be >= 0 (0: the default), got {kv_tokens}")
        if max_n < 1:
            raise ValueError(f"'max_n' must be >= 1, got {max_n}")
        _check_type("prefix_caching", prefix_caching, (bool,), "a bool")
        _check_type("offline", offline, (bool,), "a bool")
        if kv_type not in ("f32", "f16"):
            raise ValueError(f"'kv_type' must be f32 or f16, got {kv_type!r}")
        if chat_template_kwargs is not None and not isinstance(chat_template_kwargs, dict):
            raise TypeError(f"'chat_template_kwargs' must be a dict, got {type(chat_template_kwargs).__name__}")
        self.model = os.fspath(model)
        self.weights = weights
        self.threads = threads
        _core.pull_if_missing(self.model, offline)
        self._engine = _core.Engine(self.model, threads, weights, max_batch, kv_tokens, kv_type, prefix_caching, max_n,
                                    json.dumps(chat_template_kwargs) if chat_template_kwargs else "")
        self._tokenizer: Optional[Tokenizer] = None
        self._next_id = 0

    @property
    def name(self) -> str:
        return self._engine.name

    @property
    def context_length(self) -> int:
        return self._engine.context_length

    def get_tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = Tokenizer(self.model)
        return self._tokenizer

    # --- generation, through the server's routes in-process ---

    def _params(self, sampling_params: Optional[SamplingParams]) -> SamplingParams:
        if sampling_params is None:
            return SamplingParams()
        _check_type("sampling_params", sampling_params, (SamplingParams,), "a SamplingParams")
        return sampling_params

    def _run(self, route: str, body: dict[str, Any], n_prompts: int, n: int) -> tuple[_Choices, list[list[int]]]:
        request = self._engine.submit(route, json.dumps(body))
        choices = _Choices(n_prompts, n)
        try:
            while not request.done:
                for update in _poll(request):
                    choices.absorb(update)
        finally:
            if not request.done:  # interrupted (KeyboardInterrupt) or failed: free the sequences now
                request.cancel()
        return choices, json.loads(request.prompt_token_ids())

    def _outputs(self, choices: _Choices, prompts: list[Optional[str]], prompt_ids: list[list[int]], n: int,
                 logprobs: bool) -> list[RequestOutput]:
        outputs = []
        for p, prompt in enumerate(prompts):
            completions = []
            items = choices.items[p * n:(p + 1) * n]
            for item in items:
                lps = [_logprob_dict(entry) for entry in item["logprobs"]] if logprobs else None
                completions.append(CompletionOutput(
                    index=item["index"], text=item["text"], token_ids=item["token_ids"],
                    cumulative_logprob=sum(e["logprob"] for e in item["logprobs"]) if logprobs else None,
                    logprobs=lps, finish_reason=item["finish_reason"], stop_reason=item["stop_reason"],
                    tool_calls=item["tool_calls"], reasoning_content=item["reasoning"]))
            outputs.append(RequestOutput(request_id=str(self._next_id), prompt=prompt, prompt_token_ids=prompt_ids[p],
                                         outputs=completions, finished=True, metrics=[i["timings"] for i in items]))
            self._next_id += 1
        return outputs

    def generate(self, prompts: Union[Prompt, Sequence[Prompt]],
                 sampling_params: Optional[SamplingParams] = None) -> list[RequestOutput]:
        """Completes each prompt (text, token ids, or {"prompt_token_ids": [...]}); all are submitted
        at once and batched by the scheduler. One RequestOutput per prompt, in order."""
        params = self._params(sampling_params)
        if isinstance(prompts, (str, dict)) or (isinstance(prompts, Sequence) and prompts and
                                                 isinstance(prompts[0], (int, np.integer))):
            prompts = [prompts]
        if isinstance(prompts, np.ndarray):
            prompts = [prompts] if prompts.ndim == 1 else list(prompts)
        if not isinstance(prompts, Sequence) or isinstance(prompts, bytes):
            raise TypeError(f"'prompts' must be a string, token ids or a list of them, got {type(prompts).__name__}")
        if not prompts:
            raise ValueError("'prompts' is empty")
        fields = [_prompt_field(p) for p in prompts]
        body = params.to_body(chat=False)
        body["prompt"] = fields
        choices, prompt_ids = self._run("completions", body, len(fields), params.n)
        texts = [f if isinstance(f, str) else None for f in fields]
        return self._outputs(choices, texts, prompt_ids, params.n, params.logprobs is not None)

    def _chat_body(self, messages: Any, params: SamplingParams, tools: Any, tool_choice: Any, response_format: Any,
                   chat_template_kwargs: Any, parallel_tool_calls: Any = None) -> dict[str, Any]:
        body = params.to_body(chat=True)
        body["messages"] = _conversation("messages", messages)
        if tools is not None:
            if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
                raise TypeError(f"'tools' must be a list of tools (OpenAI's shape), got {type(tools).__name__}")
            body["tools"] = list(tools)
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
        if parallel_tool_calls is not None:
            _check_type("parallel_tool_calls", parallel_tool_calls, (bool,), "a bool")
            body["parallel_tool_calls"] = parallel_tool_calls
        if response_format is not None:
            if not isinstance(response_format, dict):
                raise TypeError(f"'response_format' must be a dict (OpenAI's shape), got {type(response_format).__name__}")
            body["response_format"] = response_format
        if chat_template_kwargs is not None:
            if not isinstance(chat_template_kwargs, dict):
                raise TypeError(f"'chat_template_kwargs' must be a dict, got {type(chat_template_kwargs).__name__}")
            body["chat_template_kwargs"] = chat_template_kwargs
        return body

    def chat(self, messages: Union[Sequence[Message], Sequence[Sequence[Message]]],
             sampling_params: Optional[SamplingParams] = None, *, tools: Optional[Sequence[dict]] = None,
             tool_choice: Union[str, dict, None] = None, parallel_tool_calls: Optional[bool] = None,
             response_format: Optional[dict] = None,
             chat_template_kwargs: Optional[dict[str, Any]] = None) -> list[RequestOutput]:
        """Answers a conversation (or a list of them) through the model's chat template, as
        /v1/chat/completions does: tools and tool_choice, response_format (json_object,
        json_schema) in OpenAI's shapes; parallel_tool_calls=False: one call at most. A tool call
        comes back in outputs[i].tool_calls."""
        params = self._params(sampling_params)
        if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
            raise TypeError("'messages' must be a conversation (a list of message dicts) or a list of conversations, "
                            f"got {type(messages).__name__}")
        if not messages:
            raise ValueError("'messages' is empty")
        conversations = [messages] if isinstance(messages[0], dict) else messages
        requests = []
        try:
            for conversation in conversations:  # one request each, all submitted before any is read: batched
                body = self._chat_body(conversation, params, tools, tool_choice, response_format, chat_template_kwargs,
                                       parallel_tool_calls)
                request = self._engine.submit("chat", json.dumps(body))
                requests.append((request, _Choices(1, params.n)))
            while not all(r.done for r, _ in requests):
                for request, choices in requests:
                    if not request.done:
                        for update in _poll(request):
                            choices.absorb(update)
        finally:
            for request, _ in requests:
                if not request.done:
                    request.cancel()
        outputs = []
        for request, choices in requests:
            outputs += self._outputs(choices, [None], json.loads(request.prompt_token_ids()), params.n,
                                     params.logprobs is not None)
        return outputs

    def _stream(self, route: str, body: dict[str, Any]) -> Iterator[str]:
        """Checks and submits now (errors are raised by the call, not the first next()); the
        iterator then reads the request."""
        if body.get("n", 1) != 1:
            raise ValueError(f"'n' must be 1 to stream (one choice's text), got {body['n']}; use generate for n > 1")
        return self._pieces(self._engine.submit(route, json.dumps(body)))

    @staticmethod
    def _pieces(request: Any) -> Iterator[str]:
        try:
            while not request.done:
                for update in _poll(request):
                    if update["text"]:
                        yield update["text"]
        finally:
            if not request.done:  # the caller stopped early, or Ctrl-C
                request.cancel()

    def stream(self, prompt: Prompt, sampling_params: Optional[SamplingParams] = None) -> Iterator[str]:
        """The completion's text piece by piece as the engine produces it (n must be 1)."""
        params = self._params(sampling_params)
        body = params.to_body(chat=False)
        body["prompt"] = _prompt_field(prompt)
        return self._stream("completions", body)

    def stream_chat(self, messages: Sequence[Message], sampling_params: Optional[SamplingParams] = None, *,
                    tools: Optional[Sequence[dict]] = None, tool_choice: Union[str, dict, None] = None,
                    response_format: Optional[dict] = None,
                    chat_template_kwargs: Optional[dict[str, Any]] = None) -> Iterator[str]:
        """The chat answer's text piece by piece (n must be 1)."""
        params = self._params(sampling_params)
        return self._stream("chat", self._chat_body(messages, params, tools, tool_choice, response_format,
                                                    chat_template_kwargs))

    # --- the model alone, step by step ---

    def forward(self, ids: Union[Sequence[int], np.ndarray], past_key_values: Optional[KVCache] = None,
                use_cache: bool = False, cache_tokens: Optional[int] = None) -> ForwardOutput:
        """Logits of every position of `ids` ([len(ids), vocab], float32), as transformers'
        model(ids, past_key_values=..., use_cache=...) gives them. With use_cache, the returned
        past_key_values holds the sequence so far: pass it back with only the new ids. A new cache
        holds cache_tokens positions (default: the context, at most 4096). It runs the engine's own
        model (the weights loaded once), between two of the scheduler's steps."""
        _check_type("use_cache", use_cache, (bool,), "a bool")
        token_ids = _token_ids("ids", ids)
        if past_key_values is not None and not isinstance(past_key_values, KVCache):
            raise TypeError(f"'past_key_values' must be the KVCache a forward call returned, got "
                            f"{type(past_key_values).__name__}")
        if cache_tokens is not None:
            _check_type("cache_tokens", cache_tokens, (int,), "an int")
        cache = past_key_values
        if cache is None and use_cache:
            context = self._engine.context_length
            cache = self._engine.new_cache(cache_tokens or (min(context, 4096) if context > 0 else 4096))
        logits = self._engine.forward(token_ids, cache)
        return ForwardOutput(logits=logits, past_key_values=cache if use_cache else None)


def _logprob_dict(entry: dict[str, Any]) -> dict[int, Logprob]:
    out: dict[int, Logprob] = {}
    for rank, (token, logprob, text) in enumerate(entry["top"], start=1):
        out[token] = Logprob(logprob=logprob, rank=rank, decoded_token=text)
    if entry["token"] not in out:
        out[entry["token"]] = Logprob(logprob=entry["logprob"], rank=None, decoded_token=entry["text"])
    return out
