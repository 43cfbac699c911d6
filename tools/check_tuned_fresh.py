"""One training step of a benchmark model in this (fresh) process: how much it compiled and tuned.

    python3 -m gingham tune model story --device cuda:0          # once
    GINGHAM_TUNE=on python3 tools/check_tuned_fresh.py story cuda:0  # then: compiles 0, searches 0

With ``GINGHAM_TUNE=on`` a tuning-database miss would start a search, so "searches 0" shows that
every tunable kernel was found tuned, and "compiles 0" that every binary came from the disk cache.
"""

from __future__ import annotations

import json
import sys

import gingham
from gingham.devices import get_device
from gingham.tune import search
from gingham.tune.cli import model_step


def main(name: str, device_id: str) -> None:
    device = get_device(device_id)
    # The benchmark's own step (model, layout, optimiser, data): the kernels `tune model` tuned.
    step, (x, y) = model_step(name, device_id)
    loss = step(gingham.tensor(x, device=device_id), gingham.tensor(y, device=device_id))
    print(json.dumps({"model": name, "device": device_id, "loss": loss.item(),
                      "compiles": device.stats.compiles, "cache_hits": device.stats.cache_hits,
                      "searches": search.stats.searches, "db_hits": search.stats.hits,
                      "db_misses": search.stats.misses}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
