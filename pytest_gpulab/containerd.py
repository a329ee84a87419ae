"""The fake ``containerd`` a grader puts first on PATH for a learner's script.

``FakeContainerd(directory)`` writes a small launcher at
``directory/bin/containerd`` that runs the shipped stand-in
(``fake_containerd/containerd``) with its state in ``directory/state``. The
grader chooses what ``containerd config dump`` prints (a shipped dump by name,
TOML text, or a file), runs the script with ``bin_dir`` prepended to PATH and
then reads back every invocation the stand-in recorded.

``generate_dump()`` renders a realistic dump for any set of runtime handlers,
in the version-2 (containerd 1.7) or version-3 (containerd 2.x) layout.

Usable without pytest.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import Iterable

__all__ = [
    "FakeContainerd",
    "GLOBAL_VALUE_FLAGS",
    "available_dumps",
    "dump_path",
    "generate_dump",
    "render_runtimes",
    "shim_path",
    "strip_global_flags",
]

STATE_ENV = "GPULAB_FAKE_CONTAINERD_STATE"

# Global flags of the containerd CLI that take a value (kept in step with the
# stand-in script, which must not import this package).
GLOBAL_VALUE_FLAGS = frozenset(
    {"--config", "-c", "--address", "-a", "--log-level", "-l", "--root", "--state"}
)


def _package_dir() -> Path:
    return Path(str(resources.files("pytest_gpulab.fake_containerd")))


def shim_path() -> Path:
    """Path of the shipped stand-in script."""
    return _package_dir() / "containerd"


def available_dumps() -> list[str]:
    """Names (file stems) of the shipped dumps, sorted."""
    dumps = _package_dir() / "dumps"
    return sorted(p.stem for p in dumps.glob("*.toml") if p.is_file())


def dump_path(name: str) -> Path:
    """Path of a shipped dump, by stem (``v2-runc-nvidia``) or file name."""
    stem = name[:-5] if name.endswith(".toml") else name
    if stem not in available_dumps():
        raise KeyError(f"no shipped containerd dump named {name!r}")
    return _package_dir() / "dumps" / f"{stem}.toml"


def strip_global_flags(argv: Iterable[str]) -> list[str] | None:
    """argv without its leading global flags; None if a flag lacks its value."""
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, _ = arg.partition("=")
        if eq and name in GLOBAL_VALUE_FLAGS:
            i += 1
        elif arg in GLOBAL_VALUE_FLAGS:
            if i + 1 >= len(args):
                return None
            i += 2
        else:
            break
    return args[i:]


class FakeContainerd:
    """A launcher directory plus the state the stand-in reads and writes."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.state_dir = self.directory / "state"
        self._bin_dir = self.directory / "bin"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._bin_dir.mkdir(parents=True, exist_ok=True)
        shim = shim_path()
        if not shim.is_file():
            raise FileNotFoundError(f"the fake containerd script is missing: {shim}")
        launcher = self._bin_dir / "containerd"
        launcher.write_text(
            "#!/bin/sh\n"
            "# Fake containerd for grading, written by pytest-gpulab.\n"
            f"{STATE_ENV}={shlex.quote(str(self.state_dir.resolve()))}\n"
            f"export {STATE_ENV}\n"
            f'exec {shlex.quote(sys.executable)} -I -S {shlex.quote(str(shim))} "$@"\n',
            encoding="utf-8",
        )
        launcher.chmod(0o755)
        self.executable = launcher

    def __repr__(self) -> str:
        return f"FakeContainerd({str(self.directory)!r})"

    @property
    def bin_dir(self) -> Path:
        """Directory holding ``containerd``; prepend it to PATH."""
        return self._bin_dir

    @property
    def dump_file(self) -> Path:
        return self.state_dir / "dump.toml"

    @property
    def calls_file(self) -> Path:
        return self.state_dir / "calls.jsonl"

    # -- what `config dump` prints -------------------------------------------

    def available_dumps(self) -> list[str]:
        return available_dumps()

    def serve(self, name_or_text: str) -> Path:
        """Serve a shipped dump (by stem) or, failing that, the given TOML text."""
        stem = name_or_text[:-5] if name_or_text.endswith(".toml") else name_or_text
        if stem in available_dumps():
            return self.serve_path(dump_path(stem))
        self.dump_file.write_text(name_or_text, encoding="utf-8")
        return self.dump_file

    def serve_path(self, path: Path) -> Path:
        """Serve the bytes of a file."""
        shutil.copyfile(Path(path), self.dump_file)
        return self.dump_file

    def served(self) -> str | None:
        """The text `config dump` currently prints, or None."""
        try:
            return self.dump_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def clear(self) -> None:
        """Choose no dump: `config dump` then fails."""
        self.dump_file.unlink(missing_ok=True)

    # -- what the script asked -----------------------------------------------

    def calls(self) -> list[list[str]]:
        """The argv (after the program name) of every invocation so far."""
        try:
            raw = self.calls_file.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        calls = []
        for line in raw.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            argv = entry.get("argv") if isinstance(entry, dict) else None
            if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
                calls.append(argv)
        return calls

    def reset_calls(self) -> None:
        self.calls_file.unlink(missing_ok=True)

    def asked_for_config_dump(self) -> bool:
        """Whether any invocation was ``[global flags] config dump ...``."""
        for argv in self.calls():
            rest = strip_global_flags(argv)
            if rest is not None and rest[:2] == ["config", "dump"]:
                return True
        return False


