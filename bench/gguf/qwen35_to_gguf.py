#!/usr/bin/env python3
"""qwen35_to_gguf.py: converts a Qwen3.5 model directory (Hugging Face layout:
config.json, safetensors shards, tokenizer.json; as real checkpoints and
linserve-qwen35-random-model write it) to a GGUF file that llama.cpp's
"qwen35" architecture loads.

It exists so that linserve can be measured beside llama.cpp on the same
weights: the bench converts the random checkpoint it serves and runs
llama-bench / llama-server on the result (bench/gguf/qwen35_agreement.sh checks
that both give the same greedy tokens). It is written from the GGUF format
and the names and conventions llama.cpp's loader expects, with the standard
library only (no numpy, torch or gguf-py):

  * every RMSNorm weight except linear_attn.norm is stored as 1 + w (the
    checkpoint keeps them zero-centred);
  * A_log is stored as ssm_a = -exp(A_log); dt_bias as ssm_dt.bias;
  * conv1d.weight (C, 1, K) is squeezed to (C, K);
  * where the linear layers have more value heads than key heads, the value
    heads are reordered from grouped (all value heads of key head 0, then of
    key head 1, ...) to tiled (value head j of every key head, then j + 1),
    the order llama.cpp's broadcast expects;
  * vectors, norms, conv1d, ssm_a and ssm_dt.bias are stored as F32, the
    matrices as --outtype (auto keeps the checkpoint's dtype);
  * model.visual.* and mtp.* tensors are skipped (no nextn layers written).

  python3 bench/gguf/qwen35_to_gguf.py MODEL_DIR OUT.gguf [--outtype=auto|f32|bf16|f16]
"""

import argparse
import json
import math
import os
import struct
import sys
from array import array

# GGUF metadata value types.
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = range(10)
T_UINT64, T_INT64, T_FLOAT64 = 10, 11, 12

# ggml tensor types and llama file types.
GGML_F32, GGML_F16, GGML_BF16 = 0, 1, 30
FILE_TYPE = {GGML_F32: 0, GGML_F16: 1, GGML_BF16: 32}
GGML_OF = {"F32": GGML_F32, "F16": GGML_F16, "BF16": GGML_BF16}
BYTES_OF = {GGML_F32: 4, GGML_F16: 2, GGML_BF16: 2}
ALIGNMENT = 32

# llama.cpp token types.
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED = 1, 3, 4, 5


class ConvertError(Exception):
    pass


# ---------------------------------------------------------------------------
# Element conversions on raw little-endian bytes.

def bf16_to_f32(raw):
    out = bytearray(len(raw) * 2)
    out[2::4] = raw[0::2]
    out[3::4] = raw[1::2]
    return bytes(out)


def f16_to_f32(raw):
    n = len(raw) // 2
    return struct.pack(f"<{n}f", *struct.unpack(f"<{n}e", raw))


def f32_to_bf16(raw):
    # Round to nearest even, NaN kept a quiet NaN.
    words = array("I")
    words.frombytes(raw)
    if sys.byteorder != "little":
        words.byteswap()
    out = array("H", (
        ((w >> 16) | 0x40) if (w & 0x7FFFFFFF) > 0x7F800000 else
        ((w + 0x7FFF + ((w >> 16) & 1)) >> 16) & 0xFFFF for w in words))
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def f32_to_f16(raw, name):
    n = len(raw) // 4
    try:
        return struct.pack(f"<{n}e", *struct.unpack(f"<{n}f", raw))
    except (OverflowError, struct.error) as e:
        raise ConvertError(f"{name}: a value does not fit float16 ({e}); use --outtype=bf16 or f32")


def to_type(raw, src, dst, name):
    """raw bytes of dtype src (a GGML_* type) as dtype dst."""
    if src == dst:
        return raw
    f32 = raw if src == GGML_F32 else bf16_to_f32(raw) if src == GGML_BF16 else f16_to_f32(raw)
    if dst == GGML_F32:
        return f32
    if dst == GGML_BF16:
        return f32_to_bf16(f32)
    return f32_to_f16(f32, name)


