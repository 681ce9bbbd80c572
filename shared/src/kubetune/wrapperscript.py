"""The shell side of :mod:`kubetune.procwait`'s protocol: the wrapper the webhook injects
around a training container's command. Apart from the waiting so that a trial pod's collector,
which only waits, does not import `shlex` (and with it `re`) or :mod:`kubetune.commandline`.

:func:`sh_register` and :func:`sh_record_end` write the records (or :func:`sh_wrap` for both
around a command, run by :func:`sh_run`: SIGTERM passed on to the command, and for the StdOut
collector its output teed into the metrics file); :func:`wrap_argv` is the container command
the webhook injects: the argv passed as positional parameters and run as Katib runs it, joined
into one shell line.
They contain ``$$``, ``$?`` and ``$(...)``; when the webhook puts them into a container's
``command``/``args`` it must write every ``$`` of these fragments as ``$$`` so Kubernetes'
``$(VAR)`` expansion hands them to ``sh`` unchanged (a ``$$`` left as is would reach ``sh`` as
a bare ``$``).
"""

from __future__ import annotations

import shlex

from kubetune import commandline
from kubetune.procwait import COMPLETED, DEFAULT_LOG_DIR, EARLY_STOPPED, RUNNING

# `$0` of the wrapper shell (shows in its error messages, e.g. "kubetune-wrapper: 1: train:
# not found"), and the largest single exec argument Linux accepts (MAX_ARG_STRLEN, with its NUL).
WRAPPER_ARGV0 = "kubetune-wrapper"
MAX_ARG_BYTES = 128 * 1024 - 1


def sh_register(log_dir: str = DEFAULT_LOG_DIR) -> str:
    """POSIX sh that registers the current shell (``$$``); run it before the real command."""
    d = shlex.quote(log_dir)
    return f"{{ [ -d {d} ] || mkdir -p {d}; }} && printf '%s\\n' {RUNNING} > {d}/$$.pid"


def sh_record_end(log_dir: str = DEFAULT_LOG_DIR, *, status: str = "$?") -> str:
    """POSIX sh that records the end of the command that ran just before it, then exits with
    that command's status, or 0 when the collector marked it early-stopped (as upstream's
    wrapper: the job must neither fail nor be retried for a stop). With the default `status`
    it must follow the command directly (it reads ``$?``); `sh_wrap` passes the variable its
    wait filled, which saves a subshell forked only to set ``$?``."""
    d = shlex.quote(log_dir)
    return (
        f"katib_rc={status}; "
        f"if [ $katib_rc -eq 0 ]; then katib_s={COMPLETED}; "
        'elif [ $katib_rc -gt 128 ]; then katib_s="signal $((katib_rc - 128))"; '
        'else katib_s="exit $katib_rc"; fi; '
        f"katib_mark=; {{ read -r katib_mark < {d}/$$.pid; }} 2>/dev/null; "
        f'if [ "$katib_mark" = {EARLY_STOPPED} ]; '
        f"then katib_s={EARLY_STOPPED}; katib_rc=0; fi; "
        f"printf '%s\\n' \"$katib_s\" > {d}/$$.pid; "
        "exit $katib_rc"
    )


def _sh_remove(path: str) -> str:
    """POSIX sh removing ``path`` (quoted already) that runs ``rm`` only when it exists.

    Why: every external program the wrapper runs is a fork and exec in every trial pod (about
    a millisecond of CPU each); the files it clears at start and end are almost never there.
    The same holds for ``mkdir`` of the mounted log directory and for reading the record back
    (``read``, a builtin, not ``head`` in a subshell)."""
    return f"[ ! -e {path} ] || rm -f {path}"


def _sh_trap(log_dir: str) -> str:
    """The signal-forwarding trap of :func:`sh_run`; installed first, so a SIGTERM that comes
    before the command started is passed on too. Each signal is forwarded exactly once: by the
    trap when the child's PID is known, else (``katib_early``) by the wrapper right after it
    learns the PID. A second SIGTERM could reach the training program while it is shutting
    down after the first, when Python has already restored the default action (exit 143 or 1
    instead of its own code). The flag file covers a signal that reaches the child before it
    has dropped the inherited trap (it would swallow it): the child checks the file before it
    runs the command."""
    term = f"{shlex.quote(log_dir)}/.$$.term"
    return (
        f"katib_child=; katib_early=; katib_term=; katib_tee=; {_sh_remove(term)}\n"
        f'trap \'katib_term=1; : > {term}; if [ -n "$katib_child" ];'
        " then kill -TERM $katib_child 2>/dev/null; else katib_early=1; fi' TERM INT HUP"
    )


