"""A learner's script reaches nothing but its own read-only view: the hostile corpus of the network, the
sockets, the grader's environment and /proc, the scratch directory and huge arguments.

Every case runs a script through the grader's ``ScriptRunner`` in this machine's sandbox, beside a real lab
cluster (``gpuop_cluster``) whose etcd and API server listen on this machine's loopback; each ends as a
clean result of its own, with the cluster's objects and every file outside the scratch directory unchanged.
The cross-learner case, inside a real ``gpulab grade-batch --jobs 2``, is in ``test_confinement_batch.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_scripts import ETCD_ATTACK, PWNED, SCAN_REPORT, etcd_keys, fingerprint, objects_of

from pytest_gpulab.grading.feedback import MachineBusy
from pytest_gpulab.grading.scripts.script_runner import ScriptRunner
from pytest_gpulab.sandbox import confine as sandbox
from pytest_gpulab.sandbox.script_result import ScriptResult

SANDBOX = sandbox.probe()
pytestmark = pytest.mark.skipif(not SANDBOX.namespaces, reason=f"no sandbox here: {SANDBOX.describe()}")
SECRET = "gpulab-grader-secret-6d1f"


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    root = tmp_path / "lab"
    (root / "bin").mkdir(parents=True)
    (root / "out").mkdir()
    (root / "out" / "merge.txt").write_text("MAIN_RUNTIMES=runc\n")
    return root


@pytest.fixture
def runner(tmp_path: Path, lab: Path, gpuop_cluster) -> Iterator[ScriptRunner]:
    scripts = ScriptRunner(
        tmp_path / "work", 20.0, lambda: str(gpuop_cluster.kubeconfig), lab_root=lab, sandbox=SANDBOX
    )
    yield scripts
    scripts.close()


def bytes_under(folder: Path) -> int:
    return sum(
        (Path(root) / name).lstat().st_size for root, _, names in os.walk(folder, onerror=lambda error: None)
        for name in names
    )  # fmt: skip


def write(lab: Path, text: str) -> Path:
    script = lab / "bin" / "hostile"
    script.write_text(text)
    script.chmod(0o755)
    return script


def test_a_scan_of_every_loopback_port_finds_only_the_view_and_writes_no_etcd(runner, lab, gpuop_cluster):
    """The script scans 1-65535 on 127.0.0.1 and ::1, asks each open port for etcd's /version and puts a key
    into every etcd that answers; the lab cluster's etcd listens on this machine's loopback all along."""
    # The cluster is shared: other tests' objects come and go meanwhile, so what is compared is what the
    # attack writes (a key and a namespace named PWNED), and the view's record of the writes it refused.
    assert etcd_keys(gpuop_cluster) == []
    assert PWNED not in json.dumps(objects_of(gpuop_cluster))
    script = write(lab, ETCD_ATTACK)
    before_files = fingerprint(lab)
    result = runner.run(script, cluster=True).result
    report = json.loads(result.stdout.strip().splitlines()[-1]) if result.stdout.strip() else {}
    assert result.exit_code == 0 and not result.timed_out, result
    assert report == {**SCAN_REPORT, "open": report.get("open")}, report
    assert report["open"] == [8001], f"the script reached more than its view: {report}"
    assert etcd_keys(gpuop_cluster) == []
    assert PWNED not in json.dumps(objects_of(gpuop_cluster))
    assert ("POST", "/api/v1/namespaces") in runner.cluster_view().refused
    assert fingerprint(lab) == before_files


def test_the_script_reads_the_cluster_through_its_view_and_may_not_write(runner, lab, gpuop_cluster):
    script = write(lab, "#!/bin/sh\nkubectl get nodes -o name\nkubectl create namespace gpulab-pwned\necho rc=$?\n")
    result = runner.run(script, cluster=True).result
    assert "node/lab-node-0" in result.stdout, result
    assert result.stdout.strip().endswith("rc=1"), result
    assert "read-only" in result.stderr
    assert "gpulab-pwned" not in json.dumps(objects_of(gpuop_cluster))
    assert runner.cluster_view().refused, "the view records the refused write"


@pytest.mark.parametrize("cluster", [False, True], ids=["no-cluster", "cluster"])
def test_the_script_sees_loopback_only(runner, lab, cluster):
    script = write(
        lab,
        "#!/usr/bin/env python3\nimport socket\n"
        "print('IFACES=' + ','.join(name for _, name in socket.if_nameindex()))\n"
        "routes = open('/proc/net/route').read().splitlines()[1:]\n"
        "print('ROUTES=' + str(len(routes)))\n"
        "print('IPV6=' + ','.join(sorted({l.split()[-1] for l in open('/proc/net/if_inet6')})))\n",
    )
    result = runner.run(script, cluster=cluster).result
    assert result.stdout.splitlines() == ["IFACES=lo", "ROUTES=0", "IPV6=lo"], result


def test_unix_sockets_of_the_host_are_out_of_reach(runner, lab, tmp_path):
    """An abstract socket and a filesystem socket the grader listens on, and the host's well-known ones."""
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0{SECRET}")
    filesystem = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = tmp_path / "grader.sock"
    filesystem.bind(str(path))
    path.chmod(0o777)
    for listener in (abstract, filesystem):
        listener.listen()
    view_socket = runner.cluster_view().socket
    targets = [f"@{SECRET}", str(path), str(view_socket), "/run/podman/podman.sock", "/var/run/docker.sock",
               "/run/systemd/private", "/run/dbus/system_bus_socket"]  # fmt: skip
    script = write(
        lab,
        "#!/usr/bin/env python3\nimport socket, sys\n"
        "for target in sys.argv[1:]:\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    name = '\\0' + target[1:] if target.startswith('@') else target\n"
        "    try:\n        s.connect(name); print('REACHED', repr(target))\n"
        "    except OSError as e:\n        print('NO', e.errno)\n",
    )
    try:
        result = runner.run(script, *targets).result
    finally:
        abstract.close()
        filesystem.close()
    assert result.exit_code == 0 and "REACHED" not in result.stdout, result
    assert len(result.stdout.splitlines()) == len(targets)


