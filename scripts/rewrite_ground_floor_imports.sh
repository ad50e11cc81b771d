#!/usr/bin/env bash
# Re-point every import of the names issue 43's "clean ground floor" moved at their new
# modules (for branches merged after the move that add import sites); idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
move() { python scripts/move_names.py "$@"; }
move lmaudit.provenance.digest canonical_json sha256_text --from lmaudit.backends.base
move lmaudit.errors InputError ConfigRangeError UndeclaredKeyError PreregError RunDirLocked \
    PromptTooLong ItemBankError ItemSelectionError StrictJsonError BackendError ServerUnreachable \
    GateG1Error QQUnavailable InvalidEntry CacheBusy ProtocolError NotCombinable Terminated \
  --from lmaudit.provenance.io lmaudit.config.checks lmaudit.provenance.predictions \
    lmaudit.pipeline.rundir lmaudit.backends.context lmaudit.studies.qq.items \
    lmaudit.studies.qq.selection lmaudit.provenance.jsoncheck lmaudit.backends.base \
    lmaudit.backends.openai.client lmaudit.studies.qq.measure lmaudit.provenance.cache \
    lmaudit.provenance.compact lmaudit.studies.qq.protocol lmaudit.studies.base lmaudit.interrupts
move lmaudit.interop.records Draw Found LogSequence LogSource interop_missing --from lmaudit.interop.detect
move lmaudit.tracking.paired_studies compare_runs --from lmaudit.tracking.paired
move lmaudit.config.store register_configs --from lmaudit.config.schema
move lmaudit.config.studies study_groups --from lmaudit.config.overrides
ruff check --fix src tests benchmarks run.py
ruff format src tests benchmarks run.py
