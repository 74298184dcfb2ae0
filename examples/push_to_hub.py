"""Push an hf_bpe tokenizer to the Hugging Face Hub (or any hub set by HF_ENDPOINT) and load it
back with AutoTokenizer.

    HF_TOKEN=... python examples/push_to_hub.py user/my-tokenizer [TOKENIZER_DIR]

Without TOKENIZER_DIR, a small tokenizer is trained on the corpus bundled with hf_bpe. Loading
the pushed repo gives hf_bpe's BPETokenizer where hf_bpe is installed and transformers' own
tokenizers backend (same ids) elsewhere.
"""

import gzip
import sys

from transformers import AutoTokenizer

import hf_bpe

if len(sys.argv) < 2:
    sys.exit(__doc__)
repo_id = sys.argv[1]

if len(sys.argv) > 2:
    bpe = hf_bpe.BPE.load(sys.argv[2])
else:
    with gzip.open(hf_bpe.sample_corpus(), "rt", encoding="utf-8") as f:
        docs = f.read(1_000_000).split("\n<|endoftext|>\n")
    bpe = hf_bpe.train(docs, vocab_size=2000, progress=False)

tok = hf_bpe.BPETokenizer.from_bpe(bpe, model_max_length=1024)
tok.pad_token = tok.eos_token
url = tok.push_to_hub(repo_id, commit_message="Add hf_bpe tokenizer")
print("pushed:", url)

back = AutoTokenizer.from_pretrained(repo_id)
text = "Hello world, this is a tokenizer on the Hub."
assert back(text)["input_ids"] == tok(text)["input_ids"], "round trip changed the ids"
print(type(back).__name__, back(text)["input_ids"])
