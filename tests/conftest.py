"""Shared pytest helpers."""

from __future__ import annotations

from pathlib import Path

import pytest


def shared_data() -> Path:
    """The shared data directory beside the repository (``<x>/shared/data`` for ``<x>/main``).

    Skips the calling test when it is missing (e.g. in a fresh clone).
    """
    path = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
    if not path.is_dir():
        pytest.skip(f"../shared/data not found (fresh clone): {path}")
    return path
