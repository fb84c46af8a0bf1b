"""Wait until a store holds a run of a variant started after a time (a parent that another GPU has started).

    python scripts/wait_for_run.py STORE VARIANT SINCE_EPOCH_S [TIMEOUT_S]

Exit 0 when there is one, 1 on timeout. Used by scripts/h200_search.sh so that a child names this call's run
of its parent, not an older one.
"""

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tracker.store import Store  # noqa: E402


def main() -> int:
    store, variant, since = sys.argv[1], sys.argv[2], float(sys.argv[3])
    deadline = time.monotonic() + (float(sys.argv[4]) if len(sys.argv) > 4 else 60.0)
    while time.monotonic() < deadline:
        run_id = Store(store).latest_run_of_variant(variant)
        started = Store(store).get_run(run_id)["started_at"] if run_id else None
        if started is not None and started.astimezone(UTC) >= datetime.fromtimestamp(since, UTC):
            return 0
        time.sleep(1.0)
    return 1


if __name__ == "__main__":
    sys.exit(main())
