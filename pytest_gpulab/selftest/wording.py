"""The rules every learner-facing sentence keeps, held by ``gpulab selftest`` over each trap's and the untouched
start's failing steps: values as the learner wrote them, never a Python rendering (a tuple, a list or a dict of
quoted strings); and no path of the grader's own (its temporary folders), since a learner's file is named from the
lab root; and a headline of at most 50 words (detail goes in the hint or the check's detail field).
"""

from __future__ import annotations

import re
from typing import Any

from ..grading.feedback import HEADLINE_WORDS as MOST_WORDS

PYTHON_RENDERING = re.compile(r"\(\s*'[^']*'\s*,\s*'|\[\s*'[^']*'\s*,\s*'|\{\s*'[^']*'\s*:")
GRADER_PATH = re.compile(r"/tmp/(?:pytest-of-|gpulab-|tmp)\S*|pytest-of-\w+|/learner-scripts/|/lab-snapshot/")


def long_sentences(number: int, step: dict[str, Any]) -> list[str]:
    """The step's headlines over :data:`MOST_WORDS` words."""
    texts = [(f"step {number}'s sentence", step.get("message") or "")]
    texts += [(f"step {number}'s check {c.get('name')}", c.get("message") or "") for c in step.get("checks") or []
              if c.get("outcome") != "passed"]  # fmt: skip
    return [f"{where} is {len(text.split())} words" for where, text in texts if len(text.split()) > MOST_WORDS]


def sentence_problems(where: str, text: str) -> list[str]:
    """How one headline breaks the held rules (a Python rendering, a grader path), each said with ``where``."""
    problems = []
    for found in (PYTHON_RENDERING.search(text), GRADER_PATH.search(text)):
        if found:
            problems.append(f"{where} shows {found.group(0)!r}, not as the learner wrote it")
    return problems


def step_problems(number: int, step: dict[str, Any]) -> list[str]:
    """The rules the step's sentence and its unsuccessful checks' sentences and hints break."""
    problems = [
        f"{long} ({MOST_WORDS} at most: put detail in the hint or detail)" for long in long_sentences(number, step)
    ]
    problems += sentence_problems(f"step {number}'s sentence", step.get("message") or "")
    for check in step.get("checks") or []:
        if check.get("outcome") == "passed":
            continue
        where = f"step {number}'s check {check.get('name') or check.get('id')}"
        problems += sentence_problems(where, check.get("message") or "")
        problems += sentence_problems(f"{where}'s hint", check.get("hint") or "")
    return problems
