#!/usr/bin/env python3
"""Converts a linserve RWKV-7 model directory to a GGUF file for llama.cpp.

    bench/gguf/rwkv7_to_gguf.py MODEL_DIR OUT.gguf [--outtype=f32|f16|bf16]
        [--vocab=rwkv_vocab_v20230424.txt]

Why: to measure linserve beside llama.cpp's llama-server on the very same
weights (bench/gguf/ttft_beside_llama.sh; the agreement check is
bench/gguf/rwkv7_agreement.sh). MODEL_DIR is what
`linserve-rwkv7-random-model` writes in its default format: config.json and
model.safetensors with the canonical names engine/rwkv7/rwkv7_config.cc uses
(blocks.N.att.x_r, att.w1 as (C, D), att.r_k as (H, N), ...). The output
loads as llama.cpp's RWKV7 architecture with the World vocabulary as
tokenizer.ggml.model "rwkv".

The layout llama.cpp expects (src/models/rwkv7.cpp, its converter's
Rwkv7Model, read for the format only):
  - the six token-shift mixes x_r x_w x_k x_v x_a x_g stacked, in that order,
    as blk.N.time_mix_lerp_fused (ggml dims [C, 1, 1, 6]);
  - the low-rank matrices w1 w2 a1 a2 v1 v2 g1 g2 transposed (a ggml matrix
    multiplies its rows by x, where the checkpoint computes x @ M);
  - r_k (H, N) flattened to (C);
  - block 0 has no value-residual LoRA, yet llama.cpp requires one: block 0's
    v0/v1/v2 are copies of its a0/a1/a2 (never used);
  - the decay w0 + LoRA enters as exp(-exp(-0.5) * sigmoid(.)), the same form
    as linserve's, so it is copied unchanged.
As llama.cpp's own converter does, 1-D tensors, w1, w2 and the fused mixes
are stored in float32 whatever --outtype says; every other matrix in
--outtype.

Standard library only: safetensors is an 8-byte header length, a JSON header
and raw little-endian bytes; bfloat16 to float32 is a 16-bit shift.
"""

import argparse
import array
import ast
import json
import mmap
import os
import struct
import sys

GGUF_VERSION = 3
ALIGNMENT = 32

# GGUF metadata value types.
T_UINT32, T_INT32, T_FLOAT32, T_STRING, T_ARRAY = 4, 5, 6, 8, 9
# ggml tensor types and llama file types of --outtype.
GGML_F32, GGML_F16, GGML_BF16 = 0, 1, 30
OUTTYPES = {"f32": (GGML_F32, 0), "f16": (GGML_F16, 1), "bf16": (GGML_BF16, 32)}
ELEMENT_BYTES = {GGML_F32: 4, GGML_F16: 2, GGML_BF16: 2}
# llama.cpp token types.
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_UNUSED = 1, 3, 5

LERPS = ["r", "w", "k", "v", "a", "g"]  # the order of time_mix_lerp_fused
LORAS = ["w", "a", "v", "g"]


class ConvertError(Exception):
    pass


def fail(message):
    raise ConvertError(message)


# --- reading the safetensors file -------------------------------------------


class Safetensors:
    """The tensors of one .safetensors file, read through mmap."""

    def __init__(self, path):
        try:
            self._file = open(path, "rb")
        except OSError as e:
            fail(f"cannot open {path}: {e.strerror}")
        size = os.fstat(self._file.fileno()).st_size
        if size < 8:
            fail(f"{path}: {size} bytes, too short for a safetensors file")
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        (header_len,) = struct.unpack("<Q", self._map[:8])
        if 8 + header_len > size:
            fail(f"{path}: header of {header_len} bytes runs past the end ({size} bytes)")
        try:
            header = json.loads(self._map[8 : 8 + header_len])
        except ValueError as e:
            fail(f"{path}: the header is not JSON ({e})")
        header.pop("__metadata__", None)
        self._base = 8 + header_len
        self.tensors = {}
        for name, info in header.items():
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            if dtype not in ("BF16", "F16", "F32"):
                fail(f"{path}: tensor '{name}' has dtype {dtype}; expected BF16, F16 or F32")
            count = 1
            for d in shape:
                count *= d
            if end - begin != count * (4 if dtype == "F32" else 2) or self._base + end > size:
                fail(f"{path}: tensor '{name}' {shape} {dtype} has {end - begin} bytes of data")
            self.tensors[name] = (dtype, list(shape), begin, end)
        self.path = path

    def shape(self, name):
        return self.tensors[name][1]

    def raw(self, name):
        dtype, _, begin, end = self.tensors[name]
        return dtype, self._map[self._base + begin : self._base + end]


