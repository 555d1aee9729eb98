#!/usr/bin/python3
"""Convert an HF-layout qwen2, qwen3, qwen3_moe, gpt_oss, llama, gpt2 or bert model (safetensors + config.json + tokenizer.json) to a GGUF
v3 file that llama.cpp loads, in any of the tensor types inferlab runs, so llama.cpp can be measured
on (and compared with) the very weights that inferlab runs. numpy only, nothing downloaded.

  bench/hf_to_gguf.py MODEL_DIR --type TYPE --out FILE.gguf [--tokenizer DIR] [--pure]
  TYPE: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k q4_k_m q5_k_m

Tensor types follow what llama.cpp's own tools write by default:
- bf16 (as convert_hf_to_gguf.py --outtype bf16): every 2-D weight BF16; norms and biases F32.
- q8_0 (as llama-quantize ... Q8_0): every 2-D weight Q8_0, token_embd included; 1-D F32.
- q4_0 (as llama-quantize ... Q4_0): 2-D weights Q4_0, but the output matrix (token_embd when the
  embeddings are tied) gets llama-quantize's output type Q6_K, which falls back to Q8_0 when the
  row length is not a multiple of 256 (Qwen2.5-0.5B's 896 is not). This script has no Q6_K
  quantizer, so it writes Q8_0 in that case too and says so. --pure (like llama-quantize --pure)
  writes that tensor in the main type.
Q8_0 and Q4_0 blocks are computed exactly as ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref
(fp32 arithmetic, roundf / truncation, fp16 scale rounded to nearest even).
- q4_1 q5_0 q5_1 f16 f32: every 2-D weight in that type (like --pure; llama-quantize would give the
  output matrix Q6_K). The blocks are written from the GGUF format description (block layouts
  below), with simple min/max quantizers: an independent writer, not ggml's search.
- q4_k / q5_k / q6_k: every 2-D weight in that K-quant type (q6_k is also llama-quantize's Q6_K
  mix). q4_k_m / q5_k_m: llama-quantize's Q4_K_M / Q5_K_M mixes: Q4_K (Q5_K), but attn_v and
  ffn_down Q6_K in the layers use_more_bits() picks (the first and last eighth, every third
  between), and the output matrix (token_embd when tied) Q6_K. A K-quant needs rows that are a
  multiple of 256; other rows fall back as llama-quantize does: Q4_K -> Q5_0, Q5_K -> Q5_1,
  Q6_K -> Q8_0.
llama models get attn_q / attn_k rows permuted for ggml's interleaved RoPE, as convert_hf_to_gguf.py.
qwen3_moe models become llama.cpp's qwen3moe: each layer's experts stacked into 3-D tensors
blk.N.ffn_{gate,up,down}_exps ([experts, rows, cols]), the router blk.N.ffn_gate_inp kept F32 in every
type (as convert_hf_to_gguf.py and llama-quantize keep it), ffn_down_exps counted as ffn_down in the _M
mixes (llama-quantize's extra bits for attn_v / attn_k of 8-expert models, Mixtral's case, are not
applied; Qwen3-MoE's have 128). llama.cpp's qwen3moe renormalises the chosen experts' weights and makes every layer sparse, so
norm_topk_prob false, mlp_only_layers or decoder_sparse_step > 1 are refused.
gpt_oss models become llama.cpp's gpt-oss (as convert_hf_to_gguf.py writes it): transformers' stacked
experts (gate_up_proj [experts, hidden, 2 * inter], gate and up interleaved column by column; down_proj
[experts, inter, hidden]) split into blk.N.ffn_{gate,up}_exps and transposed to [experts, rows, cols],
the biases split likewise (ffn_{gate,up,down}_exps.bias, F32); the sinks as blk.N.attn_sinks.weight,
the router with its bias as ffn_gate_inp, the norm after attention as post_attention_norm. A checkpoint
whose experts are MXFP4 (the Hub's *_blocks / *_scales) keeps them MXFP4 in every type, repacked into
ggml's block (the scale byte, then 16 bytes: low nibbles elements 0-15, high nibbles 16-31; the Hub
packs elements 2j and 2j+1 in byte j), as convert_hf_to_gguf.py does; plain experts get the main type.
What llama.cpp's gpt-oss fixes is refused when the config differs: windows on the even layers only,
swiglu_limit 7, q/k/v/o biases. YaRN needs truncate false (how gpt-oss configs set it, and how
inferlab reads a gpt-oss GGUF).
gpt2 models get their Conv1D weights ([in, out]) written transposed, as linear layers [out, in]
(attn_qkv stays one fused q|k|v matrix), under llama.cpp's gpt2 names.
bert models (BertModel, e.g. sentence-transformers' all-MiniLM-L6-v2) become llama.cpp's bert: its
tensor names (token_types, token_embd_norm, attn_output_norm, layer_output_norm, ...; the pooler
and the masked-LM head dropped, as convert_hf_to_gguf.py drops them), position_embd and token_types
F32 in every type, bert.attention.causal false and bert.pooling_type from sentence-transformers'
modules.json (mean 1, cls 2, last token 3). Their WordPiece tokenizer.json is written as llama.cpp's
"bert" vocabulary: a word-initial piece gets a leading U+2581, a continuation piece loses its "##",
special tokens stay as they are; [CLS] as BOS and [SEP] as EOS / separator, both added.
A tokenizer.json BPE with byte_fallback (Llama 2, Mistral) is written as a SentencePiece vocabulary
(tokenizer.ggml.model "llama": scores, byte tokens); any other BPE as byte-level BPE ("gpt2").
"""
import argparse
import json
import os
import re
import struct
import sys

import numpy as np

GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q8_0 = 0, 1, 2, 3, 6, 7, 8
GGML_Q4_K, GGML_Q5_K, GGML_Q6_K, GGML_BF16, GGML_MXFP4 = 12, 13, 14, 30, 39
BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_BF16: (1, 2), GGML_Q8_0: (32, 34), GGML_Q4_0: (32, 18),
         GGML_Q4_1: (32, 20), GGML_Q5_0: (32, 22), GGML_Q5_1: (32, 24),
         GGML_Q4_K: (256, 144), GGML_Q5_K: (256, 176), GGML_Q6_K: (256, 210), GGML_MXFP4: (32, 17)}
TYPE_NAME = {GGML_F32: "F32", GGML_F16: "F16", GGML_BF16: "BF16", GGML_Q8_0: "Q8_0", GGML_Q4_0: "Q4_0",
             GGML_Q4_1: "Q4_1", GGML_Q5_0: "Q5_0", GGML_Q5_1: "Q5_1", GGML_Q4_K: "Q4_K", GGML_Q5_K: "Q5_K",
             GGML_Q6_K: "Q6_K", GGML_MXFP4: "MXFP4"}
# llama_ftype written to general.file_type
FILE_TYPE = {"f32": 0, "f16": 1, "bf16": 32, "q8_0": 7, "q4_0": 2, "q4_1": 3, "q5_0": 8, "q5_1": 9,
             "q4_k": 15, "q5_k": 17, "q6_k": 18, "q4_k_m": 15, "q5_k_m": 17}
MAIN_TYPE = {"f32": GGML_F32, "f16": GGML_F16, "bf16": GGML_BF16, "q8_0": GGML_Q8_0, "q4_0": GGML_Q4_0,
             "q4_1": GGML_Q4_1, "q5_0": GGML_Q5_0, "q5_1": GGML_Q5_1, "q4_k": GGML_Q4_K, "q5_k": GGML_Q5_K,
             "q6_k": GGML_Q6_K, "q4_k_m": GGML_Q4_K, "q5_k_m": GGML_Q5_K}
K_FALLBACK = {GGML_Q4_K: GGML_Q5_0, GGML_Q5_K: GGML_Q5_1, GGML_Q6_K: GGML_Q8_0}
# gguf-py TokenType
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6
# GGUF metadata value types
V_UINT32, V_INT32, V_FLOAT32, V_BOOL, V_STRING, V_ARRAY = 4, 5, 6, 7, 8, 9
ALIGNMENT = 32
ROWS_PER_CHUNK = 4096  # quantize in slices to bound the temporaries of the largest (embedding) matrix


class ConvertError(Exception):
    pass


# ---------------------------------------------------------------- safetensors

