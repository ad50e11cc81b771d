"""lmaudit: pre-registered, audit-logged behavioural measurements of language models."""

__version__ = "0.1.0"
