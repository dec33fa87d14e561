#!/usr/bin/env python3
"""Checkpoint figures (issue 27's targets), printed as one JSON object; not run in CI.

``scripts/bench.py --only checkpoints`` runs it as a group of the whole benchmark
(:func:`measure`); run alone, it takes ``--files``, ``--takes`` and ``--loose``.

A repository of ``--files`` files (default 10,000, in 100 directories of 100, ~1 KB each)
is made with ``git init`` + ``git add`` + ``git commit`` in a temp dir, then packed with
``git gc`` as a clone is (``--loose``: left with a loose object per file in its ``.git``,
twice the files for a checkpoint to walk), then:

- ``first_ms``: the first take (every file read, hashed and stored; target ≤ 2 s);
- ``take_ms``: ``--takes`` takes (default 100), each after changing up to 10 files
  (p50 target ≤ 50 ms, p99 ≤ 200 ms);
Each take's time is given as wall time (``took_ms``) and as this process's CPU time
(``cpu_ms``): the benchmark machine is shared, and the CPU time is what a take costs.

- ``growth``: a session of ``--takes`` calls that edits 20 files (each call rewrites one of
  them): the store's growth against the size of the blobs changed (target ≤ 2×).

The repository is left alone for 2 s after ``git commit`` before the first take, as a
workspace is between its last edit and a session's start: the stat cache treats a file
written within 2 s of a take as racy and reads it again (see
:mod:`actors.sandbox.workspace.scan`), and a benchmark whose repository is a second old would
measure that rereading of every file instead of the steady state.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.sandbox.workspace.checkpoints import Checkpoints, Meta  # noqa: E402


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def _repo(root: Path, files: int, loose: bool) -> list[Path]:
    made = []
    for n in range(files):
        path = root / f"pkg{n // 100:03d}" / f"mod{n % 100:03d}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"# module {n}\n" + "x = 1\n" * 170)
        made.append(path)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}
    steps = [["init", "-q"], ["add", "-A"], ["-c", "gc.auto=0", "commit", "-qm", "init"]]
    for args in steps if loose else [*steps, ["gc", "-q"]]:
        subprocess.run(["git", "-C", str(root), *args], check=True, env=env)
    return made


def _edit(path: Path, n: int) -> int:
    data = path.read_bytes() + f"# edit {n}\n".encode()
    path.write_bytes(data)
    return len(data)


def measure(files: int = 10_000, takes: int = 100, loose: bool = False) -> dict[str, object]:
    """The figures (see the module docstring) for a repository of ``files`` files."""
    rng = random.Random(27)
    with tempfile.TemporaryDirectory(prefix="acode-bench-ckpt-") as tmp:
        work, store = Path(tmp) / "w", Path(tmp) / "store"
        work.mkdir()
        load_before = os.getloadavg()
        made = _repo(work, files, loose)
        walked = sum(len(names) for _, _, names in os.walk(work))
        time.sleep(2.1)  # see the docstring: the steady state, not the racy rereading of a 1 s old repository
        checkpoints = Checkpoints(str(store), str(work))
        cpu = time.process_time()
        first = checkpoints.take(Meta(session="bench", call="first"))
        first_cpu = (time.process_time() - cpu) * 1000
        took, cpus, hashed = [], [], []
        for n in range(takes):
            for path in rng.sample(made, rng.randint(1, 10)):
                _edit(path, n)
            cpu = time.process_time()
            taken = checkpoints.take(Meta(session="bench", call=f"call {n}"))
            cpus.append((time.process_time() - cpu) * 1000)
            took.append(taken.took_ms)
            hashed.append(taken.hashed)
        size_before = checkpoints.size_bytes()
        edited = rng.sample(made, 20)
        blobs = 0
        for n in range(takes):
            blobs += _edit(edited[n % len(edited)], 1000 + n)
            checkpoints.take(Meta(session="bench", call=f"edit {n}"))
        growth = checkpoints.size_bytes() - size_before
        return {
            "files": files, "files_walked_with_git_dir": walked,
            "loose": loose,
            "first_ms": first.took_ms, "first_cpu_ms": round(first_cpu, 1), "first_target_ms": 2000,
            "take_ms": {"p50": _percentile(took, 0.5), "p99": _percentile(took, 0.99),
                        "max": max(took), "targets": {"p50": 50, "p99": 200},
                        "cpu_p50": _percentile(cpus, 0.5), "cpu_p99": _percentile(cpus, 0.99),
                        "files_read_p50": _percentile([float(h) for h in hashed], 0.5)},
            "growth": {"store_bytes": growth, "changed_blob_bytes": blobs, "ratio": round(growth / blobs, 2),
                       "target_ratio": 2.0},
            "store_bytes": checkpoints.size_bytes(),
            "load": {"before": load_before, "after": os.getloadavg()},
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--takes", type=int, default=100)
    parser.add_argument("--loose", action="store_true", help="leave the repository's objects loose")
    args = parser.parse_args()
    print(json.dumps(measure(args.files, args.takes, args.loose), indent=2))


if __name__ == "__main__":
    main()