# ---------------------------------------------------------------------------
# Dump rendering
# ---------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

_BINARY_NAMES = {
    "nvidia": "/usr/bin/nvidia-container-runtime",
    "nvidia-cdi": "/usr/bin/nvidia-container-runtime.cdi",
}


def _basic_string(text: str) -> str:
    out = []
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\b\t\n\f\r":
            out.append({"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _string(text: str, version: int) -> str:
    """A TOML string as containerd prints it: "..." for v2, '...' for v3."""
    if version >= 3 and "'" not in text and not any(
        ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text
    ):
        return f"'{text}'"
    return _basic_string(text)


def _key(name: str, version: int) -> str:
    return name if _BARE_KEY.fullmatch(name) else _string(name, version)


def _runtime_v2(name: str) -> str:
    table = f'plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{_key(name, 2)}'
    binary = _BINARY_NAMES.get(name, "")
    return f"""
        [{table}]
          base_runtime_spec = ""
          cni_conf_dir = ""
          cni_max_conf_num = 0
          container_annotations = []
          pod_annotations = []
          privileged_without_host_devices = false
          privileged_without_host_devices_all_devices_allowed = false
          runtime_engine = ""
          runtime_path = ""
          runtime_root = ""
          runtime_type = "io.containerd.runc.v2"
          sandbox_mode = "podsandbox"
          snapshotter = ""

          [{table}.options]
            BinaryName = {_string(binary, 2)}
            CriuImagePath = ""
            CriuPath = ""
            CriuWorkPath = ""
            IoGid = 0
            IoUid = 0
            NoNewKeyring = false
            NoPivotRoot = false
            Root = ""
            ShimCgroup = ""
            SystemdCgroup = true
"""


def _runtime_v3(name: str) -> str:
    table = f"plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.{_key(name, 3)}"
    binary = _BINARY_NAMES.get(name, "")
    return f"""
        [{table}]
          runtime_type = 'io.containerd.runc.v2'
          runtime_path = ''
          pod_annotations = []
          container_annotations = []
          privileged_without_host_devices = false
          privileged_without_host_devices_all_devices_allowed = false
          base_runtime_spec = ''
          cni_conf_dir = ''
          cni_max_conf_num = 0
          snapshotter = ''
          sandboxer = 'podsandbox'
          io_type = ''

          [{table}.options]
            BinaryName = {_string(binary, 3)}
            CriuImagePath = ''
            CriuWorkPath = ''
            IoGid = 0
            IoUid = 0
            NoNewKeyring = false
            Root = ''
            ShimCgroup = ''
            SystemdCgroup = true
"""


# containerd 1.7 `config dump` (keys sorted, double-quoted strings).
_V2_TEMPLATE = """\
disabled_plugins = []
imports = @IMPORTS@
oom_score = 0
plugin_dir = ""
required_plugins = []
root = "/var/lib/containerd"
state = "/run/containerd"
temp = ""
version = 2

[cgroup]
  path = ""

[debug]
  address = ""
  format = ""
  gid = 0
  level = ""
  uid = 0

[grpc]
  address = "/run/containerd/containerd.sock"
  gid = 0
  max_recv_message_size = 16777216
  max_send_message_size = 16777216
  tcp_address = ""
  tcp_tls_ca = ""
  tcp_tls_cert = ""
  tcp_tls_key = ""
  uid = 0

[metrics]
  address = ""
  grpc_histogram = false

[plugins]

  [plugins."io.containerd.gc.v1.scheduler"]
    deletion_threshold = 0
    mutation_threshold = 100
    pause_threshold = 0.02
    schedule_delay = "0s"
    startup_delay = "100ms"

  [plugins."io.containerd.grpc.v1.cri"]
    cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
    device_ownership_from_security_context = false
    disable_apparmor = false
    disable_cgroup = false
    disable_hugetlb_controller = true
    disable_proc_mount = false
    disable_tcp_service = true
    drain_exec_sync_io_timeout = "0s"
    enable_cdi = false
    enable_selinux = false
    enable_tls_streaming = false
    enable_unprivileged_icmp = false
    enable_unprivileged_ports = false
    ignore_deprecation_warnings = []
    ignore_image_defined_volumes = false
    image_pull_progress_timeout = "5m0s"
    max_concurrent_downloads = 3
    max_container_log_line_size = 16384
    netns_mounts_under_state_dir = false
    restrict_oom_score_adj = false
    sandbox_image = "registry.k8s.io/pause:3.8"
    selinux_category_range = 1024
    stats_collect_period = 10
    stream_idle_timeout = "4h0m0s"
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    systemd_cgroup = false
    tolerate_missing_hugetlb_controller = true
    unset_seccomp_profile = ""

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/opt/cni/bin"
      conf_dir = "/etc/cni/net.d"
      conf_template = ""
      ip_pref = ""
      max_conf_num = 1
      setup_serially = false

    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = @DEFAULT@
      disable_snapshot_annotations = true
      discard_unpacked_layers = false
      ignore_blockio_not_enabled_errors = false
      ignore_rdt_not_enabled_errors = false
      no_pivot = false
      snapshotter = "overlayfs"

      [plugins."io.containerd.grpc.v1.cri".containerd.default_runtime]
        base_runtime_spec = ""
        cni_conf_dir = ""
        cni_max_conf_num = 0
        container_annotations = []
        pod_annotations = []
        privileged_without_host_devices = false
        privileged_without_host_devices_all_devices_allowed = false
        runtime_engine = ""
        runtime_path = ""
        runtime_root = ""
        runtime_type = ""
        sandbox_mode = ""
        snapshotter = ""

        [plugins."io.containerd.grpc.v1.cri".containerd.default_runtime.options]

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]
@RUNTIMES@
      [plugins."io.containerd.grpc.v1.cri".containerd.untrusted_workload_runtime]
        base_runtime_spec = ""
        cni_conf_dir = ""
        cni_max_conf_num = 0
        container_annotations = []
        pod_annotations = []
        privileged_without_host_devices = false
        privileged_without_host_devices_all_devices_allowed = false
        runtime_engine = ""
        runtime_path = ""
        runtime_root = ""
        runtime_type = ""
        sandbox_mode = ""
        snapshotter = ""

        [plugins."io.containerd.grpc.v1.cri".containerd.untrusted_workload_runtime.options]

    [plugins."io.containerd.grpc.v1.cri".image_decryption]
      key_model = "node"

    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "/etc/containerd/certs.d"

      [plugins."io.containerd.grpc.v1.cri".registry.auths]

      [plugins."io.containerd.grpc.v1.cri".registry.configs]

      [plugins."io.containerd.grpc.v1.cri".registry.headers]

      [plugins."io.containerd.grpc.v1.cri".registry.mirrors]

    [plugins."io.containerd.grpc.v1.cri".x509_key_pair_streaming]
      tls_cert_file = ""
      tls_key_file = ""

  [plugins."io.containerd.internal.v1.opt"]
    path = "/opt/containerd"

  [plugins."io.containerd.internal.v1.restart"]
    interval = "10s"

  [plugins."io.containerd.internal.v1.tracing"]
    sampling_ratio = 1.0
    service_name = "containerd"

  [plugins."io.containerd.metadata.v1.bolt"]
    content_sharing_policy = "shared"

  [plugins."io.containerd.monitor.v1.cgroups"]
    no_prometheus = false

  [plugins."io.containerd.nri.v1.nri"]
    disable = true
    disable_connections = false
    plugin_config_path = "/etc/nri/conf.d"
    plugin_path = "/opt/nri/plugins"
    plugin_registration_timeout = "5s"
    plugin_request_timeout = "2s"
    socket_path = "/var/run/nri/nri.sock"

  [plugins."io.containerd.runtime.v1.linux"]
    no_shim = false
    runtime = "runc"
    runtime_root = ""
    shim = "containerd-shim"
    shim_debug = false

  [plugins."io.containerd.runtime.v2.task"]
    platforms = ["linux/amd64"]
    sched_core = false

  [plugins."io.containerd.service.v1.diff-service"]
    default = ["walking"]

  [plugins."io.containerd.service.v1.tasks-service"]
    blockio_config_file = ""
    rdt_config_file = ""

  [plugins."io.containerd.snapshotter.v1.aufs"]
    root_path = ""

  [plugins."io.containerd.snapshotter.v1.blockfile"]
    fs_type = ""
    mount_options = []
    root_path = ""
    scratch_file = ""

  [plugins."io.containerd.snapshotter.v1.btrfs"]
    root_path = ""

  [plugins."io.containerd.snapshotter.v1.devmapper"]
    async_remove = false
    base_image_size = ""
    discard_blocks = false
    fs_options = ""
    fs_type = ""
    pool_name = ""
    root_path = ""

  [plugins."io.containerd.snapshotter.v1.native"]
    root_path = ""

  [plugins."io.containerd.snapshotter.v1.overlayfs"]
    mount_options = []
    root_path = ""
    sync_remove = false
    upperdir_label = false

  [plugins."io.containerd.snapshotter.v1.zfs"]
    root_path = ""

  [plugins."io.containerd.tracing.processor.v1.otlp"]
    endpoint = ""
    insecure = false
    protocol = ""

  [plugins."io.containerd.transfer.v1.local"]
    config_path = ""
    max_concurrent_downloads = 3
    max_concurrent_uploaded_layers = 3

    [[plugins."io.containerd.transfer.v1.local".unpack_config]]
      differ = ""
      platform = "linux/amd64"
      snapshotter = "overlayfs"

[proxy_plugins]

[stream_processors]

  [stream_processors."io.containerd.ocicrypt.decoder.v1.tar"]
    accepts = ["application/vnd.oci.image.layer.v1.tar+encrypted"]
    args = ["--decryption-keys-path", "/etc/containerd/ocicrypt/keys"]
    env = ["OCICRYPT_KEYPROVIDER_CONFIG=/etc/containerd/ocicrypt/ocicrypt_keyprovider.conf"]
    path = "ctd-decoder"
    returns = "application/vnd.oci.image.layer.v1.tar"

  [stream_processors."io.containerd.ocicrypt.decoder.v1.tar.gzip"]
    accepts = ["application/vnd.oci.image.layer.v1.tar+gzip+encrypted"]
    args = ["--decryption-keys-path", "/etc/containerd/ocicrypt/keys"]
    env = ["OCICRYPT_KEYPROVIDER_CONFIG=/etc/containerd/ocicrypt/ocicrypt_keyprovider.conf"]
    path = "ctd-decoder"
    returns = "application/vnd.oci.image.layer.v1.tar+gzip"

[timeouts]
  "io.containerd.timeout.bolt.open" = "0s"
  "io.containerd.timeout.metrics.shimstats" = "2s"
  "io.containerd.timeout.shim.cleanup" = "5s"
  "io.containerd.timeout.shim.load" = "5s"
  "io.containerd.timeout.shim.shutdown" = "3s"
  "io.containerd.timeout.task.state" = "2s"

[ttrpc]
  address = ""
  gid = 0
  uid = 0
"""

# containerd 2.0 `config dump` (struct order, single-quoted strings). In
# version 3 the CRI runtime settings live in io.containerd.cri.v1.runtime;
# io.containerd.grpc.v1.cri keeps only the streaming server settings.
_V3_TEMPLATE = """\
version = 3
root = '/var/lib/containerd'
state = '/run/containerd'
temp = ''
plugin_dir = ''
disabled_plugins = []
required_plugins = []
oom_score = 0
imports = @IMPORTS@

[grpc]
  address = '/run/containerd/containerd.sock'
  tcp_address = ''
  tcp_tls_ca = ''
  tcp_tls_cert = ''
  tcp_tls_key = ''
  uid = 0
  gid = 0
  max_recv_message_size = 16777216
  max_send_message_size = 16777216

[ttrpc]
  address = ''
  uid = 0
  gid = 0

[debug]
  address = ''
  uid = 0
  gid = 0
  level = ''
  format = ''

[metrics]
  address = ''
  grpc_histogram = false

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    disable_snapshot_annotations = true
    discard_unpacked_layers = false
    max_concurrent_downloads = 3
    image_pull_progress_timeout = '5m0s'
    image_pull_with_sync_fs = false
    stats_collect_period = 10

    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = 'registry.k8s.io/pause:3.10'

    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = '/etc/containerd/certs.d'

    [plugins.'io.containerd.cri.v1.images'.image_decryption]
      key_model = 'node'

  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    selinux_category_range = 1024
    max_container_log_line_size = 16384
    disable_apparmor = false
    restrict_oom_score_adj = false
    disable_proc_mount = false
    unset_seccomp_profile = ''
    tolerate_missing_hugetlb_controller = true
    disable_hugetlb_controller = true
    device_ownership_from_security_context = false
    ignore_image_defined_volumes = false
    netns_mounts_under_state_dir = false
    enable_unprivileged_ports = true
    enable_unprivileged_icmp = true
    enable_cdi = true
    cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi']
    drain_exec_sync_io_timeout = '0s'
    ignore_deprecation_warnings = []

    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = @DEFAULT@
      ignore_blockio_not_enabled_errors = false
      ignore_rdt_not_enabled_errors = false

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes]
@RUNTIMES@
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dir = '/opt/cni/bin'
      conf_dir = '/etc/cni/net.d'
      max_conf_num = 1
      setup_serially = false
      conf_template = ''
      ip_pref = ''
      use_internal_loopback = false

  [plugins.'io.containerd.gc.v1.scheduler']
    pause_threshold = 0.02
    deletion_threshold = 0
    mutation_threshold = 100
    schedule_delay = '0s'
    startup_delay = '100ms'

  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
    stream_idle_timeout = '4h0m0s'
    enable_tls_streaming = false

    [plugins.'io.containerd.grpc.v1.cri'.x509_key_pair_streaming]
      tls_cert_file = ''
      tls_key_file = ''

  [plugins.'io.containerd.image-verifier.v1.bindir']
    bin_dir = '/opt/containerd/image-verifier/bin'
    max_verifiers = 10
    per_verifier_timeout = '10s'

  [plugins.'io.containerd.internal.v1.opt']
    path = '/opt/containerd'

  [plugins.'io.containerd.internal.v1.tracing']

  [plugins.'io.containerd.metadata.v1.bolt']
    content_sharing_policy = 'shared'
    no_sync = false

  [plugins.'io.containerd.monitor.container.v1.restart']
    interval = '10s'

  [plugins.'io.containerd.monitor.task.v1.cgroups']
    no_prometheus = false

  [plugins.'io.containerd.nri.v1.nri']
    disable = false
    socket_path = '/var/run/nri/nri.sock'
    plugin_path = '/opt/nri/plugins'
    plugin_config_path = '/etc/nri/conf.d'
    plugin_registration_timeout = '5s'
    plugin_request_timeout = '2s'
    disable_connections = false

  [plugins.'io.containerd.runtime.v2.task']
    platforms = ['linux/amd64']

  [plugins.'io.containerd.service.v1.diff-service']
    default = ['walking']
    sync_fs = false

  [plugins.'io.containerd.service.v1.tasks-service']
    blockio_config_file = ''
    rdt_config_file = ''

  [plugins.'io.containerd.shim.v1.manager']
    env = []

  [plugins.'io.containerd.snapshotter.v1.blockfile']
    root_path = ''
    scratch_file = ''
    fs_type = ''
    mount_options = []
    recreate_scratch = false

  [plugins.'io.containerd.snapshotter.v1.btrfs']
    root_path = ''

  [plugins.'io.containerd.snapshotter.v1.devmapper']
    root_path = ''
    pool_name = ''
    base_image_size = ''
    async_remove = false
    discard_blocks = false
    fs_type = ''
    fs_options = ''

  [plugins.'io.containerd.snapshotter.v1.native']
    root_path = ''

  [plugins.'io.containerd.snapshotter.v1.overlayfs']
    root_path = ''
    upperdir_label = false
    sync_remove = false
    slow_chown = false
    mount_options = []

  [plugins.'io.containerd.snapshotter.v1.zfs']
    root_path = ''

  [plugins.'io.containerd.tracing.processor.v1.otlp']

  [plugins.'io.containerd.transfer.v1.local']
    max_concurrent_downloads = 3
    concurrent_layer_fetch_buffer = 0
    max_concurrent_uploaded_layers = 3
    check_platform_supported = false
    config_path = ''

[cgroup]
  path = ''

[timeouts]
  'io.containerd.timeout.bolt.open' = '0s'
  'io.containerd.timeout.cri.defercleanup' = '1m0s'
  'io.containerd.timeout.metrics.shimstats' = '2s'
  'io.containerd.timeout.shim.cleanup' = '5s'
  'io.containerd.timeout.shim.load' = '5s'
  'io.containerd.timeout.shim.shutdown' = '3s'
  'io.containerd.timeout.task.state' = '2s'

[stream_processors]
  [stream_processors.'io.containerd.ocicrypt.decoder.v1.tar']
    accepts = ['application/vnd.oci.image.layer.v1.tar+encrypted']
    returns = 'application/vnd.oci.image.layer.v1.tar'
    path = 'ctd-decoder'
    args = ['--decryption-keys-path', '/etc/containerd/ocicrypt/keys']
    env = ['OCICRYPT_KEYPROVIDER_CONFIG=/etc/containerd/ocicrypt/ocicrypt_keyprovider.conf']

  [stream_processors.'io.containerd.ocicrypt.decoder.v1.tar.gzip']
    accepts = ['application/vnd.oci.image.layer.v1.tar+gzip+encrypted']
    returns = 'application/vnd.oci.image.layer.v1.tar+gzip'
    path = 'ctd-decoder'
    args = ['--decryption-keys-path', '/etc/containerd/ocicrypt/keys']
    env = ['OCICRYPT_KEYPROVIDER_CONFIG=/etc/containerd/ocicrypt/ocicrypt_keyprovider.conf']
"""


def _handlers(handlers: Iterable[str]) -> list[str]:
    if isinstance(handlers, str):
        raise TypeError("handlers must be an iterable of names, not a single string")
    names = sorted(set(handlers))
    if any(not isinstance(n, str) or not n for n in names):
        raise ValueError(f"handler names must be non-empty strings: {names!r}")
    return names


def render_runtimes(handlers: Iterable[str], version: int = 2) -> str:
    """Only the runtime tables (as a trimmed dump would show them)."""
    if version not in (2, 3):
        raise ValueError(f"containerd config version must be 2 or 3, not {version!r}")
    render = _runtime_v2 if version == 2 else _runtime_v3
    return "".join(render(name) for name in _handlers(handlers))


def generate_dump(
    handlers: Iterable[str],
    version: int = 2,
    default_runtime: str = "runc",
    imports: Iterable[str] = (),
) -> str:
    """A full ``containerd config dump`` with one runtime table per handler.

    ``version=2`` gives the containerd 1.7 layout
    (``plugins."io.containerd.grpc.v1.cri".containerd.runtimes.*``),
    ``version=3`` the containerd 2.x one
    (``plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.*``).
    ``nvidia`` and ``nvidia-cdi`` get the toolkit's BinaryName; any other
    handler gets runc.v2 defaults. Names outside [A-Za-z0-9_-] are quoted.
    """
    if version not in (2, 3):
        raise ValueError(f"containerd config version must be 2 or 3, not {version!r}")
    template = _V2_TEMPLATE if version == 2 else _V3_TEMPLATE
    imports_toml = "[" + ", ".join(_string(i, version) for i in imports) + "]"
    return (
        template.replace("@IMPORTS@", imports_toml)
        .replace("@DEFAULT@", _string(default_runtime, version))
        .replace("@RUNTIMES@", render_runtimes(handlers, version))
    )