def _sh_run_body(command: str, log_dir: str, metrics_file: str | None) -> str:
    d = shlex.quote(log_dir)
    fifo = f"{d}/.$$.fifo"
    term = f"{d}/.$$.term"
    lines = ["{ command exec 3<&0; } 2>/dev/null || exec 3</dev/null"]
    out = ""
    if metrics_file is not None:
        m = shlex.quote(metrics_file)
        # The wrapper opens the FIFO read-write (never blocks, so no signal can interrupt it)
        # before tee opens it: tee's open cannot hang even if the child dies at once, and tee
        # sees EOF once the child and everything it started have closed their output.
        # `command exec` keeps a failed redirection from ending the wrapper.
        lines.append(
            f"{_sh_remove(fifo)}; if mkfifo {fifo} &&"
            f" {{ command exec 4<>{fifo}; }} 2>/dev/null; then"
            f" tee -a {m} < {fifo} 4>&- & katib_tee=$!;"
            f" else {{ command exec 4>>{m}; }} 2>/dev/null || exec 4>/dev/null; fi"
        )
        out = " >&4 2>&4 4>&-"
    lines += [
        f"(\n[ -e {term} ] && exit 143\n{command}\n) <&3 3<&-{out} &",
        "katib_child=$!",
        "exec 3<&-" + (" 4>&-" if out else ""),
        'if [ -n "$katib_early" ]; then kill -TERM $katib_child 2>/dev/null; fi',
        "wait $katib_child; katib_rc=$?",
        # A trapped signal makes wait return early (128+n): wait again for the real status. A
        # child already waited for makes wait answer 127 ("not a child"): keep what we have.
        'while [ -n "$katib_term" ]; do katib_term=; wait $katib_child; katib_w=$?;'
        " [ $katib_w -ne 127 ] && katib_rc=$katib_w; done",
    ]
    if out:
        lines.append(
            'if [ -n "$katib_tee" ]; then wait $katib_tee;'
            f" while kill -0 $katib_tee 2>/dev/null; do wait $katib_tee; done; rm -f {fifo}; fi"
        )
    lines.append(f"trap - TERM INT HUP; {_sh_remove(term)}")
    return "\n".join(lines)


def sh_run(command: str, log_dir: str = DEFAULT_LOG_DIR, metrics_file: str | None = None) -> str:
    """POSIX sh that runs ``command`` so that SIGTERM reaches it, optionally teeing its output.

    The command runs as a background child (in a subshell, so an ``exit`` inside it ends only
    the subshell) and the wrapper waits for it with a trap that forwards SIGTERM, SIGINT and
    SIGHUP as SIGTERM (a non-interactive shell does not pass signals on, and background jobs
    ignore SIGINT). The command keeps the wrapper's stdin (fd 3 carries it past ``&``). With
    ``metrics_file``, stdout and stderr go, merged in the order written, through a FIFO to
    ``tee -a metrics_file`` whose output is the wrapper's stdout (straight to the file if no
    FIFO can be made); the wrapper waits for tee to drain, so the file holds every line once
    the end is recorded. Leaves ``$?`` = the command's exit status (128+n when killed by
    signal n) for :func:`sh_record_end`. Helper files ``.<pid>.fifo``/``.<pid>.term`` in
    ``log_dir`` are dot files, never registrations, and are removed at the end.
    """
    body = _sh_run_body(command, log_dir, metrics_file)
    return f"{_sh_trap(log_dir)}\n{body}\n(exit $katib_rc)"


def sh_wrap(
    command: str, log_dir: str = DEFAULT_LOG_DIR, *, metrics_file: str | None = None
) -> str:
    """The whole wrapped command, ``register; run (command); record end``, as one sh script.

    The command runs in a subshell so an ``exit`` inside it (``train.py && exit 0``) cannot
    skip the end record; ``$$`` in a subshell is still the wrapper's PID. It runs through
    :func:`sh_run`: SIGTERM to the wrapper reaches it (the trap is set before the wrapper
    registers) and, with ``metrics_file`` (the StdOut collector's log), its stdout and stderr
    also go to that file.
    """
    return "\n".join(
        [
            _sh_trap(log_dir),
            sh_register(log_dir),
            _sh_run_body(command, log_dir, metrics_file),
            sh_record_end(log_dir, status="$katib_rc"),
        ]
    )


def sh_run_line(argv: list[str]) -> tuple[str, list[str]]:
    """The command :func:`wrap_argv` runs for ``argv``, and the positional parameters it reads.

    Katib's reading (:mod:`kubetune.commandline`): the elements are joined with spaces
    (``"$*"``) and the line is evaluated by ``sh``, or by ``bash`` for a ``bash -c`` command,
    with no positional parameters left. The line is never one exec argument, so only each
    element has to stay under Linux's 128 KiB. A line that is one plain command is run with
    ``exec``, so the wrapper's SIGTERM reaches the program, not a shell in between.
    """
    shell, words = commandline.katib_line(argv)
    run = "exec " if commandline.is_simple_command(" ".join(words)) else ""
    line = f'katib_line="$*"; set --; eval "{run}$katib_line"'
    if shell != "sh":
        line = f'{shell} -c {shlex.quote(line)} {shell} "$@"'
    return line, words


def wrap_argv(
    argv: list[str], log_dir: str = DEFAULT_LOG_DIR, *, metrics_file: str | None = None
) -> list[str]:
    """The wrapped container command: ``sh -c <sh_wrap script> kubetune-wrapper words...``.

    ``argv`` (command + args) means what it means to Katib: one shell line, its elements
    joined with spaces (:func:`sh_run_line`). The elements travel as positional parameters,
    each its own exec argument, and are joined inside the shell: a joined ``sh -c`` string
    would be one exec argument, and Linux refuses any over 128 KiB (MAX_ARG_STRLEN), which
    2,000 hyperparameters easily exceed. A command that cannot be started (not found, not
    executable, too long) makes the shell exit 127 or 126, recorded as the end like any
    failed command.
    """
    line, words = sh_run_line(argv)
    script = sh_wrap(line, log_dir, metrics_file=metrics_file)
    return ["sh", "-c", script, WRAPPER_ARGV0, *words]
