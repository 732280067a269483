"""bench/catalog_bulk.py reports each phase's own peak memory (issue #30).

Each phase runs in a process the command starts. Linux carries the peak of the memory a
process had before it ran a program into that program's ``ru_maxrss``, so the YAML export
phase reported the command's own peak (152 MiB, PyYAML writing the input file) instead of
its 121 MiB. ``peak_mib`` reads the process's own high-water mark.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELD_MIB = 200


def test_a_phase_reports_its_own_peak_not_the_commands() -> None:
    # The command's peak: HELD_MIB resident (every byte written) while the phase starts.
    held = bytearray(b"x") * (HELD_MIB << 20)
    try:
        child = subprocess.run(
            [sys.executable, "-c", "from bench.catalog_bulk import peak_mib; print(peak_mib())"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        del held

    # A Python importing the command's module: about 15 MiB of its own.
    assert float(child.stdout) < HELD_MIB / 2, child.stdout
