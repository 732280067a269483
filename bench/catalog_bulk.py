"""Catalog import and export at size: a 10,000-tool catalog into an empty database, again
unchanged, and exported.

Usage (from the project root, after ``python3 dev.py test`` or ``run`` made .venv):

    .venv/bin/python bench/catalog_bulk.py [--tools 10000] [--endpoints 10] [--format yaml]
        [--profile PHASE]

Starts a throwaway PostgreSQL (scripts/services.py) and migrates. Writes a generated document
(``--tools`` template tools, each with an input schema of its own, spread over
``--endpoints`` endpoints, a group allowed on every tenth) as a ``--format`` file, then runs
each phase in a fresh Python process, as ``manage.py mcp_import`` / ``mcp_export`` would, and
prints one JSON line per phase: the seconds the phase took inside the process (Django set up
before the clock starts) and the process's CPU seconds over them, its own peak resident
memory (``peak_mib``), the 1-minute load average at the end, and the changes reported:

- ``import``: the file into the empty catalog, read as ``mcp_import`` reads it (its bytes,
  ``catalog_parse``, ``catalog_import``; also the seconds and CPU seconds of the read alone,
  and the values the document holds, as ``MCP_CATALOG_MAX_VALUES`` counts them);
- ``reimport``: the same file again (no change);
- ``export``: the whole catalog, streamed as ``mcp_export`` writes it, to a file in the same
  format (also the seconds until its first piece of text);
- ``reimport-export``: that export read back (no change): an export imports with the
  default bounds.

``--profile import`` (or another phase) runs that phase under cProfile and prints the 30
most expensive functions by cumulative time instead. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts import services  # noqa: E402

PHASES = ("import", "reimport", "export", "reimport-export")


def document(tools: int, endpoints: int) -> dict[str, object]:
    slugs = [f"bulk-{n}" for n in range(endpoints)]
    return {
        "format": "mcphost-catalog/1",
        "endpoints": [
            {"slug": slug, "title": f"Bulk {slug}", "auth_mode": "public"} for slug in slugs
        ],
        "tools": [
            {
                "name": f"tool_{n:05d}",
                "description": f"Generated tool {n}: says hello to a name.",
                "kind": "template",
                "config": {"template": "Hello {{ name }} from tool " + str(n)},
                "input_schema": {
                    "type": "object",
                    # A schema of its own per tool, as in a real catalog: each is checked.
                    "properties": {
                        "name": {
                            "type": "string",
                            "maxLength": 64,
                            "description": f"Whom tool {n} greets.",
                        }
                    },
                    "required": ["name"],
                },
                "enabled": True,
                "endpoints": [slugs[n % endpoints]],
                "allowed_groups": ["bulk-callers"] if n % 10 == 0 else [],
            }
            for n in range(tools)
        ],
    }


def dump(document: dict[str, object], fmt: str) -> str:
    """``document`` as ``catalog_io.catalog_dump`` writes it (without Django set up)."""
    from mcp_app.services import catalog_yaml

    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return catalog_yaml.document_text(document)


def peak_mib() -> float:
    """This process's own peak resident memory, in MiB: its memory's high-water mark
    (``VmHWM``). Not ``ru_maxrss``: Linux carries the peak of the memory a process had
    before it ran a program into the program's ``ru_maxrss``, so a phase started by this
    command reported the command's own peak when that was higher (152 MiB for a YAML
    export of 121, after PyYAML wrote the 10,000-tool file here)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:  # no procfs
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (line,) = (line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def values(document: object) -> int:
    """The values ``document`` holds, as ``catalog_check_bounds`` counts them."""
    count, stack = 0, [document]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(part for pair in item.items() for part in pair)
        elif isinstance(item, list):
            stack.extend(item)
    return count


def phase(name: str, path: str, profile: bool) -> None:
    """One phase in this (fresh) process; prints its JSON line."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
    import django

    django.setup()
    from mcp_app.services.catalog_io import catalog_export_text, catalog_import, catalog_parse

    fmt = Path(path).suffix[1:]
    exported = Path(path).with_name(f"export.{fmt}")

    def run() -> dict[str, object]:
        if name == "export":
            # As mcp_export writes it: each piece written as it comes, then let go.
            started = time.perf_counter()
            first: float | None = None
            size = 0
            with exported.open("w", encoding="utf-8") as out:
                for piece in catalog_export_text(fmt=fmt):
                    if first is None:
                        first = time.perf_counter() - started
                    out.write(piece)
                    size += len(piece)
            return {"bytes": size, "first_piece_seconds": round(first or 0, 3)}
        # As mcp_import reads its file: bytes, parsed (bounds checked), then imported.
        started, cpu_started = time.perf_counter(), time.process_time()
        source = exported if name == "reimport-export" else Path(path)
        document = catalog_parse(source.read_bytes(), fmt=fmt)
        read = {
            "read_seconds": round(time.perf_counter() - started, 2),
            "read_cpu_seconds": round(time.process_time() - cpu_started, 2),
        }
        report = catalog_import(document=document)
        return {**read, "changes": len(report.changes), "values": values(document)}

    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(run)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
        return
    started, cpu_started = time.perf_counter(), time.process_time()
    figures = run()
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    print(
        json.dumps(
            {
                "phase": name,
                "seconds": round(seconds, 2),
                # This process's own CPU time: steadier than the seconds on a shared machine.
                "cpu_seconds": round(cpu_seconds, 2),
                "peak_mib": round(peak_mib()),
                "load": round(os.getloadavg()[0], 1),
                **figures,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--endpoints", type=int, default=10)
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml")
    parser.add_argument("--profile", choices=PHASES, help="profile this phase instead")
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        phase(args.phase, args.file, profile=args.profile == args.phase)
        return
    with ExitStack() as stack:
        env = {
            **os.environ,
            "DATABASE_URL": stack.enter_context(services.postgres()),
            "DJANGO_SETTINGS_MODULE": "mcpsite.settings",
            "SECRET_KEY": "bench-" + "x" * 50,
        }
        env.pop("REDIS_URL", None)
        python = sys.executable
        subprocess.run([python, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        setup = "from django.contrib.auth.models import Group; "
        setup += "Group.objects.create(name='bulk-callers')"
        subprocess.run([python, "manage.py", "shell", "-c", setup], cwd=ROOT, env=env, check=True)
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        path = folder / f"catalog.{args.format}"
        path.write_text(dump(document(args.tools, args.endpoints), args.format))
        for name in PHASES:
            command = [python, __file__, "--phase", name, "--file", str(path)]
            if args.profile:
                command += ["--profile", args.profile]
            subprocess.run(command, cwd=ROOT, env=env, check=True)


if __name__ == "__main__":
    main()
