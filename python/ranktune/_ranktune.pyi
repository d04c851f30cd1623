"""Type stubs of the compiled extension (use the ``ranktune`` package)."""

import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ranktune.records import (
    Entry,
    ExportReport,
    ImportReport,
    Measured,
    RankInfo,
    Resolution,
    SaveReport,
    TrtllmSaveReport,
)

_Path = Union[str, "os.PathLike[str]"]

__version__: str

class Error(Exception):
    """Base class of every error ranktune raises."""

class LockTimeout(Error):
    """A cache's lock could not be taken in time (RANKTUNE_LOCK_TIMEOUT)."""

class CorruptFile(Error):
    """A file does not parse (truncated, not JSON, not UTF-8, ...)."""

class UnsupportedFile(Error):
    """A well-formed file this version must not read or rewrite."""

def rank_info() -> RankInfo:
    """{"rank", "world_size", "local_rank", "source"} from the launcher's environment."""

class Cache:
    """A ranktune cache (a file, or ``redis://host[:port][/db][?prefix=NAME]``),
    shared by every rank and process of a job."""

    def __init__(self, location: _Path) -> None: ...
    @property
    def path(self) -> "os.PathLike[str]": ...
    @property
    def location(self) -> str:
        """The path, or the URL with any password redacted."""
    @staticmethod
    def from_env() -> Optional["Cache"]:
        """The cache ``RANKTUNE_CACHE`` (else ``TLLM_AUTOTUNER_CACHE_PATH``)
        names, or None: the rule ``ranktune tune`` follows."""
    @property
    def meeting_place(self) -> str:
        """Where the ranks meet for a collective strategy: the cache's
        directory (absolute), or its Redis server (password redacted)."""
    def entries(self, rank: Optional[int] = None) -> List[Entry]:
        """Entries with the fields of ``ranktune cache show --json``."""
    def save(self, entries: Iterable[Dict[str, Any]]) -> SaveReport:
        """Merge entries in through the locked, crash-safe save."""
    def blocklist(self) -> List[Dict[str, Any]]:
        """The blocklist's records (known-bad tactics) as dicts, like
        ``ranktune cache show --json``'s ``blocklist``."""
    def check(self) -> List[str]:
        """Problems by the rules of ``ranktune cache check`` (empty: healthy)."""
    def import_file(
        self,
        path: _Path,
        format: str = "auto",
        rank: Optional[int] = None,
        from_rank: Optional[int] = None,
    ) -> ImportReport:
        """Import a cache file (or folder) of any format ranktune reads:
        ``"auto"`` (decided from the file, as ``ranktune cache import``),
        ``"ranktune"``, ``"trtllm"``, ``"vllm-moe"``, ``"flashinfer"`` or
        ``"triton"``."""
    def export(self, path: _Path, format: str = "trtllm", force: bool = False) -> ExportReport:
        """Write the cache in another tuner's format, as ``ranktune cache
        export`` does: ``"trtllm"`` or ``"flashinfer"`` (one file),
        ``"vllm-moe"`` or ``"triton"`` (a folder of files). Returns
        ``{"written", "skipped", "files"}``."""

class SpanSite:
    def __init__(self, name: str, cat: str = "python") -> None: ...
    def open(self, args: Optional[Dict[str, Any]] = None) -> Span: ...

class Span:
    def close(self) -> None: ...

def trace_start(path: _Path, iterations: Optional[str] = None) -> str: ...
def trace_stop() -> Optional[str]: ...
def trace_step() -> None: ...
def trace_active() -> bool: ...
def trace_after_fork_in_child() -> None: ...
def trace_summary(paths: List[str], top: int = 10) -> Dict[str, Any]: ...
def trace_merge(paths: List[str], out: _Path, align: str = "absolute") -> Dict[str, Any]: ...
def trtllm_save(path: _Path, sections: List[Tuple[str, List[Tuple[str, int, str, float]]]], metadata: List[Tuple[str, Any]]) -> Dict[str, Any]: ...
def trtllm_load(path: _Path, rank: int) -> Optional[Dict[str, Any]]: ...

class TrtllmLock:
    def release(self) -> None: ...

