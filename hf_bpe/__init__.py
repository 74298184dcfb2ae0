"""hf_bpe: a byte-level BPE tokenizer for people who train language models.

>>> import hf_bpe
>>> bpe = hf_bpe.train(["the cat sat on the mat"] * 10, vocab_size=270, progress=False)
>>> bpe.vocab_size
270
"""

from hf_bpe import _core
from hf_bpe.bpe import BPE
from hf_bpe.formats import FormatError
from hf_bpe.training import train, train_files

__version__ = "0.1.0"
__all__ = ["BPE", "FormatError", "train", "train_files", "sample_corpus", "__version__"]


def sample_corpus() -> str:
    """Path of the small public-domain English corpus shipped with the package (21 Project
    Gutenberg books, 8.8 MB of text gzipped to 3.3 MB; see ``hf_bpe/data/README.md``)."""
    from importlib.resources import files

    return str(files("hf_bpe") / "data" / "english-sample.txt.gz")
