"""Learner scripts as a grader runs them, over :func:`pytest_gpulab.runner.run_script`.

Each run gets a fresh scratch directory and a fake ``containerd`` first on
PATH serving the dump the grader chose. The cluster's kubeconfig and the
pinned kubectl are added only for a step whose script reads the cluster
(``cluster=True``); ``containerd=False`` runs the script as on a machine
without containerd. Usable without pytest.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import toolchain
from .containerd import FakeContainerd, shim_path
from .feedback import fail
from .learner import LearnerFile
from .runner import SandboxPlan, ScriptResult, run_script
from .sandbox import Exposure, Sandbox, snapshot, tool_paths

if TYPE_CHECKING:
    from .clusterview import DoctoredView


def path_without(command: str, path: str) -> str:
    """``path`` without the directories that hold an executable ``command``."""
    kept = [d for d in path.split(os.pathsep) if d and not os.access(os.path.join(d, command), os.X_OK)]
    return os.pathsep.join(kept)


def _bash_ran_another_language(result: ScriptResult) -> str | None:
    """The #! interpreter bash ignored, when a script without the exec bit is not a shell script."""
    if not result.ran_with_bash or len(result.command) < 2:
        return None
    try:
        with open(result.command[1], "rb") as handle:
            first = handle.readline(256).decode("utf-8", "replace").strip()
    except OSError:
        return None
    shells = ("sh", "bash", "dash", "ksh", "zsh")
    interpreter = first[2:].split()[-1] if first.startswith("#!") and first[2:].split() else None
    return interpreter if interpreter and os.path.basename(interpreter) not in shells else None


def said(result: ScriptResult) -> str:
    """What a script printed on stderr, for the learner: its first line, or a Python error's last line;
    and why, when bash ran a script of another language because it was not executable."""
    if interpreter := _bash_ran_another_language(result):
        return f" (it is not executable, so the grader ran it with bash, not with {interpreter}: chmod +x it)"
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1] if lines[0].startswith("Traceback (most recent call last)") else lines[0]
    return f" (it said: {line[:200]})"


