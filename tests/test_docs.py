"""The front door stays a front door: README.md is short, shows the two commands, and every relative
link and image in README.md, CHANGELOG.md and docs/**/*.md resolves (to a file, and to a heading
where it names one). The docs are reference, not log: no page over 400 lines but the contract
(docs/design.md), CHANGELOG.md short dated bullets (at most 300 lines), history in docs/history/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

def pages(root: Path) -> list[Path]:
    """README.md, CHANGELOG.md and every Markdown page under docs/, at any depth."""
    return [root / "README.md", root / "CHANGELOG.md", *sorted((root / "docs").rglob("*.md"))]


PAGES = pages(ROOT)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # links and images (the image's target is a file too)
MAX_PAGE_LINES = 400  # a reference page a reader can hold; the contract is the exception
MAX_CHANGELOG_LINES = 300


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return out


def broken_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)  # code is not links
    out = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            out.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            out.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_check_catches_a_broken_link(tmp_path):
    page = tmp_path / "x.md"
    (tmp_path / "there.md").write_text("# A heading\n")
    page.write_text("[a](there.md) [b](there.md#a-heading) [c](gone.md) [d](there.md#nope) "
                    "[e](https://example.org/gone) ![g](gone.png)\n```\n[f](inside-code.md)\n```\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert broken_links(page) == ["x.md: gone.md (no such file)", "x.md: there.md#nope (no such heading)",
                                      "x.md: gone.png (no such file)"]
    finally:
        ROOT = saved


def test_the_pages_include_the_nested_docs(tmp_path):
    (tmp_path / "docs" / "a" / "b").mkdir(parents=True)
    for name in ("README.md", "CHANGELOG.md", "docs/top.md", "docs/a/b/deep.md"):
        (tmp_path / name).write_text("# x\n")
    assert [p.relative_to(tmp_path).as_posix() for p in pages(tmp_path)] == [
        "README.md", "CHANGELOG.md", "docs/a/b/deep.md", "docs/top.md"]
    assert (ROOT / "docs" / "integrations" / "memory.md") in PAGES


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_is_a_log(page):
    lines = len(page.read_text(encoding="utf-8").splitlines())
    if page == ROOT / "docs" / "design.md":
        return  # the contract keeps its numbered sections whole
    limit = MAX_CHANGELOG_LINES if page.name == "CHANGELOG.md" else MAX_PAGE_LINES
    assert lines <= limit, f"{page.relative_to(ROOT)} has {lines} lines (at most {limit}): move history to docs/history/"


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 220
    assert "make demo" in text and "make test" in text
    assert "## Headline" in text


HEADLINE_MAX_LINES, HEADLINE_MAX_WORDS, HEADLINE_MAX_FIGURES = 6, 80, 6
# a figure: a number standing alone (+0.038, −0.013, 1,000,000, 27.0 %); digits inside a word (p50,
# L6, GPT-4o) are names, not figures
FIGURE = re.compile(r"(?<![\w.])[−+-]?\d+(?:[.,]\d+)*(?![\w])")


def headline(text: str) -> list[str]:
    """The Headline's prose: the non-empty lines after `## Headline` up to its first table or heading."""
    lines = text.split("## Headline\n", 1)[1].splitlines()
    out = []
    for line in lines:
        if line.startswith(("|", "#")):
            break
        if line.strip():
            out.append(line)
    return out


def headline_counts(text: str) -> tuple[int, int, int]:
    prose = headline(text)
    return len(prose), sum(len(line.split()) for line in prose), sum(len(FIGURE.findall(line)) for line in prose)


def test_the_headline_reads_in_a_minute():
    lines, words, figures = headline_counts((ROOT / "README.md").read_text(encoding="utf-8"))
    assert 0 < lines <= HEADLINE_MAX_LINES, f"README Headline has {lines} lines (at most {HEADLINE_MAX_LINES})"
    assert words <= HEADLINE_MAX_WORDS, f"README Headline has {words} words (at most {HEADLINE_MAX_WORDS})"
    assert figures <= HEADLINE_MAX_FIGURES, f"README Headline has {figures} figures (at most {HEADLINE_MAX_FIGURES})"


def test_the_headline_count_sees_figures_not_names():
    text = ("## Headline\n\nGate L6 on GPT-4o-mini: p50 +0.038, −0.013 and 1,000,000 memories;\n"
            "27.0 % → 3.5 % (x2).\n\n| a | 1 |\n")
    assert headline_counts(text) == (2, 16, 5)


def test_the_readme_places_the_paper_anchors():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "Beyond Similarity: Trustworthy Memory Search for Personal AI Agents" in text
    for paper in ("27.0 % → 3.5 %", "16.8 % → 4.4 %", "38.9 → 40.8", "1.47 s → 1.59 s"):
        assert paper in text, paper


def test_the_researcher_quickstart_trains_on_the_data_it_generates():
    """README's quickstart generates and mines the folder the default training config reads."""
    import yaml

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quickstart = readme[readme.index("## Quickstart: a researcher"):]
    generated = re.search(r"memgate generate --config (\S+) --out (\S+)", quickstart)
    mined = re.search(r"memgate mine --data (\S+)", quickstart)
    data = yaml.safe_load((ROOT / "configs/train/default.yaml").read_text(encoding="utf-8"))["data"]
    assert generated and mined, "the quickstart generates and mines its data"
    assert (generated[1], generated[2], mined[1]) == (data["data_config"], data["data_dir"], data["data_dir"])
