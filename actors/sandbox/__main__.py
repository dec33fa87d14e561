"""``python -m actors.sandbox --spec <json>``: the sandbox process (see actors.sandbox.actor)."""

from __future__ import annotations

import hashlib  # noqa: F401  (before lean: the sandbox hashes file contents with OpenSSL's faster digests)

from actors import lean  # noqa: F401  (first of acode's: keeps this process lean)
from actors._base import main
from actors.sandbox.actor import SandboxActor

if __name__ == "__main__":
    main(SandboxActor)
