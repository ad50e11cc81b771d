"""scripts/move_names.py, the rewrite that points every use of a moved name at its new module."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "move_names.py"


@pytest.fixture
def move_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("move_names", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "SRC", tmp_path / "src")
    return module


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


def test_imports_attributes_bare_uses_and_all_are_rewritten_once(
    move_names: ModuleType, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    _write(
        src,
        {
            "lmaudit/__init__.py": "",
            "lmaudit/errors.py": "class E(ValueError): ...\n",
            # the old home: its class moved away, its function still raises it
            "lmaudit/old.py": """
                __all__ = ["E", "f"]


                def f():
                    raise E("x")
            """,
            "lmaudit/reexport.py": "from lmaudit.old import E\n",
            "lmaudit/other.py": "class E(Exception): ...\n",
            "lmaudit/user.py": """
                import sys
                from lmaudit.old import E, f  # noqa: E402
                from lmaudit import old
                from lmaudit.other import E as OtherE


                def g():
                    from .reexport import E as Moved

                    return old.E, Moved, OtherE, f
            """,
        },
    )
    names, homes = {"E"}, {"lmaudit.old"}
    new = {
        p: move_names.rewrite(src / p, "lmaudit.errors", names, homes)
        for p in ("lmaudit/old.py", "lmaudit/user.py", "lmaudit/reexport.py", "lmaudit/other.py")
    }
    assert new["lmaudit/other.py"] is None  # another module's own E is left alone
    assert (
        new["lmaudit/old.py"]
        == 'from lmaudit.errors import E\n__all__ = ["f"]\n\n\ndef f():\n    raise E("x")\n'
    )
    assert new["lmaudit/reexport.py"] == "from lmaudit.errors import E\n"
    assert new["lmaudit/user.py"] == textwrap.dedent(
        """
        import sys
        from lmaudit.old import f  # noqa: E402
        from lmaudit.errors import E  # noqa: E402
        from lmaudit import old
        from lmaudit.other import E as OtherE


        def g():
            from lmaudit.errors import E as Moved

            return E, Moved, OtherE, f
        """
    ).lstrip("\n")
    for p, text in new.items():
        if text is not None:
            (src / p).write_text(text)
    assert all(move_names.rewrite(src / p, "lmaudit.errors", names, homes) is None for p in new)
