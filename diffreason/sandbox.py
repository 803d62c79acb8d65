"""Run untrusted Python (model-written code) in a child process, contained by the operating system.

    from diffreason.sandbox import run_python, Limits
    r = run_python("print(sum(range(10)))", timeout=5)
    r.status, r.exit_code, r.stdout, r.protections      # 'passed', 0, '45\\n', {...}

The code never runs in the calling process: `run_python` starts a launcher (this file, run as a script by the same
interpreter with `-I -S -B`), which sets the sandbox up and then execs a fresh `python -I -S -B` that installs an audit
hook and runs the code. Three levels of isolation, the best that works is taken (`isolation="auto"`), and the result
says which held (`SandboxResult.isolation`, `.protections`):

``namespaces`` (root, i.e. CAP_SYS_ADMIN: this machine and CI)
    unshare(NEWNS|NEWNET|NEWPID|NEWIPC|NEWUTS); the mount tree made private, fresh empty tmpfs over /tmp, /var/tmp,
    /run, /dev/shm, /root and /home (what the run needs below them — its working directory, the Python installation
    — is bind-mounted back), then the whole tree read-only (mount_setattr AT_RECURSIVE) except the working directory;
    the code runs as pid 2, in a session of its own, under a small init (pid 1) of a new pid namespace with its own
    /proc (so it sees no other process, and when the init or the launcher dies the kernel kills everything left in
    the namespace), as a fresh random unprivileged uid/gid (so RLIMIT_NPROC binds and counts only this run's
    processes, and the uid can neither signal nor write anything of anyone else), with no capabilities,
    no_new_privs and PR_SET_PDEATHSIG; the new IPC namespace holds no System V shared memory or message queues
    (kernel memory past the address-space limit; a user namespace cannot set those sysctls, and says so), and a
    seccomp filter (libseccomp) refuses new namespaces — a user namespace of the code's own would give it every
    capability there —, the kernel keyrings (their keys outlive the run), bpf, perf events, userfaultfd, io_uring,
    mounts and kernel modules (`protections["syscalls"]`; in every mode, where libseccomp is installed); ptys come
    from a devpts instance of the run's own, at most `PTYS` (the host's are the whole machine's).
``userns`` (an unprivileged user where user namespaces are allowed)
    the same inside a new user namespace mapped to the caller's own uid (uid 0 inside, no capabilities left:
    the bounding set is dropped before the exec); RLIMIT_NPROC counts per user namespace, so again only this run.
    Asked for as root, a helper left outside writes the map 0 -> a fresh uid (mapping root itself would need
    CAP_SETFCAP, which root lacks on this machine, and would leave RLIMIT_NPROC unbound). The attempt is made in a
    forked child, so a namespace that cannot be mapped is abandoned rather than half-entered.
``none`` (no namespaces: an unprivileged user without user namespaces, or forced)
    own session and process group, rlimits, and the audit hook alone for network, files and signals (see below);
    RLIMIT_NPROC is set to the user's current process count plus the limit (it counts all the user's processes), or
    where that cannot bind (uid 0) the audit hook's fork budget caps the process tree. Leftover processes are found
    by a per-run token in their environment and killed.

In every mode: a wall-clock timeout (SIGKILL to the launcher's process group; in the namespace modes that brings down
the whole pid namespace), rlimits in the child (RLIMIT_CPU, RLIMIT_AS, RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_CORE=0,
RLIMIT_NOFILE), a fresh temporary working directory removed afterwards, an environment of PATH, HOME=TMPDIR=the
working directory, LANG/LC_ALL=C.UTF-8 and the run token only (no proxies, no secrets; `-I` ignores every PYTHON*
variable and `-S` skips site-packages — the standard library imports as usual), stdout/stderr read concurrently and
capped (the rest is drained and dropped, `stdout_truncated`), and the audit hook, defense in depth over the OS layer
(and the only layer in ``none``): it refuses sockets other than AF_UNIX socketpairs, name lookups, connect/bind/send
to addresses, os.kill/os.killpg outside the process's own process group (and kill(-1)), opening for writing, creating,
renaming, removing, chmod/chown/utime of paths outside the working directory (realpath, so symlinks are followed),
os.open for writing with a relative path (its dir_fd is invisible to the hook), exec/spawn/system/subprocess (a new
interpreter would not carry the hook), ctypes and the modules that bypass the audited APIs (_ctypes, readline's
history files), the gc introspection that could reach the hook, replacing the code or defaults of the hook's helpers,
changing the mode, owner, times or attributes of a file through a descriptor, prlimit of other processes and sqlite
databases outside the working directory (a path relative to a directory descriptor is judged where that directory is);
where RLIMIT_NPROC cannot bind it also allows each process only `fork_budget` minus its inherited count of os.fork
calls, which bounds the whole process tree at 2**fork_budget. Calls that reach outside or start a process without
raising an audit event (mkfifo, mknod, pidfd, memfd, scheduling and clock setters, setpgid/setsid,
_posixsubprocess.fork_exec) are taken out of their modules and of os's tables of them. The hook decides from C calls
and str methods only, with everything it reads bound as default arguments (no module global, builtin or Python-level
function a program could patch, no closure cell to rewrite), so what a refusal's traceback shows of it cannot be
turned against it. An audit hook is still not a security boundary by itself: a program written against it can rebuild
a module from its spec (`importlib.util.module_from_spec`), race a path between the hook's check and the open
(renaming symlinked directories), and C code gets past it. It is the second wall; in ``none`` it is the only one,
which holds code that is not written to escape it, not code that is. The OS layer works without it
(`audit_hook=False`, tested in the namespace modes).

Not bounded: the total a run writes into its working directory (each file is capped by `file_size_mb`; the directory
lives in the host's temporary folder, with no quota) and what it reads — the file system minus the hidden folders.

The verdict (`run_python(verdict=...)`): "exit" passes exit status 0; "end" and "last" pass only a program that ran
to its end (the guard then writes a token drawn per run to a pipe of its own and exits with a status drawn per run
from 121, both handed to it — and to the launcher, whose fork is pid 1 — through a pipe read and closed, not on a
command line; a program that exits with that status itself wrote no token), so an `os._exit(0)`, an early
`SystemExit` or an exit hook does not pass a test program ("end" takes `SystemExit(0)`, as `unittest.main()` ends,
"last" does not). The code shares its process with the checks, so a program written to forge a pass still can (the
guard's own frame is one `sys._getframe` away; in human-eval-infilling the same program could append to the
evaluator's result list): the verdict is sound for code that is not written against the harness, as a model's fills
are not.

What was compared (at hand here: /usr/bin/unshare, prlimit, setpriv, systemd-run; in Debian's archive: bubblewrap,
firejail; not packaged: nsjail; on PyPI: pyseccomp, which needs libseccomp and only filters syscalls):

* bubblewrap (bwrap) builds this kind of view (ro binds, tmpfs, user/pid/net namespaces) and is maintained, but it is
  a system package that is not installed here nor declared by the project (`pip install` cannot bring it), and CI runs
  on a fresh machine from the project's files; as root without user namespaces it needs setuid mode. nsjail is not
  packaged for Debian 12; firejail is a setuid-root binary with a large profile language (more attack surface than
  this needs).
* systemd-run (transient scopes with cgroup pids/memory limits) needs systemd as pid 1 and a bus: neither here.
* util-linux `unshare -n -p -f --mount-proc`, `setpriv`, `prlimit` are here and cover the namespace, uid and limit
  steps, but chaining three or four execs per run costs more than the run itself (each HumanEval check is ~30 ms of
  Python), `unshare --map-user` differs across util-linux versions, the read-only view with a writable hole and the
  re-exposed Python prefix cannot be said in their options, and a failed step is an opaque exit code, not a report.
* human-eval-infilling's `execution.py` runs the program in a multiprocessing child of the evaluator with
  `reliability_guard()`, which sets RLIMIT_AS/DATA/STACK and replaces os.kill, os.system, shutil.rmtree, subprocess.
  Popen, ... by None in-process: no network isolation, no process or file-system isolation, a child that shares the
  evaluator's uid, files and sockets, and guards the code can undo (`import posix`).

So the launcher does the same steps itself with the kernel's interfaces (ctypes: unshare, mount, open_tree/
move_mount, mount_setattr, prctl; os: setres[ug]id, fork, exec; resource: rlimits): stdlib only, one extra Python
start per run (a whole run of a small program takes ~0.1 s here), each step tried and reported, the same code as
root (CI) and as a user (user namespaces),
and a clear report of what held where a step is refused. No cgroups: the machine's cgroup tree is not ours to edit,
so the total memory of a run is bounded by nproc x address space (plus open files x file size in the working
directory), not by one cap (keep them small).
"""

