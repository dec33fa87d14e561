"""What Qwen2.5-Coder-1.5B really answered in the issue-25 runs, shared by the stage tests that replay it."""

from __future__ import annotations

from typing import Any

CONTRACTIONS = "The test test_contractions_are_one_word in tests/test_core.py fails. Fix the code so that it passes."
# its plan for CONTRACTIONS: the goal and the only write resource are the test
TESTS_ONLY: dict[str, Any] = {
    "goal": "Fix the test test_contractions_are_one_word in tests/test_core.py so that it passes.",
    "status": "ready",
    "tasks": [{"label": "T1", "title": "Fix test_contractions_are_one_word", "complexity": 1,
               "description": "Fix the test test_contractions_are_one_word in tests/test_core.py",
               "resources": {"read": ["tests/test_core.py"], "write": ["tests/test_core.py"]},
               "acceptance": [{"label": "A1", "description": "the test passes",
                               "check": {"command": "python -m pytest tests/test_core.py"}}],
               "steps": [{"label": "S1", "title": "Modify test_core.py", "action": "modify_file",
                          "description": "Fix the test so that it passes"}]}]}
