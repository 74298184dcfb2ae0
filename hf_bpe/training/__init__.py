"""Training: options (:mod:`~hf_bpe.training.options`), counting documents and files
(:mod:`~hf_bpe.training.counting`) into word counts as data (:mod:`~hf_bpe.training.counts`),
the trainers (:mod:`~hf_bpe.training.trainer`, the merge loop's entry
:mod:`~hf_bpe.training.merging`), extending a vocabulary (:mod:`~hf_bpe.training.extending`),
superword training (:mod:`~hf_bpe.training.superword`), parity-aware training
(:mod:`~hf_bpe.training.parity`), pruning (:mod:`~hf_bpe.training.pruning`) and the StochasTok
augmentation (:mod:`~hf_bpe.training.augment`). Below the ``transformers`` adapter, above ``BPE``."""

from hf_bpe.training.augment import stochastok
from hf_bpe.training.counting import count, count_files
from hf_bpe.training.extending import extend
from hf_bpe.training.parity import train_parity
from hf_bpe.training.pruning import prune
from hf_bpe.training.trainer import train, train_files, train_from_counts

__all__ = ["count", "count_files", "extend", "train", "train_files", "train_from_counts", "train_parity", "prune",
           "stochastok"]
