"""Thread pools: shared by counting, training and encoding, bounded whatever `num_threads` values
are asked for, refused when absurd, and usable again in a forked child (src/pool.rs)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from hf_bpe import _core

KEPT = 3  # pools kept alive at once (src/pool.rs KEPT)


def _run(code: str, timeout: float = 240) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "RAYON_NUM_THREADS": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="counts threads through /proc")
def test_thread_count_stays_bounded_over_every_num_threads():
    out = _run(f"""
        import hf_bpe
        def threads():
            for line in open("/proc/self/status"):
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        import os, tempfile
        bpe = hf_bpe.train(["the cat sat on the mat, and the dog sat too"] * 50, vocab_size=300)
        docs = ["the cat sat on the mat " * 2000] * 4   # big enough to run on a pool
        d = tempfile.mkdtemp()
        src = os.path.join(d, "in.txt")
        open(src, "w").write("the cat sat on the mat\\n" * 20000)
        bpe.save(os.path.join(d, "tok"))
        from hf_bpe import _core
        tok = hf_bpe.BPETokenizer.from_pretrained(os.path.join(d, "tok"))
        peak = 0
        for n in range(1, 65):
            bpe.encode_batch_flat(docs, num_threads=n)                          # encode
            hf_bpe.train(["a b c d e f " * 100], vocab_size=270, num_threads=n)  # train
            wc = _core.WordCounter("gpt2", [], n)                              # count
            wc.add_texts(docs)
            wc.add_file(src)
            bpe.encode_file(src, os.path.join(d, "out.npy"), num_threads=n, progress=False)  # files
            tok(docs)                                                           # the HF class
            peak = max(peak, threads())
        print(peak, threads())
    """)
    peak, end = map(int, out.split())
    # Before pools were bounded, encode_batch alone over this range left 2,081 threads. Evicted pools' threads end a moment
    # after their last call, so allow two pools more than are kept while the loop runs.
    assert peak <= (KEPT + 2) * 64 + 8, peak
    assert end <= (KEPT + 2) * 64 + 8, end


def test_an_absurd_num_threads_is_refused_at_once():
    enc = _core.Encoder({i: bytes([i]) for i in range(256)}, None, {}, "gpt2")
    for call in (lambda: enc.encode_batch(["a b"], num_threads=100_000),
                 lambda: enc.encode_batch_flat(["a b"], num_threads=5000),
                 lambda: _core.WordCounter("gpt2", [], 100_000)):
        t = time.perf_counter()
        with pytest.raises(ValueError, match="num_threads=.* is more than 1024 threads"):
            call()
        assert time.perf_counter() - t < 1.0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_of_a_process_that_trained_trains_again():
    out = _run("""
        import os, sys
        import hf_bpe
        texts = ["the cat sat on the mat " * 50 + str(i) for i in range(2000)]
        a = hf_bpe.train(texts, vocab_size=400, num_threads=2)        # the counter's pool is used
        bpe = a
        bpe.encode_batch_flat(["the cat " * 100_000], num_threads=2)   # and the encoder's
        sw = hf_bpe.train(texts, vocab_size=450, superword_transition=400, num_threads=2)  # spans split, cut
        pid = os.fork()
        if pid == 0:
            b = hf_bpe.train(texts, vocab_size=400, num_threads=2)
            ok = b.merges == a.merges and b.encode_batch_flat(["the cat " * 100_000], num_threads=2)[0].size > 0
            ok = ok and hf_bpe.train(texts, vocab_size=450, superword_transition=400, num_threads=2).merges == sw.merges
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """, timeout=120)
    assert out.strip() == "0"