from __future__ import annotations

import json
import os
import sys

# ---------------------------------------------------------------------------------------------------------------------
# The launcher: runs in the child (this file as a script), before the untrusted code. Stdlib only, imported lazily,
# so that the start stays short; everything the parent needs comes after the `__main__` check below.
# ---------------------------------------------------------------------------------------------------------------------

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 4096, 8192, 16384, 1 << 18
MNT_DETACH = 2
AT_FDCWD, AT_EMPTY_PATH, AT_RECURSIVE = -100, 0x1000, 0x8000
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, 0o2000000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_RDONLY = 0x1
# Syscall numbers from 424 on are the same on every architecture Linux has (alpha aside).
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
PR_SET_CHILD_SUBREAPER = 36
MEMORY_EXIT = 86  # the guard's exit status for an uncaught MemoryError
SETUP_EXIT = 87  # the launcher's exit status when it could not start the code (reported on the status pipe)
HIDDEN_DIRS = ("/tmp", "/var/tmp", "/run", "/dev/shm", "/root", "/home")
PTYS = 8  # ptys a run may hold (namespace modes: a devpts instance of its own)
# What the code may not call (the launcher's seccomp filter): EPERM, as if it lacked the privilege
DENIED_SYSCALLS = ("unshare", "setns", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
                   "io_uring_setup", "io_uring_enter", "io_uring_register", "mount", "umount2", "pivot_root",
                   "fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount", "mount_setattr",
                   "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module")
CLONE_NEWCGROUP, CLONE_NEWTIME = 0x02000000, 0x00000080
NAMESPACE_FLAGS = (CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
                   CLONE_NEWTIME)