def trtllm_lock(path: _Path) -> TrtllmLock: ...
DEFAULT_TIE_TOLERANCE: float
def tune_measure(
    n: int, run: Any, timed: bool = False, warmup: Optional[int] = None, samples: Optional[int] = None
) -> List[Measured]: ...

# Isolated measuring (crates/py/src/isolate.rs).
class IsolationLimits:
    """The limits of an isolated worker, as the Rust tuner sets them."""
    def __init__(self, local_ranks: int = 1, timeout: Optional[float] = None, memory_mib: Optional[int] = None) -> None: ...
    @property
    def timeout(self) -> Optional[float]: ...
    @property
    def memory(self) -> Optional[int]: ...
    @property
    def start_timeout(self) -> float: ...
    @property
    def derived(self) -> Tuple[float, float, float]: ...
    def timeout_for(self, reference_us: Optional[float] = None) -> float: ...

# Durable progress of tuning(save_every=...) (crates/py/src/autosave.rs).
SAVE_EVERY_ENV: str

class TuningSession:
    """What ``with ranktune.tuning() as session:`` gives: the save policy
    and what was saved so far (crates/py/src/session.rs)."""
    @property
    def policy(self) -> str:
        """``"auto"``, ``"end"`` or ``"every"``."""
    @property
    def interval(self) -> float:
        """The seconds between saves of ``"every"``; 0.0 for the others."""
    @property
    def saved(self) -> int:
        """New choices saved so far."""
    @property
    def pending(self) -> int:
        """Choices made and not saved yet."""
    @property
    def saves(self) -> int:
        """Saves that wrote something."""
    @property
    def failed_saves(self) -> int:
        """Saves that failed (each warned)."""
    @property
    def save_seconds(self) -> float:
        """What the saves cost, in seconds."""
    def save(self) -> int:
        """Saves the pending choices now; how many (a failed save raises)."""

def session_begin(save_every: Union[None, str, int, float] = None) -> TuningSession:
    """A new session with the policy of ``save_every`` (None: ``$RANKTUNE_SAVE_EVERY``)."""
def session_end(session: TuningSession) -> None:
    """Ends ``session``: saves what is pending (a failed save raises)."""
def session_sigterm_save() -> None:
    """Saves everything pending at once (the SIGTERM handler's save)."""

# One op's decisions by the Rust tuner's rules (crates/py/src/tuned.rs).
def miss_rule(found: str, tuning: bool) -> str:
    """The miss dispatch by name (``ranktune_tune::miss_action``)."""
class TunedOp:
    def __init__(
        self,
        op: str,
        candidates: List[Tuple[str, int, int, Any]],
        cache: Optional[Cache],
        strategy: Optional[str],
        tolerance: float,
        retry_failed: Optional[bool],
        validate: bool,
        legacy_checksum: str,
    ) -> None: ...
    @property
    def strategy(self) -> str: ...
    @property
    def collective(self) -> bool: ...
    @property
    def checksum(self) -> str: ...
    @property
    def tolerance(self) -> float: ...
    @property
    def measured(self) -> int: ...
    @property
    def fallbacks(self) -> List[str]: ...
    @property
    def skipped(self) -> List[Tuple[str, Any, str]]: ...
    @property
    def failures(self) -> List[Tuple[Tuple[int, ...], str, Any, str, str]]: ...
    def choices(self) -> Dict[Tuple[int, ...], int]:
        """{bucket: position} of the choices made or loaded so far."""
    def spawn_init(self, bucket: Tuple[int, ...], positions: List[int], spec: Dict[str, Any]) -> Dict[str, Any]:
        """The init message of a spawned worker measuring ``positions`` (ValueError when too large)."""
    def position(self, bucket: Tuple[int, ...]) -> Optional[int]:
        """The position of ``bucket``'s choice, if any."""
    def dispatch(self, bucket: Tuple[int, ...], tuning: bool, level: int) -> Tuple[str, int]:
        """(action, position) of a miss: hit, agreed, check, tune, together or fallback."""
    def checked(self, bucket: Tuple[int, ...], why: Optional[str], level: int) -> None:
        """The outcome of the first use's check (``why``: why it failed)."""
    def measure(self, bucket: Tuple[int, ...], positions: List[int], run: Any, level: int) -> List[Measured]:
        """The stats of ``positions``; ``run(ps) -> (stats, hard)`` measures them."""
    def tune(self, bucket: Tuple[int, ...], run: Any, level: int) -> int:
        """Measures every candidate, decides and records; the winner's position."""
    def resolved(self, bucket: Tuple[int, ...], res: Resolution, level: int) -> int:
        """Records what the ranks resolved; the choice's position."""

