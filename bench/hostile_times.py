"""How long each hostile bundle of ``tests/hostile_bundles.py`` takes to grade beside an honest one, against the
honest bundle graded alone.

    .venv/bin/python bench/hostile_times.py [ATTACK ...]

Grades the honest bundle alone (``gpulab grade``'s code, three gradings: their median), then each attack's bundle in a real
``gpulab grade-batch --jobs 2`` beside it; prints each one's ``outcome.json`` total seconds, the honest neighbour's,
and the attack's time over the honest bundle's alone. The test (``tests/test_hostile_time.py``) holds the verdicts;
these figures are the issue's goal (at most 4x), which no test asserts: a loaded machine moves them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hostile_bundles import ATTACKS, HONEST, beside_honest, bundles  # the test's bundles, not a copy of them

from pytest_gpulab.cohort.regrade import grade_bundle


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("attacks", nargs="*", metavar="ATTACK", help=f"of {', '.join(ATTACKS)} (default: all)")
    attacks = parser.parse_args(argv).attacks or list(ATTACKS)
    if unknown := set(attacks) - set(ATTACKS):
        parser.error(f"no attack {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        made = bundles(base)
        each = [grade_bundle(made[HONEST], base / f"alone-{index}").seconds["total"] for index in range(3)]
        alone = statistics.median(each)
        print(f"honest alone: {alone:.1f} s (median of {', '.join(f'{seconds:.1f}' for seconds in each)})", flush=True)
        for attack in attacks:
            graded = beside_honest(base, made, attack, f"batch-{attack}")
            took, honest = (graded[who]["outcome"]["seconds"]["total"] for who in (attack, HONEST))
            neighbour, hostile = graded[HONEST]["outcome"], graded[attack]["outcome"]
            print(f"{attack}: {took:.1f} s ({took / alone:.1f}x the honest bundle alone, {hostile['status']}, "
                  f"{len(hostile['warnings'])} warnings); the honest neighbour {honest:.1f} s, {neighbour['status']} "
                  f"{neighbour['earned']}/{neighbour['possible']}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