# The guard: the first code of the final interpreter (passed with -c). It installs the audit hook, replaces
# __main__ by a fresh module and runs the program file in it. argv: [-c, the descriptor its config json is read from,
# program path].
GUARD = r'''
import sys, os, json, types
def _install(cfg):
    # Everything the hook reads is bound as a default argument: no module global, no builtin and no Python-level
    # function another module could patch is consulted while it decides (it calls C functions and str methods only),
    # no closure cell could be rewritten, and no mutable table could be emptied.
    import posix, itertools, signal, _signal

    def realpath(path, lstat=posix.lstat, readlink=posix.readlink, getcwd=posix.getcwd, OSError=OSError):
        # os.path.realpath from C calls only; a missing component is taken as it is. A relative path starts from
        # the working directory, which getcwd gives with its links resolved.
        done = "" if path.startswith("/") else getcwd().rstrip("/")
        todo, links = path.split("/")[::-1], 0
        while todo:
            part = todo.pop()
            if part == "" or part == ".":
                continue
            if part == "..":
                done = done[:done.rfind("/")]
                continue
            step = done + "/" + part
            try:
                mode = lstat(step).st_mode
            except OSError:
                done = step
                continue
            if mode & 0o170000 != 0o120000 or links >= 40:
                done = step
                continue
            links += 1
            target = readlink(step)
            if target.startswith("/"):
                done = ""
            todo.extend(target.split("/")[::-1])
        return done or "/"

    wd = realpath(cfg["workdir"])

    def inside(path, allow_devices=True, dir_fd=None, fd_ok=True, wd=wd, sub=wd + "/", realpath=realpath,
               readlink=posix.readlink, type=type, str=str, bytes=bytes, int=int, repr=repr, OSError=OSError,
               devices=frozenset(("/dev/null", "/dev/zero", "/dev/full", "/dev/stdout", "/dev/stderr", "/dev/tty"))):
        kind = type(path)
        if kind is int:  # an open descriptor: what it names was checked if it was opened for writing
            return fd_ok
        if kind is bytes:
            path = path.decode("utf-8", "surrogateescape")
        elif kind is not str:  # (the audited calls pass str / bytes; anything else is refused)
            return False
        if allow_devices and path in devices:
            return True
        if dir_fd is not None and not path.startswith("/"):  # relative to an open directory: where that is
            try:
                base = readlink("/proc/self/fd/" + repr(dir_fd))
            except OSError:
                return False
            if not base.startswith("/"):
                return False
            path = base + "/" + path
        p = realpath(path)
        return p == wd or p.startswith(sub) or (allow_devices and p in devices)

    budget = cfg.get("fork_budget")
    # event -> indices of path arguments that get written/changed, indices of dir_fd arguments
    path_events = (
        ("os.rename", (0, 1), (2, 3)), ("os.remove", (0,), (1,)), ("os.rmdir", (0,), (1,)),
        ("os.mkdir", (0,), (2,)), ("os.link", (0, 1), (2, 3)), ("os.symlink", (1,), (2,)),
        ("os.truncate", (0,), ()), ("os.chmod", (0,), (2,)), ("os.chown", (0,), (3,)),
        ("os.utime", (0,), (3,)), ("os.chflags", (0,), ()), ("os.lchflags", (0,), ()),
        ("os.lchmod", (0,), ()), ("os.setxattr", (0,), ()), ("os.removexattr", (0,), ()),
        ("shutil.rmtree", (0,), ()),
    )

    def hook(event, args, inside=inside, realpath=realpath, type=type, str=str, bytes=bytes, int=int, len=len,
             repr=repr, next=next, PermissionError=PermissionError, BlockingIOError=BlockingIOError, OSError=OSError,
             ImportError=ImportError,
             getpgid=posix.getpgid, getpgrp=posix.getpgrp, getpid=posix.getpid,
             WRITE=os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC, AF_UNIX=1,
             budget=budget, forks=itertools.count(1),
             refused_events=frozenset((
                 "os.exec", "os.posix_spawn", "os.spawn", "os.system", "subprocess.Popen", "os.startfile",
                 "pty.spawn", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "socket.getaddrinfo",
                 "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo", "socket.sethostname",
                 "os.forkpty", "os.chroot",
             )),
             # (readline writes its history files without an audit event)
             refused_modules=frozenset(("_ctypes", "ctypes", "_xxsubinterpreters", "_testcapi", "_testinternalcapi",
                                        "readline")),
             metadata_events=frozenset(("os.chmod", "os.chown", "os.utime", "os.chflags", "os.setxattr",
                                        "os.removexattr")),
             code_attrs=frozenset(("__code__", "__defaults__", "__kwdefaults__")),
             path_events=path_events, path_event_names=frozenset(name for name, _, _ in path_events)):
        if event == "open":
            path, mode, flags = args
            if path is None:
                return
            writing = type(flags) is int and flags & WRITE != 0
            if type(mode) is str:
                writing = writing or "w" in mode or "a" in mode or "x" in mode or "+" in mode
            if writing:
                if mode is None and type(path) is not int and not (
                        (type(path) is str and path.startswith("/"))
                        or (type(path) is bytes and path.startswith(b"/"))):
                    raise PermissionError("sandbox: os.open for writing with a relative path is not allowed")
                if not inside(path):
                    raise PermissionError("sandbox: writing " + repr(path) + " is not allowed")
            return
        for name, paths, dirfds in path_events if event in path_event_names else ():  # (most events are none)
            if event == name:
                for k, i in enumerate(paths):
                    if i >= len(args) or args[i] is None:
                        continue
                    fd = args[dirfds[k]] if k < len(dirfds) and dirfds[k] < len(args) else None
                    if fd == -1 or fd == -100:
                        fd = None
                    if type(fd) is not int and fd is not None:
                        raise PermissionError("sandbox: " + event + " with dir_fd " + repr(fd) + " is not allowed")
                    # (a descriptor opened to read may name anything: no metadata is changed through one)
                    if not inside(args[i], False, fd, event not in metadata_events):
                        raise PermissionError("sandbox: " + event + " of " + repr(args[i]) + " is not allowed")
                return
        if event == "os.kill":
            pid = args[0]
            if pid == 0 or pid == getpid():
                return
            if pid == -1:
                raise PermissionError("sandbox: kill(-1) is not allowed")
            if pid < -1:
                if -pid != getpgrp():
                    raise PermissionError("sandbox: signalling process group " + repr(-pid) + " is not allowed")
                return
            try:
                same = getpgid(pid) == getpgrp()
            except OSError:
                same = False
            if not same:
                raise PermissionError("sandbox: signalling pid " + repr(pid) + " outside the sandbox's process "
                                      "group is not allowed")
        elif event == "os.killpg":
            if args[0] != 0 and args[0] != getpgrp():
                raise PermissionError("sandbox: signalling process group " + repr(args[0]) + " is not allowed")
        elif event == "os.fork":
            if budget is not None and next(forks) > budget:
                raise BlockingIOError(11, "sandbox: fork budget spent")
        elif event == "socket.__new__":
            if args[1] != AF_UNIX:
                raise PermissionError("sandbox: a network socket is not allowed")
        elif event == "socket.connect" or event == "socket.bind" or event == "socket.sendto" or \
                event == "socket.sendmsg":
            addr = args[1]
            if addr is None and (event == "socket.sendto" or event == "socket.sendmsg"):
                return  # (a connected socket: an AF_UNIX one, whose connect was checked, or a socketpair)
            if (type(addr) is not str and type(addr) is not bytes) or not addr or not inside(addr, False):
                raise PermissionError("sandbox: " + event + " to " + repr(addr) + " is not allowed")
        elif event == "import":
            if type(args[0]) is not str or args[0] in refused_modules:  # (as missing: `except ImportError` goes on)
                raise ImportError("sandbox: importing " + repr(args[0]) + " is not allowed")
        elif event == "object.__setattr__" or event == "object.__delattr__":
            if type(args[1]) is str and args[1] in code_attrs and (args[0] is inside or args[0] is realpath):
                raise PermissionError("sandbox: replacing a function's " + args[1] + " is not allowed")
        elif event == "resource.prlimit":
            if args[0] != 0 and args[0] != getpid():
                raise PermissionError("sandbox: prlimit of another process is not allowed")
        elif event == "sqlite3.connect":
            db = args[0]
            in_memory = type(db) is str and (db == ":memory:" or db == "")
            a_path = ((type(db) is str and not db.startswith("file:"))  # (a file: URI is not a path to judge)
                      or (type(db) is bytes and not db.startswith(b"file:")))
            if not in_memory and not (a_path and inside(db, False)):
                raise PermissionError("sandbox: a database at " + repr(db) + " is not allowed")
        elif event.startswith("ctypes.") or event in refused_events:
            raise PermissionError("sandbox: " + event + " is not allowed")

    sys.addaudithook(hook)
    # Calls that raise no audit event and reach outside (or start a process): gone from their modules and from os's
    # tables of them (a program written against the sandbox could rebuild a module; the OS layer is the wall, this
    # is the second one).
    import _posixsubprocess
    import subprocess  # (imported first: it binds fork_exec at import, and the code may import it, as asyncio does)
    unaudited = ("mkfifo", "mknod", "pidfd_open", "memfd_create", "setpriority", "sched_setaffinity",
                 "sched_setscheduler", "sched_setparam", "clock_settime", "clock_settime_ns", "setpgid", "setsid",
                 "pidfd_send_signal", "fork_exec")
    for module in (os, posix, signal, _signal, _posixsubprocess):
        for name in unaudited:
            if hasattr(module, name):
                delattr(module, name)
    del subprocess._fork_exec
    for table in (os.supports_dir_fd, os.supports_fd, os.supports_follow_symlinks, os.supports_effective_ids):
        for f in list(table):
            if getattr(f, "__name__", None) in unaudited:
                table.discard(f)

with os.fdopen(int(sys.argv[1]), "rb") as f:
    cfg = json.loads(f.read())
path = sys.argv[2]
with open(path, "rb") as f:
    source = f.read()
if cfg.get("audit_hook", True):
    _install(cfg)
del _install
main = types.ModuleType("__main__")
main.__file__ = path
main.__builtins__ = __builtins__
sys.modules["__main__"] = main
sys.argv = [path]
verdict, ended, SystemExit_ = cfg.get("verdict", "exit"), cfg.get("ended_status"), SystemExit
end_fd, end_token, write_ = cfg.get("end_fd"), cfg.get("end_token", "").encode(), os.write
try:
    exec(compile(source, path, "exec"), main.__dict__)
except MemoryError:
    try:
        sys.stdout.flush()
    finally:
        sys.__excepthook__(*sys.exc_info())
        sys.stderr.flush()
        os._exit(86)
except SystemExit as e:
    if verdict == "end" and e.code in (None, 0):
        write_(end_fd, end_token)
        raise SystemExit_(ended)
    raise
if verdict != "exit":
    write_(end_fd, end_token)
    raise SystemExit_(ended)
'''