def f32_values(raw):
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def f32_bytes(values):
    return struct.pack(f"<{len(values)}f", *values)


# ---------------------------------------------------------------------------
# Reading the checkpoint.

class Tensor:
    """One tensor of a safetensors shard, read on demand."""

    def __init__(self, path, start, dtype, shape, name):
        self.path, self.start, self.shape, self.name = path, start, list(shape), name
        if dtype not in GGML_OF:
            raise ConvertError(f"{name}: dtype {dtype} is not supported (F32, F16 or BF16)")
        self.type = GGML_OF[dtype]
        self.numel = math.prod(self.shape)

    def read(self):
        with open(self.path, "rb") as f:
            f.seek(self.start)
            raw = f.read(self.numel * BYTES_OF[self.type])
        if len(raw) != self.numel * BYTES_OF[self.type]:
            raise ConvertError(f"{self.name}: {self.path} ends inside the tensor")
        return raw


def read_shard(path):
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ConvertError(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (length,) = struct.unpack("<Q", head)
        if length > 100 << 20:
            raise ConvertError(f"{path}: header of {length} bytes is not a safetensors header")
        try:
            header = json.loads(f.read(length))
        except ValueError as e:
            raise ConvertError(f"{path}: header is not JSON ({e})")
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        t = Tensor(path, 8 + length + begin, info["dtype"], info["shape"], name)
        if end - begin != t.numel * BYTES_OF[t.type]:
            raise ConvertError(f"{path}: {name} spans {end - begin} bytes, its shape needs "
                               f"{t.numel * BYTES_OF[t.type]}")
        tensors[name] = t
    return tensors


def read_checkpoint(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
    else:
        shards = sorted(n for n in os.listdir(model_dir) if n.endswith(".safetensors"))
    if not shards:
        raise ConvertError(f"{model_dir}: no safetensors files")
    tensors = {}
    for shard in shards:
        tensors.update(read_shard(os.path.join(model_dir, shard)))
    # Canonical names: layers.N..., embed_tokens, norm, lm_head.
    canonical = {}
    for name, t in tensors.items():
        if name.startswith(("model.visual.", "visual.", "mtp.", "model.mtp.")):
            continue
        short = name
        for prefix in ("model.language_model.", "model."):
            if short.startswith(prefix):
                short = short[len(prefix):]
                break
        canonical[short] = t
    return canonical


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    text = config.get("text_config", config)
    if text.get("model_type") not in ("qwen3_5_text", "qwen3_5", None):
        raise ConvertError(f"config.json: model_type {text.get('model_type')!r} is not Qwen3.5")
    c = dict(text)
    if "tie_word_embeddings" in config and "tie_word_embeddings" not in text:
        c["tie_word_embeddings"] = config["tie_word_embeddings"]
    rope = dict(c.get("rope_parameters") or c.get("rope_scaling") or {})
    c["rope_theta"] = rope.get("rope_theta", c.get("rope_theta", 10000.0))
    c["partial_rotary_factor"] = rope.get("partial_rotary_factor", c.get("partial_rotary_factor", 0.25))
    c["mrope_section"] = list(rope.get("mrope_section", [11, 11, 10]))
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "vocab_size", "linear_num_key_heads",
                "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                "linear_conv_kernel_dim"):
        if not isinstance(c.get(key), int) or c[key] < 1:
            raise ConvertError(f"config.json: {key} is missing or not a positive integer")
    if c["linear_key_head_dim"] != c["linear_value_head_dim"]:
        raise ConvertError("config.json: llama.cpp's qwen35 needs linear_key_head_dim == "
                           "linear_value_head_dim")
    if c["linear_num_value_heads"] % c["linear_num_key_heads"]:
        raise ConvertError("config.json: linear_num_value_heads is not a multiple of "
                           "linear_num_key_heads")
    n = c["num_hidden_layers"]
    interval = c.get("full_attention_interval", 4)
    types = c.get("layer_types") or [
        "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]
    if len(types) != n:
        raise ConvertError(f"config.json: layer_types has {len(types)} entries, not {n}")
    if any((t == "full_attention") != ((i + 1) % interval == 0) for i, t in enumerate(types)):
        raise ConvertError("config.json: layer_types do not follow full_attention_interval "
                           f"{interval} (llama.cpp's qwen35 derives the layer kinds from it)")
    c["full_attention_interval"] = interval
    c["layer_types"] = types
    return c


# ---------------------------------------------------------------------------
# The tokenizer.

def load_tokenizer(model_dir, vocab_size):
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    model = tok.get("model", {})
    if model.get("type") != "BPE":
        raise ConvertError(f"tokenizer.json: model type {model.get('type')!r} is not BPE")
    by_id = {}
    for text, i in model["vocab"].items():
        by_id[i] = (text, TOKEN_NORMAL)
    by_text = {}
    for added in tok.get("added_tokens", []):
        content = added["content"]
        special = added.get("special", False) or (content.startswith("<|") and content.endswith("|>"))
        by_id[added["id"]] = (content, TOKEN_CONTROL if special else TOKEN_USER_DEFINED)
        by_text[content] = added["id"]
    if by_id and max(by_id) >= vocab_size:
        raise ConvertError(f"tokenizer.json: id {max(by_id)} is not below vocab_size {vocab_size}")
    tokens, types = [], []
    for i in range(vocab_size):
        text, kind = by_id.get(i, (f"[PAD{i}]", TOKEN_UNUSED))
        tokens.append(text)
        types.append(kind)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]

    config = {}
    path = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            config = json.load(f)

    def token_id(key, fallback):
        value = config.get(key, fallback)
        if isinstance(value, dict):
            value = value.get("content")
        if value is None:
            return None
        if value not in by_text:
            raise ConvertError(f"tokenizer_config.json: {key} {value!r} is not an added token")
        return by_text[value]

    specials = {
        # Qwen's files name no BOS; llama.cpp's Qwen GGUFs carry <|endoftext|>,
        # never added (add_bos_token false).
        "bos": token_id("bos_token", None) if config.get("bos_token") else by_text.get("<|endoftext|>"),
        "eos": token_id("eos_token", "<|im_end|>"),
        "pad": token_id("pad_token", "<|endoftext|>"),
    }
    return tokens, types, merges, specials, bool(config.get("add_bos_token", False))


# ---------------------------------------------------------------------------
# The GGUF writer.

def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


class Metadata:
    def __init__(self):
        self.items = []

    def add(self, key, kind, value):
        self.items.append(gguf_string(key) + struct.pack("<I", kind) + self._value(kind, value))

    def add_array(self, key, kind, values):
        body = struct.pack("<IQ", kind, len(values))
        if kind == T_STRING:
            body += b"".join(gguf_string(v) for v in values)
        else:
            fmt = {T_INT32: "i", T_UINT32: "I", T_FLOAT32: "f"}[kind]
            body += struct.pack(f"<{len(values)}{fmt}", *values)
        self.items.append(gguf_string(key) + struct.pack("<I", T_ARRAY) + body)

    @staticmethod
    def _value(kind, value):
        if kind == T_STRING:
            return gguf_string(value)
        return struct.pack({T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?",
                            T_UINT64: "<Q"}[kind], value)


class Output:
    """A tensor to write: its GGUF name, torch-order shape, type and a producer of bytes."""

    def __init__(self, name, shape, type_, produce):
        self.name, self.shape, self.type, self.produce = name, shape, type_, produce
        self.nbytes = math.prod(shape) * BYTES_OF[type_]


def reorder_v_heads(raw, rows, row_bytes, num_k, num_v_per_k, head_rows):
    """Rows of `raw` (rows x row_bytes) grouped (k, j, d) reordered to tiled (j, k, d)."""
    if rows != num_k * num_v_per_k * head_rows:
        raise ValueError("value head reorder: rows do not match the head counts")
    block = head_rows * row_bytes
    out = bytearray()
    for j in range(num_v_per_k):
        for k in range(num_k):
            start = (k * num_v_per_k + j) * block
            out += raw[start:start + block]
    return bytes(out)


def reorder_v_columns(raw, rows, cols, elem, num_k, num_v_per_k, head_dim):
    """Columns of each row reordered as reorder_v_heads reorders rows."""
    row_bytes = cols * elem
    out = bytearray()
    for r in range(rows):
        row = raw[r * row_bytes:(r + 1) * row_bytes]
        out += reorder_v_heads(row, cols, elem, num_k, num_v_per_k, head_dim)
    return bytes(out)


def plan_tensors(c, tensors, outtype):
    """The GGUF tensors, in block order, each with how its bytes are made."""
    H, n = c["hidden_size"], c["num_hidden_layers"]
    num_k, num_v = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
    per_k = num_v // num_k
    reorder = num_v != num_k
    used = set()
    plans = []

    def take(name, shape=None):
        if name not in tensors:
            raise ConvertError(f"checkpoint has no tensor {name}")
        t = tensors[name]
        if shape is not None and t.shape != shape:
            raise ConvertError(f"{name}: shape {t.shape}, expected {shape}")
        used.add(name)
        return t

    def matrix_type(t):
        return t.type if outtype is None else outtype

    def emit(gguf_name, t, shape=None, f32=False, transform=None):
        """transform(raw bytes in t's own type) -> raw bytes in t's own type."""
        shape = list(shape or t.shape)
        dst = GGML_F32 if f32 else matrix_type(t)

        def produce():
            raw = t.read()
            if transform is not None:
                raw = transform(raw)
            return to_type(raw, t.type, dst, t.name)
        plans.append(Output(gguf_name, shape, dst, produce))

    def emit_values(gguf_name, t, shape, fn):
        """A small F32 tensor computed element by element from t's values."""
        def produce():
            values = f32_values(to_type(t.read(), t.type, GGML_F32, t.name))
            return f32_bytes(fn(values))
        plans.append(Output(gguf_name, list(shape), GGML_F32, produce))

    def plus_one(values):
        return [v + 1.0 for v in values]

    def v_rows(head_rows, row_elems, elem_type):
        elem = BYTES_OF[elem_type]
        return lambda raw: reorder_v_heads(raw, num_v * head_rows, row_elems * elem, num_k, per_k,
                                           head_rows)

    emit("token_embd.weight", take("embed_tokens.weight", [c["vocab_size"], H]))
    emit_values("output_norm.weight", take("norm.weight", [H]), [H], plus_one)
    if "lm_head.weight" in tensors and not c.get("tie_word_embeddings", False):
        emit("output.weight", take("lm_head.weight", [c["vocab_size"], H]))
    elif "lm_head.weight" in tensors:
        used.add("lm_head.weight")  # tied: llama.cpp reuses token_embd

    for i in range(n):
        p, b = f"layers.{i}.", f"blk.{i}."
        emit_values(b + "attn_norm.weight", take(p + "input_layernorm.weight", [H]), [H], plus_one)
        emit_values(b + "post_attention_norm.weight",
                    take(p + "post_attention_layernorm.weight", [H]), [H], plus_one)
        if c["layer_types"][i] == "linear_attention":
            a = p + "linear_attn."
            qkv = take(a + "in_proj_qkv.weight", [2 * num_k * dk + num_v * dv, H])
            if reorder:
                qk_bytes = 2 * num_k * dk * H * BYTES_OF[qkv.type]
                v_fix = v_rows(dv, H, qkv.type)
                emit(b + "attn_qkv.weight", qkv,
                     transform=lambda raw, f=v_fix, s=qk_bytes: raw[:s] + f(raw[s:]))
            else:
                emit(b + "attn_qkv.weight", qkv)
            z = take(a + "in_proj_z.weight", [num_v * dv, H])
            emit(b + "attn_gate.weight", z, transform=v_rows(dv, H, z.type) if reorder else None)
            for hf, gg in (("in_proj_b.weight", "ssm_beta.weight"), ("in_proj_a.weight", "ssm_alpha.weight")):
                t = take(a + hf, [num_v, H])
                emit(b + gg, t, transform=v_rows(1, H, t.type) if reorder else None)
            K = c["linear_conv_kernel_dim"]
            conv = take(a + "conv1d.weight", [2 * num_k * dk + num_v * dv, 1, K])
            if reorder:
                qk_bytes = 2 * num_k * dk * K * BYTES_OF[conv.type]
                c_fix = v_rows(dv, K, conv.type)
                emit(b + "ssm_conv1d.weight", conv, shape=[conv.shape[0], K], f32=True,
                     transform=lambda raw, f=c_fix, s=qk_bytes: raw[:s] + f(raw[s:]))
            else:
                emit(b + "ssm_conv1d.weight", conv, shape=[conv.shape[0], K], f32=True)

            def heads(values):
                if not reorder:
                    return values
                return [values[k * per_k + j] for j in range(per_k) for k in range(num_k)]
            emit_values(b + "ssm_dt.bias", take(a + "dt_bias", [num_v]), [num_v], heads)
            emit_values(b + "ssm_a", take(a + "A_log", [num_v]), [num_v],
                        lambda v, h=heads: [-math.exp(x) for x in h(v)])
            emit_values(b + "ssm_norm.weight", take(a + "norm.weight", [dv]), [dv], lambda v: v)
            out = take(a + "out_proj.weight", [H, num_v * dv])
            elem = BYTES_OF[out.type]
            emit(b + "ssm_out.weight", out, transform=(
                lambda raw, e=elem: reorder_v_columns(raw, H, num_v * dv, e, num_k, per_k, dv))
                if reorder else None)
        else:
            s = p + "self_attn."
            D, nh, nkv = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
            emit(b + "attn_q.weight", take(s + "q_proj.weight", [2 * nh * D, H]))
            emit(b + "attn_k.weight", take(s + "k_proj.weight", [nkv * D, H]))
            emit(b + "attn_v.weight", take(s + "v_proj.weight", [nkv * D, H]))
            emit(b + "attn_output.weight", take(s + "o_proj.weight", [H, nh * D]))
            emit_values(b + "attn_q_norm.weight", take(s + "q_norm.weight", [D]), [D], plus_one)
            emit_values(b + "attn_k_norm.weight", take(s + "k_norm.weight", [D]), [D], plus_one)
        I = c["intermediate_size"]
        emit(b + "ffn_gate.weight", take(p + "mlp.gate_proj.weight", [I, H]))
        emit(b + "ffn_up.weight", take(p + "mlp.up_proj.weight", [I, H]))
        emit(b + "ffn_down.weight", take(p + "mlp.down_proj.weight", [H, I]))

    unused = sorted(set(tensors) - used)
    if unused:
        raise ConvertError(f"checkpoint tensors this converter does not know: {', '.join(unused[:8])}"
                           + (" ..." if len(unused) > 8 else ""))
    return plans


def metadata_for(c, tokenizer, file_type, name):
    tokens, types, merges, specials, add_bos = tokenizer
    arch = "qwen35"
    m = Metadata()
    m.add("general.architecture", T_STRING, arch)
    m.add("general.name", T_STRING, name)
    m.add("general.file_type", T_UINT32, file_type)
    m.add("general.alignment", T_UINT32, ALIGNMENT)
    k = lambda key: f"{arch}.{key}"
    m.add(k("block_count"), T_UINT32, c["num_hidden_layers"])
    m.add(k("context_length"), T_UINT32, c.get("max_position_embeddings", 262144))
    m.add(k("embedding_length"), T_UINT32, c["hidden_size"])
    m.add(k("feed_forward_length"), T_UINT32, c["intermediate_size"])
    m.add(k("attention.head_count"), T_UINT32, c["num_attention_heads"])
    m.add(k("attention.head_count_kv"), T_UINT32, c["num_key_value_heads"])
    m.add(k("attention.key_length"), T_UINT32, c["head_dim"])
    m.add(k("attention.value_length"), T_UINT32, c["head_dim"])
    m.add(k("attention.layer_norm_rms_epsilon"), T_FLOAT32, c.get("rms_norm_eps", 1e-6))
    m.add(k("rope.freq_base"), T_FLOAT32, c["rope_theta"])
    m.add(k("rope.dimension_count"), T_UINT32, int(c["head_dim"] * c["partial_rotary_factor"]))
    sections = (c["mrope_section"] + [0, 0, 0, 0])[:4]
    m.add_array(k("rope.dimension_sections"), T_INT32, sections)
    m.add(k("ssm.conv_kernel"), T_UINT32, c["linear_conv_kernel_dim"])
    m.add(k("ssm.state_size"), T_UINT32, c["linear_key_head_dim"])
    m.add(k("ssm.group_count"), T_UINT32, c["linear_num_key_heads"])
    m.add(k("ssm.time_step_rank"), T_UINT32, c["linear_num_value_heads"])
    m.add(k("ssm.inner_size"), T_UINT32, c["linear_value_head_dim"] * c["linear_num_value_heads"])
    m.add(k("full_attention_interval"), T_UINT32, c["full_attention_interval"])
    m.add("tokenizer.ggml.model", T_STRING, "gpt2")
    m.add("tokenizer.ggml.pre", T_STRING, "qwen35")
    m.add_array("tokenizer.ggml.tokens", T_STRING, tokens)
    m.add_array("tokenizer.ggml.token_type", T_INT32, types)
    m.add_array("tokenizer.ggml.merges", T_STRING, merges)
    for key, value in specials.items():
        if value is not None:
            m.add(f"tokenizer.ggml.{key}_token_id", T_UINT32, value)
    m.add("tokenizer.ggml.add_bos_token", T_BOOL, add_bos)
    return m


def write_gguf(path, metadata, plans):
    header = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(plans), len(metadata.items)))
    for item in metadata.items:
        header += item
    offset = 0
    for t in plans:
        ne = list(reversed(t.shape))  # ggml's order: the fastest dimension first
        header += gguf_string(t.name) + struct.pack(f"<I{len(ne)}QIQ", len(ne), *ne, t.type, offset)
        offset += t.nbytes + (-t.nbytes) % ALIGNMENT
    header += b"\0" * ((-len(header)) % ALIGNMENT)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header)
        for t in plans:
            raw = t.produce()
            if len(raw) != t.nbytes:
                raise ConvertError(f"{t.name}: made {len(raw)} bytes, expected {t.nbytes}")
            f.write(raw)
            f.write(b"\0" * ((-t.nbytes) % ALIGNMENT))
    os.replace(tmp, path)
    return len(header) + offset


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir")
    parser.add_argument("out")
    parser.add_argument("--outtype", choices=["auto", "f32", "bf16", "f16"], default="auto",
                        help="type of the matrices (auto: as the checkpoint holds them)")
    parser.add_argument("--name", default=None, help="general.name (default: the directory's name)")
    args = parser.parse_args()
    try:
        c = load_config(args.model_dir)
        tensors = read_checkpoint(args.model_dir)
        outtype = {"auto": None, "f32": GGML_F32, "bf16": GGML_BF16, "f16": GGML_F16}[args.outtype]
        plans = plan_tensors(c, tensors, outtype)
        matrix_types = {t.type for t in plans if len(t.shape) == 2 and not t.name.endswith("conv1d.weight")}
        file_type = FILE_TYPE[outtype if outtype is not None else
                              (matrix_types.pop() if len(matrix_types) == 1 else GGML_BF16)]
        tokenizer = load_tokenizer(args.model_dir, c["vocab_size"])
        name = args.name or os.path.basename(os.path.normpath(args.model_dir))
        size = write_gguf(args.out, metadata_for(c, tokenizer, file_type, name), plans)
    except ConvertError as e:
        print(f"qwen35_to_gguf: {e}", file=sys.stderr)
        return 1
    except (OSError, KeyError, ValueError) as e:
        print(f"qwen35_to_gguf: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"qwen35_to_gguf: wrote {args.out}: {len(plans)} tensors, {size / 1e6:.1f} MB, "
          f"file type {file_type}, {c['num_hidden_layers']} layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
