"""``python -m hf_bpe``: the ``hf-bpe`` command line."""

from hf_bpe.tools.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
