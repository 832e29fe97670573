"""How a bash tool is isolated: bubblewrap over a minimal root, or nothing (development only).

`probe` decides once at start by actually running a sandboxed command. It fails closed:
with `use_bwrap=on` (the default) a runner whose bubblewrap does not work refuses to
start and says why; `use_bwrap=off` runs tools on the host and is logged as an error.

Under bubblewrap a tool sees a root built for it, not the host's: `/usr` (and the
`/bin`, `/lib*` links into it) read-only, a minimal `/etc` (a copy of a short list of the
host's, `build_system_etc`: no shadow, no keys, no host users; a passwd naming only root,
nobody and the session's own uid), its own work dir,
a fresh size-bounded `/tmp` and `/dev/shm`, a `/proc` of its own pid namespace, and no
network. The project's `.data` (broker and database files, keys), other sessions' work
dirs and the runner's home do not exist in it.

When the runner is root, each session's tools run as a uid of their own (`identity`),
so process limits, which the kernel counts per uid, are per session. Either way the
environment is built from constants, so nothing of the runner's own (credentials) leaks.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from wakeline_runner.records import SessionDirs, ensure_dir
from wakeline_runner.settings import RunnerSettings

log = logging.getLogger(__name__)
TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The host's top-level links into /usr (merged /usr), or directories bound read-only.
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# What of the host's /etc a tool gets: the loader, name-service and locale plumbing,
# certificates and interpreters' configuration. Never shadow, ssh, sudoers, or environment
# (hosts keep proxy credentials there).
ETC_ENTRIES = ("alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "debian_version",
               "gai.conf", "gitconfig", "host.conf", "hosts", "inputrc", "ld.so.cache",
               "ld.so.conf", "ld.so.conf.d", "localtime", "magic", "magic.mime", "mime.types",
               "nsswitch.conf", "os-release", "perl", "profile", "protocols", "python3", "python3.11",
               "services", "shells", "ssl", "terminfo", "timezone", "vim")
# Where a sandbox's own mounts go; a work dir's parents on this list are not recreated.
MOUNTED = ("/", "/usr", "/etc", "/tmp", "/dev", "/proc", "/var")

Owner = tuple[int, int]  # (uid, gid)


def tool_env(work: Path) -> dict[str, str]:
    return {"PATH": TOOL_PATH, "HOME": str(work), "LANG": "C.UTF-8", "TERM": "dumb", "TMPDIR": "/tmp",
            "USER": "session", "LOGNAME": "session"}


def rlimits(settings: RunnerSettings) -> dict[str, int]:
    return {"RLIMIT_CPU": settings.cpu_seconds, "RLIMIT_AS": settings.memory_bytes,
            "RLIMIT_FSIZE": settings.file_size_bytes, "RLIMIT_NPROC": settings.nproc, "RLIMIT_CORE": 0}


@dataclass(frozen=True)
class Isolation:
    use_bwrap: bool
    uid_range: tuple[int, int] | None  # (first uid, count) when the runner is root; None otherwise
    tmp_bytes: int
    reason: str
    system_etc: Path | None = None  # the /etc a tool sees (build_system_etc); needed under bwrap

    def identity(self, tenant: str, session_id: str) -> Owner | None:
        """The (uid, gid) a session's tools and files belong to; None when the runner is not
        root (tools then run as the runner's uid, inside a user namespace under bwrap).

        A hash, not a table: any runner on any host gives a session the same uid, with no
        coordination. Two sessions share a uid with probability 1/count per pair; they
        then share a process limit, never files (work dirs stay 0700 and apart in the
        sandbox's mount namespace)."""
        if self.uid_range is None:
            return None
        first, count = self.uid_range
        digest = hashlib.sha256(f"{tenant}/{session_id}".encode("utf-8")).digest()
        uid = first + int.from_bytes(digest[:8], "big") % count
        return uid, uid

    def command(self, dirs: SessionDirs, script: str) -> tuple[list[str], Owner | None]:
        """The argv the wrapper runs, and the (uid, gid) the wrapper itself must drop to."""
        shell = ["bash", "-c", script]
        if not self.use_bwrap:
            return shell, dirs.owner
        if self.system_etc is None:
            raise RuntimeError("bwrap isolation without a system /etc (probe builds it)")
        argv = bwrap_argv(dirs.work, self.system_etc, dirs.etc, self.tmp_bytes, privileged=self.uid_range is not None)
        if dirs.owner is not None:
            # bwrap runs as root (it must, to bind a work dir whose parents the session's
            # uid cannot traverse) and setpriv drops to the session's uid inside.
            uid, gid = dirs.owner
            argv += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs", "--"]
        return argv + shell, None


def bwrap_argv(work: Path, system_etc: Path, etc: Path | None, tmp_bytes: int, privileged: bool) -> list[str]:
    # A user namespace would map the session's uid to root outside and break writes to the
    # work dir, so a root runner unshares everything but the user namespace.
    namespaces = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if not privileged:
        namespaces.append("--unshare-user")
    argv = ["bwrap", "--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            argv += ["--ro-bind", str(host), str(host)]
    argv += ["--ro-bind", str(system_etc), "/etc"]
    if etc is not None:
        argv += ["--ro-bind", str(etc / "passwd"), "/etc/passwd", "--ro-bind", str(etc / "group"), "/etc/group"]
    size = str(tmp_bytes)
    argv += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp", "--dev", "/dev",
             "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm", "--proc", "/proc",
             "--dir", "/var", "--symlink", "../tmp", "/var/tmp"]
    # bwrap would create the work dir's parents 0700 root, and then a tool could not
    # resolve its own absolute path (python3 /abs/x.py does): create them traversable.
    # They hold nothing but the way to this one work dir.
    w = str(work)
    between = [str(p) for p in reversed(work.parents) if str(p) not in MOUNTED]
    argv += [arg for d in between for arg in ("--perms", "0755", "--dir", d)]
    return argv + ["--bind", w, w, *namespaces, "--die-with-parent", "--chdir", w, "--"]


def build_system_etc(sandbox_root: Path) -> Path:
    """The /etc a tool sees: a copy of the host's ETC_ENTRIES under `<sandbox_root>/.etc/`,
    bound read-only in one mount (one bind per entry made bwrap's start 11.2 ms instead of
    7.0 here). Named by a digest of what it copied, so runners sharing a sandbox root share
    it; made at runner start, so a change to the host's /etc reaches tools at the next one.
    A file the runner cannot read (a non-root runner, `ssl/private`) is left out."""
    digest = hashlib.sha256()
    for name in ETC_ENTRIES:
        for path in _walk(Path("/etc") / name):
            st = os.lstat(path)
            digest.update(f"{path}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    parent = sandbox_root / ".etc"
    ensure_dir(parent, 0o755, parents=True)
    target = parent / digest.hexdigest()[:24]
    if target.is_dir():
        return target
    building = Path(tempfile.mkdtemp(prefix=".build-", dir=parent))
    os.chmod(building, 0o755)
    for name in ETC_ENTRIES:
        src, dst = Path("/etc") / name, building / name
        try:
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
            elif src.is_dir():
                shutil.copytree(src, dst, symlinks=True)
            elif src.exists():
                shutil.copy2(src, dst)
        except (OSError, shutil.Error) as err:  # unreadable parts: a tool could not read them either
            log.warning("the tools' /etc lacks part of /etc/%s: %s", name, err)
    for name in ("passwd", "group"):  # mount points for a session's own (write_identity_files)
        (building / name).touch(0o644)
    try:
        os.rename(building, target)
    except OSError:  # another runner made the same one meanwhile
        shutil.rmtree(building, ignore_errors=True)
    return target


def _walk(top: Path) -> list[Path]:
    if not os.path.lexists(top):
        return []
    if top.is_symlink() or not top.is_dir():
        return [top]
    found = [top]
    for root, dirs, files in os.walk(top):
        found += [Path(root) / n for n in sorted(dirs + files)]
    return found


def write_identity_files(etc: Path, owner: Owner | None) -> None:
    """The passwd and group a session's tools see: root, nobody and the session's own uid,
    so `id`, `whoami` and `~` work without exposing the host's users."""
    uid, gid = owner if owner is not None else (os.getuid(), os.getgid())
    home = etc.parent / "work"
    passwd = ("root:x:0:0:root:/root:/usr/sbin/nologin\n"
              "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
              f"session:x:{uid}:{gid}:wakeline session:{home}:/bin/bash\n")
    group = f"root:x:0:\nnogroup:x:65534:\nsession:x:{gid}:\n"
    ensure_dir(etc, 0o755)
    for name, text in (("passwd", passwd), ("group", group)):
        path = etc / name
        if not path.exists() or path.read_text() != text:
            tmp = etc / f".{name}.tmp"
            tmp.write_text(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)


def probe(settings: RunnerSettings) -> Isolation:
    uid_range = (settings.sandbox_uid_base, settings.sandbox_uid_count) if os.geteuid() == 0 else None
    if uid_range is None:
        log.warning("runner is not root (uid %d): every session's tools run as that uid, inside a user "
                    "namespace, so process limits are shared between sessions", os.geteuid())
    if settings.use_bwrap == "off":
        log.error("TOOLS RUN UNSANDBOXED ON THE HOST (use_bwrap=off): they see the host's files, network "
                  "and processes. This is for development only; never run it with untrusted sessions")
        return Isolation(False, uid_range, settings.tmp_bytes, "use_bwrap=off")
    candidate = Isolation(True, uid_range, settings.tmp_bytes, "bwrap probe succeeded",
                          build_system_etc(settings.sandbox_root))
    failure = _try_bwrap(candidate, settings)
    if failure is not None:
        raise RuntimeError(
            f"refusing to start: tools must run under bubblewrap and it does not work here ({failure}). "
            "Install it (deploy/system-deps.sh does), and for a runner that is not root allow unprivileged "
            "user namespaces (sysctl user.max_user_namespaces > 0 and, on Debian, "
            "kernel.unprivileged_userns_clone=1); or run the runner as root. Only for development, "
            "WAKELINE_USE_BWRAP=off runs tools unsandboxed on the host.")
    log.info("tool isolation: bubblewrap over a minimal root (%s)",
             " ".join(bwrap_argv(Path("/<work>"), candidate.system_etc or Path("/<etc>"), Path("/<session etc>"),
                                 settings.tmp_bytes, uid_range is not None)))
    return candidate


def _try_bwrap(candidate: Isolation, settings: RunnerSettings) -> str | None:
    if shutil.which("bwrap") is None:
        return "bwrap is not on PATH"
    ensure_dir(settings.sandbox_root, 0o711, parents=True)
    ensure_dir(settings.sandbox_root / ".probe", 0o711)
    owner = candidate.identity(".probe", "probe")
    dirs = SessionDirs(work=settings.sandbox_root / ".probe" / "work", calls=settings.sandbox_root / ".probe",
                       etc=settings.sandbox_root / ".probe" / "etc", owner=owner)
    ensure_dir(dirs.work, 0o700)
    if owner is not None:
        os.chown(dirs.work, *owner)
    write_identity_files(dirs.etc, owner)
    # Write in the work dir and in /tmp as the session's user, as a real tool would, and
    # check that the host's private places are not there.
    script = ": > .probe && rm .probe && : > /tmp/.probe && test ! -e /root && test ! -e /home"
    if owner is not None:
        script += f' && test "$(id -u)" = {owner[0]}'
    argv, _ = candidate.command(dirs, script)
    try:
        done = subprocess.run(argv, env=tool_env(dirs.work), capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{type(err).__name__}: {err}"
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.decode('utf-8', 'replace').strip()[-500:]}"
    return None
