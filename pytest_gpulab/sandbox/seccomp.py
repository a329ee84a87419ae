"""The seccomp filter every sandboxed script runs under, as a classic BPF program for ``bwrap --seccomp``.

It refuses, with EPERM, the system calls that reach state outliving the run or shared between sandboxes,
and kernel surfaces a shell checker never needs:

- the kernel keyrings (``keyctl``, ``add_key``, ``request_key``): a user's keyring is shared by every
  process of that uid, so a script could read the grader's keys, or leave data for another run;
- ``io_uring``, ``bpf``, ``perf_event_open`` and ``userfaultfd``: large attack surfaces;
- any system call of another ABI than the machine's own (i386 and x32 on x86_64), which would pass the
  same calls under other numbers;
- a new user namespace (``unshare`` or ``clone`` with CLONE_NEWUSER), in which a script would be root of its
  own namespace and reach kernel code written for root; ``clone3``, whose flags a filter cannot read, says
  ENOSYS, and the C library falls back to ``clone``. bubblewrap's ``--disable-userns`` does the same in the
  user-namespace mode only: this holds in both.

Only x86_64 and aarch64 are known; elsewhere :func:`program` returns None and the sandbox says so.
"""

from __future__ import annotations

import errno
import platform
import struct

# struct seccomp_data: int nr at offset 0, u32 arch at offset 4.
LOAD = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
FLAGS = 16  # offset of args[0]'s low 32 bits (little-endian)
CLONE_NEWUSER = 0x10000000
NO_SUCH_CALL = 0x00050000 | errno.ENOSYS
RETURN = 0x06  # BPF_RET | BPF_K
ALLOW = 0x7FFF0000
REFUSE = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO
X32_BIT = 0x40000000

REFUSED = ("keyctl", "add_key", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf",
           "perf_event_open", "userfaultfd")  # fmt: skip
ARCHES = {
    "x86_64": (0xC000003E, {"keyctl": 250, "add_key": 248, "request_key": 249, "io_uring_setup": 425,
                            "io_uring_enter": 426, "io_uring_register": 427, "bpf": 321, "perf_event_open": 298,
                            "userfaultfd": 323, "unshare": 272, "clone": 56, "clone3": 435}),
    "aarch64": (0xC00000B7, {"keyctl": 219, "add_key": 217, "request_key": 218, "io_uring_setup": 425,
                             "io_uring_enter": 426, "io_uring_register": 427, "bpf": 280, "perf_event_open": 241,
                             "userfaultfd": 282, "unshare": 97, "clone": 220, "clone3": 435}),
}  # fmt: skip


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture (``platform.machine()``), or None for an unknown one."""
    known = ARCHES.get(machine or platform.machine())
    if known is None:
        return None
    arch, numbers = known
    refused = [numbers[name] for name in REFUSED]
    ops = [_op(LOAD, 4), _op(JEQ, arch, jt=1), _op(RETURN, REFUSE), _op(LOAD, 0)]
    # Each test jumps, when it matches, to its target below: the final REFUSE, ENOSYS, or the look at the flags.
    tests = [(JGE, X32_BIT, "refuse")] if arch == ARCHES["x86_64"][0] else []
    tests += [(JEQ, number, "refuse") for number in refused]
    tests += [(JEQ, numbers["clone3"], "nosys"), (JEQ, numbers["unshare"], "flags"), (JEQ, numbers["clone"], "flags")]
    tail = ["allow", "refuse", "nosys", "flags"]  # the blocks after the tests, in order, one instruction each but flags
    for index, (code, k, target) in enumerate(tests):
        ops.append(_op(code, k, jt=len(tests) - index - 1 + tail.index(target)))
    ops += [_op(RETURN, ALLOW), _op(RETURN, REFUSE), _op(RETURN, NO_SUCH_CALL)]
    # flags: a new user namespace is refused, any other clone or unshare allowed.
    ops += [_op(LOAD, FLAGS), _op(JSET, CLONE_NEWUSER, jt=1), _op(RETURN, ALLOW), _op(RETURN, REFUSE)]
    return b"".join(ops)
