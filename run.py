"""lmaudit entry point: ``python run.py [group=option ...] [stage=...]`` (``-m`` for sweeps)."""

from __future__ import annotations

import errno
import sys
import traceback
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from lmaudit.config.keys import check_overrides
from lmaudit.config.overrides import canonical
from lmaudit.config.store import register_configs
from lmaudit.errors import BackendError, InputError, Terminated
from lmaudit.pipeline.sweep import JobFailed
from lmaudit.prereg import check_registrations
from lmaudit.provenance.redact import redact_text
from lmaudit.terminal import printable

register_configs()


#: what the machine refuses, reported in one line: a full disk or quota, a file-size limit,
#: a permission, a read-only file system, a path component that is a file
_MACHINE_REFUSALS = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EFBIG,
    errno.EACCES,
    errno.EPERM,
    errno.EROFS,
    errno.ENOTDIR,
    errno.EISDIR,
}


def _one_line(e: BaseException) -> str:
    """The error in one line, credentials masked and control characters escaped (a message
    may quote a name from imported data)."""
    if isinstance(e, OSError) and e.strerror:  # "<path>: No space left on device"
        line = f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    else:  # one line, even when the message quotes a library's multi-line one
        line = " ".join(part.strip() for part in str(e).splitlines() if part.strip())
    return printable(redact_text(line))


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | JobFailed | None:
    from lmaudit.pipeline import run

    sweeping = HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        return run(cfg)
    except Terminated as e:  # SIGTERM: the run's MLflow record says KILLED, its lock is released
        print(f"error: stopped by {_one_line(e)}", file=sys.stderr)
        sys.exit(143)
    except (InputError, BackendError, OSError) as e:
        # errors for people, without a traceback: bad input (the message names file, item and
        # field), a backend that cannot answer, and what the machine refuses (a full disk, a
        # file-size limit, a permission); any other OSError is a fault of lmaudit's, below
        if isinstance(e, OSError) and e.errno not in _MACHINE_REFUSALS:
            if not sweeping:
                raise
            traceback.print_exc()
            return JobFailed(f"{type(e).__name__}: {e}")
        message = _one_line(e)
        print(f"error: {message}", file=sys.stderr)
        if sweeping:  # the sweep goes on; its end reports the failure and exits non-zero
            return JobFailed(message)
        sys.exit(2 if isinstance(e, InputError) else 1)
    except Exception as e:
        if not sweeping:
            raise
        traceback.print_exc()
        return JobFailed(f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    conf = Path(__file__).resolve().parent / "conf"
    try:  # a study's groups by their short names (framing=track_p, judge/condition=P0, ...)
        args, study = canonical(sys.argv[1:])
        # options and keys that do not exist, '+key' included, refused in one line
        check_overrides(args, conf, study, given=sys.argv[1:])
        sys.argv = [sys.argv[0], *args]
        # registrations set design and predictions only, checked before Hydra reads them
        check_registrations(conf / "prereg")
    except InputError as e:
        print(f"error: {_one_line(e)}", file=sys.stderr)
        sys.exit(2)
    main()
