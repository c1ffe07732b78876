#!/usr/bin/env python3
"""Writes a tokenizer.json of Qwen3.5's size (about 248,000 tokens, 20 MB)
for linserve-tokenizer-bench's load-time and memory figures.

    bench/make_large_hf_tokenizer.py [--fixture ../shared/data/tokenizers/qwen35-style]
        [--tokens 248044] [--out build/hf-large/tokenizer.json]

It keeps the qwen35-style fixture's pipeline, bytes, merges and added tokens,
then appends seeded merges of two existing tokens (shorter ones likelier)
until the vocabulary has --tokens entries. The merges are valid but not
trained: the file has the shape and size of Qwen3.5's, not its statistics,
which is what loading costs depend on."""
import argparse
import json
import os
import random


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixture", default="../shared/data/tokenizers/qwen35-style")
    parser.add_argument("--tokens", type=int, default=248044)
    parser.add_argument("--out", default="build/hf-large/tokenizer.json")
    parser.add_argument("--seed", type=int, default=50)
    args = parser.parse_args()
    with open(os.path.join(args.fixture, "tokenizer.json"), encoding="utf-8") as f:
        tokenizer = json.load(f)
    model = tokenizer["model"]
    vocab = model["vocab"]
    merges = model["merges"]
    added = tokenizer["added_tokens"]
    rng = random.Random(args.seed)
    tokens = sorted(vocab, key=lambda t: vocab[t])
    next_id = len(vocab)
    target = args.tokens - len(added)
    while next_id < target:
        # Shorter tokens are likelier, as in a trained vocabulary.
        left = tokens[min(int(rng.expovariate(1 / 3000)), len(tokens) - 1)]
        right = tokens[min(int(rng.expovariate(1 / 3000)), len(tokens) - 1)]
        merged = left + right
        if merged in vocab or len(merged) > 24:
            continue
        vocab[merged] = next_id
        merges.append([left, right])
        tokens.append(merged)
        next_id += 1
    # The added tokens move past the grown vocabulary, in their order.
    for i, token in enumerate(added):
        token["id"] = next_id + i
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    print(f"{args.out}: {next_id + len(added)} tokens, {len(merges)} merges, "
          f"{os.path.getsize(args.out) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
