"""The pathological `%` pattern `(a+)+b` on `a...ac`: the gjson package's regex against
kubetune's bounded evaluation (Go's wildcard match), and the worst validations.

Before (the library's regex) the time doubles with each `a`, so only small inputs are run;
after, the time is linear in the text and the same pattern runs on 1,000,000 characters. Also
printed: the validation time of a condition that doubles a value with multipaths before
`@tostr` (refused by the modifier bound), of one nesting queries over it (stopped by the CPU
deadline), and of a long expression of nested queries.

    python bench/gjson_match.py [--max-small 24]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import time
from collections.abc import Callable

import gjson

from kubetune import boundedgjson, jobstatus

EXPR = 'conditions.#(type%"(a+)+b")'
STARS = 'conditions.#(type%"*a*a*a*b")'


def _doc(n: int) -> dict[str, list[dict[str, str]]]:
    return {"conditions": [{"type": "a" * n + "c"}]}


def _seconds(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    # a "no match" or a refusal raises: the time is what is measured
    with contextlib.suppress(gjson.GJSONError, jobstatus.ConditionError):
        run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-small", type=int, default=24, help="largest n for the regex")
    args = parser.parse_args()
    print(f"pattern {EXPR!r} on 'a' * n + 'c'")
    print(f"{'n':>9}  {'gjson regex s':>14}  {'bounded s':>10}")
    for n in range(16, args.max_small + 1, 2):
        before = _seconds(functools.partial(gjson.get, _doc(n), EXPR))
        after = _seconds(functools.partial(boundedgjson.get, _doc(n), EXPR))
        print(f"{n:>9}  {before:>14.3f}  {after:>10.6f}")
    for n in (10_000, 100_000, 1_000_000):
        after = _seconds(functools.partial(boundedgjson.get, _doc(n), EXPR))
        star = _seconds(functools.partial(boundedgjson.get, _doc(n), STARS))
        print(f"{n:>9}  {'(not run)':>14}  {after:>10.6f}   '*a*a*a*b': {star:.3f} s")
    print("validation (webhook and controller), worst shapes:")
    doubling = "@this" + "|[@this,@this]" * 24
    cases = {
        "doubling then @tostr": doubling + "|@tostr",
        "doubling then nested queries": doubling + "|" + "#(" * 30 + "a" + ")" * 30,
        "nested queries, repeated": ("#(" * 16 + "a" + ")" * 16 + "|") * 15,
    }
    for name, expr in cases.items():
        jobstatus._validate.cache_clear()
        cpu = time.thread_time()
        wall = _seconds(functools.partial(jobstatus.validate_expression, expr))
        print(f"  {name} ({len(expr)} chars): {wall:.3f} s, CPU {time.thread_time() - cpu:.3f} s")


if __name__ == "__main__":
    main()
