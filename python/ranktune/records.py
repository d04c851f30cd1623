"""The records the API returns, as ``typing.TypedDict`` types: plain dicts
at run time, with their keys and value types spelled out for type checkers
and readers.

Owns only the declarations (the extension's stubs, ``_ranktune.pyi``, name
them as return types); the values are made by the Rust extension.
"""

from __future__ import annotations

from typing import Any, List, Optional, TypedDict

__all__ = [
    "RankInfo",
    "Stats",
    "Measured",
    "Candidate",
    "Entry",
    "SaveReport",
    "ImportReport",
    "ExportReport",
    "TrtllmSaveReport",
    "Resolution",
]


class RankInfo(TypedDict):
    """``ranktune.rank_info()``: this process's place in the job."""

    rank: int
    world_size: int
    local_rank: int
    source: str


class Stats(TypedDict):
    """One candidate's timings, microseconds (the Rust tuner's statistics)."""

    min_us: float
    median_us: float
    p90_us: float
    spread: float
    samples: int


class Measured(TypedDict, total=False):
    """One measured candidate: its timings, or ``error`` when it failed."""

    min_us: float
    median_us: float
    p90_us: float
    spread: float
    samples: int
    error: str


class Candidate(TypedDict, total=False):
    """One (runner, tactic) tried for an entry's bucket: ``stats`` when it
    ran, ``error`` when it failed."""

    runner: str
    runner_index: int
    tactic: Any
    stats: Stats
    error: str


class Entry(TypedDict):
    """``Cache.entries()``: one stored choice, with the fields of
    ``ranktune cache show --json``."""

    rank: Optional[int]
    section: str
    op: str
    runner: str
    fingerprint: str
    bucket: List[List[int]]
    tactic: Any
    time_us: float
    stale: bool
    runner_index: int
    checksum: str
    env: str
    created_unix: int
    candidates: List[Candidate]


class SaveReport(TypedDict):
    """``Cache.save()``: entries written, and the cache's total after."""

    written: int
    total: int


class ImportReport(TypedDict):
    """``Cache.import_file()``: entries read (in ``format``, or ``"empty"``),
    skipped, written, and the cache's total after."""

    read: int
    format: str
    skipped: int
    written: int
    total: int


class ExportReport(TypedDict):
    """``Cache.export()``: entries written and skipped, files written."""

    written: int
    skipped: int
    files: int


class TrtllmSaveReport(TypedDict):
    """``ranktune.trtllm.save_cache()``: entries written, the file's total
    after (where another rank's rewrite folded this save, the entries it
    wrote, as ``Cache.save()`` reports), and entries skipped (those of
    excluded ops)."""

    written: int
    total: int
    skipped: int


class Resolution(TypedDict):
    """``Coordinator.resolve()``: how the ranks resolved one bucket."""

    kind: str
    winner: Optional[int]
    results: List[Measured]
    measured_here: int
    fallback: Optional[str]
