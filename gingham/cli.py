"""The ``gingham`` command line.

Each subcommand lives in its own module and is registered in ``SUBCOMMANDS`` below by a
dotted path to a function ``register(subparsers)`` that adds its parser and sets
``func=handler`` (``handler(args) -> int``, the exit status). To add ``gingham bench``,
write ``gingham/bench/cli.py`` with ``register`` and add one line here.

    $ gingham devices                     # table of every device, default marked with *
    $ gingham devices --json              # the same, machine-readable
    $ gingham devices --set-default opencl:0
    $ gingham devices --model             # the tuner's device model (measured once, cached)
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Callable, Sequence

from gingham.errors import GinghamError

# name -> "module:function" registering the subcommand. Imported when the CLI starts.
SUBCOMMANDS: dict[str, str] = {
    "devices": "gingham.cli:register_devices",
    "demo": "gingham.demo:register",
    "bench": "gingham.bench.cli:register",
    "tune": "gingham.tune.cli:register",
    "cache": "gingham.cache_cli:register",
    # "run": "gingham.frontends.cli:register",
}


def _load(target: str) -> Callable[[argparse._SubParsersAction], None]:
    module_name, _, function = target.partition(":")
    return getattr(importlib.import_module(module_name), function)


def build_parser() -> argparse.ArgumentParser:
    """The parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="gingham", description="gingham: a portable deep-learning compiler")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for target in SUBCOMMANDS.values():
        _load(target)(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 gingham error, 2 usage)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except GinghamError as exc:
        print(f"gingham: error: {exc}", file=sys.stderr)
        return 1


# ---- gingham devices ------------------------------------------------------------------------

def register_devices(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "devices", help="list the devices gingham can run on",
        description="List every device gingham found (the default marked with *), or set "
                    "the default device.")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--set-default", metavar="ID",
                        help="make ID (e.g. cpu, opencl:0, cuda:0) the default device, "
                             "saved in the user config file")
    parser.add_argument("--model", action="store_true",
                        help="show the device model the tuner uses (driver queries plus "
                             "bandwidth, arithmetic rate and launch overhead measured once)")
    parser.set_defaults(func=devices_command)


def _size(nbytes: int) -> str:
    if not nbytes:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) \
                else f"{value:.1f} {unit}"
    return f"{nbytes} B"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)


def devices_command(args: argparse.Namespace) -> int:
    from gingham import devices
    from gingham.config import get_config, write_config_file

    if args.set_default:
        device = devices.get_device(args.set_default)  # DeviceNotFoundError lists the ids
        path = write_config_file({"device": device.id})
        print(f"default device: {device.id} ({device.info.name}); saved in {path}")
        if get_config().device not in (None, device.id):
            print(f"note: GINGHAM_DEVICE={get_config().device} overrides it in this "
                  "environment", file=sys.stderr)
        return 0

    found = devices.list_devices()
    default = devices.default_device_id()
    if args.model:
        return _models(found, args.json)
    missing = devices.unavailable()
    if args.json:
        payload = {"default": default,
                   "devices": [dict(d.info.as_dict(), default=d.id == default) for d in found],
                   "unavailable": missing}
        print(json.dumps(payload, indent=2))
        return 0

    rows = [["", "id", "name", "vendor", "kind", "CUs", "memory", "local", "L1", "L2", "L3",
             "line"]]
    for d in found:
        info = d.info
        rows.append(["*" if d.id == default else "", info.id, info.name, info.vendor,
                     info.kind, str(info.compute_units), _size(info.global_memory_bytes),
                     _size(info.local_memory_bytes), _size(info.l1_bytes),
                     _size(info.l2_bytes), _size(info.l3_bytes),
                     f"{info.cache_line_bytes} B" if info.cache_line_bytes else "-"])
    print(_table(rows))
    notes = [f"no {prefix} devices: {reason}" for prefix, reason in missing.items()]
    if default not in {d.id for d in found}:
        notes.insert(0, f"the configured default {default!r} is not available")
    if notes:
        print("\n" + "\n".join(notes))
    return 0


def _models(found: list, as_json: bool) -> int:
    from gingham.tune.device_model import device_model

    models = [device_model(d) for d in found if d.info.dialect is not None]
    if as_json:
        print(json.dumps([m.as_dict() for m in models], indent=2))
        return 0
    rows = [["id", "workers", "simd", "sub-group", "vec", "threads/unit", "local/unit",
             "GB/s", "GFLOP/s fp32", "launch us", "source"]]
    for m in models:
        rows.append([m.device, str(m.workers), str(m.simd_width), str(m.sub_group_size),
                     str(m.vector_width_float), str(m.threads_per_unit),
                     _size(m.local_memory_per_unit), f"{m.bandwidth / 1e9:.1f}",
                     f"{m.flops('float32') / 1e9:.1f}", f"{m.launch_overhead * 1e6:.1f}",
                     f"measured in {m.measure_seconds:.2f} s" if m.measured else "estimated"])
    print(_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
