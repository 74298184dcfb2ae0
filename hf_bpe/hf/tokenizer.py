"""Hugging Face integration: :class:`BPETokenizer`, a ``transformers.PreTrainedTokenizer`` encoding
straight through the native core (``ds.map(tok, batched=True)`` from Arrow, :mod:`hf_bpe.hf.arrow`).

Importing this module imports ``transformers`` (about a second); ``import hf_bpe`` registers
:class:`BPETokenizer` with ``AutoTokenizer`` lazily, when ``transformers`` is imported (:mod:`hf_bpe.hf.hook`).

Output follows transformers' ``GPT2Tokenizer`` (``tokenizers``-backed) on the same files: ids, masks,
padding, truncation with ``stride``, overflowing rows, special-token masks, lengths, offsets."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from transformers import PreTrainedConfig, PreTrainedTokenizer
from transformers.tokenization_utils_base import AddedToken, BatchEncoding, TruncationStrategy
from transformers.utils.generic import PaddingStrategy

from hf_bpe import formats
from hf_bpe.bpe import BPE
from hf_bpe.formats.files import save_staged
from hf_bpe.hf.arrow import ArrowMapFn, is_arrow_table, map_batch, map_batch_column, map_fn, table_call
from hf_bpe.hf.building import (backend_of, bpe_of, extended, pruned, portable_config, train_new, with_file_defaults,
                                write_vocabulary)
from hf_bpe.hf.encoding import (cleans_up, decode_ids, encode_split_words, encode_texts, new_added, numpy_batch,
                                token_tables)
from hf_bpe.hf.post import bos_eos_flag, bos_eos_template, prefix_space, template_of
from hf_bpe.hf.rows import all_rows, ones_rows, pad_rows, rows_of
from hf_bpe.hf.spans import LazyEncodings, spans_rows

__all__ = ["BPETokenizer", "BPETokenizerConfig", "ArrowMapFn", "map_fn", "register"]

EOT = "<|endoftext|>"
_DEFAULT = object()  # "argument not given" (None means "no such token")


class BPETokenizerConfig(PreTrainedConfig):
    """A registry key for ``AutoTokenizer.register``; no model uses it."""

    model_type = "hf_bpe"


def register() -> None:
    """Registers :class:`BPETokenizer` with ``AutoTokenizer`` (idempotent; no ``auto_map`` and no
    ``trust_remote_code`` involved: folders naming ``tokenizer_class: BPETokenizer`` resolve to it)."""
    from transformers import AutoTokenizer

    AutoTokenizer.register(BPETokenizerConfig, tokenizer_class=BPETokenizer, exist_ok=True)


class BPETokenizer(PreTrainedTokenizer):
    """A GPT-2 style byte-level BPE tokenizer for ``transformers`` backed by :class:`hf_bpe.BPE`.

    >>> tok = BPETokenizer.from_pretrained("out/")           # doctest: +SKIP
    >>> tok = BPETokenizer.from_bpe(hf_bpe.BPE.load("out/"))  # doctest: +SKIP
    >>> ds = ds.map(tok, batched=True)                       # doctest: +SKIP

    Calling it on a ``datasets`` batch (any ``Mapping``) encodes the ``text_column`` column; on a
    ``pyarrow.Table`` it appends ``input_ids``/``attention_mask`` columns.
    """

    vocab_files_names = {"vocab_file": "vocab.json", "merges_file": "merges.txt", "tokenizer_file": "tokenizer.json"}
    model_input_names = ["input_ids", "attention_mask"]
    model = BPE  # the model class, as transformers 5's tokenizer classes name theirs (a BPE: vocab is {token: id})

    def __init__(self, vocab_file: str | None = None, merges_file: str | None = None, tokenizer_file: str | None = None,
                 *, vocab: dict[str, int] | str | None = None, merges: list | str | None = None,
                 bpe: BPE | None = None, errors: str = "replace", unk_token: Any = _DEFAULT, bos_token: Any = _DEFAULT,
                 eos_token: Any = _DEFAULT, pad_token: Any = None, add_prefix_space: bool = False,
                 text_column: str = "text", cache_bytes: int | None = None, **kwargs: Any) -> None:
        if bpe is None:
            named = [EOT if t is _DEFAULT else t for t in (unk_token, bos_token, eos_token, pad_token)]
            bpe = bpe_of(vocab_file, merges_file, tokenizer_file, vocab, merges, kwargs.get("added_tokens_decoder"),
                         [str(t) for t in named if t is not None])
        elif not isinstance(bpe, BPE):
            raise TypeError(f"bpe must be an hf_bpe.BPE, got {type(bpe).__name__}")
        if add_prefix_space and not prefix_space(bpe.pipeline):
            raise ValueError("add_prefix_space=True is not supported by hf_bpe's BPETokenizer unless the "
                             "tokenizer.json's ByteLevel pre-tokenizer adds the space itself")
        if cache_bytes is not None:  # (from_pretrained passes it through): the encoder's memory bound
            bpe.cache_bytes = cache_bytes
        kwargs, pad_token = with_file_defaults(bpe.truncation_padding, kwargs, pad_token)
        self.bpe = bpe  # before super().__init__: it calls get_vocab()
        # add_bos_token / add_eos_token given: a template of them replaces the post-processor
        # (as transformers' tokenizers backend does); None: the post-processor of the files.
        self._bos_eos: tuple[bool, bool] | None = None
        if "add_bos_token" in kwargs or "add_eos_token" in kwargs:
            self._bos_eos = (bool(kwargs.pop("add_bos_token", False)), bool(kwargs.pop("add_eos_token", False)))
        self.errors = errors
        self.text_column = text_column
        default = EOT if EOT in bpe.special_tokens else None
        unk_token = default if unk_token is _DEFAULT else unk_token
        bos_token = default if bos_token is _DEFAULT else bos_token
        eos_token = default if eos_token is _DEFAULT else eos_token
        self._added_tokens_decoder = {t.id: AddedToken(t.content, special=t.special, normalized=t.normalized,
                                                       lstrip=t.lstrip, rstrip=t.rstrip, single_word=t.single_word)
                                      for t in bpe.added_tokens}
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        # whatever class saved the folder: "tokenizers" is "has the fast features" (offsets, sequence_ids...)
        kwargs["backend"] = "tokenizers"
        # bpe=None: init_kwargs name every argument (transformers' suite checks it); a save writes the folder.
        super().__init__(errors=errors, unk_token=unk_token, bos_token=bos_token, eos_token=eos_token,
                         pad_token=pad_token, add_prefix_space=False, text_column=text_column, bpe=None,
                         cache_bytes=cache_bytes, **kwargs)

    @classmethod
    def from_bpe(cls, bpe: BPE, **kwargs: Any) -> "BPETokenizer":
        """``bpe`` as a ``transformers`` tokenizer sharing it as ``.bpe``; ``kwargs`` as the constructor's."""
        return cls(bpe=bpe, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args: Any, **kwargs: Any) -> "BPETokenizer":
        """transformers' ``from_pretrained``, and OpenAI's published encodings by name (``"gpt2"``,
        ``"cl100k_base"``, ...: shipped, no network) where no such folder exists."""
        name = pretrained_model_name_or_path
        named = isinstance(name, str) and name in formats.PUBLISHED and not os.path.exists(name)
        return cls(*args, bpe=BPE.load(name), **kwargs) if named else super().from_pretrained(name, *args, **kwargs)

    add_prefix_space = property(lambda self: prefix_space(self.bpe.pipeline),
                                doc="Whether a space is put before each text (as the files' ByteLevel says).")

    @property
    def vocab_size(self) -> int:
        return self.bpe.vocab_size

    def __len__(self) -> int:
        """The largest id + 1 (added tokens included): an embedding of this size fits every id."""
        return max(self.bpe.vocab_size, max(self._added_tokens_decoder, default=-1) + 1)

    # ---- the post-processor (`hf_bpe.hf.post`): the files', or add_bos_token / add_eos_token's ----
    add_bos_token = bos_eos_flag(0, "Whether bos_token starts each sequence (a post-processor of its own).")
    add_eos_token = bos_eos_flag(1, "Whether eos_token ends each sequence (a post-processor of its own).")

    def _bos_eos_template(self) -> dict | None:
        """The ``TemplateProcessing`` of add_bos_token / add_eos_token (None when not given)."""
        if self._bos_eos is None:
            return None
        return bos_eos_template((self.bos_token, self.bos_token_id, self._bos_eos[0]),
                                (self.eos_token, self.eos_token_id, self._bos_eos[1]))

    def _template(self):
        return template_of(self.engine().pipeline)

    def build_inputs_with_special_tokens(self, ids_a: list[int], ids_b: list[int] | None = None) -> list[int]:
        t = self._template()
        return t.apply(ids_a, ids_b)[0] if t else super().build_inputs_with_special_tokens(ids_a, ids_b)

    def create_token_type_ids_from_sequences(self, ids_a: list[int], ids_b: list[int] | None = None) -> list[int]:
        t = self._template()
        return t.apply(ids_a, ids_b)[1] if t else super().create_token_type_ids_from_sequences(ids_a, ids_b)

    def get_special_tokens_mask(self, ids_a, ids_b=None, already_has_special_tokens: bool = False) -> list[int]:
        t = None if already_has_special_tokens else self._template()
        return (t.apply(ids_a, ids_b)[2] if t
                else super().get_special_tokens_mask(ids_a, ids_b, already_has_special_tokens))

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        t = self._template()
        return t.added(pair) if t else super().num_special_tokens_to_add(pair)

    @property
    def backend_tokenizer(self):
        """This tokenizer as a ``tokenizers.Tokenizer`` with the same ids (from its ``tokenizer.json``)."""
        return backend_of(self)

    def train_new_from_iterator(self, text_iterator, vocab_size: int, **kwargs: Any) -> "BPETokenizer":
        """A new tokenizer of this kind trained on ``text_iterator`` (see :func:`hf.building.train_new`)."""
        return train_new(self, text_iterator, vocab_size, **kwargs)

    def _extended(self, texts, vocab_size: int, **options: Any) -> "BPETokenizer":
        """:func:`hf_bpe.extend` of this tokenizer (see :func:`hf.building.extended`)."""
        return extended(self, texts, vocab_size, **options)

    def _pruned(self, *args: Any, **kwargs: Any) -> tuple["BPETokenizer", list[int]]:
        """:func:`hf_bpe.prune` of this tokenizer (see :func:`hf.building.pruned`)."""
        return pruned(self, *args, **kwargs)

    def get_vocab(self) -> dict[str, int]:
        v = dict(token_tables(self.bpe).str_to_id)
        v.update(self._added_tokens_encoder)
        return v

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        t = token_tables(self.bpe).id_to_str
        return [t[i] for i in self.bpe.encode_ordinary(text)]

    def _convert_token_to_id(self, token: str) -> int | None:
        i = token_tables(self.bpe).str_to_id.get(token)
        if i is None and self.unk_token is not None:
            i = token_tables(self.bpe).str_to_id.get(str(self.unk_token))
        return i

    def _convert_id_to_token(self, index: int) -> str | None:
        return token_tables(self.bpe).id_to_str.get(int(index))

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        out = bytearray()
        for t in tokens:
            b = None if t in self._added_tokens_encoder else formats.str_to_token(t)
            out += t.encode("utf-8") if b is None else b
        return out.decode("utf-8", errors=self.errors)

    def _decode(self, token_ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool | None = None,
                **kwargs: Any) -> str:
        ids = decode_ids(token_ids)
        if skip_special_tokens:
            skip = set(self.all_special_ids) | {i for i, t in self._added_tokens_decoder.items() if t.special}
            ids = [i for i in ids if i not in skip]
        text = self.engine().decode_bytes(ids).decode("utf-8", errors=self.errors)  # (added tokens included)
        return self.clean_up_tokenization(text) if cleans_up(self, clean_up_tokenization_spaces) else text

    # ---- files -----------------------------------------------------------------------------
    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """vocab.json, merges.txt and tokenizer.json, which lists every added token (``add_tokens`` ones
        too) and the post-processor (the add_bos_token / add_eos_token template when given)."""
        e = self.engine()
        files = formats.folder_files(e.vocab, e.merges, e.special_tokens, e.pattern, type(self).__name__,
                                     e.added_tokens, e.pipeline)
        return write_vocabulary(save_directory, files, filename_prefix)

    def save_pretrained(self, save_directory, *args: Any, tokenizer_class: str | None = None, **kwargs: Any):
        """``PreTrainedTokenizer.save_pretrained``, all-or-nothing (:func:`hf_bpe.formats.files.save_staged`),
        without the load-time keys transformers leaks into ``tokenizer_config.json`` (and no ``backend``:
        the class that reads the folder names its own). ``tokenizer_class`` replaces the class name the
        folder gives ``AutoTokenizer`` (``"PreTrainedTokenizerFast"`` for transformers 4 without hf_bpe)."""
        if tokenizer_class is not None and kwargs.get("push_to_hub"):
            raise ValueError("tokenizer_class= is for a local save; save, then upload the folder")
        leaked = {k: self.init_kwargs.pop(k) for k in ("is_local", "local_files_only", "bpe", "backend", "cache_bytes")
                  if k in self.init_kwargs and (k != "cache_bytes" or self.init_kwargs[k] is None)}
        try:
            if kwargs.get("push_to_hub"):
                return super().save_pretrained(save_directory, *args, **kwargs)
            return save_staged(save_directory, lambda d: portable_config(
                super(BPETokenizer, self).save_pretrained(d, *args, **kwargs), tokenizer_class))
        finally:
            self.init_kwargs.update(leaked)

    # ---- encoding --------------------------------------------------------------------------

    def engine(self) -> BPE:
        """The :class:`hf_bpe.BPE` that encodes for this tokenizer: ``bpe`` with the tokens added by
        ``add_tokens``/``add_special_tokens`` and the add_bos_token / add_eos_token template (built
        once per set of them; ``bpe`` itself when there are none)."""
        cache = self.__dict__.setdefault("cache", {})  # datasets' hasher ignores a dict named `cache`
        key = (id(self.bpe), len(self._added_tokens_decoder), self._bos_eos,
               self._bos_eos and (self.bos_token, self.eos_token), self.bpe.dropout)
        hit = cache.get("engine")
        if hit is None or hit[0] != key:
            extra = new_added(self.bpe, self._added_tokens_decoder)
            post = self._bos_eos_template()
            engine = self.bpe.derive(extra, post_processor=post) if extra or post else self.bpe
            hit = cache["engine"] = (key, engine)
        return hit[1]

    def encode_texts(self, texts: list[str], split_special_tokens: bool | None = None) -> list[list[int]]:
        """Ids of each text (added tokens matched), without special tokens added, truncation or padding."""
        sst = self.split_special_tokens if split_special_tokens is None else split_special_tokens
        return encode_texts(self.engine(), list(texts), sst, False)[0]

    def _encode_plus(self, text, text_pair=None, add_special_tokens: bool = True,
                     padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
                     truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
                     max_length: int | None = None, stride: int = 0, is_split_into_words: bool = False,
                     pad_to_multiple_of: int | None = None, padding_side: str | None = None, return_tensors=None,
                     return_token_type_ids: bool | None = None, return_attention_mask: bool | None = None,
                     return_overflowing_tokens: bool = False, return_special_tokens_mask: bool = False,
                     return_offsets_mapping: bool = False, return_length: bool = False, verbose: bool = True,
                     split_special_tokens: bool | None = None, **kwargs: Any) -> BatchEncoding:
        words = is_split_into_words
        batched = isinstance(text, (list, tuple)) and (not words or bool(text) and isinstance(text[0], (list, tuple)))
        texts = list(text) if batched else [text]
        pairs = None
        if text_pair is not None:
            if batched and (not isinstance(text_pair, (list, tuple)) or len(text_pair) != len(texts)):
                raise ValueError("If `text` is a batch, `text_pair` must also be a batch of the same length.")
            pairs = list(text_pair) if batched else [text_pair]
        elif batched and not words and texts and all(isinstance(t, tuple) and len(t) == 2 for t in texts):
            texts, pairs = [t[0] for t in texts], [t[1] for t in texts]
        ok = ((lambda t: isinstance(t, (list, tuple)) and all(isinstance(w, str) for w in t)) if words
              else (lambda t: isinstance(t, str)))
        if kwargs.get("sanitize_control_tokens") or not all_rows(ok, texts) or (pairs and not all_rows(ok, pairs)):
            if return_offsets_mapping:
                raise NotImplementedError("return_offsets_mapping=True needs text as str / list[str] "
                                          "(or words as list[str] with is_split_into_words=True), and pairs of them")
            return super()._encode_plus(
                text, text_pair=text_pair, add_special_tokens=add_special_tokens, padding_strategy=padding_strategy,
                truncation_strategy=truncation_strategy, max_length=max_length, stride=stride,
                is_split_into_words=is_split_into_words, pad_to_multiple_of=pad_to_multiple_of,
                padding_side=padding_side, return_tensors=return_tensors, return_token_type_ids=return_token_type_ids,
                return_attention_mask=return_attention_mask, return_overflowing_tokens=return_overflowing_tokens,
                return_special_tokens_mask=return_special_tokens_mask, return_length=return_length, verbose=verbose,
                split_special_tokens=split_special_tokens, **kwargs)
        if words:  # copies: the encodings may be built later (`LazyEncodings`)
            texts, pairs = [list(t) for t in texts], pairs and [list(t) for t in pairs]
        opts = dict(add_special_tokens=add_special_tokens, padding_strategy=padding_strategy,
                    truncation_strategy=truncation_strategy, max_length=max_length, stride=stride,
                    pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
                    return_token_type_ids=return_token_type_ids, return_attention_mask=return_attention_mask,
                    return_overflowing_tokens=return_overflowing_tokens,
                    return_special_tokens_mask=return_special_tokens_mask,
                    return_offsets_mapping=return_offsets_mapping, return_length=return_length, verbose=verbose,
                    split_special_tokens=split_special_tokens)
        lazy = LazyEncodings(lambda: self._batch(texts, pairs, words, batched, spans=True, **opts))
        if (return_tensors == "np" and batched and pairs is None and not words
                and truncation_strategy != TruncationStrategy.ONLY_SECOND and self._plain((), {})
                and not (return_overflowing_tokens or return_token_type_ids or return_special_tokens_mask
                         or return_offsets_mapping or return_length)):
            sst = self.split_special_tokens if split_special_tokens is None else split_special_tokens
            data = numpy_batch(self, texts, sst, padding_strategy, truncation_strategy, max_length,
                               pad_to_multiple_of, padding_side, return_attention_mask, verbose)
            return BatchEncoding(data, encoding=lazy, tensor_type="np", n_sequences=1)
        data = self._batch(texts, pairs, words, batched, spans=False, **opts)
        if not batched and return_tensors is None and not return_overflowing_tokens:
            # as transformers' tokenizers backend: per-token lists lose the batch axis, scalars don't
            data = {k: (v[0] if v and isinstance(v[0], list) else v) for k, v in data.items()}
        return BatchEncoding(data, encoding=lazy, tensor_type=return_tensors, n_sequences=1 if pairs is None else 2)

    def _batch(self, texts, pairs, words: bool, batched: bool, spans: bool, *, add_special_tokens, padding_strategy,
               truncation_strategy, max_length, stride, pad_to_multiple_of, padding_side, return_token_type_ids,
               return_attention_mask, return_overflowing_tokens, return_special_tokens_mask, return_offsets_mapping,
               return_length, verbose, split_special_tokens):
        """The rows of a batch (lists), or with ``spans`` their :class:`TokenSpans` (the encodings)."""
        sst = self.split_special_tokens if split_special_tokens is None else split_special_tokens
        engine = self.engine()
        encode = encode_split_words if words else encode_texts
        offs = return_offsets_mapping or spans
        a = encode(engine, texts, sst, offs)
        b = encode(engine, pairs, sst, offs) if pairs is not None else None
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        n_special = self.num_special_tokens_to_add(pair=pairs is not None) if add_special_tokens else 0

        # Fast exit: nothing but ids (and a mask of ones).
        if (not spans and b is None and n_special == 0 and padding_strategy == PaddingStrategy.DO_NOT_PAD
                and truncation_strategy == TruncationStrategy.DO_NOT_TRUNCATE and not return_overflowing_tokens
                and not (return_token_type_ids or return_special_tokens_mask or return_offsets_mapping
                         or return_length)):
            data: dict[str, Any] = {"input_ids": a[0]}
            longest = max(a[0], key=len, default=[])
            if return_attention_mask:
                data["attention_mask"] = ones_rows(a[0])
            self._eventual_warn_about_too_long_sequence(longest, max_length, verbose)
            return data

        rows, mapping = rows_of(self, a, b, add_special_tokens, truncation_strategy, max_length, stride,
                                return_overflowing_tokens, return_token_type_ids, return_special_tokens_mask,
                                return_offsets_mapping, spans)
        for x in rows["input_ids"] if not spans else ():
            self._eventual_warn_about_too_long_sequence(x, max_length, verbose)
        pad_rows(rows, padding_strategy, max_length, pad_to_multiple_of, padding_side or self.padding_side,
                 self.pad_token_id, self.pad_token_type_id)
        if spans:
            t = token_tables(engine)
            added = {i: str(x.content) for i, x in self._added_tokens_decoder.items()}
            return spans_rows(rows, t.id_to_str, added, 1 if pairs is None else 2)
        if not return_attention_mask:
            rows.pop("attention_mask")
        if return_length:
            rows["length"] = [len(x) for x in rows["input_ids"]]
        if return_overflowing_tokens:
            rows["overflow_to_sample_mapping"] = mapping
        return rows

    # ---- datasets ----------------------------------------------------------------------------

    def __call__(self, text=None, *args: Any, **kwargs: Any):
        """As ``PreTrainedTokenizer.__call__``, plus: a ``Mapping`` (a ``datasets`` batch or row)
        encodes its ``text_column``; a ``pyarrow.Table`` gets the encoding appended as columns."""
        if isinstance(text, Mapping):
            if self.text_column not in text:
                raise KeyError(f"column {self.text_column!r} not in the batch (columns: {list(text.keys())}); "
                               f"set tokenizer.text_column")
            if self._plain(args, kwargs) and (column := map_batch_column(text, self.text_column)) is not None:
                cols, longest = map_batch(text, column, self.engine(), self.text_column,
                                          self.split_special_tokens, "attention_mask" in self.model_input_names)
                self._eventual_warn_about_too_long_sequence(range(longest), None, True)
                return cols
            col = text[self.text_column]
            return dict(super().__call__(col if isinstance(col, str) else list(col), *args, **kwargs))
        if is_arrow_table(text):
            return self._call_arrow(text, *args, **kwargs)
        return super().__call__(text, *args, **kwargs)

    def _plain(self, args, kwargs) -> bool:
        """Whether a call gives ids and masks only (no options, nothing added around the text)."""
        return (not args and not kwargs and set(self.model_input_names) <= {"input_ids", "attention_mask"}
                and self.num_special_tokens_to_add() == 0)

    def _call_arrow(self, table, *args: Any, **kwargs: Any):
        plain = self._plain(args, kwargs)
        return table_call(self.engine() if plain else None, table, self.text_column,
                          self.split_special_tokens, "attention_mask" in self.model_input_names,
                          lambda texts: super(BPETokenizer, self).__call__(texts, *args, **kwargs))


register()  # also when this module is imported directly (the import hook may have run too early)
