"""Readers of the logs other evaluation tools write (docs/interop.md).

One module per tool. Each reads with the tool's own reader where the tool ships one, maps the
log onto a study's import rows, and audits what the log gets wrong for that study (copies
served from a cache, repeated seeds, a temperature of 0, an unknown model) so it is reported,
never silently accepted. The tools themselves are optional dependencies (the ``interop`` extra).
"""
