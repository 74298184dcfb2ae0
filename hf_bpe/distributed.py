"""Ray, the distributed engine: counting, training and encoding spread over a cluster, with the
results of the single-machine calls.

* **Shards.** A plain text or JSON-lines file is cut into byte ranges of about ``shard_bytes``,
  each starting where the reader itself may cut (``WordCounter.shard_cuts``: a line start, or a
  place where no pre-token can straddle), so one large file spreads over every worker and the
  shards' counts add up to the file's. A ``.gz`` file, and text counted with a custom regex,
  is one shard.
* **Counting** is one Ray task per shard, each on all of its worker's cores (the native core),
  returning :class:`~hf_bpe.WordCounts` (flat arrays: compact to ship); the counts are merged by
  a tree of tasks (``fan_in`` at a time), so the driver receives one result.
* **Training** is :func:`hf_bpe.train_from_counts` on the driver: its memory is that of the
  merged counts (``min_word_count=`` prunes rare words after the merge; exact when 0).
* **Encoding** sends the tokenizer to the cluster once (an object ref); workers encode batches
  or whole files with the native core.
* **Failures.** Tasks are retried when a worker dies (Ray's ``max_retries``); a shard's counts
  are only used once its task has returned, so a retried shard is neither lost nor counted twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hf_bpe import _core
from hf_bpe.bpe import BPE
from hf_bpe.training.counting import counts_of as _counts_of
from hf_bpe.training.counting import file_paths as _paths
from hf_bpe.training.counts import WordCounts
from hf_bpe.training.options import EMPTY

__all__ = ["count_files", "train_files", "train", "encode_dataset", "encode_files", "shards", "init"]

#: Bytes of a file per counting task.
DEFAULT_SHARD_BYTES = 64 << 20


def _ray():
    try:
        import ray
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError("hf_bpe.distributed needs Ray: pip install 'hf_bpe[ray]'", name="ray") from e
    return ray


def init(address: str | None = None, **kwargs: Any):
    """Connects to the Ray cluster at ``address`` (``"auto"``, ``"ray://host:10001"``), or starts a
    local one without it; a no-op when Ray is initialized already. Returns the ``ray`` module."""
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False, **kwargs)
    return ray


def shards(paths, special_tokens: Sequence[str] = ("<|endoftext|>",), pattern: str = "gpt2",
           shard_bytes: int = DEFAULT_SHARD_BYTES) -> list[tuple[str, tuple[int, int] | None]]:
    """The shards of ``paths``: ``(path, (start, end))`` byte ranges, or ``(path, None)`` for a file
    read whole (gzip, a custom regex on text, or a file of at most ``shard_bytes``)."""
    if shard_bytes < 1:
        raise ValueError(f"shard_bytes must be >= 1, not {shard_bytes}")
    counter = _core.WordCounter(pattern, list(special_tokens), 1)
    out: list[tuple[str, tuple[int, int] | None]] = []
    for p in _paths(paths):
        size = os.path.getsize(p)
        with open(p, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        if gz or size <= shard_bytes:
            out.append((p, None))
            continue
        try:
            cuts = counter.shard_cuts(p, list(range(shard_bytes, size, shard_bytes)))
        except ValueError as e:
            if "read whole" not in str(e):  # (a custom regex on text is read whole; other errors are errors)
                raise
            out.append((p, None))
            continue
        bounds = sorted(set([0, *cuts, size]))
        out.extend((p, (a, b)) for a, b in zip(bounds, bounds[1:]))
    return out


def _count_shard(path: str, rng: tuple[int, int] | None, specials: list[str], pattern: str, errors: str,
                 text_field: str, threads: int = 1) -> WordCounts:
    fault = os.environ.get("HF_BPE_FAULT_DIR")  # fault injection for the tests: die once per shard
    if fault and Path(fault).is_dir():
        mark = Path(fault) / f"{Path(path).name}-{rng[0] if rng else 0}"
        if not mark.exists():
            mark.touch()
            os._exit(1)
    counter = _core.WordCounter(pattern, specials, threads)
    counter.add_file(path, errors, text_field, None, rng)
    return _counts_of(counter, specials, pattern)


def _merge(*parts: WordCounts) -> WordCounts:
    return WordCounts.merge(parts)


def count_files(paths, special_tokens: Sequence[str] = ("<|endoftext|>",), pattern: str = "gpt2",
                errors: str = "strict", text_field: str = "text", *, shard_bytes: int = DEFAULT_SHARD_BYTES,
                fan_in: int = 8, cpus_per_task: int = 1, threads_per_task: int | None = None,
                address: str | None = None, progress: bool = True) -> WordCounts:
    """:func:`hf_bpe.count_files` on a Ray cluster: one task per shard (:func:`shards`), each
    reserving ``cpus_per_task`` of Ray's CPUs (Ray runs as many at once as the cluster has CPUs
    for) and counting on ``threads_per_task`` threads (default: ``cpus_per_task``), then a tree
    of merges. Equal to the single-machine counts."""
    from hf_bpe.training.options import check_specials as _check_specials

    specials = _check_specials(special_tokens)
    _core.pattern_source(pattern)
    ray = init(address)
    cpus = ray.cluster_resources().get("CPU", 0)
    if cpus_per_task > cpus:
        raise ValueError(f"cpus_per_task={cpus_per_task} is more than the cluster's {cpus:g} CPUs: no task could run")
    threads = threads_per_task or cpus_per_task
    task = ray.remote(max_retries=3, num_cpus=cpus_per_task)(_count_shard)
    merge = ray.remote(max_retries=3)(_merge)
    todo = shards(paths, specials, pattern, shard_bytes)
    refs = [task.remote(p, r, specials, pattern, errors, text_field, threads) for p, r in todo]
    if progress:
        from hf_bpe.progress import _tqdm

        with _tqdm(total=len(refs), desc="counting shards", unit="shard") as bar:
            pending = list(refs)
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                bar.update(len(done))
    k = max(2, fan_in)
    while len(refs) > 1:
        refs = [merge.remote(*refs[i:i + k]) if len(refs) - i > 1 else refs[i] for i in range(0, len(refs), k)]
    return ray.get(refs[0])


def train_files(paths, vocab_size: int = 32000, special_tokens: Sequence[str] = ("<|endoftext|>",),
                pattern: str = "gpt2", tie_break: str = "lexicographic", min_frequency: int = 0,
                max_token_length: int | None = None, errors: str = "strict", text_field: str = "text", *,
                min_word_count: int = 0, shard_bytes: int = DEFAULT_SHARD_BYTES, cpus_per_task: int = 1,
                threads_per_task: int | None = None, address: str | None = None, progress: bool = True,
                superword_transition: int | None = None, superword_max_words: int | None = None,
                merge_filter: Any = None) -> BPE:
    """:func:`hf_bpe.train_files` with the counting on a Ray cluster (equal results); the merge
    loop runs on the driver. ``min_word_count`` prunes the merged counts (see
    :func:`hf_bpe.train_from_counts`). With ``superword_transition`` the cluster counts superword
    spans (:mod:`hf_bpe.training.superword`). ``merge_filter`` as in :func:`hf_bpe.train`."""
    from hf_bpe.training.options import check_options as _check_options
    from hf_bpe.training.superword import check_superword, span_pattern
    from hf_bpe.training.trainer import train_from_counts

    specials = _check_options(vocab_size, special_tokens, tie_break, min_frequency, max_token_length)
    if superword_transition is not None:
        check_superword(superword_transition, vocab_size, specials)
        pattern = span_pattern(pattern, *([] if superword_max_words is None else [superword_max_words]))
    counts = count_files(paths, special_tokens, pattern, errors, text_field, shard_bytes=shard_bytes,
                         cpus_per_task=cpus_per_task, threads_per_task=threads_per_task, address=address,
                         progress=progress)
    return train_from_counts(counts, vocab_size, tie_break, min_frequency, max_token_length, min_word_count, progress,
                             superword_transition=superword_transition, merge_filter=merge_filter)


class _CountBatch:
    def __init__(self, specials: list[str], pattern: str, text_column: str) -> None:
        self.specials, self.pattern, self.column = specials, pattern, text_column

    def __call__(self, batch):
        import pickle

        import pyarrow as pa

        texts = [t for t in batch.column(self.column).to_pylist() if t is not None]
        counter = _core.WordCounter(self.pattern, self.specials, 1)  # one thread: one actor per CPU
        counter.add_texts(texts)
        counts = _counts_of(counter, self.specials, self.pattern)
        return pa.table({"counts": pa.array([pickle.dumps(counts)], pa.large_binary())})


def train(dataset, vocab_size: int = 32000, text_column: str = "text",
          special_tokens: Sequence[str] = ("<|endoftext|>",), pattern: str = "gpt2", tie_break: str = "lexicographic",
          min_frequency: int = 0,
          max_token_length: int | None = None, *, min_word_count: int = 0, batch_size: int = 4096,
          progress: bool = True) -> BPE:
    """:func:`hf_bpe.train` on a ``ray.data.Dataset``: its blocks are counted where they are
    (``map_batches``), the counts merged, then trained on the driver."""
    import pickle

    from hf_bpe.training.options import check_options as _check_options
    from hf_bpe.training.trainer import train_from_counts

    specials = _check_options(vocab_size, special_tokens, tie_break, min_frequency, max_token_length)
    if text_column not in dataset.columns():
        raise ValueError(f"the dataset has no column {text_column!r} (columns: {dataset.columns()}); pass text_column=")
    per_block = dataset.select_columns([text_column]).map_batches(
        _CountBatch, fn_constructor_args=(specials, pattern, text_column), batch_format="pyarrow",
        batch_size=batch_size, concurrency=(1, max(1, int(_ray().cluster_resources().get("CPU", 1)))))
    parts: list[WordCounts] = []
    for row in per_block.iter_rows():  # merged 64 blocks at a time: the driver holds one result and 64 parts
        parts.append(pickle.loads(row["counts"]))
        if len(parts) > 64:
            parts = [WordCounts.merge(parts)]
    if not parts:
        raise ValueError(EMPTY)
    return train_from_counts(WordCounts.merge(parts), vocab_size, tie_break, min_frequency, max_token_length,
                             min_word_count, progress)


def _engine(tokenizer) -> BPE:
    """The BPE that encodes for ``tokenizer`` (a BPE, or a BPETokenizer's engine)."""
    if isinstance(tokenizer, BPE):
        return tokenizer
    if hasattr(tokenizer, "engine"):
        return tokenizer.engine()
    raise TypeError(f"tokenizer must be an hf_bpe.BPE or BPETokenizer, not {type(tokenizer).__name__}")


class _EncodeBatch:
    def __init__(self, bpe_ref, text_column: str, output_column: str, split_special: bool) -> None:
        ray = _ray()
        self.bpe = ray.get(bpe_ref) if isinstance(bpe_ref, ray.ObjectRef) else bpe_ref
        self.column, self.output, self.split_special = text_column, output_column, split_special

    def __call__(self, batch):
        import pyarrow as pa

        from hf_bpe.hf.arrow import column_flat

        # From the column's Arrow buffers (no Python str per row); a None row is an error naming it.
        flat, off = column_flat(self.bpe, batch.column(self.column), self.column, self.split_special)
        ids = pa.LargeListArray.from_arrays(pa.array(off), pa.array(flat))
        return batch.append_column(self.output, ids)


def encode_dataset(dataset, tokenizer, text_column: str = "text", output_column: str = "input_ids", *,
                   split_special: bool = False, batch_size: int = 4096):
    """``dataset`` (a ``ray.data.Dataset``) with ``output_column`` holding each row's ids (Arrow
    ``large_list<int32>``), encoded by the workers from the Arrow buffers (the tokenizer shipped
    once); special tokens in the text become their ids unless ``split_special``, as in
    ``ds.map(tok)``. Lazy, as Ray Data is."""
    ray = _ray()
    bpe = _engine(tokenizer)
    ref = ray.put(bpe)
    return dataset.map_batches(_EncodeBatch, fn_constructor_args=(ref, text_column, output_column, split_special),
                               batch_format="pyarrow", batch_size=batch_size,
                               concurrency=(1, max(1, int(ray.cluster_resources().get("CPU", 1)))))


def _encode_file(bpe: BPE, path: str, out: str, allowed_special, errors: str, separator, text_field: str):
    return bpe.encode_file(path, out, progress=False, allowed_special=allowed_special, errors=errors,
                           separator=separator, text_field=text_field)


def encode_files(paths, tokenizer, out_dir: str | os.PathLike, *, allowed_special="all", errors: str = "strict",
                 separator: str | None = None, text_field: str = "text", address: str | None = None) -> Path:
    """Encodes each file on the cluster into ``out_dir/<n>-<name>.npy`` (as
    :meth:`hf_bpe.BPE.encode_file`), plus ``index.json`` naming each input with its output,
    tokens and bytes. Returns the index's path."""
    from hf_bpe.formats.files import write_file

    ray = init(address)
    files = _paths(paths)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ref = ray.put(_engine(tokenizer))
    task = ray.remote(max_retries=3)(_encode_file)
    outs = [out_dir / f"{n}-{Path(p).name.split('.')[0]}.npy" for n, p in enumerate(files)]
    refs = [task.remote(ref, p, str(o), allowed_special, errors, separator, text_field) for p, o in zip(files, outs)]
    stats = ray.get(refs)
    index = [{"input": p, "output": o.name, "tokens": t, "bytes": b} for p, o, (t, b) in zip(files, outs, stats)]
    return write_file(out_dir / "index.json", (json.dumps(index, indent=2) + "\n").encode())
