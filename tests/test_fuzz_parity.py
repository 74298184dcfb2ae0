"""The parity fuzzer's quick mode (`scripts/fuzz_parity.py --quick`): random text of every class
through r50k/cl100k/o200k against tiktoken and tokenizers, and through vocabularies trained and
saved here against tokenizers and transformers. No mismatch may be left unexplained."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_fuzz_finds_no_unexplained_mismatch():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz_parity.py"), "--quick", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    names = set(report)
    assert {"r50k vs tiktoken", "cl100k vs tiktoken", "o200k vs tiktoken", "cl100k saved vs tokenizers",
            "trained cl100k vs tokenizers", "trained o200k vs transformers"} <= names, names
    for name, counts in report.items():
        assert counts["texts"] == 300, (name, counts)
        assert counts.get("other", 0) == 0, (name, counts, proc.stderr[-2000:])
    assert proc.returncode == 0
