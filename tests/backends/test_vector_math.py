"""MKL's vector math is first called on one thread before any model forward (``vector_math.py``).

The race it prevents (a process's first parallel ``cos`` returning other values for one
thread's share) shows in about 1 process in 200 beside a busy process and is measured by
``benchmarks/vml_first_call.py``, not here: a test cannot make it happen on demand. These tests
check what can be checked every time: that :func:`settle` runs before a model's first forward,
once per process, a forked child included, and that it changes no result.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_hf import write_model, write_tokenizer

REPO = Path(__file__).resolve().parents[2]
ENV = {
    "PYTHONPATH": str(REPO / "src"),
    "PATH": "/usr/bin:/bin",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def _run(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("g3-vml")
    tok = write_tokenizer(path)
    write_model(path, "gemma3", len(tok), sliding_window=8)
    return path


def test_every_cos_and_sin_of_a_forward_comes_after_settle(tiny: Path) -> None:
    code = (
        "import torch\n"
        "from lmaudit.backends import vector_math\n"
        "from lmaudit.backends.hf.backend import HFBackend\n"
        "from lmaudit.backends.base import LabelRequest\n"
        "seen = []\n"
        "for name in ('cos', 'sin'):\n"
        "    def wrap(f):\n"
        "        def call(self, *a, **k):\n"
        "            seen.append(vector_math.is_settled())\n"
        "            return f(self, *a, **k)\n"
        "        return call\n"
        "    setattr(torch.Tensor, name, wrap(getattr(torch.Tensor, name)))\n"
        f"b = HFBackend({str(tiny)!r}, progress=False)\n"
        "msgs = ({'role': 'user', 'content': 'is it true that A'},)\n"
        "print(vector_math.is_settled())\n"
        "b.label_logprobs([LabelRequest(msgs, ('A', 'B'))])\n"
        "print(len(seen), all(seen))\n"
    )
    before, calls, settled = _run(code)
    assert before == "False"  # building the backend does not load the model
    assert int(calls) >= 2 and settled == "True"


def test_settle_is_once_per_process_and_again_in_a_forked_child() -> None:
    code = (
        "import os\n"
        "from lmaudit.backends import vector_math\n"
        "print(vector_math.is_settled())\n"
        "vector_math.settle()\n"
        "print(vector_math.is_settled())\n"
        "r, w = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    a = vector_math.is_settled()\n"
        "    vector_math.settle()\n"
        "    os.write(w, f'{a} {vector_math.is_settled()}'.encode())\n"
        "    os._exit(0)\n"
        "os.close(w)\n"
        "print(os.read(r, 100).decode())\n"
        "os.waitpid(pid, 0)\n"
    )
    assert _run(code) == ["False", "True", "False", "True"]


def test_settle_changes_no_value() -> None:
    """A rotary table and every settled function on a larger tensor, in a process that settled
    and in one that did not, to the last bit. Both on one thread (so the one that did not settle
    cannot meet the race, and both split the tensors alike: ATen's own vectorised functions
    compute the ends of each thread's share apart)."""
    code = (
        "import sys, torch, hashlib\n"
        "from lmaudit.backends import vector_math\n"
        "torch.set_num_threads(1)\n"
        "if sys.argv[1] == 'settle':\n"
        "    vector_math.settle()\n"
        "inv = 1.0 / (1e6 ** (torch.arange(0, 256, 2).float() / 256))\n"
        "emb = torch.arange(433).float()[:, None] * inv[None, :]\n"
        "x = torch.linspace(0.01, 0.99, 50_000)\n"
        "h = hashlib.sha256()\n"
        "for t in (emb.cos(), emb.sin(), *(getattr(torch, n)(x) for n in vector_math._FUNCTIONS)):\n"
        "    h.update(t.numpy().tobytes())\n"
        "print(h.hexdigest())\n"
    )
    settled = subprocess.run([sys.executable, "-c", code, "settle"], env=ENV, capture_output=True, text=True)
    plain = subprocess.run([sys.executable, "-c", code, "plain"], env=ENV, capture_output=True, text=True)
    assert settled.returncode == 0 and plain.returncode == 0, settled.stderr + plain.stderr
    assert settled.stdout.strip() == plain.stdout.strip()
