"""``dvc plots show`` draws its page with no network: the repository's DVC config names a page
template (plot_template/offline.html) with vega, vega-lite and vega-embed inlined, so the page
asks no CDN; the page DVC writes (dvc_plots/) is ignored by git."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
# headless, with every host unresolvable and every connection sent to a closed port: no network
OFFLINE_CHROMIUM = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--proxy-server=127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--virtual-time-budget=15000",
)
PLOTS = ("line", "points")


def sh(*cmd: str, cwd: Path) -> str:
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``dvc plots show`` in a new repository with this repository's plots config and template,
    and two figures of the kinds dvc.yaml uses (linear, scatter)."""
    repo = tmp_path_factory.mktemp("plots") / "repo"
    shutil.copytree(REPO / "plot_template", repo / "plot_template")
    sh("git", "init", "-q", cwd=repo)
    sh("dvc", "init", "-q", cwd=repo)
    template = sh("dvc", "config", "plots.html_template", cwd=REPO).strip()
    assert template, "the repository's .dvc/config names no plots.html_template"
    sh("dvc", "config", "plots.html_template", template, cwd=repo)
    (repo / "d.csv").write_text("x,y\n0,0.1\n1,0.5\n2,0.9\n")
    (repo / "dvc.yaml").write_text(
        "plots:\n"
        "  - line:\n      template: linear\n      x: x\n      y:\n        d.csv: y\n"
        "  - points:\n      template: scatter\n      x: x\n      y:\n        d.csv: y\n"
    )
    sh("dvc", "plots", "show", cwd=repo)
    return repo / "dvc_plots" / "index.html"


def test_the_page_loads_no_script_from_the_network(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]*\ssrc\s*=", html), "a script is loaded from elsewhere"
    assert "cdn.jsdelivr.net" not in html
    # the three libraries are in the page itself, with the figures
    for name in ("vega-5.20.2", "vega-lite-5.2.0", "vega-embed-6.18.2"):
        assert f"<!-- {name} (" in html
    assert html.count("vegaEmbed('#") == len(PLOTS)


def test_the_page_draws_every_figure_in_a_browser_with_no_network(page: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("needs /usr/bin/chromium (scripts/install_chromium.sh)")
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [str(CHROMIUM), *OFFLINE_CHROMIUM, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # vega-embed draws each figure into a canvas inside its div
    assert proc.stdout.count("<canvas") == len(PLOTS), proc.stdout[-2000:]


def test_the_written_page_is_ignored_by_git() -> None:
    proc = subprocess.run(
        ["git", "check-ignore", "-q", "dvc_plots/index.html"], cwd=REPO, capture_output=True, timeout=60
    )
    assert proc.returncode == 0, "dvc_plots/ is not in .gitignore"
