"""Text to metric values: the TEXT format (default or user filter regexes) and JSON lines.

Pure functions over blocks of *complete* lines (`tailing` hands them over); what comes out is
`(name, value, timestamp)` triples in the order written, for `summaries`. Upstream behaviour
(Katib's file and stdout collectors) with these deliberate differences, each because a
streaming collector must not lose a whole trial's metrics over one odd line:

* a captured value that is empty or a lone sign is skipped rather than reported as text;
* the default format also captures `inf`, `-inf`, `infinity` and `nan` (any case), where
  upstream's regex captured `-` or nothing: every non-finite value, `1e309` included, then
  follows one rule (`kubetune.observations.parse_number`): kept as reported in `latest`, never
  `min`/`max`, never ranked;
* a JSON line that is not an object is skipped with a warning instead of aborting the
  collection, and JSON numbers are accepted as well as JSON strings (upstream ignores them).
"""

from __future__ import annotations

from kubetune import lightjson, lightlog
from kubetune.lazyregex import LazyPattern
from kubetune.typenames import TYPE_CHECKING, Protocol
from kubetune_pns_collector import literalscan

if TYPE_CHECKING:
    import re
    from collections.abc import Iterable, Sequence

log = lightlog.get(__name__)

DEFAULT_FORMAT = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"
# The default format made safe to run over many lines at once: `\s` may not cross a line end
# (on a single line it is the same regex), and the groups nobody reads are non-capturing.
# The value also takes a signed `inf`, `infinity` or `nan` in any case, as a whole word (upstream
# captured `-` of `-inf` and nothing of `inf`/`nan`): one rule for non-finite values, see
# `kubetune.observations.parse_number`.
# Every default-format regex is ASCII (`LazyPattern`'s default), as upstream's Go regexes are:
# Python's `\d` and `\w` would also match `１` or `٣`, which are no number
# (`kubetune.observations`).
_VALUE = r"[+-]?(?:(?i:inf(?:inity)?|nan)(?![\w|-])|[0-9]*(?:\.[0-9]+)?(?:[Ee][+-]?[0-9]+)?)"
_DEFAULT_BLOCK = r"([\w|-]+)[^\S\n]*=[^\S\n]*(" + _VALUE + ")"
# 1.5x faster: a name may not start right after a name character. That gives the same matches
# unless a match starts where the previous one ended (`loss=1epoch=2`: upstream also finds
# `epoch`), i.e. unless some value is directly followed by a name character; blocks where
# `_ADJACENT` (no backtracking, a cheap scan for `=`) finds that use the exact regex.
_DEFAULT_FAST = r"(?<![\w|-])([\w|-]+)[^\S\n]*=[^\S\n]*(" + _VALUE + ")"
_ADJACENT = r"=[^\S\n]*+[+-]?+[0-9]*+(?:\.[0-9]+)?+(?:[Ee][+-]?[0-9]+)?+[\w|-]"


_EXACT = LazyPattern(_DEFAULT_BLOCK)
_FAST = LazyPattern(_DEFAULT_FAST)
_VALUE_INTO_NAME = LazyPattern(_ADJACENT)


def _default_pattern(text: str) -> re.Pattern[str]:
    """The default format's regex for this block: the exact one where a value runs straight
    into a name, else the fast one. Compiled on first use, not at import: a collector whose
    names all take the literal scan below never needs them, and compiling them cost about a
    thirtieth of its start in every trial pod."""
    return (_EXACT if _VALUE_INTO_NAME.get().search(text) else _FAST).get()


# 2-3x faster again when every wanted name is known up front: one scan per name whose pattern
# starts with the name itself (the regex engine then skips to each occurrence of that literal),
# the name's left edge checked by a lookbehind placed after it. It finds what the exact regex
# finds for that name, provided (1) no occurrence of the name is directly preceded by a name
# character (the exact regex may start a match there when a value ends right before it:
# `x=1loss=2`; `name_after_name` looks for that) and (2) the name cannot be read as (the start
# of) a value: it starts with a letter or `_`, not like an exponent (`e5x`), and is not `inf`,
# `infinity` or `nan` (`_literal_safe`).
_DIGITS = literalscan.DIGITS
_NAME_CHARS = literalscan.NAME_CHARS

# The characters a parser scans by `literalscan` (string methods) before it takes the regexes
# for good. String methods scan about 6x slower (41 ns a character more) but need no `re`,
# whose import and compiles cost the collector 4.1 CPU-ms: a trial with a small log never pays
# for `re`, a chatty one at most 2.7 ms more (`python bench/collector_throughput.py --scan`).
STRING_SCAN_BUDGET = 64 * 1024


def _is_name(name: str) -> bool:
    """What the default format takes as a name (`[\\w|-]+`, ASCII), whole."""
    return bool(name) and _NAME_CHARS.issuperset(name)