ISOLATE_ENV: str
TIMEOUT_ENV: str
MEMORY_ENV: str
def isolation_settings(
    isolate: Any = None, timeout: Any = None, memory: Any = None
) -> Tuple[str, Optional[IsolationLimits]]:
    """(mode, limits) of isolate=/candidate_timeout=/candidate_memory= (None: their variables; limits None when off)."""
def isolation_local_ranks() -> int:
    """Ranks on this machine, as the launcher says (else 1)."""
def reason_signal_name(sig: int) -> str:
    """``SIGSEGV``, or ``signal N``."""
def reason_mib(bytes: int) -> str:
    """Bytes as MiB as a reason says them: ``512 MiB``, ``1.5 MiB``."""
def reason_last_line(text: str) -> str:
    """The last non-empty line of ``text``, at most 300 characters."""
def reason_memory_line(text: str) -> Optional[str]:
    """The line of a worker's standard error that says an allocation failed."""
def reason_classify(
    status: Optional[int], max_rss: int, killed_for: Optional[Tuple[str, str]], memory_limit: Optional[int], stderr: str
) -> Tuple[str, str]:
    """Why a worker is lost, ``(kind, reason)``: the tuner's rule
    (``isolation::reasons::classify``)."""

class WorkerHandle:
    """A started worker, supervised by the Rust tuner's handle (takes over
    the pid and both descriptors)."""

    def __init__(self, pid: int, sock_fd: int, err_fd: int, memory: Optional[int] = None) -> None: ...
    @staticmethod
    def spawn(program: _Path, args: List[str], env: Dict[str, str], memory: Optional[int] = None) -> "WorkerHandle":
        """Starts ``program args`` as a worker (the Rust tuner's start of a worker program)."""
    @property
    def pid(self) -> int: ...
    def request(
        self, message: Optional[Dict[str, Any]], limit: float
    ) -> Tuple[Optional[Dict[str, Any]], Optional[Tuple[str, str]]]:
        """``(answer, None)``, or ``(None, (kind, reason))`` once it is lost."""
    def kill(self) -> None: ...
    def close(self) -> None: ...
    def tell_to_end(self) -> None: ...
    def try_reap(self) -> bool: ...

class WorkerPool:
    """An op's workers under the Rust tuner's pool policy."""

    def __init__(self, limits: IsolationLimits) -> None: ...
    def measure(
        self,
        positions: List[int],
        start: Callable[[], Tuple[WorkerHandle, Optional[Dict[str, Any]]]],
        init: Optional[Dict[str, Any]],
        fork: bool,
        warmup: Optional[int] = None,
        samples: Optional[int] = None,
    ) -> Tuple[List[Measured], List[Tuple[int, str, str]]]:
        """One bucket's stats at ``positions`` and its hard failures ``(i, kind, reason)``."""
    def end(self, wait: bool = True) -> None: ...
    @property
    def worker_pid(self) -> Optional[int]: ...
    @property
    def starts(self) -> int: ...
    @property
    def start_seconds(self) -> float: ...

def reap_ended(wait: bool = False) -> None:
    """Reaps the workers told to exit that have (``wait``: all of them)."""
def worker_prepare(parent: int) -> bool:
    """Sets this process up as a measuring worker; False when its parent is gone."""
def worker_limit_memory(extra: Optional[int]) -> Optional[int]:
    """Limits this worker's address space to its size plus ``extra`` bytes (None: no limit)."""
def worker_serve(fd: int, handle: Callable[[Dict[str, Any]], Dict[str, Any]], ready: bool = True) -> None:
    """A worker's loop on socket ``fd``: answers each request with ``handle(request)`` until the end of input."""