def test_the_grader_s_environment_and_processes_are_not_there(runner, lab, monkeypatch):
    monkeypatch.setenv("GPULAB_TEST_SECRET", SECRET)
    script = write(
        lab,
        "#!/bin/sh\nenv\ncat /proc/1/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n'\n"
        "cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '\necho\nls /proc\n"
        f"kill -0 {os.getpid()} 2>/dev/null && echo grader-visible\ncat /etc/passwd\n",
    )
    result = runner.run(script, cluster=True).result
    assert SECRET not in result.stdout, result.stdout
    assert "grader-visible" not in result.stdout
    assert "test_confinement.py" not in result.stdout  # the grader's command line
    pids = [word for word in result.stdout.split() if word.isdigit()]
    assert str(os.getpid()) not in pids
    passwd = [line.split(":")[0] for line in result.stdout.splitlines() if line.count(":") == 6]
    assert sorted(passwd) == ["learner", "root"], passwd
    assert "KUBECONFIG=/run/gpulab/kubeconfig" in result.stdout


def test_kubectl_in_a_run_that_reads_the_cluster_collects_garbage_only_past_its_heap_limit(runner, lab, monkeypatch):
    """A run's kubectl calls are short-lived: collecting garbage is a fifth of their time and buys nothing. The
    limit bounds the heap well under the run's address space; a run that does not read the cluster is left as it was."""
    monkeypatch.setenv("GOGC", "50")  # the grader's own setting does not reach a run
    script = write(lab, "#!/bin/sh\necho GOGC=${GOGC:-unset} GOMEMLIMIT=${GOMEMLIMIT:-unset}\n")
    assert runner.run(script, cluster=True).result.stdout.split() == ["GOGC=off", "GOMEMLIMIT=512MiB"]
    assert runner.run(script).result.stdout.split() == ["GOGC=unset", "GOMEMLIMIT=unset"]
    assert sandbox.ResourceLimits().address_space_bytes >= 4 * 512 * 1024**2


