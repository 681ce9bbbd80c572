"""A seeded shuffle of 0..size-1 computed one index at a time, for grids of any size.

Shuffling a list of every index costs memory and time in the size (a grid of 21 parameters of
1,001 values has ~1e63 points: no list holds that). Here `permute(i, size, seed)` maps i to its
place directly: a balanced Feistel network (six rounds, each keyed by SHAKE-256 of the seed) is
a bijection on the 2**bits integers, bits even and just above size; applying it again until the
result falls below `size` (cycle walking) keeps it a bijection on 0..size-1. Each application
lands below `size` with probability above 1/4, so a few rounds of hashing per index, O(log size).
"""

from __future__ import annotations

import hashlib

ROUNDS = 6


def _round(seed: int, number: int, half: int, bits: int) -> int:
    data = f"{seed}/{number}/{half}".encode()
    return int.from_bytes(hashlib.shake_256(data).digest((bits + 7) // 8)) & ((1 << bits) - 1)


def _feistel(value: int, seed: int, bits: int) -> int:
    mask = (1 << bits) - 1
    left, right = value >> bits, value & mask
    for number in range(ROUNDS):
        left, right = right, left ^ _round(seed, number, right, bits)
    return (left << bits) | right


def permute(index: int, size: int, seed: int) -> int:
    """The place of `index` (0 ≤ index < size) in the shuffle of 0..size-1 fixed by `seed`."""
    if not 0 <= index < size:
        raise IndexError(f"index {index} outside 0..{size - 1}")
    half = max(1, ((size - 1).bit_length() + 1) // 2)
    value = _feistel(index, seed, half)
    while value >= size:
        value = _feistel(value, seed, half)
    return value