class _SetupError(Exception):
    pass


def _launch(cfg: dict) -> int:
    """The launcher's work: namespaces, the mount view, a pid-1 child, uid and limits, then exec of the guard."""
    import ctypes
    import resource
    import select  # noqa: F401 - imported here: pid 1 may no longer reach the standard library by the time it needs it
    import signal

    status_fd, end_fd = cfg["status_fd"], cfg["end_fd"]
    os.set_inheritable(status_fd, False)
    if end_fd is not None:
        os.set_inheritable(end_fd, False)  # until the guard's exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    if hasattr(libc, "prctl"):  # Linux; elsewhere the namespace steps fail cleanly and "none" is what holds
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    else:
        libc.prctl = lambda *args: -1
    prot: dict[str, str] = {}
    workdir = os.path.realpath(cfg["workdir"])

    def report(**kw):
        try:
            os.write(status_fd, (json.dumps(kw) + "\n").encode())
        except OSError:
            pass

    def check(ret, what):
        if ret < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")
        return ret

    def unshare(flags):
        if not hasattr(libc, "unshare"):
            raise OSError(38, "unshare: not available on this system")
        check(libc.unshare(ctypes.c_int(flags)), "unshare")

    def mount(src, dst, fstype, flags, data=None):
        enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
        check(libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {dst}")

    def open_tree(path):
        """A detached recursive bind of `path`."""
        return check(libc.syscall(SYS_OPEN_TREE, ctypes.c_int(AT_FDCWD), os.fsencode(path),
                                  ctypes.c_uint(OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE)), "open_tree")

    def move_mount(fd, dst):
        check(libc.syscall(SYS_MOVE_MOUNT, ctypes.c_int(fd), b"", ctypes.c_int(AT_FDCWD), os.fsencode(dst),
                           ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH)), f"move_mount {dst}")

    def mount_setattr(path, flags, attr_set, attr_clr):
        attr = (ctypes.c_uint64 * 4)(attr_set, attr_clr, 0, 0)
        check(libc.syscall(SYS_MOUNT_SETATTR, ctypes.c_int(AT_FDCWD), os.fsencode(path), ctypes.c_uint(flags),
                           ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))), f"mount_setattr {path}")

    def write_file(path, text):
        with open(path, "w") as f:
            f.write(text)

    def under(path, top):
        return path == top or path.startswith(top.rstrip("/") + "/")

    def add_error(what, e):
        prot["view_errors"] = prot.get("view_errors", "") + f"{what}: {e}; "

    def build_view(become=None):
        """Private mount tree; tmpfs over HIDDEN_DIRS with what the run needs bound back; all read-only but the
        working directory. The binds are taken first, with the caller's own file rights; then `become()` (the
        switch to the namespace's uid 0, whose files a new tmpfs can hold); then the mounts."""
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        needed = [workdir] + [os.path.realpath(p) for p in cfg["expose"]]
        plans = []
        for top in HIDDEN_DIRS:
            if not os.path.isdir(top) or os.path.islink(top):
                continue
            top = os.path.realpath(top)
            if any(under(top, n) for n in needed):  # something needed is this dir or contains it
                continue
            keep = sorted({n for n in needed if under(n, top)})
            keep = [k for k in keep if not any(k != o and under(k, o) for o in keep)]  # outermost only
            clones = []
            try:
                for k in keep:
                    clones.append((k, open_tree(k)))
            except OSError as e:
                for _, fd in clones:
                    os.close(fd)
                add_error(top, e)
                continue
            plans.append((top, clones))
        if become is not None:
            become()
        hidden = []
        for top, clones in plans:
            try:
                mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096")
            except OSError as e:
                add_error(top, e)
                continue
            try:
                for k, fd in clones:
                    os.makedirs(k, mode=0o755, exist_ok=True)
                    move_mount(fd, k)
            except OSError as e:
                libc.umount2(os.fsencode(top), MNT_DETACH)  # back to the host's view of this directory
                add_error(top, e)
                continue
            finally:
                for _, fd in clones:
                    os.close(fd)
            hidden.append(top)
        if not any(under(workdir, h) for h in hidden):  # make the working directory a mount of its own
            mount(workdir, workdir, None, MS_BIND | MS_REC)
        if os.path.isdir("/dev/pts"):  # ptys of a devpts instance of the run's own, a few at most: the host's
            try:  # were the code's to take (QA, 2026-12-07: 40 held, of the host's 4,096)
                mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                      f"newinstance,ptmxmode=0666,mode=0620,max={PTYS}")
                try:
                    mount("/dev/pts/ptmx", "/dev/ptmx", None, MS_BIND)
                except OSError:
                    libc.umount2(b"/dev/pts", MNT_DETACH)
                    raise
                prot["ptys"] = f"a devpts instance of its own, at most {PTYS} ptys"
            except OSError as e:
                add_error("/dev/pts", e)
        mount_setattr("/", AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0)
        mount_setattr(workdir, 0, 0, MOUNT_ATTR_RDONLY)
        prot["filesystem"] = "read-only view (mount namespace), writable working directory only"
        prot["hidden"] = ", ".join(hidden) if hidden else "none"

    def limit_ipc():
        """No System V shared memory or message queues in the new IPC namespace (its sysctls are its own): their
        memory is the kernel's, past the address-space limit (QA, 2026-12-07: 2 GiB held in detached segments)."""
        failed = []
        for name in ("shmmax", "shmall", "shmmni", "msgmni"):
            try:
                write_file(f"/proc/sys/kernel/{name}", "0")
            except OSError:
                failed.append(name)
        if failed:
            return f"new IPC namespace; could not set {', '.join(failed)} to 0"
        return "new IPC namespace without System V shared memory or message queues"

    def deny_syscalls():
        """A seccomp filter (libseccomp, through ctypes) refusing with EPERM what no test needs and what reaches the
        kernel past the run's uid and limits: new namespaces (unshare, setns, clone with a CLONE_NEW* flag; clone3,
        whose flags a filter cannot read, is ENOSYS, so the C library falls back to clone) — a user namespace of its
        own gave the code every capability there and a fresh IPC namespace's System V memory (QA, 2026-12-07) —,
        the kernel keyrings (keys outlive the run), bpf, perf events, userfaultfd, io_uring, mounts and modules.
        Other ABIs of the machine (i386 on x86-64) are killed. Returns what holds, for `protections`."""
        try:
            lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
        except OSError:
            return "off (libseccomp.so.2 not found)"

        class ArgCmp(ctypes.Structure):  # struct scmp_arg_cmp
            _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                        ("datum_b", ctypes.c_uint64)]

        lib.seccomp_init.restype, lib.seccomp_init.argtypes = ctypes.c_void_p, [ctypes.c_uint32]
        lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                               ctypes.POINTER(ArgCmp)]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_load.argtypes = lib.seccomp_release.argtypes = [ctypes.c_void_p]
        allow, eperm, enosys, masked_eq = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38, 7
        ctx = lib.seccomp_init(allow)
        if not ctx:
            return "off (seccomp_init failed)"
        try:
            rules = [(name, eperm, None) for name in DENIED_SYSCALLS] + [("clone3", enosys, None)]
            rules += [("clone", eperm, flag) for flag in NAMESPACE_FLAGS]
            for name, action, flag in rules:
                number = lib.seccomp_syscall_resolve_name(name.encode())
                if number < 0:  # (not on this architecture)
                    continue
                args = (ArgCmp * 1)(ArgCmp(0, masked_eq, flag, flag)) if flag is not None else None
                if lib.seccomp_rule_add_array(ctx, action, number, 1 if args else 0, args) < 0:
                    return f"off (seccomp_rule_add for {name} failed)"
            if lib.seccomp_load(ctx) < 0:
                return "off (seccomp_load failed)"
        finally:
            lib.seccomp_release(ctx)
        return "seccomp: no new namespaces, keyrings, bpf, perf events, userfaultfd, io_uring, mounts or modules"

    def become_ns_root():
        # uid/gid 0 of the user namespace, i.e. the mapped outer uid; until now this process kept its outer uid,
        # which let the binds above be taken with the caller's own file rights. Capabilities in the namespace stay.
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)

    def drop_bounding_set():
        try:
            last = int(open("/proc/sys/kernel/cap_last_cap").read())
        except OSError:
            last = 40
        for cap in range(last + 1):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)

    def count_user_processes(uid):
        n = 0
        for name in (os.listdir("/proc") if os.path.isdir("/proc") else []):
            if name.isdigit():
                try:
                    if os.stat(f"/proc/{name}").st_uid == uid:
                        n += 1
                except OSError:
                    pass
        return n

    def python_reachable_by_others(paths):
        for p in paths:
            p = os.path.realpath(p)
            parts = p.split("/")
            for i in range(2, len(parts) + 1):
                d = "/".join(parts[:i]) or "/"
                try:
                    st = os.stat(d)
                except OSError:
                    return False
                need = 0o005 if os.path.isdir(d) else 0o004
                if st.st_mode & need != need:
                    return False
        return True

    lim = cfg["limits"]
    want = cfg["isolation"]
    euid = os.geteuid()
    uid = os.getuid()
    if euid == 0 and cfg.get("run_uid"):  # the uid the code may run as owns the working directory
        for root, dirs, names in os.walk(workdir):
            for n in [root] + [os.path.join(root, x) for x in dirs + names]:
                os.lchown(n, cfg["run_uid"], cfg["run_uid"])
    egid = os.getegid()
    mode = "none"
    userns_outer = cfg["run_uid"] if euid == 0 and cfg.get("run_uid") else euid
    ns = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS

    def enter_userns():
        if userns_outer != euid:
            # root: a helper left in the parent namespace maps uid/gid 0 inside to a fresh uid outside (a map to
            # root would leave RLIMIT_NPROC unbound, and needs CAP_SETFCAP besides)
            to_helper_r, to_helper_w = os.pipe()
            from_helper_r, from_helper_w = os.pipe()
            helper = os.fork()
            if helper == 0:
                os.close(to_helper_w)
                os.close(from_helper_r)
                ok = b"0"
                try:
                    if os.read(to_helper_r, 1) == b"1":
                        target = f"/proc/{os.getppid()}"
                        write_file(f"{target}/setgroups", "deny")
                        write_file(f"{target}/uid_map", f"0 {userns_outer} 1")
                        write_file(f"{target}/gid_map", f"0 {userns_outer} 1")
                        ok = b"1"
                finally:
                    os.write(from_helper_w, ok)
                    os._exit(0)
            os.close(to_helper_r)
            os.close(from_helper_w)
            try:
                unshare(CLONE_NEWUSER | ns)
                os.write(to_helper_w, b"1")
            except OSError:
                os.write(to_helper_w, b"0")
                raise
            finally:
                os.close(to_helper_w)
                answer = os.read(from_helper_r, 1)
                os.close(from_helper_r)
                os.waitpid(helper, 0)
            if answer != b"1":
                raise OSError(1, "the helper could not write the uid/gid map")
        else:
            unshare(CLONE_NEWUSER | ns)
            write_file("/proc/self/setgroups", "deny")
            write_file("/proc/self/uid_map", f"0 {euid} 1")
            write_file("/proc/self/gid_map", f"0 {egid} 1")

    attempts = {"auto": ["namespaces", "userns"] if euid == 0 else ["userns"],
                "namespaces": ["namespaces"], "userns": ["userns"], "none": []}[want]
    errors = []
    for m in attempts:
        try:
            if m == "namespaces":
                if euid != 0:
                    raise OSError(1, "not root")
                unshare(ns)  # all or nothing
            else:
                # A half-made user namespace (entered, not mapped) cannot be left: try in a child, which goes on as
                # the launcher when it worked; this process then only waits for it.
                err_r, err_w = os.pipe()
                child = os.fork()
                if child == 0:
                    os.close(err_r)
                    try:
                        enter_userns()
                    except OSError as e:
                        os.write(err_w, (str(e) or "failed").encode())
                        os._exit(SETUP_EXIT)
                    os.close(err_w)
                else:
                    os.close(err_w)
                    msg = b""
                    while chunk := os.read(err_r, 4096):
                        msg += chunk
                    os.close(err_r)
                    if msg:
                        os.waitpid(child, 0)
                        raise OSError(1, msg.decode(errors="replace"))
                    while True:
                        try:
                            os.waitpid(child, 0)
                            break
                        except InterruptedError:
                            continue
                    os._exit(0)
            mode = m
            break
        except OSError as e:
            errors.append(f"{m}: {e}")
    if errors:
        prot["isolation_errors"] = "; ".join(errors)
    prot["isolation"] = mode

    if mode != "none":
        prot["ipc"] = limit_ipc()
        prot["network"] = "new network namespace (no interfaces up)"
        prot["pids"] = "new pid namespace (the code is pid 2 under a small init; the namespace dies with either)"
        try:
            build_view(become_ns_root if mode == "userns" else None)
        except OSError as e:
            prot["filesystem"] = f"host view (mount setup failed: {e}); audit hook only"
        if mode == "userns" and os.getuid() != 0:
            become_ns_root()
    else:
        prot["network"] = "audit hook only"
        prot["pids"] = "own session and process group; leftovers killed by run token"
        prot["filesystem"] = "audit hook only"

    # Who runs the code, and does RLIMIT_NPROC bind?
    run_uid = run_gid = None
    nproc_binds = False
    if mode == "namespaces":
        run_uid, run_gid = cfg["run_uid"], cfg["run_uid"]
        nproc_binds = True
        prot["uid"] = f"fresh unprivileged uid/gid {run_uid}, no capabilities"
    elif mode == "userns":
        nproc_binds = userns_outer != 0
        prot["uid"] = (f"uid 0 inside a user namespace mapped to uid {userns_outer} outside, "
                       f"capability bounding set empty")
    else:
        if euid == 0 and cfg.get("run_uid") and python_reachable_by_others(cfg["expose"]):
            run_uid, run_gid = cfg["run_uid"], cfg["run_uid"]
            nproc_binds = True
            prot["uid"] = f"fresh unprivileged uid/gid {run_uid}"
        else:
            nproc_binds = uid != 0
            prot["uid"] = f"unchanged ({uid})"

    nproc = int(lim["nproc"])
    if mode == "none" and run_uid is None and nproc_binds:
        nproc += count_user_processes(uid)  # the count is of all this user's processes
    elif mode == "userns":
        nproc += 2  # the launcher and pid 1 are in the namespace's count
    fork_budget = None
    if nproc_binds:
        prot["nproc"] = f"RLIMIT_NPROC {nproc}"
    else:
        fork_budget = int(lim["fork_budget"])
        prot["nproc"] = (f"RLIMIT_NPROC cannot bind uid 0; audit-hook fork budget {fork_budget} "
                         f"(at most {2 ** fork_budget} processes)")
    guard_cfg = {"workdir": workdir, "fork_budget": fork_budget, "audit_hook": cfg["audit_hook"],
                 "verdict": cfg["verdict"], "ended_status": cfg["ended_status"], "end_fd": cfg["end_fd"],
                 "end_token": cfg["end_token"]}
    prot["audit_hook"] = "on" if cfg["audit_hook"] else "off"

    def final_exec(lifeline_r=None):
        """In the process that becomes the code: drop privileges, set limits, exec the guard. Never returns."""
        try:
            if run_uid is not None:
                os.setgroups([])
                os.setresgid(run_gid, run_gid, run_gid)
                os.setresuid(run_uid, run_uid, run_uid)
            if mode == "userns":
                drop_bounding_set()
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            prot["syscalls"] = deny_syscalls()
            if mode != "none":
                libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # after the uid change, which clears it
                if lifeline_r is not None:
                    if select.select([lifeline_r], [], [], 0)[0]:  # the launcher is already gone
                        os._exit(SETUP_EXIT)
            cpu = int(lim["cpu_s"])
            mem = int(lim["memory_mb"]) * 1024 * 1024
            for res, soft, hard in (
                (resource.RLIMIT_CPU, cpu, cpu + 1),
                (resource.RLIMIT_AS, mem, mem),
                (resource.RLIMIT_NPROC, nproc, nproc),
                (resource.RLIMIT_FSIZE, int(lim["file_size_mb"]) * 1024 * 1024,
                 int(lim["file_size_mb"]) * 1024 * 1024),
                (resource.RLIMIT_CORE, 0, 0),
                (resource.RLIMIT_NOFILE, int(lim["open_files"]), int(lim["open_files"])),
            ):
                resource.setrlimit(res, (soft, hard))
            os.chdir(workdir)
            # the guard's configuration (the verdict's status among it) goes through a pipe the guard reads and
            # closes, not its argv (/proc/self/cmdline, sys.orig_argv)
            cfg_r, cfg_w = os.pipe()
            os.write(cfg_w, json.dumps(guard_cfg).encode())
            os.close(cfg_w)
            os.set_inheritable(cfg_r, True)
            if cfg["end_fd"] is not None:
                os.set_inheritable(cfg["end_fd"], True)
            argv = [cfg["python"], "-I", "-S", "-B", "-X", "utf8", "-c", GUARD, str(cfg_r), cfg["program"]]
            report(ready=True, protections=prot)
            os.execv(cfg["python"], argv)
        except BaseException as e:  # noqa: BLE001 - report any failure to start, then leave
            tb = e.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            where = getattr(e, "filename", None) or f"launcher line {tb.tb_lineno}"
            report(error=f"{type(e).__name__}: {e}" + (f" ({where})" if where and str(where) not in str(e) else ""))
        os._exit(SETUP_EXIT)

    if mode == "none":
        # the code is this process: it is the session leader the parent kills on timeout
        final_exec()

    # pid 1 of the new pid namespace is a small init (this code, forked): it mounts the namespace's /proc, forks the
    # code as pid 2 in a session of its own, reaps orphans, reports how the code ended and exits, which makes the
    # kernel kill whatever is left in the namespace. The code gets ordinary signal semantics (pid 1 would ignore
    # its own fatal signals), and a kill(0) from it reaches its own process group only.
    lifeline_r, lifeline_w = os.pipe()
    init = os.fork()
    if init == 0:
        try:
            # The kernel drops signals a namespace's init has no handler for when they come from inside it: with
            # Python's own SIGINT handler gone, the code (same uid in "userns") cannot interrupt its init.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.close(lifeline_w)
            libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # the launcher killed (timeout) -> init killed -> all killed
            if select.select([lifeline_r], [], [], 0)[0]:
                os._exit(SETUP_EXIT)
            try:
                mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
                prot["proc"] = "private /proc of the pid namespace"
            except OSError as e:
                prot["proc"] = f"host /proc ({e})"
            code_pid = os.fork()
            if code_pid == 0:
                os.setsid()
                final_exec(lifeline_r)
            while True:
                try:
                    pid, st = os.waitpid(-1, 0)
                except InterruptedError:
                    continue
                except ChildProcessError:
                    break
                if pid == code_pid:
                    if os.WIFSIGNALED(st):
                        report(signal=os.WTERMSIG(st))
                    else:
                        report(exit=os.WEXITSTATUS(st))
                    break
        except BaseException as e:  # noqa: BLE001
            report(error=f"init: {type(e).__name__}: {e}")
        os._exit(0)
    os.close(lifeline_r)
    while True:
        try:
            os.waitpid(init, 0)
            break
        except InterruptedError:
            continue
    return 0


