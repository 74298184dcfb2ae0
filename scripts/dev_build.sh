#!/usr/bin/env bash
# Builds the extension (release) straight into hf_bpe/ so a checkout can be tested in place:
#   scripts/dev_build.sh && PYTHONPATH=$PWD python -m pytest
# (`pip install -e .` does the same through maturin; this avoids touching site-packages.)
# The new library is renamed into place, so processes that have the old one loaded keep it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --features extension-module --lib
cp target/release/lib_core.so hf_bpe/.tmp_core.abi3.so
mv -f hf_bpe/.tmp_core.abi3.so hf_bpe/_core.abi3.so
