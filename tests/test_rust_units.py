"""Runs the Rust core's own unit tests (`cargo test --lib`, a debug build).

They check things the Python tests cannot reach directly (table packing, the shared word cache,
budget accounting), and the debug build turns on the bounds assertions of the scanners' unchecked
reads (`pretok/chars.rs::at`), which caught a read past the end of a text in review.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_cargo_unit_tests_pass():
    cargo = shutil.which("cargo")
    if cargo is None:
        if os.environ.get("CI"):
            pytest.fail("cargo is missing in CI: the Rust toolchain builds the package, so it must be there")
        pytest.skip("cargo not on PATH: the Rust unit tests need the Rust toolchain")
    proc = subprocess.run([cargo, "test", "--lib", "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, f"cargo test failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert "test result: ok" in proc.stdout
