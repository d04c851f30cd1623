"""The ``ranktune`` script that ``pip install`` puts on the PATH: the same
command as the cargo-built binary (it is compiled into the extension), with
the same arguments, ``--help`` and exit statuses.

Owns only the hand-over: the arguments go to the Rust command as they came,
and ``tune --ranks N`` starts its ranks with this script itself.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Runs the command on ``sys.argv`` and exits with its status."""
    from ranktune import _ranktune

    cli = getattr(_ranktune, "cli_main", None)
    if cli is None:
        sys.stderr.write(
            "error: this build of ranktune's extension has no command in it (it was built "
            "without the `cli` feature); install the package with `pip install .`, or use the "
            "cargo-built binary (`cargo install --path crates/cli`)\n"
        )
        sys.exit(2)
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    rank_exe = script if script and os.access(script, os.X_OK) and os.path.isfile(script) else None
    argv = ["ranktune", *sys.argv[1:]]
    sys.stdout.flush()
    code = cli(argv, rank_exe)
    sys.exit(code)


if __name__ == "__main__":
    main()