def _exponent_start(name: str) -> bool:
    """`e5x` or `E-1`: read as (the start of) a value's exponent (`[Ee][+-]?[0-9]`)."""
    sign = 1 if name[1:2] in ("+", "-") else 0
    return name[:1] in ("E", "e") and name[1 + sign : 2 + sign] in _DIGITS


def _literal_safe(name: str) -> bool:
    first = name[:1]
    return (
        _is_name(name)
        and first not in _DIGITS
        and first not in ("|", "-")
        and not _exponent_start(name)
        and name.lower() not in ("inf", "infinity", "nan")
    )


def name_values(name: str) -> re.Pattern[str]:
    """The values of `name` (one group), in a regex led by the name itself."""
    import re

    quoted = re.escape(name)
    return re.compile(
        quoted + r"(?<![\w|-]" + quoted + r")[^\S\n]*=[^\S\n]*(" + _VALUE + ")", re.ASCII
    )


def name_after_name(name: str) -> re.Pattern[str]:
    """An occurrence of `name` right after a name character, followed by `=`."""
    import re

    quoted = re.escape(name)
    return re.compile(quoted + r"(?<=[\w|-]" + quoted + r")[^\S\n]*=", re.ASCII)


# A line that may start with an RFC 3339 timestamp (checked once per block, so blocks without
# any skip the per-line look-up); the leading `\n` makes the scan a fast literal search.
_TIMESTAMP_START = LazyPattern(r"\n[0-9]{4}-[0-9][0-9]-[0-9][0-9]T")


def _has_timestamp(text: str, by_strings: bool = False) -> bool:
    if by_strings:
        return literalscan.has_timestamp(text)
    return bool(_TIMESTAMP_START.get().search(text)) or literalscan.first_line_dated(text)


def _is_value(text: str) -> bool:
    """Empty or a lone sign (`loss=-`, the number regex's leftover) is no value."""
    return bool(text) and text not in ("+", "-")


Triple = tuple[str, str, float]
# (name, timestamp, values in order): what the summary takes in bulk.
Run = tuple[str, float, list[str]]


class FilterError(ValueError):
    """A `--filter` regex that cannot be used; the message names it."""


class Parser(Protocol):
    """Turns a block of complete lines (decoded, `\\n`-separated) into metric values: `parse`
    gives `(name, value, timestamp)` in the order written, `parse_runs` the same grouped into
    runs of one name and timestamp (order kept per name; the fast path for big logs)."""

    def parse(self, text: str) -> list[Triple]: ...

    def parse_runs(self, text: str) -> list[Run]: ...


def runs_of(triples: list[Triple]) -> list[Run]:
    """Group triples into runs of one name and timestamp, keeping each name's order."""
    by_name: dict[str, list[Run]] = {}
    for name, value, stamp in triples:
        runs = by_name.get(name)
        if runs is None:
            by_name[name] = [(name, stamp, [value])]
        elif runs[-1][1] == stamp:
            runs[-1][2].append(value)
        else:
            runs.append((name, stamp, [value]))
    return [run for runs in by_name.values() for run in runs]


def compile_filters(filters: Sequence[str]) -> list[re.Pattern[str]]:
    """Compile the user's metrics-format regexes; each needs two groups (name, value).

    Raises:
        FilterError: naming every bad filter (upstream's webhook demands the same).
    """
    import re

    compiled: list[re.Pattern[str]] = []
    problems: list[str] = []
    for text in filters:
        try:
            pattern = re.compile(text)
        except re.error as e:
            problems.append(f"filter {text!r} is not a valid regular expression: {e}")
            continue
        if pattern.groups < 2:
            problems.append(
                f"filter {text!r} needs two groups, the metric name and its value "
                f"(it has {pattern.groups})"
            )
            continue
        compiled.append(pattern)
    if problems:
        raise FilterError("; ".join(problems))
    return compiled


