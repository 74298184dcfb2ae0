"""hf_bpe: a byte-level BPE tokenizer for people who train language models."""

from hf_bpe import _core

__version__ = "0.1.0"
__all__ = ["_core"]