if __name__ == "__main__":
    # (the config comes on a pipe, not on the command line: pid 1 in the namespace is a fork of this process, and its
    # /proc/1/cmdline would show the code the end token and status it must not know: QA, 2026-12-07)
    with os.fdopen(int(sys.argv[1]), "rb") as _cfg:
        _config = json.loads(_cfg.read())
    sys.exit(_launch(_config))  # (the pipe closed first: the code inherited its read end)

# ---------------------------------------------------------------------------------------------------------------------
# The parent side
# ---------------------------------------------------------------------------------------------------------------------

import dataclasses  # noqa: E402
import secrets  # noqa: E402
import selectors  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Mapping  # noqa: E402

__all__ = ["Limits", "SandboxResult", "SandboxError", "run_python", "ISOLATIONS", "STATUSES", "VERDICTS"]

ISOLATIONS = ("auto", "namespaces", "userns", "none")
STATUSES = ("passed", "failed", "timeout", "memory", "crashed", "killed")
VERDICTS = ("exit", "end", "last")
ENDED_STATUSES = tuple(k for k in range(3, 126) if k not in (MEMORY_EXIT, SETUP_EXIT))
TOKEN_VAR = "DIFFREASON_SANDBOX_RUN"


class SandboxError(RuntimeError):
    """The sandbox itself could not start the code (not a verdict on the code)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Per-run resource limits. `memory_mb` is RLIMIT_AS per process; `nproc` the processes (threads count) one run
    may have at once; `fork_budget` bounds the process tree at 2**fork_budget where RLIMIT_NPROC cannot bind (uid
    0); `cpu_s` defaults to the wall-clock timeout rounded up, plus one second."""

    cpu_s: int | None = None
    memory_mb: int = 1024
    nproc: int = 16
    fork_budget: int = 4
    file_size_mb: int = 16
    open_files: int = 64
    max_output: int = 64 * 1024  # bytes kept of each of stdout and stderr


