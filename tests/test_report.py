"""hf-bpe report: the figures in the HTML against hf-bpe stats and a direct count; the page opens
in headless Chromium without console errors."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from collections import Counter

import pytest

import hf_bpe
from hf_bpe.tools import report

TEXTS = {
    "en.txt": "The cat sat on the mat. The hat was on the cat.\n" * 40 + "Then they went home.\n",
    "mixed.txt": "Кошка сидит на ковре. 猫はマットの上に座った。 قطة على السجادة 🙂\n" * 20,
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    paths = []
    for name, text in TEXTS.items():
        (d / name).write_text(text, encoding="utf-8")
        paths.append(str(d / name))
    bpe = hf_bpe.train(list(TEXTS.values()), vocab_size=400, progress=False)
    bpe.save(d / "tok")
    other = hf_bpe.train([TEXTS["en.txt"]], vocab_size=300, progress=False)
    other.save(d / "other")
    out = d / "report.html"
    run = subprocess.run([sys.executable, "-m", "hf_bpe", "report", "--tokenizer", str(d / "tok"), *paths,
                          "--compare", str(d / "other"), "--out", str(out), "--quiet"],
                         capture_output=True, text=True, check=True)
    return d, paths, bpe, other, out, run.stdout


def test_figures_match_stats_and_a_direct_count(setup):
    d, paths, bpe, other, out, stdout = setup
    page = html.unescape(out.read_text(encoding="utf-8"))
    stats = subprocess.run([sys.executable, "-m", "hf_bpe", "stats", "--tokenizer", str(d / "tok"), *paths, "--quiet"],
                           capture_output=True, text=True, check=True).stdout
    for path, (name, text) in zip(paths, TEXTS.items()):
        ids = bpe.encode(text, allowed_special="all")
        nbytes = len(text.encode())
        row = next(line for line in stats.splitlines() if line.startswith(path[-40:]))
        assert row.split()[1:] == [f"{nbytes:,}", f"{len(ids):,}", f"{nbytes / len(ids):.3f}"]
        assert f"<td>tok</td><td>{name}</td><td>{nbytes:,}</td><td>{len(ids):,}</td><td>{nbytes / len(ids):.3f}</td>" in page
        ids2 = other.encode(text, allowed_special="all")
        assert f"<td>other</td><td>{name}</td><td>{nbytes:,}</td><td>{len(ids2):,}</td>" in page
    all_ids = [i for t in TEXTS.values() for i in bpe.encode(t, allowed_special="all")]
    ordinary = [i for i in bpe.vocab if i not in bpe.special_tokens.values()]
    unused = [i for i in ordinary if i not in set(all_ids)]
    assert f"{len(unused):,} of {len(ordinary):,} tokens" in page
    top_id, top_n = Counter(all_ids).most_common(1)[0]
    assert f"<td>{top_id}</td><td>{top_n:,}</td>" in page
    total = sum(len(t.encode()) for t in TEXTS.values())
    assert f"tok: {total:,} bytes, {len(all_ids):,} tokens" in stdout


def test_scripts_and_lengths(setup):
    d, paths, bpe, other, out, _ = setup
    figures = report.compute(bpe, paths, progress=False)
    assert {"Latin", "Cyrillic", "Han", "Arabic"} <= set(figures["scripts"])
    words = re.findall(r"\s*\S+", TEXTS["mixed.txt"]) + re.findall(r"\s*\S+", TEXTS["en.txt"])
    cyr = [w for w in words if report.script_of(w) == "Cyrillic"]
    assert figures["scripts"]["Cyrillic"]["bytes"] == sum(len(w.encode()) for w in cyr)
    assert figures["scripts"]["Cyrillic"]["tokens"] == sum(len(bpe.encode(w)) for w in cyr)
    assert report.script_of(" 123 кот") == "Cyrillic" and report.script_of(" 123!") == "Common"
    assert sum(figures["lengths_vocab"].values()) == len(bpe.vocab) - len(bpe.special_tokens)
    assert sum(figures["lengths_used"].values()) == figures["total"]["tokens"]


def test_json_lines_are_sampled_by_their_text(setup, tmp_path):
    bpe = setup[2]
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"text": "Кошка сидит", "id": 1}) + "\n" + json.dumps({"text": "кот"}) + "\n")
    figures = report.compute(bpe, [str(path)], progress=False)
    assert set(figures["scripts"]) == {"Cyrillic"}
    assert figures["scripts"]["Cyrillic"]["bytes"] == len("Кошка сидит\nкот".encode())


def test_a_report_that_cannot_be_written_leaves_no_temporary_file(setup, tmp_path):
    bpe, paths = setup[2], setup[1]
    target = tmp_path / "report.html"
    target.mkdir()  # a folder where the page should go: the write fails
    with pytest.raises(IsADirectoryError):
        report.write_report(bpe, paths[:1], target, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
    page = tmp_path / "ok.html"
    report.write_report(bpe, paths[:1], page, progress=False)
    assert page.read_text(encoding="utf-8").startswith("<!") and sorted(p.name for p in tmp_path.iterdir()) == ["ok.html", "report.html"]


def test_the_page_opens_without_console_errors(setup):
    out = setup[4]
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra")
    if not (shutil.which("chromedriver") and shutil.which("chromium")):
        pytest.skip("needs Debian's chromium and chromium-driver (.ci/run installs them)")
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        opts.add_argument(a)
    opts.binary_location = shutil.which("chromium")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=shutil.which("chromedriver")), options=opts)
    try:
        driver.get(out.as_uri())
        assert driver.title == "hf-bpe report"
        assert len(driver.find_elements("css selector", "svg")) >= 4
        assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        driver.quit()


PAIRS = [("deu", "Die Katze sitzt auf der Matte.", "The cat sits on the mat."),
         ("deu", "Ich gehe nach Hause.", "I am going home."),
         ("rus", "Кошка сидит на ковре.", "The cat sits on the rug."),
         ("jpn", "猫はマットの上に座った。", "The cat sat on the mat.")]


def test_parallel_pairs_give_each_language_its_premium_over_english(setup, tmp_path):
    import gzip

    d, paths, bpe, other, _, _ = setup
    par = tmp_path / "pairs.jsonl.gz"
    with gzip.open(par, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps({"lang": lang, "text": t, "eng": e}) + "\n" for lang, t, e in PAIRS)
    out = tmp_path / "par.html"
    run = subprocess.run([sys.executable, "-m", "hf_bpe", "report", "--tokenizer", str(d / "tok"), paths[0],
                          "--compare", str(d / "other"), "--parallel", str(par), "--out", str(out), "--quiet"],
                         capture_output=True, text=True, check=True)
    got = report.parallel_costs(bpe, str(par))
    for lang in ("deu", "rus", "jpn"):
        rows = [(t, e) for la, t, e in PAIRS if la == lang]
        tokens = sum(len(bpe.encode(t)) for t, _ in rows)
        english = sum(len(bpe.encode(e)) for _, e in rows)
        assert got["languages"][lang] == {"pairs": len(rows), "tokens": tokens, "english_tokens": english,
                                          "premium": tokens / english}
    premiums = [v["premium"] for v in got["languages"].values()]
    assert got["gini"] == pytest.approx(sum(abs(a - b) for a in premiums for b in premiums)
                                        / (2 * len(premiums) ** 2 * (sum(premiums) / len(premiums))))
    page = out.read_text(encoding="utf-8")
    assert "Per language: tokens against English" in page and f"{got['gini']:.3f}" in page
    assert f"{got['languages']['jpn']['premium']:.3f}" in page and "premium over English: Gini" in run.stdout
    assert report.gini([1.0, 1.0, 1.0]) == 0.0


def test_a_bad_parallel_line_names_the_file_and_line(setup, tmp_path):
    _, paths, bpe, _, _, _ = setup
    par = tmp_path / "bad.jsonl"
    par.write_text(json.dumps({"lang": "deu", "text": "x", "eng": "y"}) + "\n" + '{"lang": "deu", "text": "x"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl, line 2: a parallel pair"):
        report.parallel_costs(bpe, str(par))
