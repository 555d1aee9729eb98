"""What the Python package's tests share: the models and the CLI the build made (tests/python/
CMakeLists.txt passes their paths), and one LLM per model per test file."""
import json
import os
import subprocess

import pytest

import inferlab

CLI = os.environ["INFERLAB_CLI"]
SMOLLM2 = os.environ["INFERLAB_SMOLLM2"]    # the default model, llama.cpp's Q4_1 GGUF
DEMO = os.environ["INFERLAB_DEMO_MODEL"]    # the trained demo model, an HF folder (qwen2, bf16)
THREADS = 1                                 # the CLI and the package alike


@pytest.fixture(scope="module")
def smollm2():
    return inferlab.LLM(SMOLLM2, threads=THREADS)


@pytest.fixture(scope="module")
def demo():
    return inferlab.LLM(DEMO, threads=THREADS, weights="f32")


def cli_json(*args):
    """`inferlab ARGS --json`'s object."""
    done = subprocess.run([CLI, *args, "--json"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)
