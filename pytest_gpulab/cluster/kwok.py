"""A real lab cluster: kwokctl's binary runtime with the locally built binaries.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the kwok
controller run as local processes; the lab's nodes are fake (kwok keeps them
Ready and runs their Pods on paper). Usable without pytest::

    with KwokCluster.for_lab("gpuop") as cluster:
        cluster.kubectl("get", "nodes")

Nothing here touches ``~/.kube/config`` or ``~/.kwok``: each cluster keeps its
state and kubeconfig in its own work directory, the user's only. Its ports are its
own (``ports.py``), its components listen on 127.0.0.1 only and its etcd takes only
its own API server (``kwokconfig.py``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..labs.discovery import discover
from ..labs.errors import ApiError, TransportError
from ..labs.labfile import Environment, Lab, NodeSpec
from ..labs.waiting import wait_until
from . import ports, reaper, toolchain
from .bringup import Bringup
from .environ import environ_now
from .kwokconfig import write_kwokctl_config
from .kwokctl import (
    KwokClusterError,
    check_can_start,
    create_command,
    delete_cluster,
    explain_start_failure,
    run_kwokctl,
)

PORT_RACE_ATTEMPTS = 3


class KwokCluster:
    """One kwokctl cluster of the binary runtime, with the given fake nodes and starting objects."""

    def __init__(
        self,
        name: str = "gpulab",
        nodes: Sequence[NodeSpec] = (),
        *,
        objects: Sequence[Path] = (),
        bin_dir: Path | None = None,
        workdir: Path | None = None,
        apiserver_port: int | None = None,
        start_timeout: float = 120,
        ready_timeout: float = 60,
        kwokctl_options: dict[str, object] | None = None,
        component_args: Mapping[str, Mapping[str, str]] | None = None,
        component_env: Mapping[str, str] | None = None,
        outlives_caller: bool = False,
        seed: Callable[[KwokCluster], None] | None = None,
    ) -> None:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name):
            raise ValueError(f"cluster name {name!r} must be lower-case letters, digits and dashes")
        self.name = name
        self.nodes = tuple(nodes)
        self.objects = tuple(Path(path) for path in objects)
        self.bin_dir = Path(bin_dir) if bin_dir else toolchain.bin_dir()
        self._owns_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else None
        self.apiserver_port = apiserver_port
        self.start_timeout = start_timeout
        self.ready_timeout = ready_timeout
        self.kwokctl_options = dict(kwokctl_options or {})  # KwokctlConfiguration options
        self.component_args = dict(component_args or {})  # more flags, by component: {"kube-apiserver": {...}}
        self.component_env = dict(component_env or {})  # more variables for kwokctl and every component
        self.startup_seconds: float | None = None
        self._api: Bringup | None = None
        self._ports: ports.Reservation | None = None
        self.outlives_caller = outlives_caller  # `gpulab up`'s: else stopped when this process ends (reaper.py)
        self._watchdog: reaper.Watchdog | None = None
        self.seed = seed  # run before its components start (snapshot.py: etcd's data)

    @classmethod
    def for_lab(cls, lab: Lab | str, *, lab_dirs: Sequence[Path] = (), **kwargs: Any) -> KwokCluster:
        """A cluster shaped like ``lab``'s starting environment (a discovered lab's name, or the Lab)."""
        lab = discover(lab_dirs).get(lab) if isinstance(lab, str) else lab
        environment: Environment = lab.environment
        return cls(
            name=kwargs.pop("name", f"gpulab-{lab.name}"),
            nodes=environment.nodes,
            objects=environment.objects,
            **kwargs,
        )

    # -- paths and environment ------------------------------------------------

    @property
    def cluster_dir(self) -> Path:
        if self.workdir is None:
            raise KwokClusterError("the cluster has not been started")
        return self.workdir / "clusters" / self.name

    @property
    def kubeconfig(self) -> Path:
        return self.cluster_dir / "kubeconfig.yaml"

    def environment(self) -> dict[str, str]:
        """The caller's environment with this cluster's binaries first on PATH, its kubeconfig and its own kubectl cache."""
        env = environ_now()  # not dict(os.environ): another thread may set a variable meanwhile
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env["KWOK_KUBE_VERSION"] = f"v{toolchain.pinned_versions().kubernetes}"
        if self.workdir is not None:
            env["KWOK_WORKDIR"] = str(self.workdir)
            env["KUBECONFIG"] = str(self.kubeconfig)
            # kubectl caches discovery under ~/.kube/cache by host:port; a later cluster on a reused port
            # would be read with the kinds of an earlier one ("could not find the requested resource").
            env["KUBECACHEDIR"] = str(self.workdir / "kubectl-cache")
        return env

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> KwokCluster:
        """Create the cluster; a port taken between our choice and kwokctl's bind is retried on others."""
        for attempt in range(1, PORT_RACE_ATTEMPTS + 1):
            try:
                return self._start_once()
            except KwokClusterError as error:
                if self.apiserver_port or "already in use" not in str(error) or attempt == PORT_RACE_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    def _start_once(self) -> KwokCluster:
        check_can_start(self.bin_dir, self.apiserver_port)
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="gpulab-kwok-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir.chmod(0o700)  # kwokctl writes pki/*.key mode 644 (kwok's pkg/kwokctl/pki/pkiutil.go)
        started = time.monotonic()
        try:
            self._watch(self.workdir)
            if self.seed is not None:
                self.seed(self)
            self._create(self.workdir)
            self._bring_up()
            self.apply_objects(self.objects)
        except BaseException:
            self._cleanup_after_failure()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _watch(self, workdir: Path) -> None:
        """Dead graders' leftovers reaped; unless it outlives this process, a watchdog stops it (reaper.py)."""
        reaper.sweep()
        if not self.outlives_caller:
            self._watchdog = reaper.Watchdog(workdir, self.cluster_dir, self._owns_workdir)

    def _unwatch(self) -> None:
        if self._watchdog is not None:
            self._watchdog.end()
            self._watchdog = None

    def _create(self, workdir: Path) -> None:
        reservation = self._reserve_ports()
        given = {"kubeApiserverPort": self.apiserver_port} if self.apiserver_port else {}
        options = {**reservation.options(), **self.kwokctl_options, **given}  # given options and port win
        socket, args = reservation.etcd_socket, self.component_args
        config = write_kwokctl_config(workdir, self.bin_dir, self.cluster_dir, options, socket, args)
        command = create_command(self.bin_dir, self.name, self.start_timeout, config)
        result = run_kwokctl(command, {**self.environment(), **self.component_env}, self.start_timeout + 30)
        if result is None:
            raise KwokClusterError(
                f"kwokctl did not create the cluster within {self.start_timeout + 30:.0f}s; "
                "the machine may be overloaded. Try again, or raise start_timeout."
            )
        if result.returncode != 0:
            output = (result.stdout + result.stderr)[-3000:]
            raise KwokClusterError(self._explain_start_failure("kwokctl create cluster failed", output))

    def _reserve_ports(self) -> ports.Reservation:
        try:
            self._ports = ports.reserve(self.cluster_dir)
        except OSError as error:
            raise KwokClusterError(f"the lab cluster could not get ports of its own: {error}") from None
        return self._ports

    def _explain_start_failure(self, what: str, output: str = "") -> str:
        return explain_start_failure(self.cluster_dir if self.workdir else None, self.apiserver_port, what, output)

    def _cleanup_after_failure(self) -> None:
        self._close_api()  # a retried start has another port: its reads need a fresh connection
        self._kwokctl_delete(check=False)
        if self._ports is not None:
            self._ports.release()  # once the cluster is gone
        self._remove_workdir()
        self._unwatch()

    def _close_api(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    def _kwokctl_delete(self, *, check: bool) -> None:
        if self.workdir is not None and self.cluster_dir.exists():
            delete_cluster(self.bin_dir, self.name, self.workdir, self.environment(), check=check)

    def _remove_workdir(self) -> None:
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def stop(self) -> None:
        """Stop every component and delete the cluster's state."""
        self._close_api()
        self._kwokctl_delete(check=True)
        if self._ports is not None:
            self._ports.release()  # once the cluster is gone
        self._remove_workdir()
        self._unwatch()

    def __enter__(self) -> KwokCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- talking to it -----------------------------------------------------------

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl against this cluster."""
        try:
            result = subprocess.run(
                [str(self.bin_dir / "kubectl"), *args], env=self.environment(), input=input,
                stdin=None if input is not None else subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise KwokClusterError(f"kubectl {' '.join(args)} did not finish within {timeout:.0f}s") from None
        if check and result.returncode != 0:
            raise KwokClusterError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply_objects(self, paths: Sequence[Path]) -> None:
        """The lab's starting objects, file by file; a file's CustomResourceDefinitions are Established
        before the next file, which may hold their custom resources."""
        for path in paths:
            created = self.kubectl("apply", "-f", str(path), "-o", "name").stdout.split()
            crds = [name for name in created if name.startswith("customresourcedefinition")]
            if crds:
                self.kubectl("wait", "--for=condition=Established", f"--timeout={int(self.ready_timeout)}s", *crds)

    def is_running(self) -> bool:
        """Whether this cluster's API server answers (its state may outlive its processes)."""
        if self.workdir is None or not self.kubeconfig.exists():
            return False
        try:
            answer = self.kubectl("get", "--raw", "/readyz", "--request-timeout=5s", check=False, timeout=10)
        except KwokClusterError:
            return False
        return answer.returncode == 0

    @property
    def api(self) -> Bringup:
        """In-process reads and first writes for the cluster's start (made on first use)."""
        if self._api is None:
            self._api = Bringup(self.kubeconfig)
        return self._api

    def create_nodes(self, nodes: Sequence[NodeSpec]) -> None:
        try:
            self.api.create_nodes(nodes)
        except (ApiError, TransportError) as error:
            raise KwokClusterError(f"the lab nodes could not be created: {error}") from None

    def _wait(self, what: str, condition: Callable[[], bool], waited_for: str = "") -> None:
        if not wait_until(condition, self.ready_timeout, interval=0.05):
            failure = f"it did not {what} within {self.ready_timeout:.0f}s{waited_for}"
            raise KwokClusterError(self._explain_start_failure(failure))

    def _bring_up(self) -> None:
        """Nodes created as soon as the API server serves; then /readyz, the nodes Ready, the default ServiceAccount."""
        names = [node.name for node in self.nodes]
        self._wait("answer /version", self.api.serving)
        self.create_nodes(self.nodes)
        self._wait("answer /readyz", self.api.ready)
        self._wait(
            "become ready",
            lambda: self.api.nodes_ready(names) and self.api.default_service_account(),
            f" (nodes Ready and schedulable: {', '.join(names) or 'no nodes'}; default ServiceAccount)",
        )
