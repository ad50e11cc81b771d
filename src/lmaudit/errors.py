"""Every exception class of lmaudit, in one module that imports nothing of lmaudit (a module's
private control-flow exceptions, never seen outside it, stay in that module).

Two families reach the person running lmaudit as one line (``run.py``, ``lmaudit`` commands):

* :class:`InputError` (exit 2): bad input, named by file, line or item, and field, raised
  before any model call;
* :class:`BackendError` (exit 1): a model could not answer.

The others are raised and caught inside lmaudit, or say why a run stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

# --- bad input ------------------------------------------------------------------------------


class InputError(ValueError):
    """Bad user input; the message names the file, line/item and field."""


class ConfigRangeError(InputError):
    """A config field lies outside its declared range."""


class UndeclaredKeyError(InputError):
    """A config holds a key its schema does not declare (added with ``+key=...``)."""


class PreregError(InputError):
    """A registration is missing, edited, or does not match the plan being run."""


class RunDirLocked(InputError):
    """Another lmaudit process holds the run directory."""


class PromptTooLong(InputError):
    """A prompt and the tokens it asks for do not fit in the model's context."""


class ItemBankError(InputError):
    """An item bank that cannot be used; ``problems`` holds one line per problem found."""

    def __init__(self, path: str | Path, problems: Sequence[str]) -> None:
        self.path = str(path)
        self.problems = tuple(problems)
        n = len(self.problems)
        head = f"invalid item bank {self.path} ({n} problem{'' if n == 1 else 's'}):"
        super().__init__("\n".join([head, *(f"  {p}" for p in self.problems)]))


class ItemSelectionError(InputError):
    """The configured item selection does not fit the bank (unknown, repeated or excluded ids)."""


class StrictJsonError(ValueError):
    """JSON that is refused: nested too deeply, a string holding a lone UTF-16 surrogate, or
    (strict decoding) a key given twice in one object or a number that is not finite (``NaN``,
    ``Infinity``, or one too large for a float). ``where`` is the JSON path of the object or
    field (``results[1].confidence``; ``""`` for the top level or a position in the text)."""

    def __init__(self, message: str, where: str):
        super().__init__(message)
        self.where = where


# --- a model that cannot answer ---------------------------------------------------------------


class BackendError(RuntimeError):
    """A backend could not answer (bad config, unreachable server, exhausted retries)."""


class ServerUnreachable(BackendError):
    """No connection could be made to the server: retrying, or asking other endpoints, is futile."""


class GateG1Error(BackendError):
    """A canonical label is not a single token in the rendered context."""


class QQUnavailable(BackendError):
    """The backend cannot decide gate G1, so qq cannot run on it."""


# --- raised and caught inside lmaudit ---------------------------------------------------------


class InvalidEntry(ValueError):
    """A cache entry that cannot be served; the message says why."""


class CacheBusy(RuntimeError):
    """A process holds claims on the cache folder: it is being filled."""


class ProtocolError(ValueError):
    """The plan cannot be built from this combination of items, framing and mapping."""


class NotCombinable(Exception):
    """Raised by :meth:`Study.combine_sweep`: the jobs cannot be analysed as one design (the
    message says why)."""


# --- a run stopped ----------------------------------------------------------------------------


class Terminated(BaseException):
    """SIGTERM, raised where the run is (so its MLflow run is marked KILLED and its lock freed)."""