@dataclass(frozen=True)
class LearnerRun:
    """One run of a learner script, and what the fake containerd saw during it."""

    result: ScriptResult
    containerd: FakeContainerd

    def asked_for_config_dump(self) -> bool:
        return self.containerd.asked_for_config_dump()


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
    ) -> None:
        self.work = Path(work)
        self.timeout = timeout
        self._kubeconfig = kubeconfig
        self._counter = itertools.count(1)
        self.lab_root = lab_root
        self.sandbox = sandbox
        self._view: DoctoredView | None = None
        self._shared = threading.Lock()  # the view and the lab snapshot are made once, by the first run
        self._pool: ThreadPoolExecutor | None = None

    @property
    def pool(self) -> ThreadPoolExecutor:
        """Where runs started ahead run: one per core, since each is a few processes' start-up."""
        with self._shared:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="gpulab-run")
            return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._view is not None:
            self._view.__exit__(None, None, None)
            self._view = None

    def _cluster_kubeconfig(self) -> str | None:
        """The lab cluster's kubeconfig; in the sandbox, that of a read-only view of it (writes are refused)."""
        upstream = self._kubeconfig()
        if self.sandbox is None:
            return upstream
        with self._shared:
            if self._view is None:
                from .clusterview import DoctoredView  # the kubernetes client is slow to import

                view = DoctoredView(upstream or os.path.expanduser("~/.kube/config"), (), self.work / "cluster-view")
                self._view = view.__enter__()
            return str(self._view.kubeconfig)

    def _plan(
        self, script: Path, args: tuple[str, ...], fake: FakeContainerd, scratch: Path, env: dict[str, str]
    ) -> SandboxPlan | None:
        """What the script sees in the sandbox: the lab root (or its own folder), read-only; its scratch and
        the fake containerd's state, writable; the tools on PATH, the kubeconfig it is given and the files
        the grader names in its arguments (a generated dump), read-only."""
        if self.sandbox is None:
            return None
        uid, gid = self.sandbox.user or (os.getuid(), os.getgid())
        for writable in (scratch, fake.state_dir):
            os.chown(writable, uid, gid)
        root = self.lab_root
        if root is not None and root in script.parents:
            with self._shared:
                seen = [Exposure(snapshot(root, self.work / "lab-snapshot"), root)]
        else:
            seen = [Exposure(script.parent, script.parent)]
        seen += [Exposure(scratch, scratch, read_only=False), Exposure(fake.directory, fake.directory, False)]
        seen += [Exposure(tool, tool) for tool in tool_paths(env.get("PATH", "")) if tool != Path("/")]
        seen.append(Exposure(shim_path().parent, shim_path().parent))
        if kubeconfig := env.get("KUBECONFIG"):  # only a cluster run has one: _environment blanks the rest
            seen.append(Exposure(Path(kubeconfig), Path(kubeconfig)))
        given = [Path(arg) for arg in args if arg.startswith("/") and os.path.exists(arg)]
        seen += [Exposure(path, path) for path in given if root is None or root not in path.parents]
        hidden = (root.parent,) if root is not None and root.parent != Path("/") else ()
        return SandboxPlan(self.sandbox, tuple(seen), hidden, network=bool(env.get("KUBECONFIG")))

    def _environment(
        self, fake: FakeContainerd, *, cluster: bool, containerd: bool, kubeconfig: str | None = None
    ) -> tuple[list[Path], dict[str, str]]:
        prefix: list[Path] = [fake.bin_dir] if containerd else []
        extra: dict[str, str] = {}
        if not containerd:
            extra["PATH"] = path_without("containerd", os.environ.get("PATH", os.defpath))
        if not cluster:
            extra["KUBECONFIG"] = ""  # not the grader's own: a script reads the cluster only when its step asks
        if cluster:
            if kubeconfig := kubeconfig or self._cluster_kubeconfig():
                extra["KUBECONFIG"] = kubeconfig
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
        kubeconfig: str | None = None,
    ) -> LearnerRun:
        """Run ``script``: ``dump`` names a shipped dump, ``dump_text`` is one the grader generated;
        ``kubeconfig`` shows a ``cluster`` script another view of the cluster than the lab's own
        (a :class:`pytest_gpulab.clusterview.DoctoredView`)."""
        __tracebackhide__ = True
        path = script.path if isinstance(script, LearnerFile) else Path(script)
        if not path.is_file():
            fail(
                f"{script} is not a regular file."
                if path.exists()
                else f"{script} does not exist; create it as the step asks."
            )
        run_dir = self.work / f"run-{next(self._counter)}"
        fake = fake or FakeContainerd(run_dir / "fake-containerd")
        if dump is not None:
            fake.serve_dump(dump)
        if dump_text is not None:
            fake.serve_text(dump_text)
        scratch = scratch or run_dir / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        prefix, extra = self._environment(fake, cluster=cluster, containerd=containerd, kubeconfig=kubeconfig)
        env = {**os.environ, **extra}
        env["PATH"] = os.pathsep.join([*map(str, prefix), env.get("PATH", os.defpath)])
        plan = self._plan(Path(os.path.abspath(path)), tuple(map(str, args)), fake, scratch, env)
        result = run_script(
            path, args, cwd=scratch, path_prefix=prefix, extra_env=extra, timeout=self.timeout, sandbox=plan
        )
        return LearnerRun(result, fake)

    def runs_of(self, script: Path | LearnerFile) -> ScriptRuns:
        return ScriptRuns(self, script)


class Run:
    """A run of a script to start ahead of the checks that read it: ``Run("arg", dump="v2-runc-only")``."""

    def __init__(self, *args: str, **options: Any) -> None:
        self.args, self.options = args, options

    @property
    def key(self) -> tuple[object, ...]:
        return (self.args, tuple(sorted(self.options.items())))


class ScriptRuns:
    """The runs of one learner script, each distinct run made once: a step's checks share them."""

    def __init__(self, runner: ScriptRunner, script: Path | LearnerFile) -> None:
        self.runner = runner
        self.script = script
        self._runs: dict[tuple[object, ...], Future[LearnerRun]] = {}

    def ahead(self, *runs: Run) -> ScriptRuns:
        """Start ``runs`` side by side now (they do not depend on each other); a check then waits for its own."""
        for planned in runs:
            if planned.key not in self._runs:
                self._runs[planned.key] = self.runner.pool.submit(
                    self.runner.run, self.script, *planned.args, **planned.options
                )
        return self

    def run(self, *args: str, **options: Any) -> LearnerRun:
        """As :meth:`ScriptRunner.run`; the same arguments and options give the same (first) run."""
        __tracebackhide__ = True
        planned = Run(*args, **options)
        if planned.key not in self._runs:
            done: Future[LearnerRun] = Future()
            try:
                done.set_result(self.runner.run(self.script, *args, **options))
            except Exception as failure:  # a check failure (no such script) is every asker's
                done.set_exception(failure)
            self._runs[planned.key] = done
        return self._runs[planned.key].result()


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
