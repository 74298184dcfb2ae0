"""hf-bpe viz in a real headless Chromium (Debian's chromium + chromedriver, installed by .ci/run):
type the post's sentence, move the merges slider, train in the page, take a screenshot."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from hf_bpe.tools import viz

SENTENCE = "the cat saw the hat 🙂"
ARTIFACTS = Path(os.environ.get("HF_BPE_TEST_ARTIFACTS", Path(__file__).parent / "artifacts"))

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra")
if not (shutil.which("chromedriver") and (shutil.which("chromium") or shutil.which("chromium-browser"))):
    pytest.skip("needs Debian's chromium and chromium-driver (.ci/run installs them)", allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def page():
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "hf_bpe", "viz", "--port", str(port), "--no-browser"],
                              stdout=subprocess.PIPE, text=True)
    assert f"127.0.0.1:{port}" in server.stdout.readline()
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,900"):
        opts.add_argument(a)
    opts.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=shutil.which("chromedriver")), options=opts)
    driver.get(f"http://127.0.0.1:{port}/")
    try:
        yield driver
    finally:
        driver.quit()
        server.terminate()
        server.wait(10)


def _tokens(driver, box: str = "tokens") -> list[tuple[int, str]]:
    """The tokens the page shows (read in one script: the page may re-render meanwhile)."""
    got = driver.execute_script("return [...document.querySelectorAll(arguments[0])]"
                                ".map(s => [s.dataset.id, s.dataset.text, s.querySelector('.id').textContent])",
                                f"#{box} > .tok")
    assert all(shown == i for i, _, shown in got)  # the id under each token is its id
    return [(int(i), t) for i, t, _ in got]


def _wait_for(driver, pred, what: str):
    WebDriverWait(driver, 15).until(lambda d: pred(), message=what)


def _set_text(driver, text: str) -> None:
    """Types ``text``; characters outside the BMP (which chromedriver cannot type) are added by
    the page's own input event."""
    box = driver.find_element(By.ID, "text")
    box.clear()
    bmp = "".join(c if ord(c) < 0x10000 else "\0" for c in text).split("\0")[0]
    box.send_keys(bmp)
    if bmp != text:
        driver.execute_script("const t = document.getElementById('text'); t.value = arguments[0];"
                              "t.dispatchEvent(new Event('input'));", text)


def _set_slider(driver, k: int) -> None:
    driver.execute_script("const s = document.getElementById('merges'); s.value = arguments[0];"
                          "s.dispatchEvent(new Event('input'));", k)


def test_typed_sentence_shows_bpe_encode_ids_and_bytes_at_zero_merges(page):
    bpe = viz.worked_example()
    _wait_for(page, lambda: len(_tokens(page)) > 0, "the first encoding")
    _set_text(page, SENTENCE)
    want = bpe.encode(SENTENCE)
    _wait_for(page, lambda: [i for i, _ in _tokens(page)] == want, f"ids {want}")
    _set_slider(page, 0)
    _wait_for(page, lambda: len(_tokens(page)) == 24, "24 byte tokens at 0 merges")
    toks = _tokens(page)
    assert [i for i, _ in toks] == list(SENTENCE.encode())
    assert [t for _, t in toks[-4:]] == ["\\xf0", "\\x9f", "\\x99", "\\x82"]
    assert "24 tokens" in page.find_element(By.ID, "stats").text
    # hovering a merged token shows its bytes, id, rank and parts
    _set_slider(page, 6)
    _wait_for(page, lambda: [i for i, _ in _tokens(page)] == want, "all merges again")
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(page).move_to_element(page.find_element(By.CSS_SELECTOR, '#tokens > .tok[data-id="259"]')).perform()
    tip = page.find_element(By.ID, "tooltip").text
    assert "id: 259" in tip and "merge rank: 3" in tip and "␣ + the" in tip


def test_training_in_the_page_gives_the_posts_merges_and_a_screenshot(page):
    corpus = page.find_element(By.ID, "corpus")
    assert corpus.get_attribute("value").split("\n") == viz.WORKED_EXAMPLE
    page.find_element(By.ID, "vocab").clear()
    page.find_element(By.ID, "vocab").send_keys("263")
    page.find_element(By.ID, "train").click()
    _wait_for(page, lambda: len(page.find_elements(By.CSS_SELECTOR, "#merge-list li")) == 6, "six merges")
    merges = [li.text for li in page.find_elements(By.CSS_SELECTOR, "#merge-list li")]
    assert merges == ["t h", "th e", "␣ the", "a t", "c at", "␣ cat"]
    _set_text(page, SENTENCE)
    _wait_for(page, lambda: [i for i, _ in _tokens(page)] == viz.worked_example().encode(SENTENCE), "trained ids")
    steps = page.find_element(By.ID, "steps").text
    assert "Merge 3: ␣ + the" in steps
    errors = [e for e in page.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = page.get_screenshot_as_png()
    (ARTIFACTS / "viz.png").write_bytes(png)
    assert _distinct_colours(png) > 20, "the screenshot is blank"


def _distinct_colours(png: bytes) -> int:
    """Distinct byte values among the first rows of an 8-bit RGB(A) PNG's filtered scanlines: a
    blank page gives a handful (filter bytes and one colour)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind == b"IDAT":
            idat += png[pos + 8:pos + 8 + n]
        pos += 12 + n
    return len(set(zlib.decompress(idat)))
