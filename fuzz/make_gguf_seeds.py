#!/usr/bin/env python3
"""Writes the small GGUF seed files of the gguf fuzz target's corpus: complete llama models of a
few kilobytes (one layer, 8 wide) with an SPM and a BPE tokenizer, so that mutations reach the
model and tokenizer validation behind the reader. Run from the repository root."""
import struct
import sys

U32, I32, F32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9


def string(text):
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def value(kind, item):
    if kind == U32:
        return struct.pack("<I", item)
    if kind == I32:
        return struct.pack("<i", item)
    if kind == F32:
        return struct.pack("<f", item)
    if kind == BOOL:
        return struct.pack("<B", int(item))
    if kind == STRING:
        return string(item)
    element, items = item
    return struct.pack("<IQ", element, len(items)) + b"".join(value(element, x) for x in items)


def gguf(metadata, tensors):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, kind, item in metadata:
        out += string(key) + struct.pack("<I", kind) + value(kind, item)
    offset, blobs = 0, []
    for name, shape in tensors:
        count = 1
        for extent in shape:
            count *= extent
        out += string(name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", extent) for extent in shape)
        out += struct.pack("<IQ", 0, offset)  # f32
        blob = b"".join(struct.pack("<f", ((i * 7919) % 97 - 48) / 64.0) for i in range(count))
        blob += b"\0" * (-len(blob) % 32)
        blobs.append(blob)
        offset += len(blob)
    out += b"\0" * (-len(out) % 32)
    return out + b"".join(blobs)


def model(tokenizer):
    vocab = len(next(item for key, _, item in tokenizer if key == "tokenizer.ggml.tokens")[1])
    metadata = [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, "seed"),
        ("llama.embedding_length", U32, 8),
        ("llama.feed_forward_length", U32, 16),
        ("llama.block_count", U32, 1),
        ("llama.attention.head_count", U32, 2),
        ("llama.attention.head_count_kv", U32, 1),
        ("llama.context_length", U32, 32),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("llama.rope.freq_base", F32, 10000.0),
    ] + tokenizer
    tensors = [
        ("token_embd.weight", [8, vocab]),
        ("output_norm.weight", [8]),
        ("blk.0.attn_norm.weight", [8]),
        ("blk.0.attn_q.weight", [8, 8]),
        ("blk.0.attn_k.weight", [8, 4]),
        ("blk.0.attn_v.weight", [8, 4]),
        ("blk.0.attn_output.weight", [8, 8]),
        ("blk.0.ffn_norm.weight", [8]),
        ("blk.0.ffn_gate.weight", [8, 16]),
        ("blk.0.ffn_up.weight", [8, 16]),
        ("blk.0.ffn_down.weight", [16, 8]),
    ]
    return gguf(metadata, tensors)


SPM = [
    ("tokenizer.ggml.model", STRING, "llama"),
    ("tokenizer.ggml.tokens", ARRAY,
     (STRING, ["<unk>", "<s>", "</s>", "<0x41>", "\u2581a", "\u2581", "a", "b"])),
    ("tokenizer.ggml.scores", ARRAY, (F32, [0, 0, 0, 0, -1, -2, -3, -4])),
    ("tokenizer.ggml.token_type", ARRAY, (I32, [2, 3, 3, 6, 1, 1, 1, 1])),
    ("tokenizer.ggml.bos_token_id", U32, 1),
    ("tokenizer.ggml.eos_token_id", U32, 2),
    ("tokenizer.chat_template", STRING, "{% for m in messages %}<|im_start|>{{ m.content }}"),
]
BPE = [
    ("tokenizer.ggml.model", STRING, "gpt2"),
    ("tokenizer.ggml.pre", STRING, "llama-bpe"),
    ("tokenizer.ggml.tokens", ARRAY,
     (STRING, ["a", "b", "\u0120", "\u0120a", "ab", "<|begin_of_text|>", "<|eot_id|>", "!"])),
    ("tokenizer.ggml.token_type", ARRAY, (I32, [1, 1, 1, 1, 1, 3, 3, 1])),
    ("tokenizer.ggml.merges", ARRAY, (STRING, ["\u0120 a", "a b"])),
    ("tokenizer.ggml.bos_token_id", U32, 5),
    ("tokenizer.ggml.eos_token_id", U32, 6),
]

if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/gguf"
    for name, tokenizer in (("seed_spm.gguf", SPM), ("seed_bpe.gguf", BPE)):
        with open(f"{folder}/{name}", "wb") as out:
            out.write(model(tokenizer))
