#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make_modelfiles_corpus.py OUT_DIR - seeds for fuzz_modelfiles (see its header for the
input layout): folders of a config.json beside complete, partial and contradictory
safetensors shards, index.json files and GGUF files."""
import json
import os
import struct
import sys

OUT = sys.argv[1]
NAMES = ["config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
         "model-00002-of-00002.safetensors", "model.safetensors", "model.gguf",
         "extra.safetensors", "model-00001-of-00003.safetensors"]


def entry(name, data, extend=None):
    kind = NAMES.index(name) | (0x80 if extend is not None else 0)
    out = struct.pack("<BH", kind, len(data)) + data
    if extend is not None:
        out += struct.pack("<I", extend >> 2)
    return out


def llama_config(h, layers, heads, kv, ffn, vocab, tied=False):
    return json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                       "hidden_size": h, "num_hidden_layers": layers,
                       "num_attention_heads": heads, "num_key_value_heads": kv,
                       "intermediate_size": ffn, "vocab_size": vocab,
                       "tie_word_embeddings": tied, "torch_dtype": "bfloat16"}).encode()


def llama_tensors(h, layers, heads, kv, ffn, vocab):
    hd = h // heads
    t = [("model.embed_tokens.weight", [vocab, h])]
    for i in range(layers):
        p = f"model.layers.{i}."
        t += [(p + "self_attn.q_proj.weight", [heads * hd, h]),
              (p + "self_attn.k_proj.weight", [kv * hd, h]),
              (p + "self_attn.v_proj.weight", [kv * hd, h]),
              (p + "self_attn.o_proj.weight", [h, heads * hd]),
              (p + "mlp.gate_proj.weight", [ffn, h]), (p + "mlp.up_proj.weight", [ffn, h]),
              (p + "mlp.down_proj.weight", [h, ffn]),
              (p + "input_layernorm.weight", [h]), (p + "post_attention_layernorm.weight", [h])]
    return t + [("model.norm.weight", [h]), ("lm_head.weight", [vocab, h])]


def safetensors(tensors, dtype="BF16", overlap=False):
    """Header bytes and the data size; 'overlap' starts every tensor at 0."""
    size = {"BF16": 2, "F32": 4}[dtype]
    head, off = {}, 0
    for name, shape in tensors:
        n = size
        for d in shape:
            n *= d
        begin = 0 if overlap else off
        head[name] = {"dtype": dtype, "shape": shape, "data_offsets": [begin, begin + n]}
        off = max(off, begin + n)
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * ((4 - (8 + len(h) + off) % 4) % 4)  # the extension is in units of 4 bytes
    return struct.pack("<Q", len(h)) + h, 8 + len(h) + off


def gguf(tensors, kv, overlap=False, align=32):
    """A GGUF v3 with u32 metadata (strings for str values) and F32 tensors (ne reversed)."""
    def s(x):
        x = x.encode()
        return struct.pack("<Q", len(x)) + x
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, v in kv.items():
        out += s(k) + (struct.pack("<I", 8) + s(v) if isinstance(v, str)
                       else struct.pack("<II", 4, v))
    off = 0
    for name, shape in tensors:
        ne = list(reversed(shape))
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        n = 4
        for d in ne:
            n *= d
        out += struct.pack("<IQ", 0, 0 if overlap else off)
        if not overlap:
            off += (n + align - 1) // align * align
    out += b"\0" * ((align - len(out) % align) % align)
    return out, len(out) + max(off, 64)


def gguf_llama_tensors(h, layers, heads, kv, ffn, vocab):
    hd = h // heads
    t = [("token_embd.weight", [vocab, h])]
    for i in range(layers):
        p = f"blk.{i}."
        t += [(p + "attn_norm.weight", [h]), (p + "attn_q.weight", [heads * hd, h]),
              (p + "attn_k.weight", [kv * hd, h]), (p + "attn_v.weight", [kv * hd, h]),
              (p + "attn_output.weight", [h, heads * hd]), (p + "ffn_norm.weight", [h]),
              (p + "ffn_gate.weight", [ffn, h]), (p + "ffn_up.weight", [ffn, h]),
              (p + "ffn_down.weight", [h, ffn])]
    return t + [("output_norm.weight", [h]), ("output.weight", [vocab, h])]


def index(shards):
    wm = {name: shard for shard, ts in shards.items() for name, _ in ts}
    return json.dumps({"metadata": {"total_size": 0}, "weight_map": wm}).encode()


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


os.makedirs(OUT, exist_ok=True)
dims = (8, 2, 2, 1, 16, 10)
cfg = llama_config(*dims)
ts = llama_tensors(*dims)
one, one_size = safetensors(ts)
half = len(ts) // 2
s1, s1_size = safetensors(ts[:half])
s2, s2_size = safetensors(ts[half:])
A, B = NAMES[2], NAMES[3]

write("complete_one_file", entry("config.json", cfg) + entry("model.safetensors", one, one_size))
write("complete_two_shards_index",
      entry("config.json", cfg) + entry(A, s1, s1_size) + entry(B, s2, s2_size) +
      entry(NAMES[1], index({A: ts[:half], B: ts[half:]})))
write("missing_shard_no_index", entry("config.json", cfg) + entry(A, s1, s1_size))
write("missing_shard_index", entry("config.json", cfg) + entry(A, s1, s1_size) +
      entry(NAMES[1], index({A: ts[:half], B: ts[half:]})))
write("index_names_absent_tensor",
      entry("config.json", cfg) + entry(A, s1, s1_size) + entry(B, s2, s2_size) +
      entry(NAMES[1], index({A: ts[:half] + [("model.extra.weight", [1])], B: ts[half:]})))
write("index_trimmed", entry("config.json", cfg) + entry(A, s1, s1_size) +
      entry(NAMES[1], index({A: ts[:half]})))
write("one_tensor_beside_config",
      entry("config.json", cfg) + entry("model.safetensors", *safetensors(ts[-2:-1])))
ov, ov_size = safetensors(ts, overlap=True)
write("overlapping_tensors", entry("config.json", cfg) + entry("model.safetensors", ov, ov_size))
write("shard_set_of_three", entry("config.json", cfg) + entry(NAMES[7], one, one_size))
write("config_zero_layers", entry("config.json", llama_config(8, 0, 2, 1, 16, 10)) +
      entry("model.safetensors", one, one_size))

big = (4096, 32, 32, 8, 14336, 128256)
bts = llama_tensors(*big)
bh, bsize = safetensors(bts)
write("llama3_8b_sparse", entry("config.json", llama_config(*big)) +
      entry("model.safetensors", bh, bsize))
write("llama3_8b_first_quarter", entry("config.json", llama_config(*big)) +
      entry("model.safetensors", *safetensors(bts[:len(bts) // 4])))

gkv = {"general.architecture": "llama", "llama.block_count": 2, "llama.embedding_length": 8,
       "llama.feed_forward_length": 16, "llama.attention.head_count": 2,
       "llama.attention.head_count_kv": 1, "llama.vocab_size": 10}
gts = gguf_llama_tensors(*dims)
g, gsize = gguf(gts, gkv)
write("gguf_complete", entry("model.gguf", g, gsize))
write("gguf_overlap", entry("model.gguf", *gguf(gts, gkv, overlap=True)))
write("gguf_few_tensors", entry("model.gguf", *gguf(gts[:2], gkv)))
write("gguf_split_part", entry("model.gguf", *gguf(gts, dict(gkv, **{"split.count": 3}))))
write("gguf_and_safetensors", entry("model.gguf", g, gsize) + entry("config.json", cfg) +
      entry("model.safetensors", one, one_size))
