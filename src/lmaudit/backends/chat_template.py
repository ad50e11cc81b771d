"""Chat templates rendered as transformers renders them, without importing transformers.

transformers compiles a model's Jinja chat template in a sandboxed environment with
``trim_blocks`` and ``lstrip_blocks``, loop controls, its own ``tojson`` filter (no HTML
escaping), the globals ``raise_exception`` and ``strftime_now``, and a ``{% generation %}``
block that only marks assistant text (it renders its body). :func:`render_chat_template` does
the same, so a prompt rendered here is the string ``tokenizer.apply_chat_template(...,
tokenize=False)`` returns (checked in the tests).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

Message = dict[str, str]


def _raise_exception(message: str) -> None:
    from jinja2 import TemplateError

    raise TemplateError(message)


def _tojson(
    x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _generation_extension() -> Any:
    from jinja2 import nodes
    from jinja2.ext import Extension

    class Generation(Extension):
        """``{% generation %}...{% endgeneration %}``: renders its body (transformers uses the
        block to find assistant tokens, which lmaudit never asks for)."""

        tags = {"generation"}  # noqa: RUF012 (jinja2 declares it an instance attribute)

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return str(caller())

    return Generation


@functools.lru_cache(maxsize=16)
def compile_template(template: str) -> Any:
    """The compiled template, in transformers' chat-template environment."""
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_generation_extension(), loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template)


def render_chat_template(
    template: str, messages: Sequence[Message], *, add_generation_prompt: bool = True, **variables: Any
) -> str:
    """``messages`` through ``template``; ``variables`` are the template's other names (the
    special tokens, ``tools``, ``documents``, template keyword arguments)."""
    return str(
        compile_template(template).render(
            messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt, **variables
        )
    )
