"""Reporting benchmark results: a table for people, JSON records for tools.

    print(format_table(results, device_id))
    write_json(path, records(results, context))   # atomic: a temp file, then os.replace

One JSON record per (op, baseline) pair (one record with ``baseline`` null for an op without
baselines). ``ratio`` is baseline time / gingham time: above 1, gingham is faster. A record of an
op that failed its golden check or did not run has ``gingham_seconds`` and ``ratio`` null and
``status`` ``"wrong"`` or ``"error"``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import tempfile
from pathlib import Path
from typing import Any, Sequence

from .ops import OpResult
from .timing import Timing


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            break
    value = seconds / scale
    digits = 0 if value >= 100 else 1 if value >= 10 else 2
    return f"{value:.{digits}f} {unit}"


def rate(result: OpResult, seconds: float | None) -> tuple[str, float | None]:
    """(unit, value): GFLOP/s for compute-bound ops, GB/s for bandwidth-bound ones."""
    if seconds is None or seconds <= 0:
        return ("GB/s" if result.nbytes else "GFLOP/s"), None
    if result.nbytes:
        return "GB/s", result.nbytes / seconds / 1e9
    if result.flops:
        return "GFLOP/s", result.flops / seconds / 1e9
    return "", None


def _rate_text(result: OpResult, seconds: float | None) -> str:
    unit, value = rate(result, seconds)
    if value is None:
        return "-"
    return f"{value:.1f} {unit}" if value < 1000 else f"{value:.0f} {unit}"


def ratio(result: OpResult, baseline_timing: Timing | None) -> float | None:
    """baseline time / gingham time, only when both exist and gingham passed its check."""
    if result.seconds is None or baseline_timing is None or result.seconds <= 0:
        return None
    return baseline_timing.seconds / result.seconds


def _gingham_cell(result: OpResult) -> str:
    status = result.status
    if status == "wrong":
        return "WRONG"
    if status == "error":
        return "ERROR"
    return _time_cell(result.timing)


def _time_cell(timing: Timing | None) -> str:
    """The median time, marked ``*`` when it is not a median of several trials."""
    if timing is None:
        return "-"
    return format_seconds(timing.seconds) + ("*" if timing.note else "")


def _ratio_text(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


def _check_cell(result: OpResult) -> str:
    if result.golden is None:
        return "-"
    mark = "ok" if result.golden.ok else "FAIL"
    return f"{mark} {result.golden.rel_error:.0e}"


def text_table(rows: list[list[str]], right: set[int]) -> str:
    """``rows`` (the header first) as aligned columns; those in ``right`` right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.rjust(w) if i in right else cell.ljust(w)
                 for i, (cell, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _first_cell(seconds: float | None) -> str:
    return "-" if seconds is None else format_seconds(seconds)


def format_table(results: Sequence[OpResult], device_id: str) -> str:
    """The results as a text table, one line per (op, baseline), then the notes.

    ``first`` is gingham's first run (compile, or load from the disk cache, plus one run);
    ``compile`` is a torch.compile baseline's compile and first run. Neither is in the times.
    """
    header = ["name", "device", "shape", "dtype", "check", "gingham", "rate", "first",
              "baseline", "time", "rate", "compile", "ratio"]
    rows = [header]
    notes: dict[str, list[str]] = {}

    def note(result: OpResult, text: str) -> None:
        notes.setdefault(text, []).append(f"{result.name} {_short(result.dtype)}")

    for result in results:
        first = [result.name, device_id, result.shape, result.dtype, _check_cell(result),
                 _gingham_cell(result), _rate_text(result, result.seconds),
                 _first_cell(result.first_seconds)]
        blank = [""] * len(first)
        entries = result.baselines or [None]
        for position, entry in enumerate(entries):
            lead = first if position == 0 else blank
            if entry is None:
                rows.append(lead + ["-", "-", "-", "-", "-"])
                continue
            if entry.error is not None:
                rows.append(lead + [entry.name, "ERROR", "-", "-", "-"])
                note(result, f"{entry.name} failed: {entry.error}")
                continue
            seconds = entry.timing.seconds if entry.timing else None
            value = ratio(result, entry.timing)
            compile_text = "" if entry.compile_seconds is None else _first_cell(
                entry.compile_seconds)
            rows.append(lead + [entry.name, _time_cell(entry.timing), _rate_text(result, seconds),
                                compile_text, _ratio_text(value)])
        if result.error is not None:
            note(result, f"gingham failed: {result.error}")
        elif result.golden is not None and not result.golden.ok:
            note(result, f"gingham's result is WRONG: relative error "
                         f"{result.golden.rel_error:.2e} against {result.golden.reference} "
                         f"(tolerance {result.golden.tolerance:g}); not timed")
        for text in result.notes:
            note(result, text)
    lines = [text_table(rows, right={5, 6, 7, 9, 10, 11, 12})]
    lines.append("")
    lines.append("ratio = baseline time / gingham time (> 1: gingham is faster); times are "
                 "medians per run; check = relative error against the reference; first = "
                 "gingham's compile (or disk-cache load) + first run; compile = torch.compile's "
                 "compile + first run (neither is in the times)")
    # A starred time has a note from its measurement: one timed run, or other processes
    # competing for the CPU while it was timed.
    starred = [timing.note for result in results
               for timing in (result.timing, *(e.timing for e in result.baselines))
               if timing is not None and timing.note]
    for text in dict.fromkeys(starred):
        lines.append(f"* {text}")
    for text, names in notes.items():
        lines.append(f"{text} [{_rows_text(list(dict.fromkeys(names)))}]")
    return "\n".join(lines)


def _short(dtype: str) -> str:
    return {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}.get(dtype, dtype)


def _rows_text(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 4 else f"{', '.join(names[:3])} and " \
        f"{len(names) - 3} more"


# ---- JSON ------------------------------------------------------------------------------------

def machine_description() -> str:
    """Host name, architecture, CPU model and logical CPU count."""
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{platform.node()} {platform.machine()} {model} ({os.cpu_count()} CPUs)".strip()


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def records(results: Sequence[OpResult], context: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per (op, baseline); ``context`` (device, versions, machine) joins each."""
    out = []
    for result in results:
        unit, gingham_rate = rate(result, result.seconds)
        key = "gbps" if unit == "GB/s" else "gflops"
        base = {
            "name": result.name,
            "group": result.group,
            "dtype": result.dtype,
            "shape": result.shape,
            "params": result.params,
            "status": result.status,
            "golden": result.golden.as_dict() if result.golden else None,
            "error": result.error,
            "gingham_seconds": result.seconds,
            "gingham_runs": result.timing.runs if result.timing else 0,
            "gingham_trials": result.timing.trials if result.timing else [],
            "gingham_note": result.timing.note if result.timing else "",
            "gingham_first_seconds": result.first_seconds,
            key: _finite(gingham_rate),
            "flops": result.flops,
            "bytes": result.nbytes,
            "notes": list(result.notes),
        }
        entries = result.baselines or [None]
        for entry in entries:
            record = {**context, **base}
            if entry is None:
                record.update(baseline=None, baseline_label=None, baseline_seconds=None,
                              ratio=None, baseline_error=None, baseline_compile_seconds=None)
            else:
                seconds = entry.timing.seconds if entry.timing else None
                record.update(baseline=entry.name, baseline_label=entry.label,
                              baseline_seconds=seconds,
                              ratio=_finite(ratio(result, entry.timing)),
                              baseline_error=entry.error,
                              baseline_compile_seconds=entry.compile_seconds)
                record["baseline_" + key] = _finite(rate(result, seconds)[1])
            out.append(record)
    return out


def write_json(path: str | os.PathLike, payload: Any) -> None:
    """Write ``payload`` as JSON atomically: a reader sees the old file or the whole new one."""
    write_text(path, json.dumps(payload, indent=2, allow_nan=False) + "\n")


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` atomically (a temp file beside it, then ``os.replace``)."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
