"""Types (mypy), lint and format (ruff) are part of the suite, so CI runs them with the tests."""

import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [["mypy"], ["ruff", "check", "."], ["ruff", "format", "--check", "."]],
    ids=["mypy", "ruff-check", "ruff-format"],
)
def test_the_code_is_clean(command):
    tool = Path(sys.executable).parent / command[0]
    result = subprocess.run([str(tool), *command[1:]], cwd=CHECKOUT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
