"""SamplingParams in vLLM's shape. Types are checked here (TypeError naming the argument); the
values are checked by the engine with the server's rules (ValueError naming the field), so a
request is refused here exactly as `inferlab serve` refuses it."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, Union


def _check(name: str, value: Any, types: tuple, what: str) -> None:
    if isinstance(value, bool) and bool not in types:
        raise TypeError(f"SamplingParams: '{name}' must be {what}, got bool")
    if not isinstance(value, types):
        raise TypeError(f"SamplingParams: '{name}' must be {what}, got {type(value).__name__}")


def _check_int_list(name: str, value: Any) -> list[int]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"SamplingParams: '{name}' must be a list of token ids, got {type(value).__name__}")
    for item in value:
        _check(name, item, (int,), "a list of token ids")
    return list(value)


class SamplingParams:
    """How to sample: vLLM's names and defaults (temperature 0 is greedy).

    logprobs: None for none, else how many alternatives to report per token besides the chosen
    one (0..20), as vLLM's. max_tokens: None for as many as the context leaves.
    """

    def __init__(
        self,
        n: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        min_p: float = 0.0,
        seed: Optional[int] = None,
        stop: Union[str, Sequence[str], None] = None,
        stop_token_ids: Optional[Sequence[int]] = None,
        max_tokens: Optional[int] = 16,
        min_tokens: int = 0,
        logprobs: Optional[int] = None,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repetition_penalty: float = 1.0,
        ignore_eos: bool = False,
        skip_special_tokens: bool = True,
    ) -> None:
        _check("n", n, (int,), "an int")
        for name, value in (("temperature", temperature), ("top_p", top_p), ("min_p", min_p),
                            ("presence_penalty", presence_penalty), ("frequency_penalty", frequency_penalty),
                            ("repetition_penalty", repetition_penalty)):
            _check(name, value, (int, float), "a number")
        _check("top_k", top_k, (int,), "an int")
        _check("min_tokens", min_tokens, (int,), "an int")
        if seed is not None:
            _check("seed", seed, (int,), "an int or None")
        if max_tokens is not None:
            _check("max_tokens", max_tokens, (int,), "an int or None")
        if logprobs is not None:
            _check("logprobs", logprobs, (int,), "an int or None")
        if stop is None:
            stops: list[str] = []
        elif isinstance(stop, str):
            stops = [stop]
        elif isinstance(stop, Sequence) and all(isinstance(s, str) for s in stop):
            stops = list(stop)
        else:
            raise TypeError(f"SamplingParams: 'stop' must be a string or a list of strings, got {type(stop).__name__}")
        _check("ignore_eos", ignore_eos, (bool,), "a bool")
        _check("skip_special_tokens", skip_special_tokens, (bool,), "a bool")
        self.n = n
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.top_k = top_k
        self.min_p = float(min_p)
        self.seed = seed
        self.stop = stops
        self.stop_token_ids = [] if stop_token_ids is None else _check_int_list("stop_token_ids", stop_token_ids)
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self.logprobs = logprobs
        self.presence_penalty = float(presence_penalty)
        self.frequency_penalty = float(frequency_penalty)
        self.repetition_penalty = float(repetition_penalty)
        self.ignore_eos = ignore_eos
        self.skip_special_tokens = skip_special_tokens

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"SamplingParams({fields})"

    def to_body(self, chat: bool) -> dict[str, Any]:
        """The fields of a /v1/completions (chat: /v1/chat/completions) body these stand for."""
        body: dict[str, Any] = {
            "n": self.n, "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
            "min_p": self.min_p, "min_tokens": self.min_tokens, "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty, "repetition_penalty": self.repetition_penalty,
            "ignore_eos": self.ignore_eos, "skip_special_tokens": self.skip_special_tokens,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        if self.stop:
            body["stop"] = self.stop
        if self.stop_token_ids:
            body["stop_token_ids"] = self.stop_token_ids
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.logprobs is not None:
            if chat:
                body["logprobs"] = True
                body["top_logprobs"] = self.logprobs
            else:
                body["logprobs"] = self.logprobs
        return body
