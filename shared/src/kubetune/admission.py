"""How a refusal by kubetune's admission webhook says "cannot check now, retry".

Why: the API server writes a webhook's refusal into the refused request's error (and so into a
Job's `FailedCreate` Event) as `admission webhook "<name>" denied the request: <message>`,
whatever HTTP code the webhook answered: a reader of the Event cannot tell "this pod is wrong"
(code 400/403, lasting) from "the webhook could not look something up" (code 500, passing) but
by the message. So every code-5xx refusal of kubetune's webhook carries `TRANSIENT`, and the
trial-controller does not count those against a Trial.
"""

from __future__ import annotations

__all__ = ["TRANSIENT", "is_transient", "mark_transient"]

TRANSIENT = "(transient: retry)"


def mark_transient(message: str) -> str:
    """``message`` ending with the marker (once)."""
    return message if TRANSIENT in message else f"{message} {TRANSIENT}"


def is_transient(message: str) -> bool:
    """Whether a refusal message carries kubetune's marker."""
    return TRANSIENT in message
