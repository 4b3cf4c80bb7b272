"""The documentation site builds as `make docs` builds it: MkDocs with --strict, every link,
page and anchor checked (mkdocs.yml's `validation`), the README as its home page. Run into a
temporary directory, so the suite leaves no site/ behind.

Checked to fail: the build test with a link to a page that does not exist in docs/events.md, with
an anchor that does not exist in the README, and with a page left out of mkdocs.yml's nav; the
diagram test with one arrow of docs/architecture.md's flow changed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of the site at root, as `make docs` runs it."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def warnings(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]


def test_the_site_builds_with_no_warning_and_a_page_for_every_document(tmp_path: Path) -> None:
    result = build(REPO, tmp_path / "site")

    assert (result.returncode, warnings(result)) == (0, [])
    pages = {p.relative_to(REPO / "docs").with_suffix("") for p in (REPO / "docs").glob("*.md")}
    site = tmp_path / "site"
    built = {p.parent.relative_to(site) for p in site.rglob("index.html")}
    assert {Path(".") if page.name == "index" else page for page in pages} <= built


def test_a_broken_link_a_missing_anchor_and_a_page_outside_the_nav_each_fail_the_build(
    tmp_path: Path,
) -> None:
    # The validation settings of mkdocs.yml are what makes these fail: held here, on a copy.
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in ("mkdocs.yml", "README.md"):
        shutil.copy(REPO / name, copy / name)
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copytree(REPO / "tools", copy / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "docs" / "events.md").open("a", encoding="utf-8") as page:
        page.write("\n[a page](no-such-page.md), [an anchor](operations.md#no-such-anchor)\n")
    (copy / "docs" / "orphan.md").write_text("# Not in the nav\n", encoding="utf-8")

    result = build(copy, tmp_path / "site")

    assert result.returncode != 0
    found = "\n".join(warnings(result))
    assert "'no-such-page.md'" in found
    assert "'#no-such-anchor'" in found
    assert 'not included in the "nav"' in found
    assert "  - orphan.md" in result.stderr.splitlines()


def mermaid_flow(text: str) -> str:
    shown = re.search(r"## The flow of a message\n.*?(```mermaid\n.*?```)", text, re.S)
    assert shown is not None
    return shown.group(1)


def test_the_readme_and_the_architecture_page_draw_the_same_flow() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    architecture = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")

    assert mermaid_flow(readme) == mermaid_flow(architecture)
