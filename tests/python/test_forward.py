"""LLM.forward and Tokenizer on the trained demo model (models/demo's source, assets/demo-model: a
Qwen2 HF folder) against transformers: logits within the engine's parity tolerance, the course's
greedy(use_cache) loop both ways matching generate, and the tokenizer's encode / decode / chat
template equal to transformers' AutoTokenizer."""
import numpy as np
import pytest
import tokenizers
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import DEMO
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