def unstarved_run(runner: ScriptRunner, script: Path, attempts: int = 3) -> ScriptResult:
    """A run the machine did not starve: a starved one is run again by a new runner, as a grading graded again is
    (a runner gives a script the machine starved that error at once for its later runs)."""
    for attempt in range(1, attempts + 1):
        again = runner if attempt == 1 else ScriptRunner(
            runner.work.with_name(f"again-{attempt}"), runner.timeout, lambda: None, lab_root=runner.lab_root,
            sandbox=runner.sandbox,
        )  # fmt: skip
        try:
            return again.run(script).result
        except MachineBusy:
            if attempt == attempts:
                raise
        finally:
            if again is not runner:
                again.close()
    raise AssertionError("unreachable")


def test_filling_the_scratch_directory_stops_the_run_and_leaves_the_disk_alone(runner, lab, tmp_path):
    """Bytes until the scratch (a tmpfs of 64 MiB) says no, then empty files for ever: the run is stopped as soon as
    the scratch is full, in words that name the bound, and nothing of it stays. The limit is the run's own: the disk
    had room when the run was told it had none (other tests may write beside it)."""
    script = write(
        lab,
        "#!/bin/bash\nfor i in $(seq 1 100); do head -c 67108864 /dev/zero > big.$i || break; done\n"
        "echo BYTES=$(du -sb . | cut -f1)\n"
        'python3 -c \'import itertools\nfor i in itertools.count():\n  open("f%d" % i, "w").close()\'\n',
    )
    count = lab / "bin" / "count"
    count.write_text("#!/bin/sh\nls | wc -l\n")
    count.chmod(0o755)
    before = fingerprint(lab)
    runner.timeout = 8.0
    result = unstarved_run(runner, script)
    # It ended, and why: stopped at the bound of its blanks (not at its time limit, nor left running), and told so.
    assert not result.timed_out and result.limit is not None, result.describe()
    assert result.describe() == (
        "was stopped: it filled a folder it may write in (/tmp, its working folder or its home: 64 MiB each), "
        "where a checker writes a few small files at most"
    ), result.describe()
    assert shutil.disk_usage(tmp_path).free > 1024 * 1024 * 1024
    assert bytes_under(runner.work) < 32 * 1024 * 1024  # nothing of it stayed on the disk, where the runs live
    assert fingerprint(lab) == before
    again = runner.run(count).result
    assert again.stdout.strip() == "0", "each run starts with an empty scratch directory"


def test_a_huge_argv_or_environment_is_a_clean_failure(runner, lab):
    script = write(
        lab,
        "#!/bin/bash\nbig=$(head -c 3000000 /dev/zero | tr '\\0' x)\n"
        'export HUGE="$big"\n/bin/true && echo env-ok || echo env-refused\n'
        'unset HUGE\n/bin/echo "$big" "$big" >/dev/null && echo argv-ok || echo argv-refused\n',
    )
    result = runner.run(script).result
    assert result.stdout.splitlines() == ["env-refused", "argv-refused"], result
    assert "Argument list too long" in result.stderr


def test_the_fake_containerd_s_record_is_the_one_file_a_script_may_write(runner, lab):
    script = write(
        lab,
        "#!/bin/sh\nstate=$GPULAB_FAKE_CONTAINERD_STATE\n"
        'state=$(sed -n "s/^GPULAB_FAKE_CONTAINERD_STATE=//p" "$(command -v containerd)" | tr -d "\'")\n'
        'touch "$state/new-file" 2>/dev/null && echo created || echo refused\n'
        'echo junk > "$state/dump.toml" 2>/dev/null && echo overwrote || echo kept\n',
    )
    run = runner.run(script, dump="v2-runc-only")
    assert run.result.stdout.splitlines() == ["refused", "kept"], run.result
    assert "runc" in run.containerd.dump_file.read_text()