@dataclasses.dataclass
class SandboxResult:
    """How a run ended. `status`: passed (exit 0; under `run_python`'s verdicts "end" and "last", having run to the
    end of the program too), failed (other exit status, or left early), timeout (wall clock or CPU limit),
    memory (MemoryError), crashed (a fatal signal such as SIGSEGV/SIGABRT), killed (SIGKILL or another signal
    nobody here sent, e.g. the file-size limit or the OOM killer). `reason` says more where there is more."""

    status: str
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    elapsed_s: float
    isolation: str
    protections: dict[str, str]
    reason: str = ""
    run_id: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _python_exposed(python: str) -> list[str]:
    """Directories the interpreter needs (prefixes, the binary's folder) — bound back into the read-only view."""
    paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(python)), os.path.dirname(python)}
    return sorted({os.path.realpath(p) for p in paths if p})


def _tagged_processes(token: str) -> list[int]:
    """Pids whose environment carries this run's token (what is left of a run in the `none` mode)."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    for name in (os.listdir("/proc") if os.path.isdir("/proc") else []):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def _kill_tagged(token: str, rounds: int = 20) -> None:
    for _ in range(rounds):
        pids = _tagged_processes(token)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def _rmtree(path: str) -> None:
    """Remove a run's working directory however the code left it (never raises: it runs in a `finally`)."""
    try:
        _remove_tree(path)
    except Exception:  # noqa: BLE001 - what is left is removed below as far as it can be
        pass
    if os.path.lexists(path):
        try:
            shutil.rmtree(path, ignore_errors=True)
        except Exception:  # noqa: BLE001 - (RecursionError) a leftover directory, not a lost verdict
            pass


