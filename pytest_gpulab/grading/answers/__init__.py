"""The answers kit: judging what a learner wrote in a result file, lenient on form and strict on meaning.

Example::

    from pytest_gpulab.grading import answers

    answers.expect_answers(learner.file("out/free.txt"), {"FREE_GPUS": answers.number(2)})

Answers of one kind: :func:`number`, :func:`yes_no`, :func:`word`, :func:`phrase`, :func:`exactly`,
:func:`containing`, :func:`items`, :func:`count_of`, :class:`Answer`.
Judging a file of them: :func:`expect_answers`, :func:`expect_all`.
Values as Kubernetes and people write them: :func:`quantity_bytes`, :func:`parse_quantity_number`,
:func:`parse_yes_no`, :func:`split_list`;
a table's ``<none>`` where a path found nothing: :func:`unresolved_path_hint`; ``128M`` for ``128Mi``:
:func:`decimal_suffix_hint`.
"""

from __future__ import annotations

from ..values import (
    decimal_suffix_hint,
    parse_quantity_number,
    parse_yes_no,
    quantity_bytes,
    split_list,
    unresolved_path_hint,
)
from .answering import (
    Answer,
    containing,
    count_of,
    exactly,
    expect_all,
    expect_answers,
    items,
    number,
    phrase,
    word,
    yes_no,
)

__all__ = [
    "Answer",
    "containing",
    "count_of",
    "decimal_suffix_hint",
    "exactly",
    "expect_all",
    "expect_answers",
    "items",
    "number",
    "parse_quantity_number",
    "parse_yes_no",
    "phrase",
    "quantity_bytes",
    "split_list",
    "unresolved_path_hint",
    "word",
    "yes_no",
]