def worker_run(run_once: Callable[[], Any], reps: int, timed: bool, memory: Optional[int]) -> Dict[str, Any]:
    """A worker's answer to a run request: ``{"us": x}``, or ``{"error", "kind"}`` when a run raised."""

PROTOCOL_VERSION: int
PROTOCOL_MAX_LINE: int
def protocol_read(line: bytes, side: str) -> Dict[str, Any]:
    """One worker-protocol line written by ``side`` (``"worker"`` or ``"tuner"``) as a dict."""
def protocol_line(message: Dict[str, Any], side: str) -> bytes:
    """A message of ``side`` as its protocol line (newline included)."""

# What ranktune.autotune asks the Rust crates (crates/py/src/rules.rs).
STRATEGIES: Tuple[str, ...]
DEFAULT_STRATEGY: str
PYTHON_FINGERPRINT: str

class Buckets:
    """The tuner's bucket rule: ``"pow2"``, ``"exact"`` or a list of bucket values."""
    def __init__(self, spec: Union[str, Sequence[int]]) -> None: ...
    def __call__(self, dims: Tuple[int, ...]) -> Tuple[int, ...]: ...

def tune_strategy(name: Optional[str] = None) -> Tuple[str, bool]:
    """(canonical name, collective) of a strategy; None: $RANKTUNE_STRATEGY, else the default."""
def tune_checksum(op: str, candidates: List[Tuple[str, List[Any]]]) -> str:
    """The candidate-set checksum of (runner, [tactic, ...]) pairs."""
def tune_block(
    cache: Cache,
    op: str,
    runner: str,
    tactic: Any,
    bucket: List[int],
    kind: str,
    message: str,
    rank: Optional[int],
) -> None:
    """Puts a candidate on the blocklist at ``bucket`` for this environment."""
def tune_retry_failed() -> bool:
    """``$RANKTUNE_RETRY_FAILED`` as a bool (ValueError when it is not yes/no)."""

def collective_choice() -> str:
    """What ``RANKTUNE_COLLECTIVE`` asks for: auto, file, single, mpi or
    redis (a bad value raises ValueError)."""
def job_id() -> Optional[str]:
    """This run's id from the launcher's environment, or None."""

class Coordinator:
    """The ranks of one job tuning together through `directory` (or MPI)."""
    def __init__(self, directory: _Path, timeout: Optional[float] = None) -> None: ...
    @staticmethod
    def for_cache(cache: Cache, timeout: Optional[float] = None) -> "Coordinator":
        """The ranks meeting where `ranktune tune --cache` meets: the cache
        file's directory, or the cache's Redis server."""
    @staticmethod
    def over_store(
        store: Any,
        rank: int,
        world_size: int,
        job: str,
        timeout: Optional[float] = None,
        name: Optional[str] = None,
    ) -> "Coordinator":
        """The ranks meeting in a key-value store (`set`, `get` -> bytes or
        None, `delete`), e.g. torch.distributed's c10d store."""
    def describe(self) -> str: ...
    def resolve(
        self,
        strategy: str,
        op: str,
        bucket: List[List[int]],
        checksum: str,
        n: int,
        local_hit: Optional[int],
        measure: Any,
        tolerance: float = ...,
    ) -> Resolution: ...


def torch_trace_target(
    path: Optional[_Path] = None, rank: Optional[int] = None, world_size: Optional[int] = None
) -> Dict[str, Any]:
    """This rank's torch.profiler trace file by ranktune's rule, and the run
    id and clock base ranktune's own traces write."""

def torch_profile_window(value: Optional[str] = None) -> Optional[List[Tuple[int, int]]]:
    """Inclusive iteration ranges from `value` or RANKTUNE_PROFILE_ITERS /
    TLLM_PROFILE_START_STOP; None when unset."""
def torch_trace_publish(
    raw: _Path, path: _Path, cycle: int, defaults: Dict[str, Any], other: Dict[str, Any]
) -> os.PathLike:
    """Publishes torch.profiler's exported trace ``raw`` as cycle ``cycle`` of ``path``; the file written."""

def cli_main(argv: List[str], rank_exe: Optional[str] = None) -> int:
    """The `ranktune` command (only in builds with the `cli` feature, as the
    wheel's)."""
