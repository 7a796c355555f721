"""The documentation's own checks that do not need a docs build (CI's `python docs/build.py` runs every guide
page's code, executes the notebooks and fails on any warning): the README's set-up commands and generated
table, every `pbmarl` command written in the README or a guide page, every public name in the API reference,
a benchmark page per results file, the internal-link checker, and the stale-notebook guard.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS))

FULL = 'python3 -m venv .venv && . .venv/bin/activate && pip install -c constraints.txt -e ".[all]" && pip install "arch>=8" && '
SETUP = [FULL + "pbmarl psro --game kuhn_poker", FULL + "python -m pytest -q -n 2 --dist loadgroup"]
LIGHT = 'python3 -m venv .venv && . .venv/bin/activate && pip install -e . && pbmarl psro --game kuhn_poker'


def _blocks(path: Path, lang: str) -> list[str]:
    return re.findall(rf"```{re.escape(lang)}\n(.*?)```", path.read_text(), re.S)


def test_readme_opens_with_the_two_setup_commands_and_stays_short() -> None:
    readme = ROOT / "README.md"
    bash = [block.strip() for block in _blocks(readme, "bash")]
    assert bash[:2] == SETUP
    assert LIGHT in bash
    assert len(readme.read_text().splitlines()) < 250
    started = DOCS / "getting-started.md"
    assert [b.strip() for b in _blocks(started, "bash")] == [SETUP[0], LIGHT]


def test_readme_results_table_is_the_generated_one() -> None:
    import gen_benchmarks

    text = (ROOT / "README.md").read_text()
    table = text.split(gen_benchmarks.START, 1)[1].split(gen_benchmarks.END, 1)[0]
    assert table.strip() == gen_benchmarks.readme_table(ROOT / "benchmarks" / "results").strip(), (
        "README's results table is stale: python docs/gen_benchmarks.py --readme")
    assert "no rows" not in table


def _commands() -> list[tuple[str, str]]:
    pages = [ROOT / "README.md", *DOCS.glob("*.md"), *DOCS.glob("guide/*.md")]
    found = []
    for page in pages:
        text = page.read_text()
        lines = [line for block in _blocks(page, "bash") for line in block.splitlines()]
        lines += [line[1:] for block in re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, re.S)
                  for line in block.splitlines() if line.startswith("!")]
        for line in lines:
            command = line.split("#", 1)[0].split("&&")[-1].strip()
            if command.startswith("pbmarl "):
                found.append((page.name, command))
    return found


@pytest.mark.parametrize(("page", "command"), _commands())
def test_every_pbmarl_command_in_the_docs_parses(page: str, command: str) -> None:
    from pbmarl import cli

    argv = shlex.split(command)[1:]
    cli._parser().parse_args(argv)  # exits (SystemExit) on an option the command line does not have


def test_every_public_name_has_an_api_entry(tmp_path: Path) -> None:
    import gen_api

    import pbmarl

    documented = set(gen_api.write(tmp_path))
    missing = {f"pbmarl.{n}" for n in pbmarl.__all__ if n != "__version__"} - documented
    assert not missing
    index = (tmp_path / "index.rst").read_text()
    assert all(f"   {n}\n" in index for n in pbmarl.__all__ if n != "__version__")


def test_every_results_file_gets_a_benchmark_page_with_its_rows(tmp_path: Path) -> None:
    import gen_benchmarks

    results = ROOT / "benchmarks" / "results"
    gen_benchmarks.write(tmp_path, results)
    for csv in results.glob("*.csv"):
        page = (tmp_path / f"{csv.stem}.md").read_text()
        assert "## Latest row of each case" in page and "**Script:**" in page and "**Machine:**" in page
    glance = (tmp_path / "glance.md").read_text()
    assert "no rows" not in glance


def test_link_checker_finds_a_missing_page_and_a_missing_anchor(tmp_path: Path) -> None:
    import check_links

    (tmp_path / "a.html").write_text('<a href="b.html#here">ok</a><a href="b.html#gone">x</a><a href="c.html">y</a>'
                                     '<a href="https://example.org/">external</a>')
    (tmp_path / "b.html").write_text('<h1 id="here">b</h1><a href="a.html">back</a>')
    broken = check_links.check(tmp_path)
    assert sorted(broken) == ["a.html: b.html#gone (no such anchor)", "a.html: c.html (no such file)"]


def test_an_executed_notebook_is_stale_once_its_source_or_the_library_changes(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import nbformat

    import notebooks

    monkeypatch.setattr(notebooks, "DOCS", tmp_path / "docs")
    source = tmp_path / "tutorials" / "00_x.ipynb"
    source.parent.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), source)
    copy = notebooks.target(source)
    copy.parent.mkdir(parents=True)
    executed = nbformat.read(source, as_version=4)
    executed.metadata[notebooks.STAMP] = {"source_sha256": notebooks.file_hash(source), "library_sha256": "lib"}
    nbformat.write(executed, copy)
    monkeypatch.setattr(notebooks, "ROOT", tmp_path)
    assert notebooks.stale(source, "lib") is None
    assert "pbmarl changed" in (notebooks.stale(source, "other") or "")
    source.write_text(source.read_text().replace("1 + 1", "2 + 2"))
    assert "changed since" in (notebooks.stale(source, "lib") or "")


def test_the_ray_start_lines_of_the_guide_use_options_ray_has() -> None:
    """The cluster set-up is the one code block a docs build cannot run; its options are checked against Ray's."""
    import subprocess

    lines = [line.split("#", 1)[0].strip() for page in DOCS.glob("guide/*.md") for block in _blocks(page, "bash")
             for line in block.splitlines() if line.startswith("ray start")]
    assert lines
    pytest.importorskip("ray")
    ray = Path(sys.executable).parent / "ray"
    help_text = subprocess.run([str(ray), "start", "--help"], capture_output=True, text=True, timeout=120).stdout
    for line in lines:
        for option in re.findall(r"(--[a-z-]+)", line):
            assert re.search(rf"^\s+{option}\b", help_text, re.M), f"{line!r}: ray start has no {option}"


