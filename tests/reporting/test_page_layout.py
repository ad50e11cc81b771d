"""The shared page (lmaudit.reporting.page) for every study: each table sits in a horizontally
scrolling wrapper, so a table wider than the page scrolls inside it instead of being cut off
(checked in Chromium at 1280 px); a list of ids in a cell shows a count and a few ids with the
whole list folded; a section with no data is one line."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest

from lmaudit.pipeline import run
from lmaudit.reporting.page import ids, scroll_tables

WRAP = '<div class="scroll">'


def test_every_table_is_wrapped_once_nested_and_prewrapped_included() -> None:
    html = (
        "<p>x</p><table class='kv'><tr><td><table><tr><td>in</td></tr></table></td></tr></table>"
        f'{WRAP}\n<table id="own"></table></div><pre>&lt;table&gt;</pre>'
    )
    got = scroll_tables(html)
    assert got == (
        f"<p>x</p>{WRAP}<table class='kv'><tr><td>{WRAP}<table><tr><td>in</td></tr></table></div>"
        f'</td></tr></table></div>{WRAP}\n<table id="own"></table></div><pre>&lt;table&gt;</pre>'
    )
    assert scroll_tables(got) == got  # a page already wrapped is left as it is


def test_ids_in_a_cell_show_a_count_and_a_few_with_the_rest_folded() -> None:
    assert ids([]) == "none" and ids(["a", "b<"]) == "a, b&lt;"
    many = [f"q{i}" for i in range(53)]
    cell = str(ids(many))
    assert cell.startswith("53: q0, q1, q2 …<details><summary>all 53</summary>")
    assert cell.endswith(", ".join(many) + "</details>")


def test_a_section_without_data_is_one_line() -> None:
    env = jinja2.Environment(loader=jinja2.PackageLoader("lmaudit.reporting", "templates"), autoescape=True)
    tpl = env.from_string(
        '{% from "sections.html.j2" import section %}'
        '{% call section("s", "Title", empty) %}<table><tr><td>1</td></tr></table>{% endcall %}'
    )
    empty = tpl.render(empty="No pair has a valid verdict.").strip()
    assert empty == '<h2 id="s">Title</h2>\n<p class="empty">No pair has a valid verdict.</p>'
    assert "<table>" in tpl.render(empty=None) and "empty" not in tpl.render(empty=None)


def _fastchat_import(make_cfg, folder: Path, name: str) -> Path:
    """A one-line FastChat pair file under ``folder``, imported as a judge run."""
    line = {
        "question_id": 1,
        "model_1": "alpha",
        "model_2": "beta",
        "g1_winner": "model_1",
        "g2_winner": "model_2",
        "judge": ["gpt-4", "pair-v2"],
        "turn": 1,
    }
    folder.mkdir(parents=True)
    path = folder / "gpt-4_pair.jsonl"
    path.write_text(json.dumps(line) + "\n")
    run(make_cfg("study=judge", f"study.import_path={path}", "mlflow.enabled=false", name=name))
    return folder.parent / name / "report.html"


def test_every_table_of_a_report_scrolls_inside_the_page(make_cfg, tmp_path) -> None:
    html = _fastchat_import(make_cfg, tmp_path / "in", "r").read_text()
    tables = re.findall(r"<table\b", html)
    assert len(tables) > 5 and len(re.findall(rf"{WRAP}\s*<table\b", html)) == len(tables)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_a_table_wider_than_the_page_scrolls_inside_it_at_1280_px(make_cfg, tmp_path) -> None:
    """The provenance table holds the import file's path: 240 characters with no break, wider
    than the page. The page itself does not scroll sideways (nothing is cut off); the table's
    wrapper does."""
    report = _fastchat_import(make_cfg, tmp_path / ("d" * 240), "wide")
    probe = report.with_name("probe.html")
    script = (
        "<script>addEventListener('load', () => { const e = document.documentElement;"
        " const w = [...document.querySelectorAll('div.scroll')].some(d => d.scrollWidth > d.clientWidth);"
        " document.body.dataset.probe = `${e.scrollWidth} ${e.clientWidth} ${w}`; });</script>"
    )
    probe.write_text(report.read_text().replace("</body>", script + "</body>"))
    flags = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"]
    dom = subprocess.run(
        [*flags, "--dump-dom", probe.resolve().as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    (probe_text,) = re.findall(r'data-probe="([^"]*)"', dom)
    page_width, view_width, a_wrapper_scrolls = probe_text.split()
    assert int(page_width) <= int(view_width)  # the page does not scroll sideways
    assert a_wrapper_scrolls == "true"  # the wide table scrolls inside its wrapper
