"""Every relative link and anchor in README.md and docs/*.md resolves: the file exists, and
an anchor (``page.md#section``) is a heading of that page, slugged as GitHub slugs it
(lower case, punctuation dropped, spaces to hyphens, ``-1``, ``-2`` for repeats)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link: its text
    text = text.lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of every heading of ``page`` (outside code blocks)."""
    text = FENCE.sub("", page.read_text())
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    """The link targets of ``page`` outside code blocks and inline code."""
    text = INLINE_CODE.sub("", FENCE.sub("", page.read_text()))
    return [m.group(2) for m in LINK.finditer(text)]


def test_slugs_follow_github():
    assert slug("The main experiment: `python -m controller run` (what `make run` does)") == \
        "the-main-experiment-python--m-controller-run-what-make-run-does"
    assert slug("3.4a Planners: placement algorithms by name") == \
        "34a-planners-placement-algorithms-by-name"
    assert slug("`run --method bcube` — BCube (docs/design.md §4)") == \
        "run---method-bcube--bcube-docsdesignmd-4"


def test_the_checker_finds_a_broken_link(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Top\n\n[a](p.md#top) [b](p.md#nowhere) `[c](x.md)`\n"
                    "```\n[d](y.md)\n```\n")
    assert links(page) == ["p.md#top", "p.md#nowhere"]
    assert anchors(page) == {"top"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT)}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    text = "\n".join(lines)
    assert "make run" in text and "make test" in text
    assert "docs/figures/architecture.png" in text


def test_the_architecture_figure_is_made_by_its_script(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "architecture.png"
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "figures" / "architecture.py"),
                           str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (ROOT / "docs" / "figures" / "architecture.png").read_bytes()[:4] == b"\x89PNG"
