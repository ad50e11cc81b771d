"""The logged runs open in the real MLflow UI.

Two sim studies are logged into a SQLite store, a real ``mlflow server`` is started on it, and
headless Chromium renders the experiment's runs page (``/#/experiments/<id>/runs``), the
experiment's page in the model-training view (``?workflowType=machine_learning``; without it
MLflow 3.17's UI opens a GenAI traces overview that lists no runs) and one run's page. The REST API must list both runs with their gate tags.

Needs /usr/bin/chromium (``scripts/install_chromium.sh``; CI installs it).
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from lmaudit.pipeline import run, run_name

CHROMIUM = Path("/usr/bin/chromium")
MODELS = ("sim_projective", "sim_mixture")
EXPERIMENT = "lmaudit-qq"
SERVER_START_TIMEOUT = 120.0  # seconds; ~25 s on a loaded 2-core machine
CHROMIUM_TIMEOUT = 90.0
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--window-size=1400,900",
    "--virtual-time-budget=15000",
)

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "<no log>"


def _get(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return bytes(r.read())


def _api(base: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return dict(json.loads(r.read()))


def _start_server(request: pytest.FixtureRequest, mlruns: Path, log: Path) -> str:
    port = _free_port()
    cmd = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", f"sqlite:///{(mlruns / 'mlflow.db').resolve()}",
        "--default-artifact-root", (mlruns / "artifacts").resolve().as_uri(),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--workers", "1",
    ]  # fmt: skip
    env = dict(os.environ)
    # no background job runner (a second Python process) on a small machine
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    env.pop("MLFLOW_TRACKING_URI", None)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=log.parent, start_new_session=True
        )

    def stop() -> None:
        # the CLI runs uvicorn as a child: end the process group this test started, by its id
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=20)
        with contextlib.suppress(ProcessLookupError):  # whatever of the group outlived SIGTERM
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    request.addfinalizer(stop)

    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while True:
        if proc.poll() is not None:
            pytest.fail(f"mlflow server exited with {proc.returncode}:\n{' '.join(cmd)}\n{_tail(log)}")
        try:
            if _get(base + "/health", timeout=2).strip() == b"OK":
                return base
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"mlflow server not answering after {SERVER_START_TIMEOUT:.0f} s:\n{_tail(log)}")
        time.sleep(0.5)


def _page_text(dom: str) -> str:
    dom = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S | re.I)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", dom)))


def _render(url: str, tmp: Path, must_show: list[str], screenshot: Path | None = None) -> str:
    """Render ``url`` in headless Chromium and return the page text; two tries, as a cold
    server may be slow to answer the app's first API calls."""
    text, err = "", ""
    for _ in range(2):
        profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp)
        cmd = [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
        if screenshot is not None:
            cmd.append(f"--screenshot={screenshot}")
        cmd += ["--dump-dom", url]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT)
        shutil.rmtree(profile, ignore_errors=True)
        text, err = _page_text(p.stdout), p.stderr
        if p.returncode == 0 and all(s in text for s in must_show):
            return text
    missing = [s for s in must_show if s not in text]
    pytest.fail(f"{url} rendered without {missing}\npage text: {text[:3000]}\nchromium stderr: {err[-2000:]}")


def test_logged_runs_open_in_mlflow_ui(make_cfg, tmp_path, request):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install_chromium.sh (CI installs it)")
    t0 = time.monotonic()

    # two real QQ studies on simulated models, logged to tmp_path/mlruns/mlflow.db
    runs: dict[str, str] = {}  # run name -> MLflow run id
    for model in MODELS:
        cfg = make_cfg(f"model={model}", "items=sim_demo", name=model)
        run(cfg)
        audit = json.loads((tmp_path / model / "audit_record.json").read_text())
        runs[run_name(cfg)] = audit["mlflow"]["run_id"]
    assert len(runs) == 2, runs

    base = _start_server(request, tmp_path / "mlruns", tmp_path / "mlflow_server.log")
    t_server = time.monotonic()

    # REST API: both runs, finished, with their gate tags
    q = urllib.parse.urlencode({"experiment_name": EXPERIMENT})
    exp_id = _api(base, f"/api/2.0/mlflow/experiments/get-by-name?{q}")["experiment"]["experiment_id"]
    found = _api(base, "/api/2.0/mlflow/runs/search", {"experiment_ids": [exp_id], "max_results": 100})
    by_name = {r["info"]["run_name"]: r for r in found.get("runs", [])}
    assert set(by_name) == set(runs), (sorted(by_name), sorted(runs))
    for name, r in by_name.items():
        assert r["info"]["run_id"] == runs[name]
        assert r["info"]["status"] == "FINISHED", name
        tags = {t["key"]: t["value"] for t in r["data"].get("tags", [])}
        assert tags.get("gate.G1") == "PASS", (name, tags)
        assert {"gate.G2", "gate.G3"} <= set(tags), (name, tags)

    # UI: the experiment's runs table lists both runs (+ a screenshot of it)
    shot = tmp_path / "mlflow_runs.png"
    text = _render(f"{base}/#/experiments/{exp_id}/runs", tmp_path, [*runs, "2 matching runs"], shot)
    assert EXPERIMENT in text
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, len(png)
    assert struct.unpack(">II", png[16:24]) == (1400, 900)  # IHDR: the --window-size

    # UI: the experiment's page in the model-training view (MLflow 3.17's UI takes the view from
    # ?workflowType=, else the browser's last choice, GenAI at first) lists the runs
    _render(f"{base}/#/experiments/{exp_id}?workflowType=machine_learning", tmp_path, [*runs, EXPERIMENT])

    # UI: a run's page shows its name and gate tags
    name, run_id = next(iter(runs.items()))
    text = _render(f"{base}/#/experiments/{exp_id}/runs/{run_id}", tmp_path, [name, run_id, "gate.G1"])
    assert re.search(r"gate\.G1\W*PASS", text), text[:3000]
    print(f"server up after {t_server - t0:.0f} s, test {time.monotonic() - t0:.0f} s")
