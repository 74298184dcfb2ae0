"""Type stubs for the native core (Rust, PyO3). Every long call releases the GIL; a ``num_threads``
above the limit (1024) raises ``ValueError`` at once."""

import os
from typing import Callable, Literal, Sequence

import numpy as np
import numpy.typing as npt

# A file path: taken by its bytes (os.fsencode), so a name that is not UTF-8 opens that very file.
_Path = str | bytes | os.PathLike[str] | os.PathLike[bytes]

def pretokenize(pattern: str, text: str) -> list[str]:
    """Splits ``text`` into pre-tokens with a built-in pattern (``"gpt2"``, ``"cl100k"``, ``"o200k"``,
    ``"llama3"``, ``"qwen2"``, ``"qwen3.5"``, ``"nemotron"``, ``"deepseek-v3"``, ``"kimi"``) or a regex."""

def span_pattern(pattern: str, max_words: int) -> str:
    """The superword span pattern over ``pattern`` (gpt2 only so far): spans of 1 to
    ``max_words`` words (1..16); ValueError otherwise."""

def span_words(pattern: str) -> tuple[str, int] | None:
    """``(word pattern, max_words)`` if ``pattern`` is a span pattern as ``span_pattern`` spells it."""

def pattern_source(pattern: str) -> str:
    """The regex a pattern name stands for (a regex is returned as is, after compiling it)."""

def pattern_engine(pattern: str) -> Literal["builtin", "spans", "dfa", "fancy-regex"]:
    """Which engine splits text for ``pattern``: a built-in scanner, the span scanner (a superword
    span pattern: gpt2's pieces grouped), the DFA or fancy-regex."""

def pattern_splits(pattern: str) -> list[str]:
    """The regexes of the Sequence of isolated splits a pattern stands for (DeepSeek-V3 has three)."""

def from_oniguruma(regex: str) -> str:
    """A tokenizer.json regex (Oniguruma's reading) in the dialect of ``pattern=``; ValueError names a
    construct with no exact rewrite."""

def regex_may_match_empty(regex: str) -> bool:
    """Whether a regex of ours may match the empty string somewhere (look-arounds count)."""

def pattern_from_splits(regexes: list[str]) -> str | None:
    """The built-in pattern's name that isolated splits with these regexes amount to, or None."""

def byte_alphabet() -> list[str]:
    """GPT-2's byte-level alphabet: ``[b]`` is the printable character that stands for byte ``b``."""

class SpanGather:
    """The spans of :meth:`WordCounter.split_words`, being gathered."""

    def take(self) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
        """``(span_words, span_ends, span_counts)`` as :meth:`WordCounter.split_spans` gives them
        (waits until they are gathered); once, then ValueError."""