def read_safetensors(model_dir):
    """name -> (numpy view of the stored data, dtype string, shape); files memory-mapped."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    elif os.path.exists(os.path.join(model_dir, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        raise ConvertError(f"{model_dir}: no model.safetensors or model.safetensors.index.json")
    tensors = {}
    for name in files:
        path = os.path.join(model_dir, name)
        with open(path, "rb") as f:
            header_len = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(header_len))
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
        for key, info in header.items():
            if key == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            tensors[key] = (data[begin:end], info["dtype"], tuple(info["shape"]))
    return tensors


def to_f32(raw, dtype, shape):
    if dtype == "F32":
        return raw.view(np.float32).reshape(shape)
    if dtype == "F16":
        return raw.view(np.float16).astype(np.float32).reshape(shape)
    if dtype == "BF16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
    raise ConvertError(f"unsupported safetensors dtype {dtype}")


def to_bf16_bits(raw, dtype, shape):
    if dtype == "BF16":
        return raw.view(np.uint16).reshape(shape)
    bits = to_f32(raw, dtype, shape).view(np.uint32).astype(np.uint64)
    # round to nearest even, as ggml_fp32_to_bf16 (NaNs kept quiet)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(to_f32(raw, dtype, shape))
    return np.where(nan, ((bits >> 16) | 64).astype(np.uint16), rounded)


# ---------------------------------------------------------------- quantizers (ggml reference)

def quantize_q8_0(x):
    """x: float32 [rows, cols], cols % 32 == 0 -> uint8 [rows, cols/32 * 34]."""
    rows, cols = x.shape
    blocks = x.reshape(rows, cols // 32, 32).astype(np.float32)
    amax = np.abs(blocks).max(axis=2)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    scaled = (blocks * inv[:, :, None]).astype(np.float32).astype(np.float64)
    q = (np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)).astype(np.int8)  # roundf: half away from zero
    out = np.empty((rows, cols // 32, 34), dtype=np.uint8)
    out[:, :, 0:2] = d.astype(np.float16).view(np.uint8).reshape(rows, cols // 32, 2)
    out[:, :, 2:] = q.view(np.uint8)
    return out.reshape(rows, -1)


def quantize_q4_0(x):
    """x: float32 [rows, cols], cols % 32 == 0 -> uint8 [rows, cols/32 * 18]."""
    rows, cols = x.shape
    blocks = x.reshape(rows, cols // 32, 32).astype(np.float32)
    first_max = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=2)[:, :, None], axis=2)[:, :, 0]
    d = (first_max / np.float32(-8)).astype(np.float32)  # signed value of largest magnitude (first one)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    shifted = (blocks * inv[:, :, None]).astype(np.float32) + np.float32(8.5)
    q = np.minimum(15, np.trunc(shifted).astype(np.int8)).astype(np.uint8)  # (int8_t) cast truncates
    out = np.empty((rows, cols // 32, 18), dtype=np.uint8)
    out[:, :, 0:2] = d.astype(np.float16).view(np.uint8).reshape(rows, cols // 32, 2)
    out[:, :, 2:] = q[:, :, :16] | (q[:, :, 16:] << 4)
    return out.reshape(rows, -1)


# ---------------------------------------------------------------- quantizers from the block layouts
# Written from the GGUF format description (each block's byte layout and how a value is decoded),
# with plain min/max scale choices: any valid encoding is a fair parity input, since both engines
# read the same bytes.

def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def f16_bytes(x):
    return f16(x).view(np.uint8).reshape(*np.shape(x), 2)


def safe_div(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b != 0, a / np.where(b != 0, b, 1), 0).astype(np.float32)


def quantize_affine_32(x, bits, symmetric):
    """Q4_1 / Q5_0 / Q5_1 codes for blocks of 32: (d, m or None, q in [0, 2^bits))."""
    rows, cols = x.shape
    blocks = x.reshape(rows, cols // 32, 32).astype(np.float32)
    levels = (1 << bits) - 1
    if symmetric:  # Q5_0: d = signed largest / -16, value (q - 16) d
        first_max = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=2)[:, :, None], axis=2)[:, :, 0]
        d = f16(first_max / np.float32(-16)).astype(np.float32)
        q = np.clip(np.rint(safe_div(blocks, d[:, :, None])) + 16, 0, levels).astype(np.uint8)
        return d, None, q
    lo, hi = blocks.min(axis=2), blocks.max(axis=2)  # Q4_1 / Q5_1: value q d + m
    d = f16((hi - lo) / np.float32(levels)).astype(np.float32)
    m = f16(lo).astype(np.float32)
    q = np.clip(np.rint(safe_div(blocks - m[:, :, None], d[:, :, None])), 0, levels).astype(np.uint8)
    return d, m, q


def fifth_bits(q):
    """qh: bit j of the little-endian uint32 is bit 4 of weight j."""
    bit = ((q >> 4) & 1).astype(np.uint32)
    return (bit << np.arange(32, dtype=np.uint32)).sum(axis=2, dtype=np.uint32).astype("<u4").view(np.uint8).reshape(*q.shape[:2], 4)


def nibbles_32(q):
    """16 bytes: low nibble weight j, high nibble weight j + 16."""
    return (q[:, :, :16] & 15) | ((q[:, :, 16:] & 15) << 4)


def quantize_q4_1(x):  # d, m, qs[16]
    d, m, q = quantize_affine_32(x, 4, False)
    return np.concatenate([f16_bytes(d), f16_bytes(m), nibbles_32(q)], axis=2).reshape(x.shape[0], -1)


def quantize_q5_0(x):  # d, qh[4], qs[16]
    d, _, q = quantize_affine_32(x, 5, True)
    return np.concatenate([f16_bytes(d), fifth_bits(q), nibbles_32(q)], axis=2).reshape(x.shape[0], -1)


def quantize_q5_1(x):  # d, m, qh[4], qs[16]
    d, m, q = quantize_affine_32(x, 5, False)
    return np.concatenate([f16_bytes(d), f16_bytes(m), fifth_bits(q), nibbles_32(q)], axis=2).reshape(x.shape[0], -1)


def k_scales_mins(x, bits):
    """Q4_K / Q5_K: super-blocks of 256 in 8 sub-blocks of 32, value d*sc*q - dmin*m with 6-bit
    sc, m. Returns d, dmin [rows, sb], sc, m [rows, sb, 8], q [rows, sb, 256]."""
    rows, cols = x.shape
    sub = x.reshape(rows, cols // 256, 8, 32).astype(np.float32)
    levels = (1 << bits) - 1
    lo = np.minimum(sub.min(axis=3), 0)  # the min term is subtracted: m >= 0
    scale = (sub.max(axis=3) - lo) / np.float32(levels)
    d = f16(scale.max(axis=2) / np.float32(63)).astype(np.float32)
    dmin = f16(-lo.min(axis=2) / np.float32(63)).astype(np.float32)
    sc = np.clip(np.rint(safe_div(scale, d[:, :, None])), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(safe_div(-lo, dmin[:, :, None])), 0, 63).astype(np.uint8)
    step = (d[:, :, None] * sc).astype(np.float32)
    offset = (dmin[:, :, None] * m).astype(np.float32)
    q = np.clip(np.rint(safe_div(sub + offset[:, :, :, None], step[:, :, :, None])), 0, levels).astype(np.uint8)
    return d, dmin, sc, m, q.reshape(rows, cols // 256, 256)


def pack_k_scales(sc, m):
    """12 bytes: 0-3 sc0-3 (+ top bits of sc4-7), 4-7 m0-3 (+ top bits of m4-7), 8-11 low nibbles of sc4-7 | m4-7."""
    out = np.empty((*sc.shape[:2], 12), dtype=np.uint8)
    out[:, :, 0:4] = sc[:, :, 0:4] | ((sc[:, :, 4:8] >> 4) << 6)
    out[:, :, 4:8] = m[:, :, 0:4] | ((m[:, :, 4:8] >> 4) << 6)
    out[:, :, 8:12] = (sc[:, :, 4:8] & 15) | ((m[:, :, 4:8] & 15) << 4)
    return out


def k_nibbles(q):
    """128 bytes: per 64 weights c, byte 32c + l = weight 64c + l (low) | weight 64c + 32 + l (high)."""
    q = q.reshape(*q.shape[:2], 4, 2, 32)
    return ((q[:, :, :, 0, :] & 15) | ((q[:, :, :, 1, :] & 15) << 4)).reshape(*q.shape[:2], 128)


def quantize_q4_k(x):  # d, dmin, scales[12], qs[128]
    d, dmin, sc, m, q = k_scales_mins(x, 4)
    return np.concatenate([f16_bytes(d), f16_bytes(dmin), pack_k_scales(sc, m), k_nibbles(q)], axis=2).reshape(x.shape[0], -1)


def quantize_q5_k(x):  # d, dmin, scales[12], qh[32], qs[128]
    d, dmin, sc, m, q = k_scales_mins(x, 5)
    hi = ((q >> 4) & 1).reshape(*q.shape[:2], 4, 2, 32)  # bit 2c of qh[l]: weight 64c + l; bit 2c+1: 64c + 32 + l
    shifts = (2 * np.arange(4)[:, None] + np.arange(2)[None, :]).astype(np.uint8)
    qh = (hi << shifts[None, None, :, :, None]).sum(axis=(2, 3)).astype(np.uint8)
    return np.concatenate([f16_bytes(d), f16_bytes(dmin), pack_k_scales(sc, m), qh, k_nibbles(q)], axis=2).reshape(x.shape[0], -1)


def quantize_q6_k(x):  # ql[128], qh[64], scales[16] int8, d; value d * sc * (q - 32)
    rows, cols = x.shape
    sub = x.reshape(rows, cols // 256, 16, 16).astype(np.float32)
    first_max = np.take_along_axis(sub, np.abs(sub).argmax(axis=3)[:, :, :, None], axis=3)[:, :, :, 0]
    scale = first_max / np.float32(-32)
    d = f16(np.abs(scale).max(axis=2) / np.float32(127)).astype(np.float32)
    sc = np.clip(np.rint(safe_div(scale, d[:, :, None])), -128, 127).astype(np.int8)
    step = (d[:, :, None] * sc.astype(np.float32)).astype(np.float32)
    q = np.clip(np.rint(safe_div(sub, step[:, :, :, None])) + 32, 0, 63).astype(np.uint8).reshape(rows, cols // 256, 2, 4, 32)
    # per 128 weights h: q1..q4 = weights 128h + 32i + l; ql[64h + l] = q1 | q3 << 4, ql[64h + 32 + l] = q2 | q4 << 4,
    # qh[32h + l] = the top two bits of q1..q4 at bits 0, 2, 4, 6
    q1, q2, q3, q4 = q[:, :, :, 0], q[:, :, :, 1], q[:, :, :, 2], q[:, :, :, 3]
    ql = np.concatenate([(q1 & 15) | ((q3 & 15) << 4), (q2 & 15) | ((q4 & 15) << 4)], axis=3).reshape(rows, cols // 256, 128)
    qh = ((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6)).reshape(rows, cols // 256, 64)
    return np.concatenate([ql, qh, sc.view(np.uint8), f16_bytes(d)], axis=2).reshape(rows, -1)


QUANTIZE = {GGML_Q8_0: quantize_q8_0, GGML_Q4_0: quantize_q4_0, GGML_Q4_1: quantize_q4_1, GGML_Q5_0: quantize_q5_0,
            GGML_Q5_1: quantize_q5_1, GGML_Q4_K: quantize_q4_k, GGML_Q5_K: quantize_q5_k, GGML_Q6_K: quantize_q6_k}


def encode(raw, dtype, shape, ggml_type, permute_heads=None):
    """Stored tensor -> bytes of the GGUF tensor data (row-major; rows = all but the last dim)."""
    if dtype == "MXFP4" or ggml_type == GGML_MXFP4:  # blocks already in ggml's layout (repack_mxfp4)
        if dtype != "MXFP4" or ggml_type != GGML_MXFP4:
            raise ConvertError(f"MXFP4 is written only from MXFP4 blocks (got {dtype} for type {TYPE_NAME[ggml_type]})")
        return raw.tobytes()
    if permute_heads:
        values = permute_rows(to_f32(raw, dtype, shape), permute_heads)
        if ggml_type == GGML_BF16:
            bits = to_bf16_bits(raw, dtype, shape)
            return permute_rows(bits, permute_heads).tobytes()
        raw, dtype = np.ascontiguousarray(values).view(np.uint8).reshape(-1), "F32"
    if ggml_type == GGML_BF16:
        return to_bf16_bits(raw, dtype, shape).tobytes()
    if ggml_type == GGML_F32:
        return np.ascontiguousarray(to_f32(raw, dtype, shape)).tobytes()
    if ggml_type == GGML_F16:
        return f16(to_f32(raw, dtype, shape)).tobytes()
    matrix = to_f32(raw, dtype, shape).reshape(-1, shape[-1])
    quantize = QUANTIZE[ggml_type]
    return b"".join(quantize(np.ascontiguousarray(matrix[r:r + ROWS_PER_CHUNK])).tobytes()
                    for r in range(0, matrix.shape[0], ROWS_PER_CHUNK))


def permute_rows(w, heads):
    """convert_hf_to_gguf.py's llama permute: per head, rows (half i, pair j) -> (pair j, half i)."""
    shape = w.shape
    return w.reshape(heads, 2, shape[0] // heads // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


# ---------------------------------------------------------------- model mapping

def use_more_bits(layer, layers):
    """llama-quantize's choice of the layers whose attn_v / ffn_down get more bits in the _M mixes."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def tensor_plan(config, tensors, out_type, pure):
    """[(gguf name, hf name, ggml type, shape)] in llama.cpp's order, and notes on choices made."""
    if config.get("model_type") not in ("qwen2", "qwen3", "qwen3_moe", "gpt_oss", "llama", "gpt2", "bert"):
        raise ConvertError(f"model_type {config.get('model_type')!r}: this converter writes qwen2, qwen3, qwen3_moe, gpt_oss, "
                           "llama, gpt2 and bert only")
    layers = config.get("num_hidden_layers", config.get("n_layer"))
    main = MAIN_TYPE[out_type]
    tied = "lm_head.weight" not in tensors
    notes = []

    def wanted_type(gguf_name):
        # an encoder (bert) has no output matrix
        output_matrix = gguf_name == "output.weight" or (tied and gguf_name == "token_embd.weight" and config["model_type"] != "bert")
        if output_matrix and not pure and out_type in ("q4_0", "q4_k_m", "q5_k_m", "q6_k"):
            return GGML_Q6_K  # llama-quantize's output type for these
        if out_type in ("q4_k_m", "q5_k_m") and not pure:
            parts = gguf_name.split(".")
            if parts[0] == "blk" and parts[2] in ("attn_v", "ffn_down", "ffn_down_exps") and use_more_bits(int(parts[1]), layers):
                return GGML_Q6_K
        return main

    def weight_type(gguf_name, shape):
        if len(shape) < 2 or gguf_name.endswith((".ffn_gate_inp.weight", ".bias")):  # gpt-oss's experts' biases are 2-D
            return GGML_F32
        if config["model_type"] == "bert" and gguf_name in ("position_embd.weight", "token_types.weight"):
            return GGML_F32  # as convert_hf_to_gguf.py keeps them
        wanted = wanted_type(gguf_name)
        if out_type == "q4_0" and wanted == GGML_Q6_K:
            # this converter's q4_0 has always written Q8_0 there (the speed figures compare it)
            reason = ("its rows are not a multiple of 256" if shape[-1] % 256
                      else "q4_0 keeps Q8_0 here (llama-quantize would write Q6_K)")
            notes.append(f"{gguf_name}: Q8_0 ({reason})")
            return GGML_Q8_0
        if wanted in K_FALLBACK and shape[-1] % 256:
            fallback = K_FALLBACK[wanted]
            notes.append(f"{gguf_name}: {TYPE_NAME[fallback]} instead of {TYPE_NAME[wanted]} (rows of {shape[-1]}, "
                         "not a multiple of 256, as llama-quantize falls back)")
            wanted = fallback
        if shape[-1] % BLOCK[wanted][0]:
            raise ConvertError(f"{gguf_name}: row length {shape[-1]} is not a multiple of {BLOCK[wanted][0]}")
        return wanted

    if config["model_type"] == "gpt2":
        names = gpt2_names(config, tensors)
    elif config["model_type"] == "bert":
        names = bert_names(config, tensors)
    elif config["model_type"] == "gpt_oss":
        names = gpt_oss_names(config, tensors, tied)
    else:
        names = llama_family_names(config, tied)
    tied = "output.weight" not in {g for g, _ in names}
    plan = []
    for gguf_name, hf_name in names:
        if isinstance(hf_name, Derived):
            missing = [n for n in hf_name.sources if n not in tensors]
            if missing:
                raise ConvertError(f"tensor {missing[0]} is missing from the checkpoint")
            plan.append((gguf_name, hf_name, hf_name.ggml_type if hf_name.ggml_type is not None
                         else weight_type(gguf_name, hf_name.shape), hf_name.shape))
            continue
        if isinstance(hf_name, tuple):  # experts stacked: [experts, rows, cols]
            missing = [n for n in hf_name if n not in tensors]
            if missing:
                raise ConvertError(f"tensor {missing[0]} is missing from the checkpoint")
            plan.append((gguf_name, hf_name, weight_type(gguf_name, tensors[hf_name[0]][2]),
                         (len(hf_name), *tensors[hf_name[0]][2])))
            continue
        if (hf_name.endswith(".bias") or "_norm." in hf_name) and hf_name not in tensors and config["model_type"] in LLAMA_FAMILY:
            continue  # llama / qwen3 without attention_bias, qwen2 / llama without q/k norms
        if hf_name not in tensors:
            raise ConvertError(f"tensor {hf_name} is missing from the checkpoint")
        shape = tensors[hf_name][2]
        if is_gpt2_conv1d(config, gguf_name):
            shape = shape[::-1]  # Conv1D [in, out] -> linear [out, in]
        plan.append((gguf_name, hf_name, weight_type(gguf_name, shape), shape))
    unused = set(tensors) - {n for _, hf, _, _ in plan
                             for n in (hf.sources if isinstance(hf, Derived) else hf if isinstance(hf, tuple) else (hf,))}
    if config["model_type"] == "gpt2":
        # causal-mask buffers; a tied lm_head stored anyway is the embedding
        unused = {n for n in unused if not n.endswith((".attn.bias", ".attn.masked_bias")) and not (tied and n == "lm_head.weight")}
    if config["model_type"] == "bert":  # what llama.cpp's converter drops too: the pooler and the masked-LM head
        unused = {n for n in unused if not re.match(r"^(bert\.)?(embeddings\.position_ids|pooler\.|cls\.)", n)}
    if unused:
        raise ConvertError(f"checkpoint tensors this converter does not map: {sorted(unused)[:5]}")
    return plan, notes


LLAMA_FAMILY = ("qwen2", "qwen3", "qwen3_moe", "llama")
# bert: HF names inside encoder.layer.N. -> llama.cpp's inside blk.N.
BERT_LAYER = (("attn_q", "attention.self.query"), ("attn_k", "attention.self.key"), ("attn_v", "attention.self.value"),
              ("attn_output", "attention.output.dense"), ("attn_output_norm", "attention.output.LayerNorm"),
              ("ffn_up", "intermediate.dense"), ("ffn_down", "output.dense"), ("layer_output_norm", "output.LayerNorm"))


def bert_names(config, tensors):
    """[(gguf name, hf name)] of a BertModel (with or without the "bert." prefix), in llama.cpp's order."""
    p = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ConvertError(f"bert: position_embedding_type {config['position_embedding_type']!r} (llama.cpp's bert: absolute)")
    if config.get("hidden_act", "gelu") != "gelu":
        raise ConvertError(f"bert: hidden_act {config['hidden_act']!r} (llama.cpp's bert computes the exact GELU)")
    names = [("token_embd.weight", p + "embeddings.word_embeddings.weight"),
             ("token_types.weight", p + "embeddings.token_type_embeddings.weight"),
             ("position_embd.weight", p + "embeddings.position_embeddings.weight"),
             ("token_embd_norm.weight", p + "embeddings.LayerNorm.weight"),
             ("token_embd_norm.bias", p + "embeddings.LayerNorm.bias")]
    for i in range(config["num_hidden_layers"]):
        for gguf, hf in BERT_LAYER:
            names += [(f"blk.{i}.{gguf}.{part}", f"{p}encoder.layer.{i}.{hf}.{part}") for part in ("weight", "bias")]
    return names


# llama.cpp's gpt2 stores these as linear layers [out, in]: HF's Conv1D [in, out] transposed
GPT2_CONV1D = {"attn_qkv.weight", "attn_output.weight", "ffn_up.weight", "ffn_down.weight"}


def is_gpt2_conv1d(config, gguf_name):
    return config["model_type"] == "gpt2" and gguf_name.split(".", 2)[-1] in GPT2_CONV1D


def gpt2_names(config, tensors):
    """[(gguf name, hf name)] of GPT2LMHeadModel (with or without the "transformer." prefix)."""
    p = "transformer." if "transformer.wte.weight" in tensors else ""
    names = [("token_embd.weight", p + "wte.weight"), ("position_embd.weight", p + "wpe.weight")]
    for i in range(config["n_layer"]):
        g, h = f"blk.{i}.", f"{p}h.{i}."
        for gguf, hf in (("attn_norm", "ln_1"), ("attn_qkv", "attn.c_attn"), ("attn_output", "attn.c_proj"),
                         ("ffn_norm", "ln_2"), ("ffn_up", "mlp.c_fc"), ("ffn_down", "mlp.c_proj")):
            names += [(g + gguf + ".weight", h + hf + ".weight"), (g + gguf + ".bias", h + hf + ".bias")]
    names += [("output_norm.weight", p + "ln_f.weight"), ("output_norm.bias", p + "ln_f.bias")]
    if "lm_head.weight" in tensors and config.get("tie_word_embeddings", True) is False:
        names += [("output.weight", "lm_head.weight")]
    return names


def llama_family_names(config, tied):
    """[(gguf name, hf name)] of qwen2 / qwen3 / llama, in llama.cpp's order."""
    layers = config["num_hidden_layers"]
    names = [("token_embd.weight", "model.embed_tokens.weight")]
    for i in range(layers):
        p, hf = f"blk.{i}.", f"model.layers.{i}."
        names += [(p + "attn_norm.weight", hf + "input_layernorm.weight")]
        for g, h in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj")):
            names += [(p + g + ".weight", hf + f"self_attn.{h}.weight"), (p + g + ".bias", hf + f"self_attn.{h}.bias")]
        # Qwen3: an RMSNorm over each query and key head (llama.cpp's attn_q_norm / attn_k_norm)
        names += [(p + "attn_q_norm.weight", hf + "self_attn.q_norm.weight"),
                  (p + "attn_k_norm.weight", hf + "self_attn.k_norm.weight")]
        names += [(p + "attn_output.weight", hf + "self_attn.o_proj.weight"),
                  (p + "ffn_norm.weight", hf + "post_attention_layernorm.weight")]
        if config["model_type"] == "qwen3_moe":  # the router, then each matrix of all experts stacked
            experts = range(moe_experts(config))
            names += [(p + "ffn_gate_inp.weight", hf + "mlp.gate.weight")]
            names += [(p + f"ffn_{m}_exps.weight", tuple(hf + f"mlp.experts.{e}.{m}_proj.weight" for e in experts))
                      for m in ("gate", "down", "up")]
            continue
        names += [(p + "ffn_gate.weight", hf + "mlp.gate_proj.weight"),
                  (p + "ffn_up.weight", hf + "mlp.up_proj.weight"),
                  (p + "ffn_down.weight", hf + "mlp.down_proj.weight")]
    names += [("output_norm.weight", "model.norm.weight")]
    if not tied:
        names += [("output.weight", "lm_head.weight")]
    return names


class Derived:
    """A GGUF tensor computed from checkpoint tensors when it is written (one at a time in memory):
    compute(tensors) -> (raw bytes as uint8, dtype "F32" / "MXFP4", stored shape). shape is the GGUF
    tensor's [.., rows, cols]; ggml_type forces its type (MXFP4 blocks stay MXFP4)."""

    def __init__(self, sources, shape, compute, ggml_type=None):
        self.sources, self.shape, self.compute, self.ggml_type = tuple(sources), tuple(shape), compute, ggml_type


def f32_bytes(values):
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint8).reshape(-1)


