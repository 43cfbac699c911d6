"""``gingham cache``: what the disk cache holds, and carrying it to other machines.

    $ gingham cache info                   # where it is, entries and MiB per namespace
    $ gingham cache export warm.tar.gz     # everything, to an archive
    $ gingham cache import warm.tar.gz     # on a machine of the same kind
    $ gingham cache clear                  # the next runs build again

The work is :mod:`gingham.cache_archive`'s; this module parses and prints.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gingham.cache_archive import (gingham_version, cache_usage, clear_cache, export_archive,
                                   import_archive)
from gingham.config import get_config


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cache", help="the disk cache: what it holds; carry it to other machines",
        description="The disk cache of compiled kernels and programs, device models and tuned "
                    "schedules. Export it where it is warm, import it on machines of the same "
                    "kind: their first run then compiles and tunes nothing.")
    commands = parser.add_subparsers(dest="cache_command", metavar="ACTION")
    info = commands.add_parser("info", help="where the cache is and what it holds")
    info.set_defaults(func=_info)
    export = commands.add_parser("export", help="write the whole cache to an archive")
    export.add_argument("path", type=Path, help="the archive to write (.tar.gz)")
    export.set_defaults(func=_export)
    load = commands.add_parser("import", help="add an exported archive's entries to the cache")
    load.add_argument("path", type=Path, help="an archive written by `gingham cache export`")
    load.set_defaults(func=_import)
    clear = commands.add_parser("clear", help="remove every entry (the next runs build again)")
    clear.set_defaults(func=_clear)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{count} {namespace}" for namespace, count in sorted(counts.items())) \
        or "nothing"


def _info(args) -> int:
    root = get_config().cache_dir
    usage = cache_usage(root)
    print(f"cache: {root}")
    for namespace, (entries, size) in usage.items():
        print(f"  {namespace:<14} {entries:>7} entries  {size / 2**20:9.1f} MiB")
    if not usage:
        print("  (empty)")
    return 0


def _clear(args) -> int:
    root = get_config().cache_dir
    usage = clear_cache(root)
    entries = sum(count for count, _ in usage.values())
    size = sum(size for _, size in usage.values())
    print(f"cleared {root}: {entries} entries, {size / 2**20:.1f} MiB")
    return 0


def _export(args) -> int:
    summary = export_archive(args.path)
    print(f"exported {_counts(summary.entries)} to {summary.path} "
          f"({summary.bytes / 2**20:.1f} MiB)")
    if summary.damaged:
        print(f"left out {summary.damaged} damaged entr{'y' if summary.damaged == 1 else 'ies'}")
    return 0


def _import(args) -> int:
    summary = import_archive(args.path)
    print(f"imported into {get_config().cache_dir}: added {_counts(summary.added)}; "
          f"kept {_counts(summary.present)} already here")
    if summary.renewed:
        print(f"tuned schedules joined this cache's own: the programs of "
              f"{summary.renewed} device(s) will be lowered again once")
    if summary.rejected:
        shown = ", ".join(summary.rejected[:5]) + (", ..." if len(summary.rejected) > 5 else "")
        print(f"rejected {len(summary.rejected)} member(s) (a bad name or checksum): {shown}")
    if summary.manifest.get("gingham") != gingham_version():
        print("note: the archive comes from another version of gingham: its kernels are "
              "found, its compiled programs are not (each is lowered again once)")
    return 0
