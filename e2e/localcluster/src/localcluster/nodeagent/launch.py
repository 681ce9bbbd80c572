"""In-namespace container launcher (stdlib only; run as ``python -I -S launch.py SPEC``).

Runs inside the container's fresh mount namespace (and PID namespace): bind-mounts each
volume at its mountPath, enters workingDir, drops to runAsUser/runAsGroup and execs the
container's argv. The mounts vanish with the namespace, so nothing needs unmounting. On a
failure before exec it writes the reason to ``startError`` and exits 128, which the agent
reports as a StartError/RunContainerError.

Two rules keep the host intact:

- Every mount source (and the start-error directory) is opened before anything is
  mounted, and mounted through ``/proc/self/fd``: an emptyDir at ``/tmp`` must not hide
  the sources of later mounts when the agent's state dir is under ``/tmp``.
- A mount point or workingDir that does not exist is never created on the host (an
  empty ``/var/run/secrets/kubernetes.io/serviceaccount`` there makes host-side clients
  believe they run in a pod). Its deepest existing directory is *shadowed* in the
  container only: a tmpfs with the same entries bind-mounted back, moved over it (for
  ``/`` the process chroots into that tmpfs), and the missing directories are made there.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

MS_RDONLY = 1
MS_NOSUID = 2
MS_REMOUNT = 32
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
O_PATH = getattr(os, "O_PATH", 0o10000000)


def _mount(
    libc: ctypes.CDLL, src: str, dst: str, flags: int, fstype: str = "", data: str = ""
) -> None:
    ret = libc.mount(
        src.encode(), dst.encode(), fstype.encode() or None, flags, data.encode() or None
    )
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} -> {dst}: {os.strerror(err)}")


def _prepare_target(target: str, is_file: bool) -> None:
    if is_file:
        os.makedirs(os.path.dirname(target) or "/", exist_ok=True)
        if not os.path.exists(target):
            with open(target, "a", encoding="utf-8"):
                pass
    else:
        os.makedirs(target, exist_ok=True)


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def shadow_points(paths: list[tuple[str, bool]]) -> list[str]:
    """Host directories to shadow so that ``paths`` can be made without touching the host.

    ``paths`` are (path, is_mount) in mount order; a path inside an earlier mount point is
    made inside that volume, as the kubelet does. Parents come before children.
    """
    mounted: list[str] = []
    points: set[str] = set()
    for raw, is_mount in paths:
        path = os.path.normpath(os.path.join("/", raw))
        if not _inside(path, mounted) and not os.path.lexists(path):
            parent = os.path.dirname(path)
            while not os.path.isdir(parent):
                parent = os.path.dirname(parent)
            points.add(os.path.realpath(parent))
        if is_mount:
            mounted.append(path)
    return sorted(points, key=lambda p: (p.rstrip("/").count("/"), p))


def _shadow(libc: ctypes.CDLL, path: str, stage: str) -> None:
    """Cover ``path`` with a tmpfs holding the same entries (bind-mounted back)."""
    st = os.stat(path)
    os.makedirs(stage, exist_ok=True)
    opts = f"mode={st.st_mode & 0o7777:o},uid={st.st_uid},gid={st.st_gid}"
    _mount(libc, "tmpfs", stage, MS_NOSUID if path != "/" else 0, "tmpfs", opts)
    for name in os.listdir(path):
        src, dst = os.path.join(path, name), os.path.join(stage, name)
        try:
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
                continue
            if os.path.isdir(src):
                os.mkdir(dst)
            else:
                with open(dst, "a", encoding="utf-8"):
                    pass
            _mount(libc, src, dst, MS_BIND | MS_REC)
        except FileNotFoundError:
            # Gone since listdir (a lock or temp file of /run, /tmp): not there, like the host.
            if os.path.isdir(dst) and not os.path.islink(dst):
                os.rmdir(dst)
            elif os.path.lexists(dst):
                os.unlink(dst)
    if path == "/":
        os.chdir(stage)
        os.chroot(".")
        os.chdir("/")
    else:
        _mount(libc, stage, path, MS_MOVE)


def main(spec_path: str) -> None:
    """Mount, chdir, setuid, exec."""
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    err_file = spec.get("startError", "")
    err_dir = os.open(os.path.dirname(err_file) or ".", os.O_RDONLY) if err_file else -1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        mounts = spec.get("mounts", [])
        sources = [os.open(m["source"], O_PATH | os.O_CLOEXEC) for m in mounts]
        wd = spec.get("workingDir") or ""
        wanted = [(str(m["target"]), True) for m in mounts] + ([(wd, False)] if wd else [])
        scratch = os.path.abspath(spec.get("scratch") or spec_path + ".scratch")
        for i, point in enumerate(shadow_points(wanted)):
            _shadow(libc, point, os.path.join(scratch, str(i)))
        for m, fd in zip(mounts, sources, strict=True):
            _prepare_target(m["target"], m.get("file", False))
            _mount(libc, f"/proc/self/fd/{fd}", m["target"], MS_BIND | MS_REC)
            if m.get("readOnly"):
                _mount(libc, "none", m["target"], MS_REMOUNT | MS_BIND | MS_RDONLY | MS_REC)
            os.close(fd)
        if wd:
            os.makedirs(wd, exist_ok=True)
            os.chdir(wd)
        gid = spec.get("gid")
        uid = spec.get("uid")
        if gid is not None:
            os.setgroups([int(gid)])
            os.setgid(int(gid))
        if uid is not None:
            os.setuid(int(uid))
    except Exception as exc:  # noqa: BLE001 - anything before exec is a start error
        _fail(err_dir, err_file, f"failed to start container: {exc}")
    argv = spec["argv"]
    try:
        os.execvpe(argv[0], argv, spec["env"])
    except FileNotFoundError as exc:
        _fail(err_dir, err_file, f'exec: "{argv[0]}": executable file not found in $PATH ({exc})')
    except OSError as exc:
        _fail(err_dir, err_file, f'failed to start container: exec "{argv[0]}": {exc}')


def _fail(err_dir: int, err_file: str, msg: str) -> None:
    sys.stderr.write(msg + "\n")
    if err_dir >= 0:
        fd = os.open(
            os.path.basename(err_file), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=err_dir
        )
        os.write(fd, msg.encode())
        os.close(fd)
    os._exit(128)


if __name__ == "__main__":
    main(sys.argv[1])
