"""Every file format in and out, as plain data: hf_bpe's saved folder, GPT-2's ``vocab.json`` +
``merges.txt``, HF ``tokenizer.json`` / ``tokenizer_config.json``, tiktoken's ``.tiktoken`` rank
files, and the regex dialects a pattern is written in. This wing imports nothing of hf_bpe above
it (no ``BPE``): ``BPE.load`` and ``BPE.save`` call it with their parts.

* :mod:`~hf_bpe.formats.types` — the shared types (:class:`FormatError`, :class:`AddedToken`,
  :class:`Tables`), a leaf;
* :mod:`~hf_bpe.formats.reader` — :func:`read` of any tokenizer file into :class:`Tables`;
* :mod:`~hf_bpe.formats.writer` — the contents of a saved folder, by file name;
* :mod:`~hf_bpe.formats.files` — atomic writes of a folder or a file;
* :mod:`~hf_bpe.formats.tiktoken_files` — ``.tiktoken`` rank files; OpenAI's encodings by name, shipped;
* :mod:`~hf_bpe.formats.ranks` — tiktoken's merge rule against GPT-2's;
* :mod:`~hf_bpe.formats.tiktoken_export` — export to tiktoken (ranks, pattern, rank file);
* :mod:`~hf_bpe.formats.regex_forms` — a pattern spelled for Oniguruma or for tiktoken;
* :mod:`~hf_bpe.formats.alphabet` — GPT-2's byte-to-character alphabet.
"""

from hf_bpe.formats.alphabet import BYTE_TO_CHAR, bytes_to_unicode, str_to_token, token_to_str
from hf_bpe.formats.files import write_file, write_folder
from hf_bpe.formats.reader import from_strings, read
from hf_bpe.formats.regex_forms import for_oniguruma, for_tiktoken, from_tiktoken_pattern, pattern_key, pattern_name
from hf_bpe.formats.tiktoken_files import (PUBLISHED, TIKTOKEN_ENCODINGS, encoding_name_for_model, read_published,
                                           read_tiktoken)
from hf_bpe.formats.types import MAX_ID, AddedToken, FormatError, Tables
from hf_bpe.formats.writer import (ARTIFACTS, folder_files, gpt2_files, pipeline_parts, tokenizer_config,
                                   tokenizer_json, with_dropout)

__all__ = ["FormatError", "AddedToken", "Tables", "MAX_ID", "read", "from_strings", "read_tiktoken",
           "TIKTOKEN_ENCODINGS", "PUBLISHED", "read_published", "encoding_name_for_model", "pattern_name",
           "pattern_key", "from_tiktoken_pattern", "for_oniguruma", "for_tiktoken", "bytes_to_unicode",
           "token_to_str", "str_to_token", "BYTE_TO_CHAR", "ARTIFACTS", "folder_files", "gpt2_files", "pipeline_parts",
           "tokenizer_json", "tokenizer_config", "write_folder", "write_file", "with_dropout"]