def repack_mxfp4(blocks, scales):
    """The Hub's MXFP4 (blocks [..., n / 32, 16]: byte j holds elements 2j (low nibble) and 2j + 1;
    scales [..., n / 32]) -> ggml's block_mxfp4 per 32 elements: the scale byte, then qs[16] with
    element j in the low nibble of qs[j] and element j + 16 in its high nibble."""
    codes = np.empty((*blocks.shape[:-1], 32), dtype=np.uint8)
    codes[..., 0::2], codes[..., 1::2] = blocks & 0x0F, blocks >> 4
    qs = codes[..., :16] | (codes[..., 16:] << 4)
    return np.concatenate([scales[..., None], qs], axis=-1).reshape(*blocks.shape[:-2], -1)


GPT_OSS_YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096}


def gpt_oss_defaults(config):
    """GptOssConfig's defaults where the config.json leaves a key out (as gpt_oss.cpp fills them), and a
    refusal of what llama.cpp's gpt-oss graph computes otherwise."""
    c = dict(config)
    for key, value in (("rms_norm_eps", 1e-5), ("head_dim", 64), ("num_key_value_heads", 8), ("sliding_window", 128)):
        if key not in c or (c[key] is None and key != "sliding_window"):
            c[key] = value
    rope = c.get("rope_scaling") or c.get("rope_parameters") or {}
    if not rope:
        c["rope_scaling"] = dict(GPT_OSS_YARN)
    if c.get("rope_theta") is None and "rope_theta" not in (c.get("rope_parameters") or {}):
        c["rope_theta"] = 150000.0
    scaling = c.get("rope_scaling") or c.get("rope_parameters") or {}
    if scaling.get("rope_type", scaling.get("type")) == "yarn" and scaling.get("truncate", True) is not False:
        raise ConvertError("gpt_oss: YaRN with truncate true (or absent: transformers' default) cannot be written: a gpt-oss "
                           "GGUF is read with truncate false, as gpt-oss's config.json sets it")
    layers = c["num_hidden_layers"]
    alternating = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    if c.get("layer_types") not in (None, alternating):
        raise ConvertError(f"gpt_oss: layer_types {c['layer_types']}: llama.cpp's gpt-oss slides on the even layers only")
    if c["sliding_window"] is None:
        raise ConvertError("gpt_oss: sliding_window null: llama.cpp's gpt-oss always slides on the even layers")
    if float(c.get("swiglu_limit", 7.0)) != 7.0 or float(c.get("swiglu_alpha", 1.702)) != 1.702:
        raise ConvertError("gpt_oss: llama.cpp's gpt-oss computes the clamped SwiGLU with limit 7 and alpha 1.702 only")
    if c.get("attention_bias", True) is not True:
        raise ConvertError("gpt_oss: attention_bias false: llama.cpp's gpt-oss has q/k/v/o biases")
    return c


