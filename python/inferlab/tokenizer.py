"""Tokenizer: a model's own tokenizer and chat template, with transformers' method names."""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np

from . import _core


def _token_ids(name: str, value: Any) -> list[int]:
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or value.dtype.kind not in "iu":
            raise TypeError(f"'{name}' must be a 1-D array of integer token ids, got {value.dtype} with shape {value.shape}")
        return [int(v) for v in value]
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"'{name}' must be a list of token ids, got {type(value).__name__}")
    ids = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"'{name}' must be a list of token ids, found {type(v).__name__}")
        ids.append(int(v))
    return ids


class Tokenizer:
    """The tokenizer of a model folder (tokenizer.json, or vocab.json + merges.txt), a GGUF file or
    a repo id in the Hugging Face cache."""

    def __init__(self, model: Union[str, os.PathLike]) -> None:
        if not isinstance(model, (str, os.PathLike)):
            raise TypeError(f"'model' must be a path or a repo id (str), got {type(model).__name__}")
        self._tokenizer = _core.Tokenizer(os.fspath(model))

    @classmethod
    def from_pretrained(cls, model: Union[str, os.PathLike]) -> "Tokenizer":
        return cls(model)

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.vocab_size

    def __len__(self) -> int:
        return self._tokenizer.vocab_size

    @property
    def bos_token(self) -> Optional[str]:
        return self._tokenizer.bos_token or None

    @property
    def eos_token(self) -> Optional[str]:
        return self._tokenizer.eos_token or None

    @property
    def eos_token_id(self) -> Optional[int]:
        return self._tokenizer.token_id(self._tokenizer.eos_token)

    @property
    def chat_template(self) -> Optional[str]:
        return self._tokenizer.chat_template or None

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"'text' must be a str, got {type(text).__name__}")
        return self._tokenizer.encode(text, add_special_tokens)

    def decode(self, token_ids: Union[int, Sequence[int]], skip_special_tokens: bool = False) -> str:
        if isinstance(token_ids, (int, np.integer)) and not isinstance(token_ids, bool):
            token_ids = [int(token_ids)]
        return self._tokenizer.decode(_token_ids("token_ids", token_ids), skip_special_tokens)

    def convert_ids_to_tokens(self, ids: Union[int, Sequence[int]]) -> Union[str, list[str]]:
        if isinstance(ids, int):
            return self._tokenizer.id_to_piece(ids)
        return [self._tokenizer.id_to_piece(i) for i in ids]

    def apply_chat_template(self, conversation: Sequence[dict[str, Any]], tools: Optional[Sequence[dict]] = None,
                            add_generation_prompt: bool = False, tokenize: bool = True,
                            **kwargs: Any) -> Union[str, list[int]]:
        """The conversation rendered by the model's chat template (kwargs: the template's other
        variables, e.g. enable_thinking); tokenize=True returns its token ids (no special tokens
        added: the template writes its own), as transformers does with return_dict=False."""
        if not isinstance(conversation, Sequence) or isinstance(conversation, (str, bytes)) or not all(
                isinstance(m, dict) for m in conversation):
            raise TypeError(f"'conversation' must be a list of message dicts, got {type(conversation).__name__}")
        if not isinstance(add_generation_prompt, bool):
            raise TypeError(f"'add_generation_prompt' must be a bool, got {type(add_generation_prompt).__name__}")
        if not isinstance(tokenize, bool):
            raise TypeError(f"'tokenize' must be a bool, got {type(tokenize).__name__}")
        kwargs.pop("return_dict", None)
        extra = dict(kwargs)
        if tools is not None:
            extra["tools"] = list(tools)
        text = self._tokenizer.render_chat(json.dumps(list(conversation)), add_generation_prompt, json.dumps(extra))
        return self._tokenizer.encode(text, False) if tokenize else text
