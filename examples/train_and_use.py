"""Train a byte-level BPE tokenizer on a `datasets.Dataset`, save it, load it back with
`AutoTokenizer`, and tokenize the dataset with `ds.map`.

    python examples/train_and_use.py [OUT_DIR]

Uses the small English corpus bundled with hf_bpe (a slice of it, so this runs in seconds).
"""

import gzip
import sys

import datasets
from transformers import AutoTokenizer

import hf_bpe  # registers BPETokenizer with AutoTokenizer

out_dir = sys.argv[1] if len(sys.argv) > 1 else "out/example-tokenizer"

# 1. A dataset of documents: the first ~2 MB of the bundled corpus (documents are separated by
#    "\n<|endoftext|>\n"), cut into paragraphs.
with gzip.open(hf_bpe.sample_corpus(), "rt", encoding="utf-8") as f:
    raw = f.read(2_000_000)
docs = [p.strip() for d in raw.split("\n<|endoftext|>\n") for p in d.split("\n\n") if p.strip()]
ds = datasets.Dataset.from_dict({"text": docs})
print(f"{len(ds)} paragraphs, {sum(map(len, docs)) / 1e6:.1f} M characters")

# 2. Train (the Dataset is read through its "text" column) and save the tokenizer folder.
bpe = hf_bpe.train(ds, vocab_size=4000, special_tokens=["<|endoftext|>"], progress=False)
hf_bpe.BPETokenizer.from_bpe(bpe, model_max_length=1024).save_pretrained(out_dir)
print(f"trained {bpe}, saved to {out_dir}")

# 3. Load it like any Hugging Face tokenizer.
tok = AutoTokenizer.from_pretrained(out_dir)
print(type(tok).__name__, "vocab size", len(tok))
enc = tok("The quick brown fox jumps over the lazy dog.<|endoftext|>")
print("input_ids:", enc["input_ids"])
print("tokens:   ", tok.convert_ids_to_tokens(enc["input_ids"]))
print("decoded:  ", tok.decode(enc["input_ids"]))

# 4. Tokenize the dataset: the tokenizer accepts the batch dict that `map` passes.
tokenized = ds.map(tok, batched=True, remove_columns=["text"])
print(tokenized)
print("first row input_ids:", tokenized[0]["input_ids"][:20], "...")

# 5. The fastest path: Arrow batches in, Arrow columns out.
fast = ds.with_format("arrow").map(hf_bpe.map_fn(tok), batched=True)
assert fast.with_format(None)["input_ids"] == tokenized["input_ids"]
print(f"{sum(map(len, tokenized['input_ids']))} tokens in all")