def to_f32_bytes(dtype, data):
    """Little-endian float32 bytes of a BF16, F16 or F32 buffer."""
    if dtype == "F32":
        return bytes(data)
    if dtype == "BF16":
        out = bytearray(2 * len(data))
        out[2::4] = data[0::2]
        out[3::4] = data[1::2]
        return bytes(out)
    n = len(data) // 2
    return array.array("f", struct.unpack(f"<{n}e", data)).tobytes()


def f32_to(ggml_type, name, f32):
    """float32 bytes as `ggml_type`."""
    if ggml_type == GGML_F32:
        return f32
    values = array.array("f")
    values.frombytes(f32)
    if ggml_type == GGML_F16:
        out = bytearray()
        chunk = 1 << 20
        for i in range(0, len(values), chunk):
            part = values[i : i + chunk]
            try:
                out += struct.pack(f"<{len(part)}e", *part)
            except (OverflowError, struct.error):
                fail(f"tensor '{name}' has values beyond float16's range (65504); use --outtype=bf16 or f32")
        return bytes(out)
    # bfloat16, rounded to nearest even.
    bits = array.array("I")
    bits.frombytes(f32)
    return array.array("H", [((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF for b in bits]).tobytes()


def transpose_f32(f32, rows, cols):
    src = array.array("f")
    src.frombytes(f32)
    out = array.array("f")
    for j in range(cols):
        out.extend(src[j::cols])
    return out.tobytes()


# --- the tensors llama.cpp's RWKV7 loads ------------------------------------


class Tensor:
    """One GGUF tensor: its name, ggml dims (innermost first), type and a
    function that makes its bytes."""

    def __init__(self, name, dims, ggml_type, make):
        self.name, self.dims, self.type, self.make = name, dims, ggml_type, make
        count = 1
        for d in dims:
            count *= d
        self.nbytes = count * ELEMENT_BYTES[ggml_type]


def plan_tensors(st, outtype):
    """The GGUF tensors of the checkpoint and its hyperparameters."""
    def need(name, rank=None):
        if name not in st.tensors:
            fail(f"{st.path}: missing tensor '{name}' (is this a linserve RWKV-7 model in canonical names?)")
        shape = st.shape(name)
        if rank is not None and len(shape) != rank:
            fail(f"{st.path}: tensor '{name}' has shape {shape}, expected {rank} dimensions")
        return shape

    def f32_of(name):
        return to_f32_bytes(*st.raw(name))

    vocab_size, C = need("emb.weight", 2)
    H, N = need("blocks.0.att.r_k", 2)
    if H * N != C:
        fail(f"blocks.0.att.r_k is {H}x{N}, which is not the width {C}")
    layers = 0
    while f"blocks.{layers}.ln1.weight" in st.tensors:
        layers += 1
    if layers == 0:
        fail(f"{st.path}: no blocks.0.ln1.weight")
    if "blocks.0.ln0.weight" not in st.tensors:
        fail("the model has no blocks.0.ln0 (pre-norm); llama.cpp's RWKV7 always applies one")
    ffn = need("blocks.0.ffn.key.weight", 2)[0]
    lora = {x: need(f"blocks.0.att.{x}1", 2)[1] for x in ("w", "a", "g")}
    lora["v"] = need("blocks.1.att.v1", 2)[1] if layers > 1 else lora["a"]
    used = set()

    tensors = []

    def check_vector(name, length=C):
        used.add(name)
        shape = need(name)
        count = 1
        for d in shape:
            count *= d
        if count != length:
            fail(f"tensor '{name}' has shape {shape}, expected {length} elements")

    def vector(gguf_name, name):
        check_vector(name)
        tensors.append(Tensor(gguf_name, [C], GGML_F32, lambda: f32_of(name)))

    def matrix(gguf_name, name, rows, cols, transpose=False, force_f32=False):
        """A checkpoint matrix (rows, cols), stored as ggml dims [cols, rows],
        or transposed: [rows, cols]."""
        used.add(name)
        if need(name, 2) != [rows, cols]:
            fail(f"tensor '{name}' has shape {st.shape(name)}, expected {[rows, cols]}")
        ggml_type = GGML_F32 if force_f32 else outtype
        dims = [rows, cols] if transpose else [cols, rows]

        def make():
            dtype, data = st.raw(name)
            if not transpose and dtype == {GGML_BF16: "BF16", GGML_F16: "F16", GGML_F32: "F32"}[ggml_type]:
                return bytes(data)
            f32 = to_f32_bytes(dtype, data)
            if transpose:
                f32 = transpose_f32(f32, rows, cols)
            return f32_to(ggml_type, name, f32)

        tensors.append(Tensor(gguf_name, dims, ggml_type, make))

    matrix("token_embd.weight", "emb.weight", vocab_size, C)
    vector("token_embd_norm.weight", "blocks.0.ln0.weight")
    vector("token_embd_norm.bias", "blocks.0.ln0.bias")
    vector("output_norm.weight", "ln_out.weight")
    vector("output_norm.bias", "ln_out.bias")
    matrix("output.weight", "head.weight", vocab_size, C)
    for i in range(layers):
        b, g = f"blocks.{i}.", f"blk.{i}."
        vector(g + "attn_norm.weight", b + "ln1.weight")
        vector(g + "attn_norm.bias", b + "ln1.bias")
        vector(g + "attn_norm_2.weight", b + "ln2.weight")
        vector(g + "attn_norm_2.bias", b + "ln2.bias")

        lerp_names = [f"{b}att.x_{x}" for x in LERPS]
        for name in lerp_names:
            check_vector(name)
        tensors.append(Tensor(g + "time_mix_lerp_fused.weight", [C, 1, 1, len(LERPS)], GGML_F32,
                              lambda names=lerp_names: b"".join(f32_of(n) for n in names)))

        for x in LORAS:
            src = "a" if (x == "v" and i == 0) else x  # block 0: copies of a (unused)
            rank = lora["a"] if (x == "v" and i == 0) else lora[x]
            if x != "g":
                vector(f"{g}time_mix_{x}0.weight", f"{b}att.{src}0")
            force = x == "w"
            matrix(f"{g}time_mix_{x}1.weight", f"{b}att.{src}1", C, rank, True, force)
            matrix(f"{g}time_mix_{x}2.weight", f"{b}att.{src}2", rank, C, True, force)
        for x in ("k_k", "k_a", "r_k"):
            vector(f"{g}time_mix_{x}.weight", f"{b}att.{x}")
        for ours, theirs in (("key", "key"), ("value", "value"), ("receptance", "receptance"),
                             ("output", "output")):
            matrix(f"{g}time_mix_{theirs}.weight", f"{b}att.{ours}.weight", C, C)
        vector(g + "time_mix_ln.weight", b + "att.ln_x.weight")
        vector(g + "time_mix_ln.bias", b + "att.ln_x.bias")
        vector(g + "channel_mix_lerp_k.weight", b + "ffn.x_k")
        matrix(g + "channel_mix_key.weight", b + "ffn.key.weight", ffn, C)
        matrix(g + "channel_mix_value.weight", b + "ffn.value.weight", C, ffn)

    ignored = {"blocks.0.att.v0", "blocks.0.att.v1", "blocks.0.att.v2"}
    left = sorted(set(st.tensors) - used - ignored)
    if left:
        fail(f"{st.path}: tensors this converter does not know: {', '.join(left[:5])}"
             + (f" and {len(left) - 5} more" if len(left) > 5 else ""))
    hparams = {"vocab_size": vocab_size, "C": C, "N": N, "layers": layers, "ffn": ffn, "lora": lora}
    return tensors, hparams


# --- the World vocabulary ---------------------------------------------------


def world_tokens(path, vocab_size):
    """llama.cpp's "rwkv" token list: id 0 is <s>, ids 1.. the vocabulary
    file's lines (each its bytes as Python's repr writes them, without the
    b'' around), then padding up to the model's vocabulary."""
    tokens, types = [b"<s>"], [TOKEN_CONTROL]
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        fail(f"cannot read the vocabulary {path}: {e.strerror}")
    for number, line in enumerate(lines, 1):
        parts = line.split(" ")
        try:
            token_id, token, length = int(parts[0]), ast.literal_eval(" ".join(parts[1:-1])), int(parts[-1])
        except (ValueError, SyntaxError, IndexError):
            fail(f"{path}:{number}: not 'ID TOKEN LENGTH'")
        token = token.encode("utf-8") if isinstance(token, str) else token
        if token_id != len(tokens) or len(token) != length:
            fail(f"{path}:{number}: id {token_id} or length {length} does not follow")
        tokens.append(repr(token)[2:-1].encode("utf-8"))
        types.append(TOKEN_NORMAL)
    if len(tokens) > vocab_size:
        fail(f"the vocabulary has {len(tokens)} tokens, more than the model's {vocab_size}")
    for i in range(len(tokens), vocab_size):
        tokens.append(f"[PAD{i}]".encode("utf-8"))
        types.append(TOKEN_UNUSED)
    return tokens, types


# --- writing GGUF -------------------------------------------------------------


def gguf_string(s):
    data = s if isinstance(s, bytes) else s.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def gguf_kv(key, value_type, value):
    out = gguf_string(key) + struct.pack("<I", value_type)
    if value_type == T_UINT32:
        return out + struct.pack("<I", value)
    if value_type == T_FLOAT32:
        return out + struct.pack("<f", value)
    if value_type == T_STRING:
        return out + gguf_string(value)
    element_type, values = value
    out += struct.pack("<IQ", element_type, len(values))
    if element_type == T_STRING:
        return out + b"".join(gguf_string(v) for v in values)
    if element_type == T_INT32:
        return out + struct.pack(f"<{len(values)}i", *values)
    raise AssertionError(element_type)


def pad(n):
    return (ALIGNMENT - n % ALIGNMENT) % ALIGNMENT


def write_gguf(path, metadata, tensors):
    infos, offset = [], 0
    for t in tensors:
        infos.append(gguf_string(t.name) + struct.pack("<I", len(t.dims))
                     + struct.pack(f"<{len(t.dims)}Q", *t.dims) + struct.pack("<IQ", t.type, offset))
        offset += t.nbytes + pad(t.nbytes)
    head = b"GGUF" + struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(metadata))
    head += b"".join(metadata) + b"".join(infos)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head + b"\0" * pad(len(head)))
        for t in tensors:
            data = t.make()
            if len(data) != t.nbytes:
                raise AssertionError(f"{t.name}: {len(data)} bytes, expected {t.nbytes}")
            f.write(data + b"\0" * pad(len(data)))
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model_dir", help="a linserve RWKV-7 model directory (model.safetensors)")
    parser.add_argument("out", help="the GGUF file to write")
    parser.add_argument("--outtype", choices=sorted(OUTTYPES), default="f16")
    parser.add_argument("--vocab", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                        "../../../shared/data/rwkv7/rwkv_vocab_v20230424.txt"),
                        help="the World vocabulary file (rwkv_vocab_v20230424.txt)")
    parser.add_argument("--name", default="rwkv7", help="general.name")
    args = parser.parse_args()
    if sys.byteorder != "little":
        fail("this converter assumes a little-endian machine")
    weights = os.path.join(args.model_dir, "model.safetensors")
    if not os.path.exists(weights):
        fail(f"{weights} does not exist (write the model with linserve-rwkv7-random-model's "
             "default --format=safetensors)")
    outtype, file_type = OUTTYPES[args.outtype]
    st = Safetensors(weights)
    tensors, hp = plan_tensors(st, outtype)
    tokens, types = world_tokens(args.vocab, hp["vocab_size"])
    arch = "rwkv7"
    metadata = [
        gguf_kv("general.architecture", T_STRING, arch),
        gguf_kv("general.name", T_STRING, args.name),
        gguf_kv("general.file_type", T_UINT32, file_type),
        gguf_kv(f"{arch}.context_length", T_UINT32, 1048576),  # a recurrence: no context limit
        gguf_kv(f"{arch}.embedding_length", T_UINT32, hp["C"]),
        gguf_kv(f"{arch}.block_count", T_UINT32, hp["layers"]),
        gguf_kv(f"{arch}.feed_forward_length", T_UINT32, hp["ffn"]),
        gguf_kv(f"{arch}.attention.layer_norm_epsilon", T_FLOAT32, 1e-5),
        gguf_kv(f"{arch}.attention.head_count", T_UINT32, 0),  # required, unused
        gguf_kv(f"{arch}.wkv.head_size", T_UINT32, hp["N"]),
        gguf_kv(f"{arch}.attention.decay_lora_rank", T_UINT32, hp["lora"]["w"]),
        gguf_kv(f"{arch}.attention.iclr_lora_rank", T_UINT32, hp["lora"]["a"]),
        gguf_kv(f"{arch}.attention.value_residual_mix_lora_rank", T_UINT32, hp["lora"]["v"]),
        gguf_kv(f"{arch}.attention.gate_lora_rank", T_UINT32, hp["lora"]["g"]),
        gguf_kv("tokenizer.ggml.model", T_STRING, "rwkv"),
        gguf_kv("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tokens)),
        gguf_kv("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)),
        gguf_kv("tokenizer.ggml.bos_token_id", T_UINT32, 0),
        gguf_kv("tokenizer.ggml.eos_token_id", T_UINT32, 0),
    ]
    write_gguf(args.out, metadata, tensors)
    total = sum(t.nbytes for t in tensors)
    print(f"{args.out}: {len(tensors)} tensors, {total / 1e6:.1f} MB, {hp['layers']} layers, "
          f"width {hp['C']}, vocabulary {hp['vocab_size']}, --outtype={args.outtype}")


if __name__ == "__main__":
    try:
        main()
    except ConvertError as e:
        print(f"rwkv7_to_gguf: {e}", file=sys.stderr)
        sys.exit(1)
