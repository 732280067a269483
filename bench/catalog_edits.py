"""Edit one tool's description every ``--interval`` seconds for ``--seconds``, through the ORM.

Run by bench/compare.py next to a wrk run of ``tools/list`` on the same endpoint, as the
catalog edits an operator makes while clients are busy. Saving the model (not an UPDATE
query) is the point: the signals fire, the endpoint's catalog version is bumped and every
process hears of the change, as after an edit in the admin. Prints ``{"edits": n}`` at the end.

Needs DATABASE_URL (and REDIS_URL, as the server has) in the environment.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True, help="slug of the endpoint")
    parser.add_argument("--tool", required=True, help="name of the tool to edit")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--interval", type=float, default=0.2)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
    import django

    django.setup()
    from mcp_app.models import Tool

    tool = Tool.objects.get(endpoints__slug=args.endpoint, name=args.tool)
    edits = 0
    started = time.monotonic()
    deadline = started + args.seconds
    while (now := time.monotonic()) < deadline:
        tool.description = f"Edited by the benchmark ({edits}) at {time.time():.3f}."
        tool.save()
        edits += 1
        # A fixed cadence, however long the save took.
        time.sleep(max(0.0, started + edits * args.interval - time.monotonic()))
    print(json.dumps({"edits": edits, "seconds": round(now - started, 1)}), flush=True)


if __name__ == "__main__":
    main()
