"""The containerd kit: reading a learner's containerd TOML as containerd does, and making dumps to test with.

Example::

    from pytest_gpulab.grading import containerd

    containerd.loaded_handlers(dump)        # the runtime names a config dump loads
    containerd.runtime_table(config, "nvidia")

Tables and keys: :func:`top_level`, :func:`find_key`, :func:`parse_key_path`, :func:`table_name`,
:func:`stranded_table`, :data:`CRI_V2`, :data:`CRI_V3_RUNTIME`, :data:`RUNTIMES_TABLE_V2`.
The CRI plugin's runtimes: :func:`cri_containerd`, :func:`defined_runtimes`, :func:`runtime_table`,
:func:`runtime_option`, :func:`runtime_key`, :func:`misplaced_table`, :func:`loaded_handlers`, :func:`expect_plugins_match_version`.
Drop-ins: :func:`imports_of`. Dumps for a checker's cases: :func:`generate_dump`.
"""

from __future__ import annotations

from ...sandbox.containerd_dumps import generate_dump
from .containerd_toml import (
    CRI_V2,
    CRI_V3_RUNTIME,
    RUNTIMES_TABLE_V2,
    cri_containerd,
    defined_runtimes,
    expect_plugins_match_version,
    find_key,
    imports_of,
    loaded_handlers,
    misplaced_table,
    parse_key_path,
    runtime_key,
    runtime_option,
    runtime_table,
    stranded_table,
    table_name,
    top_level,
)

__all__ = [
    "CRI_V2",
    "CRI_V3_RUNTIME",
    "RUNTIMES_TABLE_V2",
    "cri_containerd",
    "defined_runtimes",
    "expect_plugins_match_version",
    "find_key",
    "generate_dump",
    "imports_of",
    "loaded_handlers",
    "misplaced_table",
    "parse_key_path",
    "runtime_key",
    "runtime_option",
    "runtime_table",
    "stranded_table",
    "table_name",
    "top_level",
]