def parse_timestamp(token: str) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp with a zone (as Go's RFC3339Nano), else None."""
    if len(token) < 20 or token[4:5] != "-" or token[10:11] not in "Tt":
        return None
    from datetime import datetime  # only for lines that start with a time

    try:
        stamp = datetime.fromisoformat(token)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        return None
    return stamp.timestamp()


def _line_timestamp(text: str, start: int) -> float:
    end = text.find(" ", start, start + 64)
    token = text[start : end if end >= 0 else min(len(text), start + 64)].rstrip("\n")
    return parse_timestamp(token.split("\n", 1)[0]) or 0.0


class TextParser:
    """TEXT lines: every match of every filter, kept when its name is a wanted metric.

    The timestamp of a value is its line's first space-separated token when that is an
    RFC 3339 time, else 0 (upstream's zero time), so `latest` is then the last value written.
    """

    def __init__(self, names: Iterable[str], filters: Sequence[str] = ()) -> None:
        self.names = frozenset(names)
        self.default = not filters or list(filters) == [DEFAULT_FORMAT]
        self.filters = [] if self.default else compile_filters(filters)
        # The names for the literal scan, or None; a name with other characters
        # (`test/accuracy`) never matches the default format.
        matchable = sorted(n for n in self.names if _is_name(n))
        self.literal = (
            matchable if self.default and all(_literal_safe(n) for n in matchable) else None
        )
        self._string_chars_left = STRING_SCAN_BUDGET
        # Each name's (values, "preceded by a name character") regexes, once past the budget.
        self._literal_patterns: list[tuple[str, re.Pattern[str], re.Pattern[str]]] | None = None

    def parse(self, text: str) -> list[Triple]:
        if "\r" in text:
            text = text.replace("\r\n", "\n")
        if self.default:
            return self._parse_default(text)
        return self._parse_filters(text)

    def parse_runs(self, text: str) -> list[Run]:
        if self.default and "=" in text:
            if "\r" in text:
                text = text.replace("\r\n", "\n")
            if self.literal is not None:
                by_strings = len(text) <= self._string_chars_left
                if by_strings:
                    self._string_chars_left -= len(text)
                if not _has_timestamp(text, by_strings):
                    literal = self._literal_runs(text, self.literal, by_strings)
                    if literal is not None:
                        return literal
            text = "\n".join([line for line in text.split("\n") if "=" in line])
            if not _has_timestamp(text):
                pairs = _default_pattern(text).findall(text)
                runs: list[Run] = []
                for name in self.names:
                    values = [v for n, v in pairs if n == name and _is_value(v)]
                    if values:
                        runs.append((name, 0.0, values))
                return runs
        return runs_of(self.parse(text))

    def _literal_runs(self, text: str, names: list[str], by_strings: bool) -> list[Run] | None:
        """The runs by one literal-led scan per name, or None where that may differ from the
        exact regex (a name right after a name character)."""
        found: list[tuple[str, list[str]]] = []
        if by_strings:
            for name in names:
                values = literalscan.values(text, name)
                if values is None:
                    return None
                found.append((name, values))
        else:
            if self._literal_patterns is None:
                self._literal_patterns = [(n, name_values(n), name_after_name(n)) for n in names]
            if any(after.search(text) for _, _, after in self._literal_patterns):
                return None
            found = [(n, values_of.findall(text)) for n, values_of, _ in self._literal_patterns]
        runs: list[Run] = []
        for name, values in found:
            if "" in values or "+" in values or "-" in values:
                values = [v for v in values if _is_value(v)]
            if values:
                runs.append((name, 0.0, values))
        return runs

    def _parse_default(self, text: str) -> list[Triple]:
        names = self.names
        # Every match holds a `=`: lines without one are dropped before the regex scans them
        # (cheap in C, and a big saving on logs full of progress bars or binary noise).
        if "=" not in text:
            return []
        text = "\n".join([line for line in text.split("\n") if "=" in line])
        pattern = _default_pattern(text)
        if not _has_timestamp(text):
            return [(n, v, 0.0) for n, v in pattern.findall(text) if _is_value(v) and n in names]
        out: list[Triple] = []
        line_start = line_end = -1
        stamp = 0.0
        for m in pattern.finditer(text):
            name, value = m.group(1), m.group(2)
            if not _is_value(value) or name not in names:
                continue
            pos = m.start()
            if not line_start <= pos < line_end:
                line_start = text.rfind("\n", 0, pos) + 1
                found = text.find("\n", pos)
                line_end = len(text) if found < 0 else found
                stamp = _line_timestamp(text, line_start)
            out.append((name, value, stamp))
        return out

    def _parse_filters(self, text: str) -> list[Triple]:
        out: list[Triple] = []
        names = self.names
        for line in text.split("\n"):
            if not any(n in line for n in names):
                continue
            stamp: float | None = None
            for pattern in self.filters:
                for m in pattern.finditer(line):
                    name, value = (m.group(1) or "").strip(), (m.group(2) or "").strip()
                    if not _is_value(value) or name not in names:
                        continue
                    if stamp is None:
                        stamp = _line_timestamp(line, 0)
                    out.append((name, value, stamp))
        return out


class JsonParser:
    """JSON lines: one object a line; wanted keys with string or number values."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(names)

    def parse_runs(self, text: str) -> list[Run]:
        return runs_of(self.parse(text))

    def parse(self, text: str) -> list[Triple]:
        out: list[Triple] = []
        for line in text.split("\n"):
            line = line.strip()
            if not line:
                continue
            try:
                obj = lightjson.loads(line)
            except ValueError:
                log.warning("skipping a metrics line that is not JSON: %.200r", line)
                continue
            if not isinstance(obj, dict):
                log.warning("skipping a JSON metrics line that is not an object: %.200r", line)
                continue
            stamp = _json_timestamp(obj.get("timestamp"))
            for name in self.names.intersection(obj):
                value = obj[name]
                if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                    continue
                text_value = value.strip() if isinstance(value, str) else lightjson.dumps(value)
                if text_value:
                    out.append((name, text_value, stamp))
        return out


def _json_timestamp(value: object) -> float:
    """RFC 3339 string or epoch seconds (upstream), else 0."""
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return parse_timestamp(value.strip()) or 0.0
    return 0.0
