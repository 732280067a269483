"""What the call-log writer costs: time and CPU to write N queued records.

Usage (from the project root, after ``python3 dev.py test`` or ``run`` made .venv):

    .venv/bin/python bench/call_log_writer.py [--records 50000] [--database sqlite]

Starts a throwaway PostgreSQL (scripts/services.py; ``--database sqlite`` uses a temporary
SQLite file instead, the embedded default), creates one endpoint with a full-capture and a
metadata-capture tool, then pushes ``--records`` finished-request records into this process's
writer at once (as a burst of traffic would) and waits for them to be written. The records
are a realistic mix: tools/call with arguments and a result under both policies, and a
tools/list. Prints one JSON line: wall time, process CPU time (the writer thread is the only
busy thread while it flushes), rows per second and CPU microseconds per row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts import services  # noqa: E402


def records(count: int) -> list:
    from django.utils import timezone

    from mcp_app.models import Endpoint, Tool
    from mcp_app.services.calllog.writer import PendingCall

    endpoint = Endpoint.objects.create(slug="bench", title="bench")
    full = Tool.objects.create(
        name="echo", kind="python", config={"function": "echo"}, capture_mode="full"
    )
    meta = Tool.objects.create(name="add", kind="python", config={"function": "add"})
    endpoint.tools.add(full, meta)
    endpoint.refresh_from_db()
    tag = (endpoint.pk, endpoint.catalog_version)
    schema = {"type": "object", "properties": {"message": {"type": "string"}}}
    made = []
    for n in range(count):
        kind = n % 4
        row = {
            "created_at": timezone.now(),
            "duration_ms": 1.25,
            "endpoint_id": endpoint.pk,
            "endpoint_slug": "bench",
            "era": "modern",
            "protocol_version": "2026-07-28",
            "session_id": "",
            "http_method": "POST",
            "http_status": 200,
            "message_type": "request",
            "rpc_method": "tools/list" if kind == 3 else "tools/call",
            "rpc_id": str(n),
            "target": "" if kind == 3 else ("echo" if kind < 2 else "add"),
            "principal_id": None,
            "client_id": "",
            "remote_addr": "127.0.0.1",
            "user_agent": "bench/1.0",
            "status": "ok",
            "error_code": None,
            "error_message": "",
            "task_id": "",
            "worker": "",
        }
        if kind == 3:
            arguments, result, tool_pk = None, {"tools": [{"name": "echo"}, {"name": "add"}]}, None
        else:
            arguments = {"message": f"hello {n}", "count": n}
            result = {"content": [{"type": "text", "text": f"hello {n}"}], "isError": False}
            tool_pk = full.pk if kind < 2 else meta.pk
        made.append(PendingCall(row, arguments, result, tool_pk, schema, tag))
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    args = parser.parse_args()
    with ExitStack() as stack:
        if args.database == "postgresql":
            os.environ["DATABASE_URL"] = stack.enter_context(services.postgres())
        else:
            folder = stack.enter_context(tempfile.TemporaryDirectory())
            os.environ["DATABASE_URL"] = f"sqlite:///{folder}/bench.sqlite3"
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
        import django

        django.setup()
        from django.core.management import call_command

        from mcp_app.models import CallLog
        from mcp_app.services.calllog import writer as call_log_writer

        call_command("migrate", verbosity=0)
        batch = records(args.records)
        call_log_writer.call_log_flush(timeout=5)  # start the writer before timing
        cpu, wall = time.process_time(), time.perf_counter()
        call_log_writer.writer().put(batch)
        if not call_log_writer.call_log_flush(timeout=600):
            raise SystemExit("the writer did not finish within 600 s")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        written = CallLog.objects.count()
        print(
            json.dumps(
                {
                    "scenario": f"{args.records} queued records -> call log ({args.database})",
                    "written": written,
                    "wall_s": round(wall, 2),
                    "cpu_s": round(cpu, 2),
                    "rows_per_s": round(written / wall),
                    "cpu_us_per_row": round(cpu / written * 1e6, 1),
                }
            )
        )


if __name__ == "__main__":
    main()
