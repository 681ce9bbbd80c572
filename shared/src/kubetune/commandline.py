"""How a Katib trial's primary container command is read: one shell line.

Katib's pod webhook joins the container's command and args with single spaces and runs the
result as one ``sh -c`` line; when the command starts with exactly ``sh -c`` or ``bash -c``,
that shell runs the line made of the remaining elements. So an argument written
``--architecture="[[36], [0, 1]]"`` reaches the program without its quotes, and an element
holding spaces or shell syntax is parsed again by the shell. :func:`katib_line` gives the
shell and the elements whose join is the line; :func:`is_simple_command` says whether that line
is one plain command, which the wrapper may ``exec`` in place (then a SIGTERM sent to the
wrapper's child reaches the training program itself, not a shell in between).
"""

from __future__ import annotations

import shlex

KATIB_SHELLS = ("sh", "bash")
"""The first elements Katib recognises (exactly these names) before a ``-c``."""

# Characters that end or redirect a simple command when they are not quoted.
_OPERATORS = frozenset(";&|<>()\n")
# First words that are not programs: reserved words and the builtins of sh and bash (an
# `exec` of them would run another program or fail, where the line runs the builtin).
_RESERVED_WORDS = (
    "! { } [[ ]] case do done elif else esac fi for function if in select then time until while"
)
_BUILTINS = (
    ". : [ alias bg break builtin cd command continue declare echo eval exec exit export false fc"
    " fg getopts hash jobs kill let local printf pwd read readonly return set shift source test"
    " times trap true type typeset ulimit umask unalias unset wait"
)
_NOT_PROGRAMS = frozenset(f"{_RESERVED_WORDS} {_BUILTINS}".split())


def katib_line(argv: list[str]) -> tuple[str, list[str]]:
    """The shell Katib runs the command with and the elements it joins into the line."""
    if len(argv) >= 2 and argv[0] in KATIB_SHELLS and argv[1] == "-c":
        return argv[0], argv[2:]
    return "sh", list(argv)


def _has_unquoted_operator(line: str) -> bool | None:
    """Whether ``line`` has a control or redirection operator outside quotes; None when a
    quote is left open (the shell refuses the line either way)."""
    quote = ""
    escaped = False
    for ch in line:
        if escaped:
            escaped = False
        elif quote == "'":
            quote = "" if ch == "'" else quote
        elif ch == "\\":
            escaped = True
        elif quote == '"':
            quote = "" if ch == '"' else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _OPERATORS:
            return True
    return None if quote or escaped else False


def is_simple_command(line: str) -> bool:
    """Whether ``line`` is one plain command that ``exec`` may run in place of the shell.

    Conservative: no unquoted operator or newline; no ``$(`` or backquote anywhere (Kubernetes
    expands ``$(VAR)`` after admission, and its value could add operators); the first word
    names a program (not a reserved word, a builtin, an assignment, an expansion or a comment).
    """
    if "$(" in line or "`" in line or _has_unquoted_operator(line) is not False:
        return False
    try:
        words = shlex.split(line)
    except ValueError:
        return False
    if not words:
        return False
    first = words[0]
    return (
        bool(first)
        and first not in _NOT_PROGRAMS
        and not any(c in first for c in "=$")
        and first[0] != "#"
    )
