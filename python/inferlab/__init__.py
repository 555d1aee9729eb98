"""inferlab in Python: the C++ engine, tokenizer and measurement lab as a library.

    import inferlab
    llm = inferlab.LLM("models/SmolLM2-135M-Instruct.Q4_1.gguf")
    out = llm.generate(["The capital of France is"], inferlab.SamplingParams(temperature=0, max_tokens=8))
    print(out[0].outputs[0].text)

docs/python.md describes the API.
"""
from ._core import Error, __version__
from .lab import compare, kv_size, report
from .llm import LLM, CompletionOutput, ForwardOutput, KVCache, Logprob, RequestOutput
from .params import SamplingParams
from .tokenizer import Tokenizer

__all__ = [
    "LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "Logprob", "ForwardOutput", "KVCache",
    "Tokenizer", "report", "compare", "kv_size", "Error", "__version__",
]
