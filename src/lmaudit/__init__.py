"""lmaudit: pre-registered, audit-logged behavioural measurements of language models."""

import os as _os

__version__ = "0.1.0"

# MKL's strict conditional numerical reproducibility: torch's CPU matrix products then give the
# same bits whatever the number of threads, so a measurement does not depend on how many cores
# (or Lightning ranks, each with its share of the cores) computed it. "AUTO" keeps the fastest
# code path for the processor (no measurable cost here). MKL reads the setting at its first
# computation, so it holds when lmaudit is imported before any torch work; a value the user set
# is kept. The audit record shows it (the hf backend's describe()).
_os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
