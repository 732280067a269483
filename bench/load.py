"""wrk, driven from Python: one closed-loop run of one JSON-RPC request, with unique ids.

Each run writes a small Lua script that numbers every request (the SDK routes a response by its
request id, so repeating one id would measure something else), counts answers that are not
status 200 or lack an expected piece of text, and prints that count when wrk ends. The
server's CPU time (utime + stime of its process, all threads) is read from /proc around the run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Any

BODY_ID = 987654321  # stands for the request id in a body template; replaced per request
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# An answer slower than this counts as a timeout (wrk leaves it out of the latencies).
TIMEOUT_SECONDS = 10


@dataclass(frozen=True)
class Request:
    """One POST to replay: headers, a JSON-RPC body (its id is renumbered), and what a good
    answer contains."""

    headers: dict[str, str]
    body: dict[str, Any]
    expect: str = "hello world"
    extra: dict[str, Any] = field(default_factory=dict)


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (every thread), in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        # The command name (field 2) may hold spaces; the fields after it are fixed.
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_kib(pid: int) -> int:
    """Resident set size of process ``pid`` in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def lua_script(request: Request) -> str:
    body = json.dumps({**request.body, "id": BODY_ID}, separators=(",", ":"))
    prefix, suffix = body.split(str(BODY_ID))
    headers = {"content-type": "application/json", **request.headers}
    lines = [
        f"local prefix = {json.dumps(prefix)}",
        f"local suffix = {json.dumps(suffix)}",
        f"local expect = {json.dumps(request.expect)}",
        "local headers = {}",
        *(f"headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()),
        "local counter = 0",
        "bad = 0",
        "local threads = {}",
        "function setup(thread) table.insert(threads, thread) end",
        "function request()",
        "  counter = counter + 1",
        '  return wrk.format("POST", nil, headers, prefix .. counter .. suffix)',
        "end",
        "function response(status, hdrs, body)",
        "  if status ~= 200 or not string.find(body, expect, 1, true) then bad = bad + 1 end",
        "end",
        "function done(summary, latency, requests)",
        "  local total = 0",
        '  for _, t in ipairs(threads) do total = total + t:get("bad") end',
        '  io.write("BAD " .. total .. "\\n")',
        "end",
    ]
    return "\n".join(lines) + "\n"


def _ms(out: str, label: str) -> float:
    found = re.search(rf"^\s+{re.escape(label)}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    if found is None:
        return float("nan")
    return float(found.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[found.group(2)]


def wrk(
    url: str, request: Request, *, seconds: float, connections: int, server_pid: int | None
) -> dict[str, Any]:
    """One wrk run (one thread, ``connections`` connections); figures as a dict."""
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is missing: install it with `apt-get install wrk`")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(lua_script(request))
    command = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency"]
    command += ["--timeout", f"{TIMEOUT_SECONDS}s", "-s", script.name, url]
    try:
        cpu_before = cpu_seconds(server_pid) if server_pid else 0.0
        run = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30)
        cpu_after = cpu_seconds(server_pid) if server_pid else 0.0
    finally:
        os.unlink(script.name)
    out = run.stdout
    total = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if run.returncode != 0 or total is None or rps is None:
        raise RuntimeError(f"wrk failed ({run.returncode}):\n{out}\n{run.stderr}")
    requests = int(total.group(1))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    timeouts = re.search(r"timeout (\d+)", socket_errors.group(1)) if socket_errors else None
    bad = re.search(r"^BAD (\d+)$", out, re.M)
    return {
        "requests": requests,
        "rps": float(rps.group(1)),
        "p50_ms": round(_ms(out, "50%"), 3),
        "p99_ms": round(_ms(out, "99%"), 3),
        "cpu_us_per_req": round((cpu_after - cpu_before) * 1e6 / requests, 1)
        if server_pid and requests
        else None,
        "bad": int(bad.group(1)) if bad else None,
        "non_2xx": int(non_2xx.group(1)) if non_2xx else 0,
        "socket_errors": socket_errors.group(1).strip() if socket_errors else "",
        "timeouts": int(timeouts.group(1)) if timeouts else 0,
    }
