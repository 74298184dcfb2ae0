"""hf_bpe: a byte-level BPE tokenizer for people who train language models.

>>> import hf_bpe
>>> bpe = hf_bpe.train(["the cat sat on the mat"] * 10, vocab_size=265, progress=False)
>>> bpe.decode(bpe.encode("the cat")), bpe.vocab_size
('the cat', 265)
"""

from hf_bpe import _core
from hf_bpe.bpe import BPE
from hf_bpe.encoding_api import UnknownTokenError
from hf_bpe.formats import FormatError
from hf_bpe.registry import Encoding, encoding_for_model, encoding_name_for_model, get_encoding, list_encoding_names
from hf_bpe.training import (count, count_files, extend, prune, stochastok, train, train_files,
                             train_from_counts, train_parity)

__version__ = "0.1.0"
__all__ = ["BPE", "BPETokenizer", "FormatError", "UnknownTokenError", "WordCounts", "count", "count_files", "extend",
           "map_fn", "prune", "stochastok", "train", "train_files", "train_from_counts", "train_parity",
           "sample_corpus", "__version__",
           # tiktoken's entry points: `import hf_bpe as tiktoken` works
           "Encoding", "get_encoding", "list_encoding_names", "encoding_for_model", "encoding_name_for_model"]


def __getattr__(name: str):
    if name == "WordCounts":  # (it holds numpy arrays: numpy is imported on first use)
        from hf_bpe.training.counts import WordCounts

        return WordCounts
    # The transformers integration is imported on first use (transformers costs ~1-2 s).
    if name in ("BPETokenizer", "map_fn"):
        from hf_bpe import hf

        try:
            return getattr(hf, name)
        except ModuleNotFoundError as e:
            if e.name and e.name.split(".")[0] in ("transformers", "datasets", "huggingface_hub", "jinja2"):
                raise ModuleNotFoundError(f"hf_bpe.{name} needs the 'hf' extra ({e.name} is missing): "
                                          "pip install 'hf_bpe[hf]'", name=e.name) from e
            raise
    raise AttributeError(f"module 'hf_bpe' has no attribute {name!r}")


def sample_corpus() -> str:
    """Path of the small public-domain English corpus shipped with the package (21 Project
    Gutenberg books, 8.8 MB of text gzipped to 3.3 MB; see ``hf_bpe/data/README.md``)."""
    from importlib.resources import files

    return str(files("hf_bpe") / "data" / "english-sample.txt.gz")


# `AutoTokenizer` learns about BPETokenizer as soon as transformers is (or gets) imported.
from hf_bpe.hf import hook  # noqa: E402

hook.install()
