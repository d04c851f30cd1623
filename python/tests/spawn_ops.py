"""Importable helpers for the spawn tests that need torch or an enum (kept
apart from isolate_ops so that a worker without torch never imports it)."""

import enum


class Tile(enum.Enum):
    SMALL = 16
    BIG = 64


def mm(a, b):
    return a @ b


def mm_t(a, b):
    return (b.t() @ a.t()).t()
