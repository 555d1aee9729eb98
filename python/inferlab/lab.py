"""The measurement lab's pure functions: a requests.csv's report, two runs compared, KV bytes.
Each returns what the CLI's --json prints (`inferlab report`, `report --compare`, `kv-size`)."""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional, Union

from . import _core

PathLike = Union[str, os.PathLike]


def _path(name: str, value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"'{name}' must be a path, got {type(value).__name__}")
    path = os.fspath(value)
    if not Path(path).is_file():
        raise FileNotFoundError(f"{name}: no file {path}")
    return path


def report(csv_path: PathLike, *, slo: Optional[str] = None, percentiles: str = "nearest-rank") -> dict[str, Any]:
    """`inferlab report requests.csv --json`: success, window, throughput, TTFT / TPOT / ITL / E2E
    percentiles, goodput under slo ("ttft_ms=200,tpot_ms=50")."""
    path = _path("csv_path", csv_path)
    if slo is not None and not isinstance(slo, str):
        raise TypeError(f"'slo' must be a str such as 'ttft_ms=200,tpot_ms=50', got {type(slo).__name__}")
    if percentiles not in ("nearest-rank", "linear"):
        raise ValueError(f"'percentiles' must be nearest-rank or linear, got {percentiles!r}")
    return json.loads(_core.report(path, slo or "", percentiles))


def _summary_json(path: str) -> Optional[str]:
    """A file whose first non-blank character is '{' is a summary JSON (`report --compare`'s rule)."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    if not text.lstrip().startswith("{"):
        return None
    try:
        json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"--compare: {path} starts like JSON but is not valid JSON") from None
    return text


def compare(a: PathLike, b: PathLike, *, seed: int = 0, resamples: int = 2000) -> dict[str, Any]:
    """`inferlab report --compare A B --json`: two requests.csv, or two `bench serve --repeat`
    summaries; per metric B - A with a bootstrap CI and a verdict."""
    path_a, path_b = _path("a", a), _path("b", b)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise TypeError(f"'seed' must be a non-negative int, got {seed!r}")
    if not isinstance(resamples, int) or isinstance(resamples, bool):
        raise TypeError(f"'resamples' must be an int, got {type(resamples).__name__}")
    if not 100 <= resamples <= 1_000_000:
        raise ValueError(f"'resamples' must be 100..1000000, got {resamples}")
    ja, jb = _summary_json(path_a), _summary_json(path_b)
    if (ja is None) != (jb is None):
        raise ValueError(f"--compare: {path_a} is a {'CSV' if ja is None else 'summary JSON'} but {path_b} is a "
                         f"{'CSV' if jb is None else 'summary JSON'}; compare two requests.csv or two summaries of "
                         "repeated runs")
    if ja is not None:
        return json.loads(_core.compare_summaries(ja, jb, path_a, path_b, seed, resamples))
    return json.loads(_core.compare_csv(path_a, path_b, seed, resamples))


def kv_size(model: Optional[PathLike] = None, *, layers: Optional[int] = None, kv_heads: Optional[int] = None,
            head_dim: Optional[int] = None, dtype: str = "bf16",
            tokens: Sequence[int] = (4096, 32768)) -> dict[str, Any]:
    """`inferlab kv-size`: KV bytes per token and for each context length in tokens, from a model's
    config or from its shape. {"layers", "kv_heads", "head_dim", "dtype", "bytes_per_token",
    "bytes": {tokens: bytes}}."""
    shape = (layers, kv_heads, head_dim)
    if model is not None:
        if any(v is not None for v in shape):
            raise ValueError("give either model or layers/kv_heads/head_dim, not both")
        if not isinstance(model, (str, os.PathLike)):
            raise TypeError(f"'model' must be a path or a repo id, got {type(model).__name__}")
        layers, kv_heads, head_dim = _core.kv_shape(os.fspath(model))
    else:
        for name, value in zip(("layers", "kv_heads", "head_dim"), shape):
            if value is None or isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"give model, or all of layers, kv_heads and head_dim (> 0): '{name}' is {value!r}")
    if not isinstance(dtype, str):
        raise TypeError(f"'dtype' must be a str, got {type(dtype).__name__}")
    element = _core.kv_dtype_bytes(dtype)
    if element == 0:
        raise ValueError(f"'dtype' {dtype!r} is not one of f32, bf16, f16, fp8, int8")
    counts = [tokens] if isinstance(tokens, int) else list(tokens)
    for t in counts:
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise ValueError(f"'tokens' must hold token counts (ints >= 0), found {t!r}")
    per_token = _core.kv_bytes_per_token(layers, kv_heads, head_dim, element)
    return {"layers": layers, "kv_heads": kv_heads, "head_dim": head_dim, "dtype": dtype,
            "bytes_per_token": per_token, "bytes": {t: per_token * t for t in counts}}