def test_every_pb_name_the_readme_and_the_docs_write_exists() -> None:
    """`pb.NAME` and `pb.SUBPACKAGE.NAME` in prose and code: a name moved or renamed leaves no stale spelling behind
    (the changelog's "before" column excepted)."""
    import pbmarl

    pages = [ROOT / "README.md", *DOCS.glob("*.md"), *DOCS.glob("guide/*.md")]
    stale = []
    for page in pages:
        text = page.read_text()
        if page.name == "changelog.md":  # its tables spell the old names on purpose: keep the "now" column only
            text = "\n".join(line.rsplit("|", 2)[-2] if line.startswith("|") else line for line in text.splitlines())
        for chain in sorted(set(re.findall(r"\bpb((?:\.[A-Za-z_]\w*)+)", text))):
            obj: object = pbmarl
            for attr in chain.strip(".").split(".")[:2]:
                if not hasattr(obj, attr):
                    stale.append(f"{page.name}: pb{chain}")
                    break
                obj = getattr(obj, attr)
    assert not stale


@pytest.mark.browser
def test_site_check_opens_every_page_and_names_a_missing_figure_a_script_error_and_an_empty_search(
        tmp_path: Path) -> None:
    """What docs/build.py runs on the built site, tried on a small one with a fault per page (no docs build needed)."""
    import base64

    import check_site
    from browser_lab import require_browser

    require_browser()
    png = base64.b64encode(bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f8cfc0f01f0005000"
        "1ff5ba9d3a80000000049454e44ae426082")).decode()
    (tmp_path / "good.html").write_text(f'<html><body><p>a figure</p><img src="data:image/png;base64,{png}"></body></html>')
    (tmp_path / "figure.html").write_text('<html><body><p>a figure</p><img src="_images/gone.png"></body></html>')
    (tmp_path / "script.html").write_text("<html><body><p>text</p><script>undefinedName();</script></body></html>")
    (tmp_path / "blank.html").write_text("<html><body></body></html>")
    (tmp_path / "search.html").write_text('<html><body><p>search</p><div id="search-results"><p class="search-summary">'
                                          'Search finished, found 0 pages matching the search query.</p></div></body></html>')
    problems, pages, hits = check_site.check(tmp_path)
    assert (pages, hits) == (5, 0)
    gone = (tmp_path / "_images" / "gone.png").as_uri()
    assert problems[0] == "blank.html: did not load (no body text)"
    assert problems[1] == f"figure.html: image not drawn: {gone[-90:]}"
    assert problems[2].startswith("figure.html: console error:") and "ERR_FILE_NOT_FOUND" in problems[2]
    assert problems[3].startswith("script.html: console error:") and "undefinedName is not defined" in problems[3]
    assert problems[4:] == ["search.html: the search box found nothing for 'exploitability'"]


def test_a_benchmark_page_shows_each_report_folder_with_its_table_and_figures(tmp_path: Path) -> None:
    import gen_benchmarks
    import pandas as pd

    results = tmp_path / "results"
    case = results / "selfplay" / "kuhn_poker"
    case.mkdir(parents=True)
    (case / "final_table.md").write_text("# kuhn_poker: final exact exploitability\n\n| a |\n| --- |\n| 1 |\n\n"
                                         "# a second top heading\n")
    (case / "curve.png").write_bytes(b"\x89PNG fake")
    (results / "selfplay" / "no_table").mkdir()  # a folder without final_table.md is not a report
    rows = pd.DataFrame({"date": ["2026-01-01T00:00:00+00:00"], "commit": ["abc"], "command": ["python x.py"],
                         "game": ["kuhn_poker"], "method": ["ppo"], "seed": [0], "iteration": [1]})
    out = tmp_path / "site"
    out.mkdir()
    text = gen_benchmarks.page("selfplay", rows, out, results)
    assert "## kuhn_poker: final exact exploitability" in text and "### a second top heading" in text
    assert "![curve](selfplay/kuhn_poker/curve.png)" in text and "| 1 |" in text and "no_table" not in text
    assert (out / "selfplay" / "kuhn_poker" / "curve.png").read_bytes() == b"\x89PNG fake"
    assert not [line for line in text.splitlines() if line.startswith("# ")][1:]  # one top heading: the page's
