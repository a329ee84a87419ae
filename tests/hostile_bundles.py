"""Five bundles that attack a grading's time, each gpurt's reference with its crosscheck (``bin/rc-crosscheck.sh``,
which step 6 runs some twenty times, and its contract checks) replaced; and the honest bundle they are graded beside.
Shared by ``tests/test_hostile_time.py`` (the verdicts) and ``bench/hostile_times.py`` (the times).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from grading import solve

from pytest_gpulab.cluster.kwok import KwokCluster
from pytest_gpulab.cohort.bundle import write_bundle
from pytest_gpulab.labs import discover
from pytest_gpulab.selftest.variants import copy_root

LAB = "gpurt"
CROSSCHECK = "bin/rc-crosscheck.sh"
HOLD = "import time; held = b'x' * (2500 << 20); time.sleep(1000)"  # 2.5 GB written, so resident
ATTACKS = {
    "memory-hog": f'#!/bin/bash\nfor i in 1 2 3 4 5 6 7 8; do python3 -c "{HOLD}" & done\nwait\n',
    "output-flood": "#!/bin/bash\nyes flood\n",
    "fork-bomb": "#!/bin/bash\nf() { f | f & }; f\nsleep 1000\n",
    "disk-fill": (
        '#!/bin/bash\nfor d in . /tmp /var/tmp /dev/shm "$HOME"; do\n'
        '  (while :; do cat /dev/zero >> "$d/fill-$RANDOM" 2>/dev/null; done) &\ndone\nwait\n'
    ),
    "signal-ignoring-sleeper": "#!/bin/bash\ntrap '' TERM INT HUP QUIT USR1 USR2\nsleep 1000\n",
}
HONEST = "b-honest"


def bundles(base: Path) -> dict[str, Path]:
    """The honest bundle and each attack's, by learner name, each in a folder of its own below ``base``."""
    honest = base / "honest"
    honest.mkdir()
    made = {}
    with KwokCluster.for_lab(LAB, name="tests-hostile-time") as cluster:
        solve(LAB, cluster, honest)
        roots = {HONEST: honest}
        for attack, text in ATTACKS.items():
            roots[attack] = copy_root(honest, base / attack)
            (roots[attack] / CROSSCHECK).write_text(text)
        for learner, root in roots.items():
            bundle = base / "bundles" / learner / f"{learner}.gpulab.tar.gz"
            bundle.parent.mkdir(parents=True)
            write_bundle(discover().get(LAB), root, cluster, bundle, learner=learner)
            made[learner] = bundle
    return made


def beside_honest(base: Path, made: dict[str, Path], attack: str, name: str) -> dict[str, dict]:
    """A real ``gpulab grade-batch --jobs 2`` of the attack's bundle and the honest one: each learner's report (empty
    when none was written: a grading that could not run) and outcome."""
    folder, out = base / name, base / f"{name}.out"
    folder.mkdir()
    for learner in (attack, HONEST):
        (folder / made[learner].name).write_bytes(made[learner].read_bytes())
    done = subprocess.run(
        [str(Path(sys.executable).with_name("gpulab")), "grade-batch", str(folder), "--jobs", "2", "--out", str(out)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    return {
        learner.name: {
            "report": json.loads((learner / "report.json").read_text()) if (learner / "report.json").exists() else {},
            "outcome": json.loads((learner / "outcome.json").read_text()),
        }
        for learner in out.iterdir()
        if (learner / "outcome.json").exists()
    }
