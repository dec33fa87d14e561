"""The workspace's state: what a snapshot of it sees, and how two snapshots are compared.

A session's baseline is one of two kinds: a git snapshot on a private ref, made and
diffed with plumbing no repository setting can hijack (``gitsnap``), or a content
manifest in acode's own store for a workspace that is not a git work tree
(``manifest``). Both read the tree through ``snapshot`` (regular files and symlinks,
never following a link) and honour the project's ``.gitignore`` files (``ignore``, which
the tree tools share). These modules build on :mod:`actors.sandbox.confinement` only;
the baseline tools that record and diff them live in :mod:`actors.sandbox.tools.baseline`.
Checkpoints (``checkpoints``: one before every call that may change the workspace) are
commits in a git-format store in acode's home, written by Python (``objects``, ``packs``)
from a stat-cached walk (``scan``) and put back under a journal (``restore``).
"""