def _remove_tree(path: str) -> None:
    """Iterative, by descriptors relative to their directory: no recursion limit and no path-length limit however
    deep the tree; a directory the code made unreadable or unwritable is opened up first (it is the run's own:
    the code is dead by now), and nothing above `path` is ever touched."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

    def enter(name: str, dir_fd: int | None) -> int:
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except PermissionError:
            os.chmod(name, stat.S_IRWXU, dir_fd=dir_fd)
            fd = os.open(name, flags, dir_fd=dir_fd)
        try:
            os.fchmod(fd, stat.S_IRWXU)  # writable and searchable, to empty it
        except OSError:
            pass
        return fd

    def empty_files(fd: int) -> list[str]:
        """Unlink what is not a directory; the subdirectories left."""
        subdirs = []
        for name in os.listdir(fd):
            try:
                os.unlink(name, dir_fd=fd)
            except IsADirectoryError:
                subdirs.append(name)
            except FileNotFoundError:
                pass
        return subdirs

    fd = enter(path, None)
    names: list[str] = []  # the path from `path` down to the directory `fd` is open on
    pending = [empty_files(fd)]  # per level, the subdirectories still to remove
    try:
        while True:
            if pending[-1]:
                name = pending[-1].pop()
                child = enter(name, fd)
                os.close(fd)
                fd = child
                names.append(name)
                pending.append(empty_files(fd))
                continue
            pending.pop()
            if not names:
                break
            parent = os.open("..", flags, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(path)


class _Capped:
    """At most `cap` bytes of a stream: its start and, once it runs past, its last `cap // 8` bytes too — where a
    failing test's traceback is (QA, 2026-12-07: a flood on stderr left only the truncation notice to report)."""

    def __init__(self, cap: int):
        self.cap, self.head, self.tail, self.total = cap, bytearray(), bytearray(), 0
        self.keep = cap // 8

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap - self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail = (self.tail + data)[-self.keep:] if self.keep else bytearray()

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        if not self.truncated:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        return (self.head.decode("utf-8", errors="replace")
                + f"\n[... output truncated: {self.total} bytes, kept the first {len(self.head)} and the last "
                  f"{len(self.tail)}]\n" + self.tail.decode("utf-8", errors="replace"))


def run_python(
    code: str,
    *,
    timeout: float = 10.0,
    limits: Limits | None = None,
    isolation: str = "auto",
    audit_hook: bool = True,
    stdin: bytes | str | None = None,
    files: Mapping[str, str | bytes] | None = None,
    python: str | None = None,
    verdict: str = "exit",
) -> SandboxResult:
    """Run `code` (a Python program) in a sandboxed child process and say how it ended; see the module docstring.

    `files` are written into the working directory first (relative names only). `isolation` picks the best of
    "namespaces" / "userns" / "none" ("auto"), or asks for one; a mode the OS refuses falls back to "none" and the
    result's `isolation` and `protections` say so. `audit_hook=False` leaves only the OS layer (refused for
    isolation "none", where the hook is the only wall). Raises SandboxError when the sandbox could not start the code.

    `verdict` says what passing is (`VERDICTS`): "exit", exit status 0; "end", the program ran to its last statement,
    or ended with `SystemExit` of status 0 as `unittest.main()` does (an `os._exit(0)` or an exit from an exit hook or
    `sys.excepthook` is a failure); "last", it ran to its last statement (any `SystemExit` fails: a test program
    whose checks come last, as HumanEval's). With "end" and "last" the guard signals the end with a token on a pipe
    and a status, both drawn per run, which the code is not told, so code that leaves early cannot pass by accident.
    """
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {ISOLATIONS}, not {isolation!r}")
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, not {verdict!r}")
    if not audit_hook and isolation == "none":
        raise ValueError("audit_hook=False needs a namespace isolation: in 'none' the hook is the only wall")
    limits = limits or Limits()
    cpu_s = limits.cpu_s if limits.cpu_s is not None else int(timeout) + 1
    python = python or sys.executable
    token = secrets.token_hex(8)
    workdir = os.path.realpath(tempfile.mkdtemp(prefix="diffreason-sandbox-"))
    run_uid = None
    try:
        program = os.path.join(workdir, "main.py")
        with open(program, "w", encoding="utf-8") as f:
            f.write(code)
        for name, content in (files or {}).items():
            target = os.path.realpath(os.path.join(workdir, name))
            if os.path.isabs(name) or not target.startswith(workdir + os.sep):
                raise ValueError(f"files: {name!r} is not a relative path inside the working directory")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(content.encode() if isinstance(content, str) else content)
        # how the guard says the program ran to its end (verdicts "end" and "last"): it writes a token drawn per
        # run to a pipe of its own, then exits with a status drawn per run from 3-125 (away from 0-2 and the guard's
        # and launcher's own statuses); a program that exits with that status itself wrote no token
        ended_status = secrets.choice(ENDED_STATUSES) if verdict != "exit" else None
        end_token = secrets.token_hex(16) if verdict != "exit" else ""
        end_r, end_w = os.pipe() if verdict != "exit" else (None, None)
        if os.geteuid() == 0:  # a fresh uid the launcher may drop to (it chowns the directory if it does)
            run_uid = 100_000 + secrets.randbelow(1_000_000_000)
        status_r, status_w = os.pipe()
        cfg_r, cfg_w = os.pipe()
        cfg = {
            "workdir": workdir, "program": program, "python": python, "status_fd": status_w,
            "isolation": isolation, "audit_hook": audit_hook, "run_uid": run_uid, "expose": _python_exposed(python),
            "verdict": verdict, "ended_status": ended_status, "end_fd": end_w, "end_token": end_token,
            "limits": dict(dataclasses.asdict(limits), cpu_s=cpu_s),
        }
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
               "LC_ALL": "C.UTF-8", TOKEN_VAR: token}
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                [python, "-I", "-S", "-B", os.path.abspath(__file__), str(cfg_r)],
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workdir, env=env,
                start_new_session=True, pass_fds=(status_w, cfg_r) + ((end_w,) if end_w is not None else ()),
                close_fds=True,
            )
        except OSError as e:
            for fd in (status_r, end_r, cfg_w):
                if fd is not None:
                    os.close(fd)
            raise SandboxError(f"the sandbox could not start {python}: {e}") from e
        finally:
            for fd in (status_w, end_w, cfg_r):
                if fd is not None:
                    os.close(fd)
        data = json.dumps(cfg).encode()  # (the launcher reads it whole first; a dead one: its status says why)
        try:
            while data:
                data = data[os.write(cfg_w, data):]
        except BrokenPipeError:
            pass
        finally:
            os.close(cfg_w)
        ended_by_guard = (ended_status, end_r, end_token.encode())
        return _supervise(proc, status_r, stdin, timeout, limits, start, token, ended_by_guard)
    finally:
        _rmtree(workdir)