def gpt_oss_experts(config):
    experts = config.get("num_local_experts", config.get("num_experts"))
    if not experts:
        raise ConvertError("gpt_oss: num_local_experts missing or 0")
    return experts


def gpt_oss_names(config, tensors, tied):
    """[(gguf name, hf name or Derived)] of gpt_oss as llama.cpp's gpt-oss: experts split, transposed,
    stacked (MXFP4 blocks repacked, not decoded)."""
    E, H, I = gpt_oss_experts(config), config["hidden_size"], config["intermediate_size"]
    names = [("token_embd.weight", "model.embed_tokens.weight")]
    for i in range(config["num_hidden_layers"]):
        p, hf = f"blk.{i}.", f"model.layers.{i}."
        x = hf + "mlp.experts."
        names += [(p + "attn_norm.weight", hf + "input_layernorm.weight")]
        for g, h in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj"), ("attn_output", "o_proj")):
            names += [(p + g + ".weight", hf + f"self_attn.{h}.weight"), (p + g + ".bias", hf + f"self_attn.{h}.bias")]
        names += [(p + "attn_sinks.weight", hf + "self_attn.sinks"),
                  (p + "post_attention_norm.weight", hf + "post_attention_layernorm.weight"),
                  (p + "ffn_gate_inp.weight", hf + "mlp.router.weight"),
                  (p + "ffn_gate_inp.bias", hf + "mlp.router.bias")]
        mxfp4 = x + "gate_up_proj_blocks" in tensors
        for matrix, parity in (("gate", 0), ("up", 1)):  # gate = rows / columns 0::2 of gate_up, up = 1::2
            if mxfp4:
                def gate_up(t, parity=parity, x=x):
                    blocks = t[x + "gate_up_proj_blocks"][0].reshape(E, 2 * I, H // 32, 16)[:, parity::2]
                    scales = t[x + "gate_up_proj_scales"][0].reshape(E, 2 * I, H // 32)[:, parity::2]
                    return repack_mxfp4(blocks, scales).reshape(-1), "MXFP4", (E, I, H)
                names.append((p + f"ffn_{matrix}_exps.weight",
                              Derived((x + "gate_up_proj_blocks", x + "gate_up_proj_scales"), (E, I, H), gate_up, GGML_MXFP4)))
            else:
                def gate_up(t, parity=parity, x=x):
                    values = to_f32(*t[x + "gate_up_proj"][:2], (E, H, 2 * I))[:, :, parity::2]
                    return f32_bytes(values.transpose(0, 2, 1)), "F32", (E, I, H)
                names.append((p + f"ffn_{matrix}_exps.weight", Derived((x + "gate_up_proj",), (E, I, H), gate_up)))

            def bias(t, parity=parity, x=x):
                return f32_bytes(to_f32(*t[x + "gate_up_proj_bias"][:2], (E, 2 * I))[:, parity::2]), "F32", (E, I)
            names.append((p + f"ffn_{matrix}_exps.bias", Derived((x + "gate_up_proj_bias",), (E, I), bias)))
        if mxfp4:
            def down(t, x=x):
                blocks = t[x + "down_proj_blocks"][0].reshape(E, H, I // 32, 16)
                scales = t[x + "down_proj_scales"][0].reshape(E, H, I // 32)
                return repack_mxfp4(blocks, scales).reshape(-1), "MXFP4", (E, H, I)
            names.append((p + "ffn_down_exps.weight",
                          Derived((x + "down_proj_blocks", x + "down_proj_scales"), (E, H, I), down, GGML_MXFP4)))
        else:
            def down(t, x=x):
                return f32_bytes(to_f32(*t[x + "down_proj"][:2], (E, I, H)).transpose(0, 2, 1)), "F32", (E, H, I)
            names.append((p + "ffn_down_exps.weight", Derived((x + "down_proj",), (E, H, I), down)))
        names.append((p + "ffn_down_exps.bias", x + "down_proj_bias"))
    names += [("output_norm.weight", "model.norm.weight")]
    if not tied:
        names += [("output.weight", "lm_head.weight")]
    return names


def moe_experts(config):
    """The expert count of a qwen3_moe config, refusing what llama.cpp's qwen3moe does not compute."""
    experts = config.get("num_experts", config.get("num_local_experts"))
    if not experts:
        raise ConvertError("qwen3_moe: num_experts missing or 0")
    if config.get("norm_topk_prob") is not True:
        raise ConvertError("qwen3_moe: norm_topk_prob must be true (llama.cpp's qwen3moe always renormalises the chosen "
                           "experts' weights)")
    if config.get("mlp_only_layers") or config.get("decoder_sparse_step", 1) != 1:
        raise ConvertError("qwen3_moe: mlp_only_layers / decoder_sparse_step > 1 (dense layers) are not in llama.cpp's "
                           "qwen3moe")
    return experts


def read_tokenizer_files(tokenizer_dir):
    """(path of tokenizer.json, its JSON, tokenizer_config.json's JSON or {})."""
    path = os.path.join(tokenizer_dir, "tokenizer.json")
    if not os.path.exists(path):
        raise ConvertError(f"{tokenizer_dir}: no tokenizer.json (give --tokenizer DIR)")
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    if tok.get("model", {}).get("type") not in ("BPE", "WordPiece"):
        raise ConvertError(f"{path}: model type {tok.get('model', {}).get('type')!r}, need a BPE or WordPiece tokenizer")
    tok_config = {}
    if os.path.exists(os.path.join(tokenizer_dir, "tokenizer_config.json")):
        with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            tok_config = json.load(f)
    return path, tok, tok_config


def tokenizer_metadata(config, tokenizer_dir):
    """tokenizer.ggml.*: a BPE with byte_fallback (Llama 2, Mistral) as a SentencePiece vocabulary
    ("llama"), any other BPE as byte-level BPE ("gpt2")."""
    path, tok, tok_config = read_tokenizer_files(tokenizer_dir)
    if tok["model"]["type"] == "WordPiece":
        return wordpiece_tokenizer_metadata(config, path, tok, tok_config)
    if tok["model"].get("byte_fallback"):
        return spm_tokenizer_metadata(config, path, tok, tok_config)
    return bpe_tokenizer_metadata(config, path, tok, tok_config)


def token_text(value):
    """A tokenizer_config.json special token: a string or {"content": ...}."""
    return value.get("content") if isinstance(value, dict) else value


def spm_tokenizer_metadata(config, path, tok, tok_config):
    """tokenizer.ggml.* for a SentencePiece BPE vocabulary as llama.cpp reads it: tokens, a score per
    token, token types (control, byte, unknown, normal) and the special ids.

    tokenizer.json keeps no scores, but its merges are SentencePiece's scores in another form: the
    conversion to tokenizer.json lists the merges in order of the merged piece's score, and
    llama.cpp's tokenizer merges the pair whose joined piece scores highest. So a token made by
    merge number r scores -r (the first such merge), which keeps that order exactly, including
    pieces the model ranks last (Llama 2's and Mistral's "▁▁" scores -1e9: its merge is near the
    end of the list, so " Hello" stays "▁" "▁Hello"). Pieces no merge makes (single characters)
    score below every merge, in id order; <unk>, control and byte tokens score 0 as in the
    SentencePiece model."""
    model = tok["model"]
    vocab_size = config["vocab_size"]
    by_id = {i: t for t, i in model["vocab"].items()}
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    by_id.update({i: a["content"] for i, a in added.items()})
    if max(by_id) >= vocab_size:
        raise ConvertError(f"{path}: token id {max(by_id)} is outside vocab_size {vocab_size}")
    ids = {t: i for i, t in sorted(by_id.items(), reverse=True)}  # a repeated text: the first id
    missing = [f"<0x{b:02X}>" for b in range(256) if f"<0x{b:02X}>" not in ids]
    if missing:
        raise ConvertError(f"{path}: byte_fallback BPE without the byte tokens {missing[:3]}... ({len(missing)} of 256)")
    unk = ids.get(token_text(tok_config.get("unk_token")) or model.get("unk_token") or "<unk>")
    merges = model.get("merges", [])
    first_merge = {}
    for rank, merge in enumerate(merges):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        first_merge.setdefault(left + right, rank)
    tokens, scores, types = [], [], []
    unmerged = 0
    for i in range(vocab_size):
        text = by_id.get(i)
        if text is None:
            tokens.append(f"[PAD{i}]")
            scores.append(-1e9)
            types.append(TOKEN_UNUSED)
            continue
        tokens.append(text)
        if i == unk:
            kind = TOKEN_UNKNOWN
        elif i in added:
            kind = TOKEN_CONTROL if added[i].get("special") else TOKEN_USER_DEFINED
        elif re.fullmatch(r"<0x[0-9A-F]{2}>", text):
            kind = TOKEN_BYTE
        else:
            kind = TOKEN_NORMAL
        if kind != TOKEN_NORMAL:
            scores.append(0.0)
        elif text in first_merge:
            scores.append(float(-first_merge[text]))
        else:
            scores.append(float(-len(merges) - unmerged))  # after every merge
            unmerged += 1
        types.append(kind)
    # the text gets a leading "▁" (SentencePiece's add_dummy_prefix): tokenizer.json writes it as a
    # Prepend normalizer (or a Metaspace pre-tokenizer that prepends)
    steps = []
    for part in (tok.get("normalizer"), tok.get("pre_tokenizer")):
        if part:
            steps += part.get("normalizers") or part.get("pretokenizers") or [part]
    space_prefix = any((s.get("type") == "Prepend" and s.get("prepend") == "\u2581")
                       or (s.get("type") == "Metaspace" and s.get("prepend_scheme", "always") != "never"
                           and s.get("add_prefix_space", True)) for s in steps)
    meta = [("tokenizer.ggml.model", V_STRING, "llama"), ("tokenizer.ggml.pre", V_STRING, "default"),
            ("tokenizer.ggml.tokens", V_ARRAY, (V_STRING, tokens)),
            ("tokenizer.ggml.scores", V_ARRAY, (V_FLOAT32, scores)),
            ("tokenizer.ggml.token_type", V_ARRAY, (V_INT32, types))]
    for key, name in (("bos_token_id", "bos_token"), ("eos_token_id", "eos_token"), ("padding_token_id", "pad_token")):
        text = token_text(tok_config.get(name))
        if text is not None and text not in ids:
            raise ConvertError(f"{path}: tokenizer_config.json's {name} {text!r} is not in the vocabulary")
        if text is not None:
            meta.append((f"tokenizer.ggml.{key}", V_UINT32, ids[text]))
    if unk is not None:
        meta.append(("tokenizer.ggml.unknown_token_id", V_UINT32, unk))
    # LlamaTokenizer adds <s> and no </s> unless tokenizer_config.json says otherwise
    meta += [("tokenizer.ggml.add_bos_token", V_BOOL, bool(tok_config.get("add_bos_token", True))),
             ("tokenizer.ggml.add_eos_token", V_BOOL, bool(tok_config.get("add_eos_token", False))),
             ("tokenizer.ggml.add_space_prefix", V_BOOL, space_prefix)]
    if isinstance(tok_config.get("chat_template"), str):
        meta.append(("tokenizer.chat_template", V_STRING, tok_config["chat_template"]))
    return meta


def split_patterns(node):
    """The regexes of every Split inside a tokenizer.json pre_tokenizer (a Sequence's included)."""
    if isinstance(node, list):
        return [p for item in node for p in split_patterns(item)]
    if not isinstance(node, dict):
        return []
    pattern = node.get("pattern")
    own = [pattern["Regex"]] if node.get("type") == "Split" and isinstance(pattern, dict) and "Regex" in pattern else []
    return own + [p for key, value in node.items() if key != "pattern" for p in split_patterns(value)]


def wordpiece_tokenizer_metadata(config, path, tok, tok_config):
    """tokenizer.ggml.* for a BERT WordPiece tokenizer as llama.cpp's converter writes it: the
    "phantom space" vocabulary, token types, the special ids with [CLS] as BOS and [SEP] as EOS,
    both added (the TemplateProcessing [CLS] $A [SEP]), and the BertNormalizer's flags. What
    llama.cpp's WordPiece cannot do is refused: another subword prefix, no Chinese-character split."""
    model = tok["model"]
    if model.get("continuing_subword_prefix", "##") != "##":
        raise ConvertError(f"{path}: continuing_subword_prefix {model['continuing_subword_prefix']!r} (llama.cpp's: '##')")
    normalizer = tok.get("normalizer") or {}
    if normalizer.get("type") != "BertNormalizer":
        raise ConvertError(f"{path}: normalizer {normalizer.get('type')!r}; llama.cpp's WordPiece runs BertNormalizer")
    if normalizer.get("handle_chinese_chars", True) is not True or normalizer.get("clean_text", True) is not True:
        raise ConvertError(f"{path}: BertNormalizer without handle_chinese_chars / clean_text (llama.cpp always does both)")
    vocab_size = config["vocab_size"]
    by_id = {i: t for t, i in model["vocab"].items()}
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    by_id.update({i: a["content"] for i, a in added.items()})
    if max(by_id) >= vocab_size or len(by_id) != vocab_size:
        raise ConvertError(f"{path}: the vocabulary's ids are not 0..{vocab_size - 1} (config.json's vocab_size)")
    tokens, types = [], []
    for i in range(vocab_size):
        text = by_id[i]
        kind = (TOKEN_CONTROL if added[i].get("special") else TOKEN_USER_DEFINED) if i in added else TOKEN_NORMAL
        if kind != TOKEN_CONTROL:
            text = text[2:] if text.startswith("##") else "\u2581" + text
        tokens.append(text)
        types.append(kind)
    ids = {t: i for i, t in sorted(by_id.items(), reverse=True)}

    def special_id(name, fallback):
        text = token_text(tok_config.get(name)) or fallback
        if text not in ids:
            raise ConvertError(f"{path}: the {name} {text!r} is not in the vocabulary")
        return ids[text]

    cls, sep = special_id("cls_token", "[CLS]"), special_id("sep_token", "[SEP]")
    meta = [("tokenizer.ggml.model", V_STRING, "bert"), ("tokenizer.ggml.pre", V_STRING, "default"),
            ("tokenizer.ggml.token_type_count", V_UINT32, config.get("type_vocab_size", 2)),
            ("tokenizer.ggml.tokens", V_ARRAY, (V_STRING, tokens)),
            ("tokenizer.ggml.token_type", V_ARRAY, (V_INT32, types)),
            ("tokenizer.ggml.bos_token_id", V_UINT32, cls), ("tokenizer.ggml.eos_token_id", V_UINT32, sep),
            ("tokenizer.ggml.unknown_token_id", V_UINT32, special_id("unk_token", model.get("unk_token", "[UNK]"))),
            ("tokenizer.ggml.seperator_token_id", V_UINT32, sep),  # llama.cpp's spelling
            ("tokenizer.ggml.padding_token_id", V_UINT32, special_id("pad_token", "[PAD]")),
            ("tokenizer.ggml.cls_token_id", V_UINT32, cls),
            ("tokenizer.ggml.mask_token_id", V_UINT32, special_id("mask_token", "[MASK]")),
            ("tokenizer.ggml.add_bos_token", V_BOOL, True), ("tokenizer.ggml.add_eos_token", V_BOOL, True),
            ("tokenizer.ggml.normalizer.lowercase", V_BOOL, bool(normalizer.get("lowercase", True)))]
    if normalizer.get("strip_accents") is not None:
        meta.append(("tokenizer.ggml.normalizer.strip_accents", V_BOOL, bool(normalizer["strip_accents"])))
    return meta


def bpe_tokenizer_metadata(config, path, tok, tok_config):
    """tokenizer.ggml.* as convert_hf_to_gguf.py writes them for a Qwen2 or GPT-2 BPE tokenizer."""
    vocab_size = config["vocab_size"]
    by_id = {i: t for t, i in tok["model"]["vocab"].items()}
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    by_id.update({i: a["content"] for i, a in added.items()})
    if max(by_id) >= vocab_size:
        raise ConvertError(f"{path}: token id {max(by_id)} is outside vocab_size {vocab_size}")
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(TOKEN_UNUSED)
        elif i in added:
            text = by_id[i]
            special = added[i].get("special") or (text.startswith("<|") and text.endswith("|>"))
            tokens.append(text)
            types.append(TOKEN_CONTROL if special else TOKEN_USER_DEFINED)
        else:
            tokens.append(by_id[i])
            types.append(TOKEN_NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"].get("merges", [])]
    ids = {t: i for i, t in by_id.items()}

    def special_id(key, fallback):
        value = tok_config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str) and value in ids:
            return ids[value]
        return fallback

    eos = config.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) else eos
    # GPT-2's own pre-tokenizer (a plain ByteLevel with its regex, e.g. the trained demo model's) is
    # llama.cpp's "gpt2"; Qwen2's (a Split with its own pattern, then ByteLevel) is "qwen2".
    # o200k's Split (GPT-4o, gpt-oss: words split at case changes) is llama.cpp's "gpt-4o".
    pre_tok = tok.get("pre_tokenizer") or {}
    o200k = any(r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]" in pattern for pattern in split_patterns(pre_tok))
    pre = ("gpt-2" if pre_tok.get("type") == "ByteLevel" and pre_tok.get("use_regex", True)
           else "gpt-4o" if o200k else "qwen2")
    meta = [("tokenizer.ggml.model", V_STRING, "gpt2"), ("tokenizer.ggml.pre", V_STRING, pre),
            ("tokenizer.ggml.tokens", V_ARRAY, (V_STRING, tokens)),
            ("tokenizer.ggml.token_type", V_ARRAY, (V_INT32, types)),
            ("tokenizer.ggml.merges", V_ARRAY, (V_STRING, merges))]
    for key, name, fallback in (("eos_token_id", "eos_token", eos), ("bos_token_id", "bos_token", config.get("bos_token_id")),
                                ("padding_token_id", "pad_token", None)):
        value = special_id(name, fallback)
        if value is not None:
            meta.append((f"tokenizer.ggml.{key}", V_UINT32, int(value)))
    meta.append(("tokenizer.ggml.add_bos_token", V_BOOL, bool(tok_config.get("add_bos_token", False))))
    if isinstance(tok_config.get("chat_template"), str):
        meta.append(("tokenizer.chat_template", V_STRING, tok_config["chat_template"]))
    return meta


# ---------------------------------------------------------------- GGUF writer

def pack_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


SCALAR = {V_UINT32: "<I", V_INT32: "<i", V_FLOAT32: "<f", V_BOOL: "<?"}


def pack_value(vtype, value):
    if vtype == V_STRING:
        return pack_string(value)
    if vtype == V_ARRAY:
        element_type, items = value
        head = struct.pack("<IQ", element_type, len(items))
        if element_type == V_STRING:
            return head + b"".join(pack_string(s) for s in items)
        return head + np.asarray(items, dtype={V_INT32: "<i4", V_UINT32: "<u4", V_FLOAT32: "<f4"}[element_type]).tobytes()
    return struct.pack(SCALAR[vtype], value)


def tensor_bytes(ggml_type, shape):
    per_block, block_bytes = BLOCK[ggml_type]
    count = int(np.prod(shape))
    return count // per_block * block_bytes


def write_gguf(path, metadata, plan, tensors, permute=None, transpose=None):
    header = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(plan), len(metadata)))
    for key, vtype, value in metadata:
        header += pack_string(key) + struct.pack("<I", vtype) + pack_value(vtype, value)
    offset = 0
    for gguf_name, _, ggml_type, shape in plan:
        dims = list(reversed(shape))  # ggml ne[0] is the innermost (row) dimension
        header += pack_string(gguf_name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        header += struct.pack("<IQ", ggml_type, offset)
        offset += (tensor_bytes(ggml_type, shape) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    header += b"\0" * (-len(header) % ALIGNMENT)
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(header)
        for gguf_name, hf_name, ggml_type, shape in plan:
            if isinstance(hf_name, Derived):  # computed from the checkpoint's tensors now
                raw, dtype, stored_shape = hf_name.compute(tensors)
            elif isinstance(hf_name, tuple):  # stacked experts, one layer's at a time in memory
                raw = np.concatenate([tensors[n][0] for n in hf_name])
                dtype, stored_shape = tensors[hf_name[0]][1], shape
            else:
                raw, dtype, stored_shape = tensors[hf_name]
            if gguf_name in (transpose or ()):  # gpt2's Conv1D weights, written as linear layers
                values = np.ascontiguousarray(to_f32(raw, dtype, stored_shape).T)
                raw, dtype = values.view(np.uint8).reshape(-1), "F32"  # exact: bf16 / f16 values are f32 too
            heads = (permute or {}).get(gguf_name.split(".")[-2]) if gguf_name.startswith("blk.") else None
            data = encode(raw, dtype, shape, ggml_type, heads)
            if len(data) != tensor_bytes(ggml_type, shape):
                raise ConvertError(f"{gguf_name}: wrote {len(data)} bytes, expected {tensor_bytes(ggml_type, shape)}")
            f.write(data)
            f.write(b"\0" * (-len(data) % ALIGNMENT))
    os.replace(tmp, path)


def rope_scaling_metadata(config, arch):
    """rope_scaling (or transformers 5's rope_parameters) as convert_hf_to_gguf.py writes it: YaRN's
    type, factor, original context and betas; another scaling type is an error, not dropped."""
    if config.get("use_sliding_window"):  # llama.cpp's qwen2 / qwen3 read no window: it would be lost
        raise ConvertError("use_sliding_window true: GGUF's qwen2 / qwen3 have no key for Qwen's per-layer windows")
    scaling = config.get("rope_scaling") or config.get("rope_parameters") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return []
    if kind != "yarn":
        raise ConvertError(f"rope_scaling type {kind!r} is not written by this converter (yarn)")
    meta = [(f"{arch}.rope.scaling.type", V_STRING, "yarn"),
            (f"{arch}.rope.scaling.factor", V_FLOAT32, float(scaling["factor"])),
            (f"{arch}.rope.scaling.original_context_length", V_UINT32,
             int(scaling.get("original_max_position_embeddings", config.get("max_position_embeddings"))))]
    for key in ("beta_fast", "beta_slow"):
        if scaling.get(key) is not None:
            meta.append((f"{arch}.rope.scaling.yarn_{key}", V_FLOAT32, float(scaling[key])))
    return meta


def convert(model_dir, out_type, out_path, tokenizer_dir=None, pure=False):
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    if config.get("model_type") == "gpt_oss":
        config = gpt_oss_defaults(config)
    tensors = read_safetensors(model_dir)
    plan, notes = tensor_plan(config, tensors, out_type, pure)
    if config["model_type"] == "gpt2":
        return gpt2_convert(config, tensors, plan, notes, model_dir, out_type, out_path, tokenizer_dir)
    if config["model_type"] == "bert":
        return bert_convert(config, tensors, plan, notes, model_dir, out_type, out_path, tokenizer_dir)
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    arch = {"qwen3_moe": "qwen3moe", "gpt_oss": "gpt-oss"}.get(config["model_type"], config["model_type"])
    meta = [("general.architecture", V_STRING, arch),
            ("general.name", V_STRING, os.path.basename(os.path.normpath(model_dir))),
            ("general.file_type", V_UINT32, FILE_TYPE[out_type]),
            (f"{arch}.block_count", V_UINT32, config["num_hidden_layers"]),
            (f"{arch}.context_length", V_UINT32, config.get("max_position_embeddings", 32768)),
            (f"{arch}.embedding_length", V_UINT32, hidden),
            (f"{arch}.feed_forward_length", V_UINT32, config["intermediate_size"]),
            (f"{arch}.attention.head_count", V_UINT32, heads),
            (f"{arch}.attention.head_count_kv", V_UINT32, kv_heads),
            (f"{arch}.rope.freq_base", V_FLOAT32, float(config.get("rope_theta", (config.get("rope_parameters") or {}).get("rope_theta", 10000.0)))),
            (f"{arch}.attention.layer_norm_rms_epsilon", V_FLOAT32, float(config.get("rms_norm_eps", 1e-6)))]
    meta += rope_scaling_metadata(config, arch)
    if arch == "qwen3moe":
        meta += [(f"{arch}.expert_count", V_UINT32, moe_experts(config)),
                 (f"{arch}.expert_used_count", V_UINT32, config["num_experts_per_tok"]),
                 (f"{arch}.expert_feed_forward_length", V_UINT32, config["moe_intermediate_size"])]
    if arch == "gpt-oss":
        meta += [(f"{arch}.expert_count", V_UINT32, gpt_oss_experts(config)),
                 (f"{arch}.expert_used_count", V_UINT32, config.get("num_experts_per_tok", 4)),
                 (f"{arch}.expert_feed_forward_length", V_UINT32, config["intermediate_size"]),
                 (f"{arch}.attention.sliding_window", V_UINT32, config["sliding_window"])]
    if arch in ("llama", "qwen3", "qwen3moe", "gpt-oss"):
        head_dim = config.get("head_dim", hidden // heads)
        meta += [(f"{arch}.rope.dimension_count", V_UINT32, head_dim),
                 (f"{arch}.attention.key_length", V_UINT32, head_dim),
                 (f"{arch}.attention.value_length", V_UINT32, head_dim),
                 (f"{arch}.vocab_size", V_UINT32, config["vocab_size"])]
    if out_type not in ("bf16", "f16", "f32"):
        meta.append(("general.quantization_version", V_UINT32, 2))
    meta += tokenizer_metadata(config, tokenizer_dir or model_dir)
    # llama.cpp's llama architecture rotates interleaved pairs: q/k rows permuted per head
    permute = {"attn_q": heads, "attn_k": kv_heads} if arch == "llama" else None
    write_gguf(out_path, meta, plan, tensors, permute)
    return plan, notes


def gpt2_convert(config, tensors, plan, notes, model_dir, out_type, out_path, tokenizer_dir):
    """GPT2LMHeadModel as llama.cpp's gpt2 architecture: learned positions, LayerNorm with biases, a
    fused q|k|v, the tanh GELU."""
    act = config.get("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh"):
        raise ConvertError(f"activation_function {act!r}: llama.cpp's gpt2 computes the tanh GELU (gelu_new)")
    hidden = config["n_embd"]
    meta = [("general.architecture", V_STRING, "gpt2"),
            ("general.name", V_STRING, os.path.basename(os.path.normpath(model_dir))),
            ("general.file_type", V_UINT32, FILE_TYPE[out_type]),
            ("gpt2.block_count", V_UINT32, config["n_layer"]),
            ("gpt2.context_length", V_UINT32, config.get("n_positions", config.get("n_ctx", 1024))),
            ("gpt2.embedding_length", V_UINT32, hidden),
            ("gpt2.feed_forward_length", V_UINT32, config.get("n_inner") or 4 * hidden),
            ("gpt2.attention.head_count", V_UINT32, config["n_head"]),
            ("gpt2.attention.layer_norm_epsilon", V_FLOAT32, float(config.get("layer_norm_epsilon", 1e-5)))]
    if out_type not in ("bf16", "f16", "f32"):
        meta.append(("general.quantization_version", V_UINT32, 2))
    meta += tokenizer_metadata(config, tokenizer_dir or model_dir)
    write_gguf(out_path, meta, plan, tensors, transpose={g for g, _, _, _ in plan if is_gpt2_conv1d(config, g)})
    return plan, notes


def sentence_transformers_pooling(model_dir):
    """llama.cpp's pooling type of a sentence-transformers folder (modules.json's Pooling module):
    mean 1, cls 2, last token 3; None without one."""
    modules_file = os.path.join(model_dir, "modules.json")
    if not os.path.exists(modules_file):
        return None
    with open(modules_file) as f:
        pooling = [m for m in json.load(f) if m.get("type", "").endswith("Pooling")]
    if not pooling:
        return None
    with open(os.path.join(model_dir, pooling[0]["path"], "config.json")) as f:
        mode = json.load(f)
    for key, kind in (("pooling_mode_mean_tokens", 1), ("pooling_mode_cls_token", 2), ("pooling_mode_lasttoken", 3)):
        if mode.get(key):
            return kind
    raise ConvertError(f"{model_dir}: pooling {mode}: llama.cpp pools by mean, cls or last token only")


def bert_convert(config, tensors, plan, notes, model_dir, out_type, out_path, tokenizer_dir):
    """BertModel as llama.cpp's bert architecture: an encoder (no causal mask) whose hidden states are
    pooled as sentence-transformers configured."""
    meta = [("general.architecture", V_STRING, "bert"),
            ("general.name", V_STRING, os.path.basename(os.path.normpath(model_dir))),
            ("general.file_type", V_UINT32, FILE_TYPE[out_type]),
            ("bert.block_count", V_UINT32, config["num_hidden_layers"]),
            ("bert.context_length", V_UINT32, config["max_position_embeddings"]),
            ("bert.embedding_length", V_UINT32, config["hidden_size"]),
            ("bert.feed_forward_length", V_UINT32, config["intermediate_size"]),
            ("bert.attention.head_count", V_UINT32, config["num_attention_heads"]),
            ("bert.attention.layer_norm_epsilon", V_FLOAT32, float(config.get("layer_norm_eps", 1e-12))),
            ("bert.attention.causal", V_BOOL, False)]
    pooling = sentence_transformers_pooling(model_dir)
    if pooling is not None:
        meta.append(("bert.pooling_type", V_UINT32, pooling))
    if out_type not in ("bf16", "f16", "f32"):
        meta.append(("general.quantization_version", V_UINT32, 2))
    meta += tokenizer_metadata(config, tokenizer_dir or model_dir)
    write_gguf(out_path, meta, plan, tensors)
    return plan, notes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="HF model folder (config.json, model.safetensors)")
    parser.add_argument("--type", required=True, choices=sorted(MAIN_TYPE), help="GGUF weight type")
    parser.add_argument("--out", required=True, help="GGUF file to write")
    parser.add_argument("--tokenizer", help="folder with tokenizer.json when the model folder has none")
    parser.add_argument("--pure", action="store_true", help="output matrix in the main type too (llama-quantize --pure)")
    args = parser.parse_args()
    try:
        plan, notes = convert(args.model, args.type, args.out, args.tokenizer, args.pure)
    except (ConvertError, OSError, KeyError, json.JSONDecodeError) as e:
        sys.exit(f"hf_to_gguf: {e}")
    counts = {}
    for _, _, t, _ in plan:
        counts[TYPE_NAME[t]] = counts.get(TYPE_NAME[t], 0) + 1
    print(f"hf_to_gguf: wrote {args.out} ({os.path.getsize(args.out) / 1e6:.1f} MB; tensors "
          + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + ")")
    seen = {}
    for note in notes:  # one line per kind of fallback, with its count
        kind = note.split(": ", 1)[1]
        seen.setdefault(kind, []).append(note.split(": ", 1)[0])
    for kind, names in seen.items():
        print(f"hf_to_gguf: {names[0]}{f' and {len(names) - 1} more' if len(names) > 1 else ''}: {kind}")


if __name__ == "__main__":
    main()
