"""In-namespace container launcher (stdlib only; run as ``python -I -S launch.py SPEC``).

Runs inside the container's fresh mount namespace (and PID namespace): bind-mounts each
volume at its mountPath, enters workingDir, drops to runAsUser/runAsGroup and execs the
container's argv. The mounts vanish with the namespace, so nothing needs unmounting. On a
failure before exec it writes the reason to ``startError`` and exits 128, which the agent
reports as a StartError/RunContainerError.
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
MS_REC = 16384


def _mount(libc: ctypes.CDLL, src: str, dst: str, flags: int) -> None:
    if libc.mount(src.encode(), dst.encode(), None, flags, None) != 0:
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


def main(spec_path: str) -> None:
    """Mount, chdir, setuid, exec."""
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    err_file = spec.get("startError", "")
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for m in spec.get("mounts", []):
            _prepare_target(m["target"], m.get("file", False))
            _mount(libc, m["source"], m["target"], MS_BIND | MS_REC)
            if m.get("readOnly"):
                _mount(libc, "none", m["target"], MS_REMOUNT | MS_BIND | MS_RDONLY | MS_REC)
        wd = spec.get("workingDir")
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
        argv = spec["argv"]
        env = spec["env"]
        os.execvpe(argv[0], argv, env)
    except FileNotFoundError as exc:
        msg = f'exec: "{spec["argv"][0]}": executable file not found in $PATH ({exc})'
        _fail(err_file, msg)
    except Exception as exc:  # noqa: BLE001 - anything before exec is a start error
        _fail(err_file, f"failed to start container: {exc}")


def _fail(err_file: str, msg: str) -> None:
    sys.stderr.write(msg + "\n")
    if err_file:
        with open(err_file, "w", encoding="utf-8") as fh:
            fh.write(msg)
    os._exit(128)


if __name__ == "__main__":
    main(sys.argv[1])