def test_keyrings_and_kernel_surfaces_are_refused_by_the_seccomp_filter(runner, lab):
    """A user's keyring is shared by its uid's processes: a script could read the grader's keys, or leave
    data for a later run. io_uring, bpf, perf_event_open and userfaultfd are surfaces a checker never needs."""
    script = write(
        lab,
        "#!/usr/bin/env python3\nimport ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "numbers = {'add_key': 248, 'keyctl': 250, 'io_uring_setup': 425, 'bpf': 321, 'userfaultfd': 323}\n"
        "for name, number in numbers.items():\n"
        "    done = libc.syscall(number, 0, 0, 0, 0, 0)\n"
        "    print(name, done, os.strerror(ctypes.get_errno()))\n",
    )
    if SANDBOX.filter is None:
        pytest.skip(f"no seccomp filter on this machine: {SANDBOX.describe()}")
    result = runner.run(script).result
    lines = result.stdout.splitlines()
    assert len(lines) == 5 and all(line.endswith(" -1 Operation not permitted") for line in lines), result


def test_no_script_makes_a_user_namespace_as_root_or_not(runner, lab):
    """In a user namespace of its own a script is root there, and reaches kernel code written for root: refused in
    the root grader's mode too (bubblewrap's --disable-userns covers its user-namespace mode only). Other clones
    still work: a fork, a thread."""
    script = write(
        lab,
        "#!/usr/bin/env bash\nunshare -Ur true && echo USERNS-MADE\nunshare --user --map-root-user id -u && echo MADE\n"
        "python3 -c 'import threading; t = threading.Thread(target=print, args=(\"thread ran\",)); t.start(); t.join()'\n"
        "( echo forked )\n",
    )
    if SANDBOX.filter is None:
        pytest.skip(f"no seccomp filter on this machine: {SANDBOX.describe()}")
    result = runner.run(script).result
    assert "MADE" not in result.stdout and "thread ran" in result.stdout and "forked" in result.stdout, result
    assert "Operation not permitted" in result.stderr, result


def test_a_script_writes_its_own_files_in_home_beside_a_tool_that_lives_there(runner, lab):
    """The pinned kubectl lives in the grader's ~/.cache: a script that reads the cluster finds it there, read-only,
    and may still keep files of its own in ~/.cache, as on a learner's machine (the folder is its blank's)."""
    script = write(
        lab,
        '#!/bin/sh\nmkdir -p "$HOME/.cache/mine" && echo kept >"$HOME/.cache/mine/f" && cat "$HOME/.cache/mine/f"\n'
        "kubectl version --client >/dev/null && echo kubectl-runs\n",
    )
    result = runner.run(script, cluster=True).result
    assert result.exit_code == 0 and "kept" in result.stdout and "kubectl-runs" in result.stdout, result


def test_one_run_s_processes_do_not_count_against_another_run(runner, lab):
    """Each run is a uid of its own: a run that holds nearly its whole process limit leaves another free."""
    if SANDBOX.run_uids is None:
        pytest.skip("a grader that is not root gives each run a user namespace of its own")
    hog = write(lab, "#!/bin/bash\nfor i in $(seq 1 240); do sleep 30 & done\nsleep 30\n")
    victim = lab / "bin" / "victim"
    victim.write_text("#!/bin/bash\nfor i in $(seq 1 20); do sleep 0.1 & done\nwait\necho forked\n")
    victim.chmod(0o755)
    runner.timeout = 6.0
    holding = runner.pool.submit(runner.run, hog)
    time.sleep(2)  # the hog's processes are up: this is the situation under test, not a wait for a result
    assert runner.run(victim).result.stdout == "forked\n"
    assert holding.result().result.timed_out


