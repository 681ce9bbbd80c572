"""What a reported metric may be: the one number grammar and the size bounds every writer
(the collector, db-manager, the trials/status authorizer) and every reader applies.

A primitive: `kubetune.observations` and `kubetune.metrichistory` both build on it.
"""

from __future__ import annotations

UNAVAILABLE = "unavailable"
"""What Katib's collectors report for a metric never seen; not a number, always accepted."""

MAX_NAME_CHARS = 256
"""The longest metric name any writer accepts (a name is an identifier, not data)."""
MAX_VALUE_CHARS = 128
"""The longest metric value any writer accepts: a float's text needs at most 24 characters."""
MAX_TEXT_CHARS = 4096
"""The longest text (not a number) value a collector may report: kept in `latest`, never ranks."""
MAX_METRICS = 100
"""The most metrics one observation may hold (the objective and its additional metrics)."""

NUMBER_PATTERN = (
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf(?:inity)?|nan))"
)
"""The one number grammar of every writer and reader, in ASCII (`re.ASCII`): ASCII digits, an
optional fraction and exponent, or a signed inf/infinity/nan in any case. Python's `float()`
also takes `1_0`, surrounding blanks and non-ASCII digits (`１`); none of them is a number here."""

_SPECIALS = ("inf", "infinity", "nan")


def is_number(value: str) -> bool:
    """Whether `value` is written in `NUMBER_PATTERN` (finite or not).

    Checked with string methods, not the pattern: `re` and its compile cost instructions in
    every trial pod's collector, which calls this for each value it reports."""
    if not isinstance(value, str) or not value.isascii():
        return False
    body = value[1:] if value.startswith(("+", "-")) else value
    lowered = body.lower()
    if lowered in _SPECIALS:
        return True
    mantissa, marked, exponent = lowered.partition("e")
    # str.isdigit of ASCII text: one or more of 0-9.
    if marked and not (exponent[1:] if exponent.startswith(("+", "-")) else exponent).isdigit():
        return False
    whole, dot, fraction = mantissa.partition(".")
    if whole:
        return whole.isdigit() and (not fraction or fraction.isdigit())
    return bool(dot) and fraction.isdigit()


def is_finite_number(value: str) -> bool:
    """Whether `value` is written in `NUMBER_PATTERN` and is not inf, infinity or nan."""
    return is_number(value) and value.lstrip("+-").lower() not in _SPECIALS


def metric_error(name: str, value: str, *, numbers_only: bool = False) -> str | None:
    """Why a reported (name, value) may not be stored, or None: the one check, and the one
    message, of every writer (collector, db-manager, the status authorizer).

    A value is a number (at most `MAX_VALUE_CHARS`), `unavailable`, or, unless `numbers_only`
    (db-manager: Katib's SDK sends floats), text of at most `MAX_TEXT_CHARS`: Katib's darts
    reports its genotype as a metric; text is kept as reported in `latest` and never ranks."""
    if not name:
        return "the metric name is empty"
    if len(name) > MAX_NAME_CHARS:
        return (
            f"metric name {name[:40]!r}... has {len(name)} characters, more than "
            f"{MAX_NAME_CHARS}: use a shorter name"
        )
    if value == UNAVAILABLE:
        return None
    if is_number(value):
        if len(value) > MAX_VALUE_CHARS:
            return (
                f"value of metric {name!r} is a number of {len(value)} characters, more than "
                f"{MAX_VALUE_CHARS}: report the number itself"
            )
        return None
    if numbers_only:
        return (
            f"value {value[:40]!r} of metric {name!r} is not a number: write ASCII digits with "
            'an optional fraction and exponent, e.g. "0.25" or "-1.5e-3" (or inf, nan)'
        )
    if len(value) > MAX_TEXT_CHARS:
        return (
            f"value of metric {name!r} is text of {len(value)} characters, more than "
            f"{MAX_TEXT_CHARS}: report a number, or shorter text"
        )
    return None