class WordCounter:
    """Counts distinct pre-tokens of a corpus on all cores."""

    def __init__(self, pattern: str = "gpt2", special_tokens: Sequence[str] = (), num_threads: int | None = None,
                 split_only: bool = False) -> None:
        """``split_only=True`` (a span pattern): only :meth:`split_spans` reads the counts (the
        spans of a pattern of up to 4 words are counted as their words' ids); :meth:`words`,
        :meth:`arrays` and training on the counter are then errors."""
    def add_texts(self, texts: Sequence[str]) -> None:
        """Counts documents: each is split on the special tokens, then pre-tokenized."""
    def add_file(self, path: _Path, errors: Literal["strict", "replace", "ignore"] = "strict", text_field: str = "text",
                 progress: Callable[[int], object] | None = None, range: tuple[int, int] | None = None) -> None:
        """Streams a text, ``.gz`` or ``.jsonl`` file (``path`` by its bytes, ``os.fsencode``);
        ``progress(bytes_read)`` now and then.
        ``range=(start, end)``: only those bytes of a plain file (a shard from ``shard_cuts``)."""
    def shard_cuts(self, path: _Path, targets: Sequence[int]) -> list[int]:
        """Where shards of ``path`` start for byte offsets ``targets``: the first place at or after
        each where the reader may cut (the file's end when there is none)."""
    def words(self) -> list[tuple[bytes, int]]:
        """Distinct pre-tokens with their counts, sorted by bytes."""
    def arrays(self, release: bool = False) -> CountArrays:
        """The same as flat arrays ``(bytes, offsets, counts)`` (``hf_bpe.WordCounts``' form);
        ``release=True`` frees the tables while gathering (the counter is then empty)."""
    def split_spans(self, pattern: str) -> tuple[CountArrays, npt.NDArray[np.uint32], npt.NDArray[np.int64],
                                                 npt.NDArray[np.uint64]]:
        """The counted spans split by the word ``pattern`` as :func:`split_spans` splits their
        arrays, straight from the tables (freed: the counter is then empty): ``(word counts,
        span_words, span_ends, span_counts)``, the spans in no order and never gathered into
        bytes of their own. ValueError naming a span that is not UTF-8."""
    def split_words(self, pattern: str) -> tuple[CountArrays, SpanGather]:
        """:meth:`split_spans`, the word counts first: the spans come from :meth:`SpanGather.take`,
        gathered meanwhile on threads of their own (``split_only=True``; any other counter has
        them ready)."""
    def __len__(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def documents(self) -> int: ...
    @property
    def read_stats(self) -> tuple[int, int]:
        """What the reader did with the last file: (most bytes held at once, bytes searched for a
        cut more than once)."""

CountArrays = tuple[np.ndarray, np.ndarray, np.ndarray]  # (u8 bytes, i64 offsets, u64 counts)

def check_counts(arrays: CountArrays) -> None:
    """Checks word counts' arrays: offsets from 0 to len(bytes), non-empty words strictly
    increasing by bytes, counts >= 1; ValueError naming the first word that breaks one."""

def merge_counts(runs: Sequence[CountArrays]) -> CountArrays:
    """Merges checked word counts: every word once, counts summed (an overflow is an error)."""

def train_merges(words: WordCounter | CountArrays | Sequence[tuple[bytes, int]], max_new_tokens: int,
                 tie_break: Literal["lexicographic", "hf"] = "lexicographic", min_frequency: int = 0,
                 max_token_length: int | None = None,
                 progress: Callable[[int], object] | None = None,
                 release_counts: bool = False,
                 merge_filter: Callable[[bytes, bytes], bool] | str | None = None) -> list[tuple[bytes, bytes]]:
    """Learns merges (in training order) until ``max_new_tokens`` new token strings exist.
    ``release_counts`` frees a counter's tables before the merge loop (the counter is emptied).
    ``merge_filter``: a callable saying whether a pair may merge, or a regex over the merged bytes
    whose match vetoes it (an exception of the callable stops training and is raised)."""

def split_spans(arrays: CountArrays, pattern: str
                ) -> tuple[CountArrays, npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """Span counts split by the word ``pattern``: ``(word counts, span_words, span_ends)``, the
    words sorted and distinct, each counted with its spans' counts; span ``i``'s words are
    ``span_words[span_ends[i]:span_ends[i + 1]]`` (none for a span of count 0). ValueError naming
    a span that is not UTF-8."""

def segment_words(encoder: Encoder, bytes: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64],
                  max_rank: int | None = None) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """The words (flat bytes + offsets) cut into ``encoder``'s token ids by its merges alone (each
    word one piece, no pre-tokenization): ``(ids, offsets)``. With ``max_rank`` only pairs of lower
    rank merge (the first ``max_rank`` merges; tiktoken: tokens of lower rank), no whole-piece lookup."""

def segment_spans(encoder: Encoder, bytes: npt.NDArray[np.uint8] | None, offsets: npt.NDArray[np.int64] | None,
                  word_bytes: npt.NDArray[np.uint8], word_offsets: npt.NDArray[np.int64],
                  span_words: npt.NDArray[np.uint32], span_ends: npt.NDArray[np.int64], checked: bool = False
                  ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """``segment_words`` of superword spans by stage 1's encoder (gpt2 pattern, merges mode), from
    their words as ``split_spans`` gives them: each distinct word is cut once, and a span is cut at
    the word boundaries no stage-1 merge can cross, a part of one word being its tokens, a longer
    part merged whole. ValueError when the words given do not spell a span (``checked``: the
    caller vouches that they do, as ``split_spans`` just gave them; only their lengths are checked).
    With ``bytes`` and ``offsets`` None a span is its words (``WordCounter.split_spans`` gives no
    span bytes), and a span given no words is empty."""

def segment_pieces(encoder: Encoder, word_bytes: npt.NDArray[np.uint8], word_offsets: npt.NDArray[np.int64],
                   word_counts: npt.NDArray[np.uint64], span_words: npt.NDArray[np.uint32],
                   span_ends: npt.NDArray[np.int64], span_counts: npt.NDArray[np.uint64], merges: int
                   ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64], npt.NDArray[np.uint64], int] | None:
    """The spans of ``segment_spans`` (their words; ``span_counts``, and the words' own counts) cut
    where no superword merge of a stage 2 of ``merges`` merges can cross, each distinct piece once:
    ``(ids, offsets, counts, floor)``, the pieces cut into stage 1's tokens as ``segment_spans``
    cuts spans. Train them with ``floor`` (``train_merges_extending``). None when no cut can pay."""

def train_merges_extending(base: Sequence[bytes], base_merges: Sequence[tuple[bytes, bytes]],
                           syms: npt.NDArray[np.uint32], offsets: npt.NDArray[np.int64],
                           counts: npt.NDArray[np.uint64], max_new_tokens: int,
                           tie_break: Literal["lexicographic", "hf"] = "lexicographic", min_frequency: int = 0,
                           max_token_length: int | None = None,
                           progress: Callable[[int], object] | None = None,
                           merge_filter: Callable[[bytes, bytes], bool] | str | None = None,
                           internal: npt.NDArray[np.uint32] | None = None, floor: int = 0
                           ) -> list[tuple[bytes, bytes]] | None:
    """Learns merges extending a vocabulary: ``base`` its tokens of two bytes or more in id order
    (internal ids 256..), the words already cut into internal ids (or into vocabulary ids that
    ``internal`` maps to them: ``internal[id]``); only new strings count, and a
    base merge that re-forms is applied but not listed again (and never vetoed by ``merge_filter``).
    With ``floor`` (the words being ``segment_pieces``' pieces): None if the best pair fell below it
    before the merges were done, or a merge reused a token (train on the whole spans then);
    ValueError with ``tie_break="hf"`` and ``max_token_length``."""

def train_parity_merges(corpora: Sequence[CountArrays], dev: Sequence[tuple[CountArrays, CountArrays | None]],
                        max_new_tokens: int, tie_break: Literal["lexicographic", "hf"] = "lexicographic",
                        min_frequency: int = 0, max_token_length: int | None = None,
                        variant: Literal["base", "window"] = "base", window_size: int = 100,
                        alpha: float = 2.0, global_merges: int = 0,
                        progress: Callable[[int], object] | None = None,
                        merge_filter: Callable[[bytes, bytes], bool] | str | None = None,
                        num_threads: int | None = None) -> list[tuple[bytes, bytes]]:
    """Learns parity-aware merges: ``corpora`` one word table per language (flat arrays), ``dev``
    per language its dev words and its reference's (``None``: its own tokens are its cost).
    ``"hf"`` ties are those of HF's ``ParityBpeTrainer``."""

def encode_batch_dropout(encoder: Encoder, texts: Sequence[str], p: float, seed: int | None,
                         allowed_special: _Specials = None, disallowed_special: _Specials = None,
                         num_threads: int | None = None) -> list[list[int]]:
    """Ids of each text with BPE-dropout (each merge skipped with probability ``p``), reproducible
    from ``seed`` and the text alone (``None``: each text draws its own)."""

def encode_bytes(encoder: Encoder, data: bytes) -> list[int]:
    """Ids of any bytes, as tiktoken's ``_encode_bytes``: valid UTF-8 is ``encode_ordinary``; else
    the valid prefix's last piece (and whitespace tokens before it) is merged again with the rest."""

class UnknownTokenError(KeyError, ValueError):
    """An id or token the vocabulary does not have (tiktoken raises ``KeyError``)."""

def count_pieces(pattern: str, text: str) -> int:
    """Number of pre-tokens of ``text`` (benchmarks the scanner without building Python strings)."""

_Specials = Literal["all"] | Sequence[str] | set[str] | None

class Encoder:
    """Byte-level BPE encoder/decoder with GPT-2/HF merges or tiktoken ranks (``merges=None``).

    Special tokens are never split; like tiktoken, a special token found in the text raises
    ``ValueError`` unless it is allowed (``allowed_special``) or not disallowed.
    """

    def __init__(self, vocab: dict[int, bytes], merges: Sequence[tuple[bytes, bytes]] | None,
                 special_tokens: dict[str, int], pattern: str, cache_bytes: int = ...,
                 added_tokens: Sequence[tuple[str, int, bool, bool, bool, bool, bool]] | None = None,
                 pipeline: str | None = None) -> None:
        """Checks the tables (distinct bytes per id, all 256 byte tokens for tiktoken ranks, merges
        of tokens into tokens, specials consistent with ``vocab``, a valid pattern) and raises
        ``ValueError`` naming the problem. ``merges`` are byte pairs in rank order; ``None`` means
        tiktoken ranks. ``vocab`` may leave out the special tokens' ids. ``added_tokens``:
        ``(content, id, special, lstrip, rstrip, single_word, normalized)``; ``pipeline``: an
        imported tokenizer.json's normalizer, pre_tokenizer, model options, post_processor and
        decoder as JSON (unsupported components raise, naming them)."""
    @property
    def added_tokens(self) -> list[tuple[str, int, bool, bool, bool, bool, bool]]:
        """Every added token with its flags, by id."""
    @property
    def pipeline(self) -> str | None:
        """The imported tokenizer.json components (JSON), or None."""
    @property
    def is_generic(self) -> bool:
        """Whether text takes the general path (normalizer, pre-tokenizer steps, ...)."""
    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of ``text`` with special tokens treated as ordinary text."""
    def encode(self, text: str, allowed_special: _Specials = None, disallowed_special: _Specials = None) -> list[int]:
        """Ids of ``text``; allowed specials become their id, disallowed ones raise."""
    def encode_to_numpy(self, text: str, allowed_special: _Specials = None,
                        disallowed_special: _Specials = None) -> npt.NDArray[np.uint32]: ...
    def encode_batch(self, texts: Sequence[str], allowed_special: _Specials = None, disallowed_special: _Specials = None,
                     num_threads: int | None = None) -> list[list[int]]:
        """Ids of each text, on all cores (GIL released)."""
    def encode_ordinary_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]: ...
    def encode_batch_flat(self, texts: Sequence[str], allowed_special: _Specials = None,
                          disallowed_special: _Specials = None, num_threads: int | None = None
                          ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
        """All ids in one flat array plus offsets (``len(texts) + 1``)."""
    def encode_with_offsets(self, text: str, allowed_special: _Specials = None,
                            disallowed_special: _Specials = None) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids plus character offsets; a character belongs to the token holding its first byte."""
    def derive(self, added_tokens: Sequence[tuple[str, int, bool, bool, bool, bool, bool]],
               pipeline: str | None = None) -> Encoder:
        """This encoder with more added tokens ``(content, id, special, lstrip, rstrip, single_word,
        normalized)`` and, when given, ``pipeline`` (tokenizer.json components) in place of its own."""
    def encode_spans(self, texts: Sequence[str], allowed_special: _Specials = None, disallowed_special: _Specials = None
                     ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64], npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
        """Flat ``(ids, offsets (n, 2), words, row_offsets)``: char ranges as ``tokenizers`` gives them
        (every char a token touches) and each token's word (pre-tokenizer piece) index per text."""
    def encode_file(self, path_in: _Path, path_out: _Path, allowed_special: _Specials = None,
                    disallowed_special: _Specials = None, separator: str | None = None, text_field: str = "text",
                    errors: Literal["strict", "replace", "ignore"] = "strict", num_threads: int | None = None,
                    progress: Callable[[int], object] | None = None) -> tuple[int, int]:
        """Streams a text/.gz/.jsonl file into an atomically written ``.npy``; returns (tokens, bytes)."""
    def decode_bytes(self, ids: Sequence[int] | npt.NDArray[np.integer]) -> bytes:
        """Concatenated bytes of ``ids`` (valid UTF-8 or not); an unknown id raises ``ValueError``."""
    def decode(self, ids: Sequence[int] | npt.NDArray[np.integer], errors: str = "replace") -> str: ...
    def decode_batch(self, batch: Sequence[Sequence[int]], errors: str = "replace") -> list[str]: ...
    def token_bytes(self, id: int) -> bytes: ...
    @property
    def n_vocab(self) -> int:
        """One more than the largest id."""
    @property
    def special_tokens(self) -> dict[str, int]: ...
    @property
    def pattern(self) -> str:
        """The pattern as given: a name or a regex."""
    @property
    def is_tiktoken(self) -> bool: ...
    @property
    def cache_bytes(self) -> int: ...
    @property
    def vocab(self) -> dict[int, bytes]:
        """Every id and its bytes (special tokens as their UTF-8 bytes)."""
    @property
    def merges(self) -> list[tuple[bytes, bytes]] | None:
        """The merges as byte pairs in rank order; ``None`` for tiktoken ranks."""
    def cache_info(self) -> dict[str, int]:
        """hits, misses, bytes and budget of the word cache; kept_output_bytes of the output
        buffers kept (process-wide) for reuse by later batches."""
    def clear_cache(self) -> None:
        """Empties the word cache and frees the output buffers kept for reuse."""
    def to_state(self) -> bytes:
        """Deterministic serialized tables (no cache)."""
    @staticmethod
    def from_state(state: bytes, cache_bytes: int | None = None) -> Encoder:
        """The encoder of ``to_state()``'s bytes; ``cache_bytes`` replaces the saved cache budget."""


class IdBuffer:
    """Owner of a big batch output behind its numpy array (the array's ``base``): when the array
    and all its views are gone, the buffer is kept for the next batch (at most 2, up to 1 GiB
    each; ``Encoder.clear_cache`` frees them)."""

def encode_utf8_column(encoder: Encoder, data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64],
                       allowed_special: _Specials = None, disallowed_special: _Specials = None,
                       num_threads: int | None = None) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """``Encoder.encode_batch_flat`` of the rows ``data[offsets[i]:offsets[i+1]]`` (an Arrow string
    column's buffers); bad offsets or bytes that are not UTF-8 fail naming the row."""

def pad_rows(ids: npt.NDArray[np.uint32], offsets: npt.NDArray[np.int64], width: int, pad_id: int,
             pad_left: bool = False, truncate_left: bool = False, attention_mask: bool = True
             ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64] | None]:
    """A batch's flat ids as a padded 2-D int64 array ``width`` wide (rows cut to ``width``, the
    end kept with ``truncate_left``), and the 0/1 attention mask."""
