"""Learner scripts as a grader runs them, over :func:`pytest_gpulab.sandbox.runner.run_script`.

Each run gets a fresh scratch directory and a fake ``containerd`` first on
PATH serving the dump the grader chose. The cluster's kubeconfig and the
pinned kubectl are added only for a step whose script reads the cluster
(``cluster=True``); ``containerd=False`` runs the script as on a machine
without containerd. Usable without pytest.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...cluster import toolchain
from ...cluster.environ import environ_now
from ...sandbox.confine import Sandbox
from ...sandbox.containerd import FakeContainerd
from ...sandbox.runner import ScriptResult, run_script
from ...sandbox.script_result import said as said  # its old home, kept for labs that import it from here
from ...sandbox.stage import Stage, StagedRun
from ..feedback import fail
from ..learner import LearnerFile
from . import record
from .cores import SEAT, CorePool, Seat
from .keeps import NOTHING_KEPT, Keeps, unbound
from .layouts import RunLayouts
from .runs import ForcedEnds, ScriptRuns, label_of
from .runs import LearnerRun as LearnerRun  # its first home
from .runs import Run as Run  # its first home, where labs import it from
from .turns import Turns

if TYPE_CHECKING:
    from ...sandbox.clusterview import DoctoredView, Door


HANGS_AFTER = 2.0  # seconds a run has gone, only waiting of late, before later runs of its kind wait for its end


def path_without(command: str, path: str) -> str:
    """``path`` without the directories that hold an executable ``command``."""
    kept = [d for d in path.split(os.pathsep) if d and not os.access(os.path.join(d, command), os.X_OK)]
    return os.pathsep.join(kept)


class ScriptRunner:
    """Runs learner scripts below ``work``, one fresh directory per run; in ``sandbox`` when given, where
    the lab root is a read-only snapshot and the cluster is reached through a read-only view of it."""

    def __init__(
        self,
        work: Path,
        timeout: float,
        kubeconfig: Callable[[], str | None],
        *,
        lab_root: Path | None = None,
        sandbox: Sandbox | None = None,
        cores: int | None = None,
    ) -> None:
        self.work = Path(work)
        self.cores = cores  # how many runs started ahead work at once: the machine's cores by default
        self.timeout = timeout
        self._kubeconfig = kubeconfig
        self._counter = itertools.count(1)
        self.lab_root = lab_root
        self.sandbox = sandbox
        self._views: dict[str | None, DoctoredView] = {}
        self._shared = threading.Lock()  # the view and the lab snapshot are made once, by the first run
        self._pool: CorePool | None = None
        self._stage = Stage(lab_root)
        self._layouts = RunLayouts(sandbox, lab_root, self.work, self._shared)
        self._turns = Turns()  # side by side, or alone to tell a run crowded by its own from one starved
        self._forced = ForcedEnds(timeout + 60)  # a script's first run ended by force, given again at once
        self._state_users: dict[
            Path, int | None
        ] = {}  # where a script run as a uid of its own without a sandbox finds its files
        self.log: list[LearnerRun] = []  # every run made, in the order each ended (a profile reads it)

    @property
    def pool(self) -> CorePool:
        """Where runs started ahead run: one working per core, since each is a few processes' start-up; one that
        only waits gives its core to the next (:mod:`.cores`)."""
        with self._shared:
            if self._pool is None:
                self._pool = CorePool(self.cores)
            return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        while self._views:
            self._views.popitem()[1].__exit__(None, None, None)
        self._stage.close()

    def cluster_view(self, fault: str | None = None) -> DoctoredView:
        """The read-only view of the lab cluster that ``cluster`` scripts read, made by the first one (it
        hides nothing, and refuses every change); with ``fault``, one whose API server fails that way
        ("unavailable": 503 to everything; "unreachable": every connection closed unanswered)."""
        with self._shared:
            if fault not in self._views:
                from ...sandbox.clusterview import DoctoredView  # the kubernetes client is slow to import

                upstream = self._kubeconfig() or os.path.expanduser("~/.kube/config")
                work = self.work / f"cluster-view-{fault or 'read-only'}"
                self._views[fault] = DoctoredView(upstream, (), work, fault=fault).__enter__()
            return self._views[fault]

    def _environment(
        self, fake: FakeContainerd, *, containerd: bool, cluster: bool, door: Door | None
    ) -> tuple[list[Path], dict[str, str]]:
        """PATH's additions and the variables a run gets: KUBECONFIG only when its step reads the cluster,
        naming the read-only view (or, for a runner given no sandbox at all, the cluster's own)."""
        prefix: list[Path] = [fake.bin_dir] if containerd else []
        extra: dict[str, str] = {"KUBECONFIG": ""}
        if not containerd:
            extra["PATH"] = path_without("containerd", os.environ.get("PATH", os.defpath))
        if cluster:
            given = door.kubeconfig if door is not None else None
            extra["KUBECONFIG"] = str(given) if given is not None else self._kubeconfig() or ""
            prefix.append(toolchain.bin_dir())
        return prefix, extra

    def run(
        self,
        script: Path | LearnerFile,
        *args: str,
        dump: str | None = None,
        dump_text: str | None = None,
        cluster: bool = False,
        containerd: bool = True,
        fake: FakeContainerd | None = None,
        scratch: Path | None = None,
        view: DoctoredView | None = None,
        api: str | None = None,
        keeps: Keeps = NOTHING_KEPT,
    ) -> LearnerRun:
        """Run ``script``: ``dump`` names a shipped dump, ``dump_text`` is one the grader generated;
        ``view`` shows a ``cluster`` script another view of the cluster than the lab's own
        (a :class:`pytest_gpulab.sandbox.clusterview.DoctoredView`); ``api="unavailable"`` or
        ``"unreachable"`` gives it an API server that fails so; ``keeps`` (:class:`Keeps`) a state kept
        across runs, or files in its working directory."""
        __tracebackhide__ = True
        path = script.path if isinstance(script, LearnerFile) else Path(script)
        if not path.is_file():
            fail(
                f"{script} is not a regular file."
                if path.exists()
                else f"{script} does not exist; create it as the step asks."
            )
        kind = (Path(os.path.abspath(path)), (api, containerd))  # a hang on a failing API server is not the others'
        seat, ended = SEAT.get(), threading.Event()
        once = functools.partial(
            self._once, Path(os.path.abspath(path)), tuple(map(str, args)), dump, dump_text, cluster, containerd,
            fake, scratch, view, api, keeps, functools.partial(self._idle, kind, ended, seat),
        )  # fmt: skip
        started = time.monotonic()
        if seat is not None:
            seat.hold()  # a task's next run works again
        try:
            run = self._forced.run(kind, self._turns.take, path, once, seat.paused if seat else nullcontext)
        finally:
            ended.set()
        shown = {"dump": dump, "dump_text": dump_text, "cluster": cluster, "no-containerd": not containerd}
        label = label_of(tuple(map(str, args)), {**shown, "view": view, "api": api, "keeps": keeps})
        options = {"dump": dump, "dump_text": dump_text, "cluster": cluster, "containerd": containerd, "api": api}
        places = (self.lab_root, self.work.parent)  # the grading's temporary folder: the runner's and the steps' files
        given = record.given(script, tuple(map(str, args)), {**options, "keeps": keeps}, view, places)
        seen = record.entry(given, run.result, *places)
        run = replace(run, started=started, ended=time.monotonic(), label=label, given=seen, readers=[])
        with self._shared:
            self.log.append(run)
        record.note_run(run)
        return run

    def _once(
        self, path: Path, args: tuple[str, ...], dump: str | None, dump_text: str | None, cluster: bool,
        containerd: bool, fake: FakeContainerd | None, scratch: Path | None, view: DoctoredView | None,
        api: str | None, keeps: Keeps, on_idle: Callable[[float], None],
    ) -> LearnerRun:  # fmt: skip
        """One attempt, in a run directory of its own."""
        run_dir = self.work / f"run-{next(self._counter)}"
        fake = fake or FakeContainerd(run_dir / "fake-containerd")
        if dump is not None:
            fake.serve_dump(dump)
        if dump_text is not None:
            fake.serve_text(dump_text)
        scratch = scratch or run_dir / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        with self._door(cluster, view, api, run_dir) as door:
            return self._run_in(path, args, fake, scratch, door, cluster, containerd, keeps, on_idle)

    def _door(self, cluster: bool, view: DoctoredView | None, api: str | None, run_dir: Path) -> Any:
        """The run's own way to the cluster: a door into its view (the lab's read-only one by default), or
        for ``api="unreachable"`` one that nothing answers; none for a run that does not read the cluster
        (or, without a sandbox and a view, the cluster's own kubeconfig)."""
        if not cluster:
            return nullcontext()
        if api == "unreachable":
            from ...sandbox.clusterview import closed_door

            return closed_door(run_dir / "api")
        if api is not None or self.sandbox is not None:
            view = view or self.cluster_view(api)
        tcp = self.sandbox is None or not self.sandbox.namespaces  # no sandbox: a loopback kubeconfig of its own
        return view.door(tcp=tcp) if view is not None else nullcontext()

    def _run_in(
        self, path: Path, args: tuple[str, ...], fake: FakeContainerd, scratch: Path, door: Door | None,
        cluster: bool, containerd: bool, keeps: Keeps, on_idle: Callable[[float], None],
    ) -> LearnerRun:  # fmt: skip
        """One run through its own door into the view: what it tried to write is its result's ``writes``.
        Run as a uid of its own without a sandbox, it is given reachable copies (:mod:`..sandbox.stage`)."""
        user = self._user(keeps)
        staged = None
        if user is not None and self.sandbox is not None and not self.sandbox.namespaces:
            staged = self._stage.run(path, args, fake, user, door)
            if keeps.state is not None:  # where the run's uid reaches it
                keeps = replace(keeps, state=self._stage.inside() / f"state-{keeps.state.name}")
        try:
            result = self._start(path, args, fake, scratch, door, (cluster, containerd), user, staged, keeps, on_idle)
        finally:
            if staged is not None:
                staged.end(fake)
        if door is not None:
            result = replace(result, writes=tuple(door.writes))
        return LearnerRun(result, fake, user)

    def _user(self, keeps: Keeps) -> int | None:
        """The uid a run is given, in root mode: one of its own, or for a kept state the same as every run of it
        (as a learner's own runs are one user's)."""
        if self.sandbox is None:
            return None
        if keeps.state is None:
            return self.sandbox.run_user()
        with self._shared:
            return self._state_users.setdefault(keeps.state, self.sandbox.run_user())

    def _start(
        self, path: Path, args: tuple[str, ...], fake: FakeContainerd, scratch: Path, door: Door | None,
        reads: tuple[bool, bool], user: int | None, staged: StagedRun | None, keeps: Keeps, on_idle: Callable[[float], None],
    ) -> ScriptResult:  # fmt: skip
        cluster, containerd = reads
        if staged is not None:
            path, args, fake, scratch, door = staged.script, staged.args, staged.fake, staged.scratch, staged.door
        prefix, extra = self._environment(fake, containerd=containerd, cluster=cluster, door=door)
        if self.sandbox is None or not self.sandbox.namespaces:  # nothing is bound in: copies, the kept state by name
            scratch = unbound(keeps, scratch, extra, user)
        if staged is not None and cluster:
            prefix = self._stage.tools(prefix, toolchain.bin_dir())
        env = {**environ_now(), **extra}
        env["PATH"] = os.pathsep.join([*map(str, prefix), env.get("PATH", os.defpath)])
        plan = self._layouts.plan(path, args, fake, scratch, env, door, user, keeps)
        return run_script(
            path,
            args,
            cwd=scratch,
            path_prefix=prefix,
            extra_env=extra,
            timeout=self.timeout,
            sandbox=plan,
            on_idle=on_idle,
        )

    def _idle(self, kind: tuple[Path, object], ended: threading.Event, seat: Seat | None, seconds: float) -> None:
        """A run seen only waiting: its core is free; waiting past ``HANGS_AFTER`` seconds, later runs of its kind
        wait for it to end (:class:`ForcedEnds`), rather than hang beside it."""
        if seat is not None:
            seat.idle()
        if seconds >= HANGS_AFTER:
            self._forced.waiting(kind, ended)

    def runs_of(self, script: Path | LearnerFile) -> ScriptRuns:
        return ScriptRuns(self, script)


@dataclass
class LearnerScripts:
    """The function-scoped runner: this check's own fake containerd and scratch directory."""

    runner: ScriptRunner
    fake_containerd: FakeContainerd
    scratch: Path

    def run(
        self,
        script: Path | LearnerFile,
        *args: str,
        dump: str | None = None,
        cluster: bool = False,
        containerd: bool = True,
    ) -> ScriptResult:
        """Run ``script``; ``dump`` names the fake containerd's dump; ``cluster`` gives the script the
        lab cluster's kubeconfig and the pinned kubectl, for steps whose scripts read the cluster."""
        __tracebackhide__ = True
        run = self.runner.run(
            script,
            *args,
            dump=dump,
            cluster=cluster,
            containerd=containerd,
            fake=self.fake_containerd,
            scratch=self.scratch,
        )
        return run.result