def _supervise(proc, status_r, stdin, timeout, limits, start, token, ended_by_guard) -> SandboxResult:
    """Wait for the run, read its output and reports, and judge it. `ended_by_guard` is (the status the guard exits
    with at the program's end, the pipe it writes its token to first, that token), or Nones for verdict "exit"."""
    ended_status, end_r, end_token = ended_by_guard
    out, err = _Capped(limits.max_output), _Capped(limits.max_output)
    status_buf, end_buf = bytearray(), bytearray()
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    sel.register(status_r, selectors.EVENT_READ, status_buf)
    if end_r is not None:
        sel.register(end_r, selectors.EVENT_READ, end_buf)
    if stdin is not None:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        try:  # small inputs; a program that does not read them must not block us
            os.set_blocking(proc.stdin.fileno(), False)
            os.write(proc.stdin.fileno(), data[:65536])
        except OSError:
            pass
        proc.stdin.close()
    deadline = start + timeout
    timed_out = False
    exited_at = None

    def kill_group():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass

    try:
        while sel.get_map():
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
                kill_group()  # leftovers in its process group
            if exited_at is None and now >= deadline:
                timed_out = True
                kill_group()
                exited_at = now
            if exited_at is not None and now > exited_at + 1.0:
                break  # something outside the group still holds the pipes: give up on them
            wait = 0.05 if exited_at is None else 0.02
            if exited_at is None:
                wait = min(wait, max(0.0, deadline - now))
            for key, _ in sel.select(wait):
                fd = key.fd if isinstance(key.fileobj, int) else key.fileobj.fileno()
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(key.fileobj)
                elif isinstance(key.data, bytearray):
                    if len(key.data) < 65536:  # the reports are short; the end pipe holds one token
                        key.data.extend(chunk)
                else:
                    key.data.add(chunk)
        if proc.poll() is None:
            remaining = max(0.0, deadline - time.monotonic())
            try:
                proc.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group()
                proc.wait()
        elapsed = time.monotonic() - start
    finally:
        kill_group()
        sel.close()
        for f in (proc.stdout, proc.stderr):
            f.close()
        os.close(status_r)
        if end_r is not None:
            os.close(end_r)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reports = []
    for line in status_buf.decode(errors="replace").splitlines():
        try:
            reports.append(json.loads(line))
        except ValueError:
            pass
    ready = next((r for r in reports if r.get("ready")), None)
    error = next((r["error"] for r in reports if "error" in r), None)
    protections = dict(ready["protections"]) if ready else {}
    isolation = protections.get("isolation", "unknown")
    if isolation == "none":
        _kill_tagged(token)
    if (ready is None or error) and not timed_out:
        raise SandboxError(f"the sandbox could not start the code: {error or 'no report from the launcher'}"
                           f"{' — stderr: ' + err.text()[-500:] if err.total else ''}")
    protections.update({
        "timeout": f"wall clock {timeout:g} s (SIGKILL to the process group)",
        "limits": (f"cpu {limits.cpu_s or int(timeout) + 1} s, address space {limits.memory_mb} MiB, "
                   f"file size {limits.file_size_mb} MiB, open files {limits.open_files}, core 0"),
        "session": "own session and process group",
        "output": f"stdout/stderr capped at {limits.max_output} bytes each",
        "environment": f"scrubbed (PATH, HOME/TMPDIR=working dir, LANG/LC_ALL, {TOKEN_VAR}); python -I -S",
        "workdir": "fresh temporary directory, removed afterwards",
    })

    # How did the code end? In the namespace modes the launcher reports pid 1's status; in "none" the code was the
    # launcher process itself.
    ended = next((r for r in reports if "exit" in r or "signal" in r), None)
    if ended is not None:
        code, sig = ended.get("exit"), ended.get("signal")
    elif proc.returncode is not None and proc.returncode < 0:
        code, sig = None, -proc.returncode
    else:
        code, sig = proc.returncode, None
    if isolation != "none" and ended is None and not timed_out:
        code, sig = None, signal.SIGKILL  # the launcher died without a word
    reason = ""
    if timed_out:
        status, reason = "timeout", f"wall clock {timeout:g} s"
    elif sig in (signal.SIGXCPU,) or (sig == signal.SIGKILL and elapsed >= (limits.cpu_s or int(timeout) + 1)):
        status, reason = "timeout", "CPU time limit"
    elif sig is not None:
        name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
        if sig in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGSYS):
            status = "crashed"
        else:
            status = "killed"
        reason = name + (" (file size limit)" if sig == signal.SIGXFSZ else "")
    elif code == MEMORY_EXIT and "MemoryError" in err.text():
        status, reason = "memory", f"MemoryError (address space {limits.memory_mb} MiB)"
    elif ended_status is not None and code == ended_status and bytes(end_buf) == end_token:
        status, code = "passed", 0
    elif code == 0 and ended_status is None:
        status = "passed"
    elif code == 0:
        status, reason = "failed", ("left before the end of the program with status 0 (os._exit, sys.exit, or an "
                                    "exit hook)")
    else:
        status = "failed"
        if error:
            reason = error
    return SandboxResult(
        status=status, exit_code=code, signal=sig, stdout=out.text(), stderr=err.text(),
        stdout_truncated=out.truncated, stderr_truncated=err.truncated, elapsed_s=round(elapsed, 4),
        isolation=isolation, protections=protections, reason=reason, run_id=token,
    )
