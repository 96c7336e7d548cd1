"""Latency bounds that hold on a loaded, shared machine.

What the server does to a request (make it wait for a busy thread, for an attacker's
connection, for a timeout) happens again on every try of the same measurement; a spike of the
machine's scheduler (other test workers, another suite beside this one) does not. So a bound is
asserted on the first of a few tries that meets it: a server that starves requests fails every
try, a busy machine fails one now and then.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from http import HTTPStatus

TRIES = 3

Answers = Sequence[tuple[int, float]]


def served_within(bound: float, measure: Callable[[], Answers], tries: int = TRIES) -> Answers:
    """`measure`'s (status, seconds) answers of the first try in which every one is 200 OK
    and took under `bound` seconds; fails with every try's answers when none did."""
    seen: list[Answers] = []
    for _ in range(tries):
        answers = measure()
        if all(status == HTTPStatus.OK and seconds < bound for status, seconds in answers):
            return answers
        seen.append(answers)
    raise AssertionError(f"no try served every request 200 OK within {bound} s: {seen}")
