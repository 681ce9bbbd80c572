"""A trial command as Katib runs it: the wrapper (real shells, real processes) gives the
program the argv that `sh -c "<command and args joined with spaces>"` gives it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kubetune import commandline, procwait, wrapperscript

SHELLS = [s for s in ("dash", "bash", "busybox") if shutil.which(s)]
PRINT_ARGV = "import json, sys\nprint(json.dumps(sys.argv[1:]))\n"

# The argument forms of Katib's NAS examples (enas-cpu, darts-cpu) after the trial's
# ${trialParameters...} substitution, and the shell syntax a joined line gives meaning to.
NAS_ENAS = [
    "--num_epochs=1",
    '--architecture="[[36], [0, 1]]"',
    "--nn_config=\"{'num_layers': 2, 'input_sizes': [32, 32, 3], 'output_sizes': [10],"
    " 'embedding': {'36': {'opt_id': 36, 'opt_type': 'convolution', 'opt_params':"
    " {'filter_size': '7', 'num_filter': '64', 'stride': '2'}}}}\"",
]
NAS_DARTS = [
    "--algorithm-settings=\"{'num_epochs': '1', 'w_lr': '0.025', 'batch_size': None}\"",
    "--search-space=\"['separable_convolution_3x3', 'max_pooling_3x3', 'skip_connection']\"",
    '--num-layers="1"',
]
SHELL_SYNTAX = [
    "--name=two words",
    "'single quoted  spaces'",
    '"$HOME" $HOME ${HOME}x \'$HOME\' \\$HOME $# "$@" $1',
    "--glob=*.nothing-matches",
]
SEQUENCES = [["--x=1;", "echo", "after;", "echo", "second"], ["--x=1", "&&", "echo", "and"]]


def _program(tmp_path: Path) -> str:
    script = tmp_path / "print_argv.py"
    script.write_text(PRINT_ARGV)
    return f"{sys.executable} {script}"


def _katib(shell: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """What Katib runs: the shell it picks, `-c`, the elements joined with spaces."""
    katib_shell, words = commandline.katib_line(argv)
    interpreter = shell if katib_shell == "sh" else katib_shell
    return _run([*_shell_argv(interpreter), "-c", " ".join(words)])


def _wrapped(shell: str, argv: list[str], log_dir: Path) -> subprocess.CompletedProcess[str]:
    _, c, script, *rest = wrapperscript.wrap_argv(argv, str(log_dir))
    return _run([*_shell_argv(shell), c, script, *rest])


def _shell_argv(shell: str) -> list[str]:
    return [shell, "sh"] if shell == "busybox" else [shell]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {"HOME": "/home/u", "PATH": os.environ["PATH"]}
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)


def _argvs(tmp_path: Path) -> list[list[str]]:
    program = _program(tmp_path)
    return [
        [*program.split(), *NAS_ENAS],
        [*program.split(), *NAS_DARTS],
        [*program.split(), *SHELL_SYNTAX],
        *([*program.split(), *tail] for tail in SEQUENCES),
        ["sh", "-c", program, *NAS_ENAS],  # sh -c: the rest is the line
        ["bash", "-c", f'{program} "$0"', *NAS_DARTS],  # bash -c: bash runs the line
        ["sh", "-c", f"cd /tmp && {program} {NAS_ENAS[1]}; exit 3"],
    ]


@pytest.mark.parametrize("shell", SHELLS)
def test_the_program_gets_the_argv_of_katibs_joined_sh_line(shell: str, tmp_path: Path) -> None:
    for i, argv in enumerate(_argvs(tmp_path)):
        log_dir = tmp_path / f"katib-{i}"
        log_dir.mkdir()
        expected = _katib(shell, argv)
        got = _wrapped(shell, argv, log_dir)
        assert (got.stdout, got.returncode) == (expected.stdout, expected.returncode), argv
        assert expected.stdout.strip(), expected.stderr
        (record,) = (p.read_text() for p in log_dir.glob("*.pid"))
        assert record == procwait.format_exit_status(expected.returncode) + "\n"


def test_katibs_quoted_nas_arguments_arrive_as_json_the_trial_can_read(tmp_path: Path) -> None:
    argv = [*_program(tmp_path).split(), *NAS_ENAS]
    got = json.loads(_wrapped("sh", argv, tmp_path).stdout)
    assert got[1] == "--architecture=[[36], [0, 1]]"
    assert json.loads(got[1].split("=", 1)[1]) == [[36], [0, 1]]
    assert json.loads(got[2].split("=", 1)[1].replace("'", '"'))["num_layers"] == 2


def test_sigterm_reaches_a_plain_command_run_from_the_joined_line(tmp_path: Path) -> None:
    """A one-command line is exec'd: the wrapper's SIGTERM lands on the program itself."""
    seen = tmp_path / "got-term"
    code = tmp_path / "train.py"
    code.write_text(
        "import signal, sys, time\n"
        "def on_term(*_):\n"
        f"    open({str(seen)!r}, 'w').write(' '.join(sys.argv[1:]))\n"
        "    sys.exit(5)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    argv = [sys.executable, str(code), '--architecture="[[1]]"']
    p = subprocess.Popen(wrapperscript.wrap_argv(argv, str(tmp_path)), stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None
        assert p.stdout.readline() == b"ready\n"
        time.sleep(0.5)  # let the wrapper reach its `wait`, as a kubelet's late SIGTERM does
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 5, "the training program's own exit status"
    finally:
        p.kill()
        p.wait()
        if p.stdout is not None:
            p.stdout.close()
    assert seen.read_text() == "--architecture=[[1]]"


def test_each_element_stays_its_own_exec_argument_under_128_kib(tmp_path: Path) -> None:
    params = [f"--p{i}=" + "x" * 100 for i in range(2000)]
    argv = [*_program(tmp_path).split(), *params]
    command = wrapperscript.wrap_argv(argv, str(tmp_path))
    assert len(" ".join(argv).encode()) > 128 * 1024
    assert max(len(a.encode()) for a in command) < 16 * 1024
    p = _run(command)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == params


@pytest.mark.parametrize(
    ("argv", "shell", "words"),
    [
        (["sh", "-c", "a b", "c"], "sh", ["a b", "c"]),
        (["bash", "-c", "a"], "bash", ["a"]),
        (["/bin/sh", "-c", "a"], "sh", ["/bin/sh", "-c", "a"]),  # Katib matches the name only
        (["bash", "train.sh"], "sh", ["bash", "train.sh"]),
        (["python3", "-c", "print(1)"], "sh", ["python3", "-c", "print(1)"]),
    ],
)
def test_katib_line_picks_the_shell_as_katib_does(
    argv: list[str], shell: str, words: list[str]
) -> None:
    assert commandline.katib_line(argv) == (shell, words)


@pytest.mark.parametrize(
    ("line", "simple"),
    [
        ('python3 -u train.py --architecture="[[36], [0, 1]]" --x=$HOME', True),
        ("python3 train.py '--a=1; b' \"x && y\" \\;", True),
        ("python3 train.py; echo done", False),
        ("python3 train.py && echo done", False),
        ("python3 train.py > log", False),
        ("python3 train.py\necho", False),
        ("python3 train.py --lr=$(LR)", False),  # Kubernetes expands $(LR) later
        ("python3 train.py `date`", False),
        ("cd /work", False),
        ("LR=1 python3 train.py", False),
        ("$TRAIN --lr=1", False),
        ("exit 3", False),
        ('python3 "unclosed', False),
        ("", False),
    ],
)
def test_only_a_line_of_one_plain_command_is_exec_d(line: str, simple: bool) -> None:
    assert commandline.is_simple_command(line) is simple
