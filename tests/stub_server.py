"""Overrides that point the openai backend at the ``openai_stub`` fixture (tests/conftest.py)."""

from __future__ import annotations

STUB_TEMPLATE = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>"


def stub_model_args(url: str) -> list[str]:
    """Overrides that point the openai backend at :func:`openai_stub`."""
    return [
        "model=openai",
        f"model.base_url={url}",
        "model.model=toy",
        f"model.chat_template='{STUB_TEMPLATE}'",
        "model.tokenizer=auto",  # the stub has a tokenize endpoint; a hosted API has none
    ]
