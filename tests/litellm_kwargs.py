"""Every keyword argument litellm reads, derived from the installed litellm itself, so a test
that tries them all stays complete when litellm grows new ones.

The sources, all in the venv's litellm:
- `litellm.types.utils.all_litellm_params`: the names litellm declares as its own;
- the signatures of `completion`, `text_completion`, `embedding` and `get_litellm_params`;
- every `kwargs.get("…")`, `kwargs.pop("…")` and `kwargs["…"]` in `litellm/main.py`,
  `litellm/utils.py` (its call wrapper: callbacks, fallbacks, retries) and
  `litellm/litellm_core_utils/litellm_logging.py`.
"""

from __future__ import annotations

import inspect
import os
import re
from functools import cache
from pathlib import Path

LISTENER = "{listener}"  # replaced by the listener's URL
KWARG_READ = re.compile(
    r"""kwargs(?:\.get|\.pop)\(\s*["']([A-Za-z_][A-Za-z0-9_-]*)["']|kwargs\[\s*["']([A-Za-z_][A-Za-z0-9_-]*)["']\s*\]"""
)
SCANNED = ("main.py", "utils.py", "litellm_core_utils/litellm_logging.py")

# Values that would steer litellm to the listener had the name reached it, for the names whose
# value is not simply a URL: fallbacks and model lists (with the key nulled, so litellm reaches
# for the environment's), headers, callbacks (integrations whose hosts are named too).
STEERING: dict[str, object] = {
    "fallbacks": [{"model": "openai/gpt-4o-mini", "api_base": LISTENER, "api_key": None}],
    "model_list": [
        {"model_name": "openai/fail-500", "litellm_params": {"model": "openai/gpt-4o-mini", "api_base": LISTENER}}
    ],
    "context_window_fallback_dict": {"openai/fail-500": "openai/gpt-4o-mini"},
    "api_key": None,
    "metadata": {"langfuse_host": LISTENER, "api_base": LISTENER},
    "headers": {"x-evil": "1"},
    "extra_headers": {"x-evil": "1"},
    "callbacks": ["langfuse", "langsmith", "posthog", "datadog", "generic_api"],
    "success_callback": ["langfuse", "langsmith", "posthog", "datadog", "generic_api"],
    "failure_callback": ["langfuse", "langsmith", "posthog", "datadog", "generic_api"],
    "litellm_disabled_callbacks": [],
    "max_fallbacks": 5,
    "num_retries": 3,
    "max_retries": 3,
    "mock_response": "pwned",
}


@cache
def litellm_kwargs() -> frozenset[str]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm
    from litellm.litellm_core_utils.get_litellm_params import get_litellm_params
    from litellm.types.utils import all_litellm_params

    names = set(all_litellm_params)
    for fn in (litellm.completion, litellm.text_completion, litellm.embedding, get_litellm_params):
        names |= {
            p.name for p in inspect.signature(fn).parameters.values() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        }
    root = Path(litellm.__file__).parent
    for relative in SCANNED:
        for match in KWARG_READ.finditer((root / relative).read_text()):
            names.add(match.group(1) or match.group(2))
    return frozenset(names - {"self"})


def hostile_value(name: str, listener: str) -> object:
    """What an attacker would put in `name`: a steering value, else the listener's URL."""
    value = STEERING.get(name, LISTENER)
    return _fill(value, listener)


def _fill(value: object, listener: str) -> object:
    if value == LISTENER:
        return listener
    if isinstance(value, list):
        return [_fill(v, listener) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, listener) for k, v in value.items()}
    return value
