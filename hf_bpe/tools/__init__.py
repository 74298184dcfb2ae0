"""The tools on top of everything: the command line (:mod:`~hf_bpe.tools.cli`), the interactive
page (:mod:`~hf_bpe.tools.viz`) and the tokenizer report (:mod:`~hf_bpe.tools.report`)."""