def test_a_root_grader_never_sandboxes_in_a_user_namespace(lab, tmp_path):
    """A user namespace made by root maps the script to the machine's root, whom the kernel trusts for
    sysctls, keyrings and process limits."""
    if os.geteuid() != 0:
        pytest.skip("the grader is not root")
    risky = sandbox.Sandbox("userns", bwrap=SANDBOX.bwrap)
    runner = ScriptRunner(tmp_path / "work", 5.0, lambda: None, lab_root=lab, sandbox=risky)
    with pytest.raises(ValueError, match="never in a user namespace"):
        runner.run(write(lab, "#!/bin/sh\necho 1 > /proc/sys/kernel/printk_ratelimit\n"))
    assert SANDBOX.mode != "userns"


def test_a_script_is_the_first_the_kernel_kills_when_memory_runs_out(runner, lab):
    result = runner.run(write(lab, "#!/bin/sh\ncat /proc/self/oom_score_adj\n")).result
    assert result.stdout == "1000\n", result


def test_the_lab_root_s_snapshot_is_bounded_and_drops_setuid_bits(tmp_path):
    """Sparse files are copied whole: forty of 63 MiB would take 2.5 GB of the grader's disk."""
    root = tmp_path / "root"
    root.mkdir()
    for index in range(40):
        with (root / f"sparse-{index:02}").open("wb") as handle:
            handle.truncate(63 * 1024 * 1024)
    (root / "setuid").write_text("#!/bin/sh\n")
    (root / "setuid").chmod(0o6755)
    copy = sandbox.snapshot(root, tmp_path / "copy")
    copied = sum(path.stat().st_size for path in copy.iterdir() if path.is_file())
    assert copied <= sandbox.SNAPSHOT_TOTAL_LIMIT
    assert (copy / "setuid").stat().st_mode & 0o7777 == 0o755


def test_a_tool_runs_but_the_rest_of_its_home_is_not_there(runner, lab, tmp_path, monkeypatch):
    """A PATH entry PREFIX/bin brings what its tools need (lib, share, ...), never a token kept beside them."""
    home = tmp_path / "toolhome"
    (home / "bin").mkdir(parents=True)
    (home / "share").mkdir()
    (home / "share" / "greeting").write_text("hello from share\n")
    (home / "credentials.toml").write_text(f"token = '{SECRET}'\n")
    tool = home / "bin" / "greet"
    tool.write_text(f"#!/bin/sh\ncat {home}/share/greeting\n")
    tool.chmod(0o755)
    for folder in (tmp_path, home, home / "bin", home / "share"):
        folder.chmod(0o755)
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{os.environ['PATH']}")
    script = write(lab, f"#!/bin/sh\ngreet\ncat {home}/credentials.toml 2>/dev/null || echo absent\n")
    result = runner.run(script).result
    assert result.stdout == "hello from share\nabsent\n", result


def test_a_run_that_reads_the_cluster_starts_its_script_as_one_that_does_not(runner, lab):
    """The forwarder in front of the script hands it what a plain run's script gets: no signal ignored or
    blocked (Python ignores SIGPIPE; a script's pipelines rely on it) and only its own descriptors."""
    # The shell reads its own status and descriptors with builtins: a grep or ls would read them while the
    # shell that started it may still hold every signal blocked (dash does around vfork) or a pipeline's pipe
    # open, until it runs again: on a busy machine, a difference that is not there.
    own_status = 'while IFS= read -r line; do case $line in Sig[IB]*) echo "$line";; esac; done < /proc/$$/status'
    own_fds = 'for fd in /proc/$$/fd/*; do echo "${fd##*/}"; done'
    script = write(lab, f"#!/bin/sh\n{own_status}\n{own_fds}\nyes | head -n 1\n")
    plain, reading = runner.run(script).result, runner.run(script, cluster=True).result
    assert plain.exit_code == 0 and "SigIgn:\t0000000000000000" in plain.stdout, plain
    assert reading.stdout == plain.stdout and reading.stderr == plain.stderr == "", reading
