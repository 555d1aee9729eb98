"""LLM.forward and Tokenizer on the trained demo model (models/demo's source, assets/demo-model: a
Qwen2 HF folder) against transformers: logits within the engine's parity tolerance, the course's
greedy(use_cache) loop both ways matching generate, forward on the engine's own weights (not a
second copy) between the steps of a generation, and the tokenizer's encode / decode / chat
template equal to transformers' AutoTokenizer."""
import subprocess
import sys

import numpy as np
import pytest
import tokenizers
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import DEMO
import inferlab
from inferlab import SamplingParams, Tokenizer

TOL = 1e-4  # tests/model/parity.py's: max abs difference of f32 logits
PROMPT = "The jury said that the city"


@pytest.fixture(scope="module")
def reference():
    return AutoModelForCausalLM.from_pretrained(DEMO, dtype=torch.float32, attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def hf_tokenizer():
    return AutoTokenizer.from_pretrained(DEMO)


def reference_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


def test_forward_logits_equal_transformers(demo, reference):
    ids = demo.get_tokenizer().encode(PROMPT)
    out = demo.forward(ids)
    assert isinstance(out.logits, np.ndarray) and out.logits.dtype == np.float32
    assert out.logits.shape == (len(ids), 50259)
    assert out.past_key_values is None
    expected = reference_logits(reference, ids)
    assert np.abs(out.logits - expected).max() <= TOL


def test_forward_with_the_cache_equals_without(demo, reference):
    ids = demo.get_tokenizer().encode(PROMPT)
    first = demo.forward(ids[:3], use_cache=True)
    cache = first.past_key_values
    assert cache.length == 3
    rest = [demo.forward([i], past_key_values=cache, use_cache=True).logits[0] for i in ids[3:]]
    assert cache.length == len(ids)
    stepped = np.vstack([first.logits, *rest])
    assert np.abs(stepped - reference_logits(reference, ids)).max() <= TOL


def greedy(llm, prompt_ids, use_cache, steps=8):
    """The course's loop: argmax of the last position's logits; without the cache the whole
    sequence is fed every step, with it only the newest token."""
    ids, past, lengths = list(prompt_ids), None, []
    for _ in range(steps):
        current = ids if past is None else ids[-1:]
        lengths.append(len(current))
        out = llm.forward(current, past_key_values=past, use_cache=use_cache)
        past = out.past_key_values
        ids.append(int(out.logits[-1].argmax()))
    return ids[len(prompt_ids):], lengths


@pytest.mark.parametrize("use_cache", [False, True])
def test_course_greedy_matches_generate(demo, use_cache):
    prompt = demo.get_tokenizer().encode(PROMPT)
    tokens, lengths = greedy(demo, prompt, use_cache)
    n = len(prompt)
    assert lengths == ([n] + [1] * 7 if use_cache else list(range(n, n + 8)))
    [out] = demo.generate({"prompt_token_ids": prompt}, SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))
    matches = tokens == out.outputs[0].token_ids
    print(f"use_cache={use_cache} lengths={lengths} matches generate: {matches}")
    assert matches


# In a process of its own, so that nothing an earlier test allocated is reused: how much loading
# the LLM grew the process, then how much three forward passes grew it after.
MEMORY_SCRIPT = """
import sys
import inferlab

def rss_mib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

before = rss_mib()
llm = inferlab.LLM(sys.argv[1], threads=1, weights="f32", kv_tokens=1024, max_batch=1)
loaded = rss_mib()
for _ in range(3):
    llm.forward(list(range(100, 108)))
print(loaded - before, rss_mib() - loaded)
"""


def test_forward_runs_on_the_weights_the_engine_loaded():
    # The demo model's output projection alone is 24.5 MiB in f32 (50,259 x 128). A forward that
    # loaded the model a second time grew the process by about as much as loading it did.
    done = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, DEMO], capture_output=True, text=True, check=True)
    load_mib, forward_mib = map(float, done.stdout.split())
    print(f"loading the LLM: +{load_mib:.1f} MiB; three forward passes after: +{forward_mib:.1f} MiB")
    assert load_mib > 20
    assert forward_mib < load_mib / 4, "forward grew the process by a large part of a model load"


def test_forward_between_the_steps_of_a_generation(demo):
    # forward waits for the scheduler's step to end and runs on the same model: interleaved with a
    # stream in flight, each gives what it gives alone.
    ids = demo.get_tokenizer().encode(PROMPT)
    alone = demo.forward(ids).logits
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    whole = demo.generate(PROMPT, params)[0].outputs[0].text
    pieces = []
    for piece in demo.stream(PROMPT, params):
        pieces.append(piece)
        np.testing.assert_array_equal(demo.forward(ids).logits, alone)
    assert len(pieces) > 1
    assert "".join(pieces) == whole


def test_a_cache_of_another_llm_is_refused(demo):
    other = inferlab.LLM(DEMO, threads=1, weights="f32", kv_tokens=1024, max_batch=1)
    cache = other.forward([100, 101], use_cache=True).past_key_values
    with pytest.raises(ValueError, match="'past_key_values' was made by another LLM"):
        demo.forward([102], past_key_values=cache, use_cache=True)
    assert other.forward([102], past_key_values=cache, use_cache=True).logits.shape == (1, 50259)


def test_tokenizer_equals_hugging_faces():
    # The reference is Hugging Face's tokenizers on the folder's tokenizer.json (what it says it is;
    # transformers 5's AutoTokenizer swaps in Qwen2Tokenizer's own pre-tokenizer for a qwen2 model).
    tokenizer = Tokenizer(DEMO)
    reference = tokenizers.Tokenizer.from_file(f"{DEMO}/tokenizer.json")
    for text in (PROMPT, "  Two spaces, punctuation!? and 123 numbers.\nNew line", "naïve café — ünïcödé"):
        ids = tokenizer.encode(text)
        assert ids == reference.encode(text).ids
        assert tokenizer.decode(ids) == reference.decode(ids, skip_special_tokens=False)


def test_tokenizer_tokens_equal_transformers(hf_tokenizer):
    tokenizer = Tokenizer(DEMO)
    assert tokenizer.encode(PROMPT) == hf_tokenizer.encode(PROMPT)
    assert tokenizer.vocab_size == len(hf_tokenizer)
    assert tokenizer.eos_token == hf_tokenizer.eos_token
    assert tokenizer.eos_token_id == hf_tokenizer.eos_token_id


def test_chat_template_equals_transformers(hf_tokenizer):
    tokenizer = Tokenizer(DEMO)
    chat = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a river."},
            {"role": "assistant", "content": "The Nile."}, {"role": "user", "content": "Another?"}]
    for add in (False, True):
        text = tokenizer.apply_chat_template(chat, add_generation_prompt=add, tokenize=False)
        assert text == hf_tokenizer.apply_chat_template(chat, add_generation_prompt=add, tokenize=False)
        ids = tokenizer.apply_chat_template(chat, add_generation_prompt=add)
        assert ids == hf_tokenizer.apply_chat_template(chat, add_generation_prompt=add, tokenize=True, return_dict=False)
