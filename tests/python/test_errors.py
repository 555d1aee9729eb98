"""Bad arguments raise TypeError / ValueError naming the argument; the engine's refusals carry the
server's messages; a generation interrupted by Ctrl-C (SIGINT) leaves the LLM usable."""
import signal
import threading
import time

import numpy as np
import pytest

import inferlab
from conftest import SMOLLM2, THREADS
from inferlab import SamplingParams

PROMPT = "The capital of France is"
GREEDY = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)


@pytest.mark.parametrize("kwargs, name", [
    ({"temperature": "hot"}, "temperature"), ({"n": 1.5}, "n"), ({"top_k": 2.0}, "top_k"),
    ({"seed": "7"}, "seed"), ({"stop": 3}, "stop"), ({"max_tokens": "16"}, "max_tokens"),
    ({"logprobs": True}, "logprobs"), ({"stop_token_ids": "1,2"}, "stop_token_ids"), ({"ignore_eos": 1}, "ignore_eos"),
])
def test_sampling_params_types(kwargs, name):
    with pytest.raises(TypeError, match=f"'{name}'"):
        SamplingParams(**kwargs)


@pytest.mark.parametrize("kwargs, name", [
    ({"temperature": 5.0}, "temperature"), ({"top_p": 0.0}, "top_p"), ({"max_tokens": 0}, "max_tokens"),
    ({"n": 0}, "n"), ({"logprobs": 99}, "logprobs"), ({"stop": [""]}, "stop"), ({"top_k": -5}, "top_k"),
    ({"max_tokens": 10**9}, "maximum context length"), ({"stop_token_ids": [10**8]}, "stop_token_ids"),
])
def test_values_refused_by_the_engine_with_the_servers_message(smollm2, kwargs, name):
    with pytest.raises(ValueError, match=name):
        smollm2.generate(PROMPT, SamplingParams(**kwargs))


def test_bad_calls_name_the_argument(smollm2):
    with pytest.raises(TypeError, match="'model'"):
        inferlab.LLM(123)
    with pytest.raises(ValueError, match="'threads'"):
        inferlab.LLM(SMOLLM2, threads=-1)
    with pytest.raises(TypeError, match="'sampling_params'"):
        smollm2.generate(PROMPT, {"temperature": 0})
    with pytest.raises(TypeError, match="'prompts'"):
        smollm2.generate(42)
    with pytest.raises(ValueError, match="'prompt'"):
        smollm2.generate("")  # encodes to no tokens
    with pytest.raises(TypeError, match="'messages'"):
        smollm2.chat("hello")
    with pytest.raises(TypeError, match="'response_format'"):
        smollm2.chat([{"role": "user", "content": "hi"}], response_format="json")
    with pytest.raises(ValueError, match="response_format"):
        smollm2.chat([{"role": "user", "content": "hi"}], response_format={"type": "xml"})
    with pytest.raises(ValueError, match="'n'"):
        list(smollm2.stream(PROMPT, SamplingParams(n=2)))
    with pytest.raises(TypeError, match="'ids'"):
        smollm2.forward("The capital")
    with pytest.raises(ValueError, match="'ids'"):
        smollm2.forward([10**8])
    with pytest.raises(TypeError, match="'ids'"):
        smollm2.forward(np.array([[1, 2]]))
    with pytest.raises(TypeError, match="'past_key_values'"):
        smollm2.forward([1], past_key_values=[1], use_cache=True)
    with pytest.raises(TypeError, match="'token_ids'"):
        smollm2.get_tokenizer().decode("12")
    with pytest.raises(ValueError, match="'dtype'"):
        inferlab.kv_size(layers=2, kv_heads=2, head_dim=64, dtype="q9")
    with pytest.raises(ValueError, match="not both"):
        inferlab.kv_size(SMOLLM2, layers=2)


def test_engine_errors_carry_the_clis_message():
    with pytest.raises(inferlab.Error) as missing:
        inferlab.LLM("/nonexistent/model.gguf", offline=True)
    assert "/nonexistent/model.gguf" in str(missing.value)
    assert isinstance(missing.value, RuntimeError)


def interrupt_after(seconds):
    """SIGINT to this process's main thread after `seconds`, as Ctrl-C in a terminal."""
    main = threading.main_thread().ident
    timer = threading.Timer(seconds, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    return timer


def test_keyboard_interrupt_leaves_the_llm_usable(smollm2):
    before = smollm2.generate(PROMPT, GREEDY)[0].outputs[0].token_ids
    long = SamplingParams(temperature=0, max_tokens=1500, ignore_eos=True)
    started = time.monotonic()
    timer = interrupt_after(0.5)
    with pytest.raises(KeyboardInterrupt):
        smollm2.generate([PROMPT, "Water boils at"], long)
    timer.join()
    assert time.monotonic() - started < 10  # interrupted, not run to the end
    # The same LLM answers again, and alike.
    assert smollm2.generate(PROMPT, GREEDY)[0].outputs[0].token_ids == before

    timer = interrupt_after(0.5)
    pieces = []
    with pytest.raises(KeyboardInterrupt):
        for piece in smollm2.stream(PROMPT, long):
            pieces.append(piece)
    timer.join()
    assert pieces  # it was streaming when interrupted
    assert smollm2.generate(PROMPT, GREEDY)[0].outputs[0].token_ids == before


def test_a_stream_left_early_frees_its_sequence(smollm2):
    stream = smollm2.stream(PROMPT, SamplingParams(temperature=0, max_tokens=1500, ignore_eos=True))
    first = next(stream)
    assert first
    stream.close()  # runs the generator's finally: the request is cancelled
    assert smollm2.generate(PROMPT, GREEDY)[0].outputs[0].token_ids
