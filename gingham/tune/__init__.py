"""Tuning: the device model, the cost model, the measured search and its database.

* :mod:`.device_model` — what a device is (driver queries + micro-benchmarks, cached on disk);
* :mod:`.cost` — estimated seconds of a kernel plan under a candidate schedule;
* :mod:`.space` — every legal schedule of the tiled families, ranked by the cost model;
* :mod:`.search` — compile and time the best candidates, keep the fastest (:func:`tuning`);
* :mod:`.db` — the persistent tuning database keyed by (kernel key, device key);
* :mod:`.algorithms` — which way a layer is built (a 3x3 convolution: direct or Winograd),
  timed both ways and stored in the same database;
* :mod:`.cli` — ``gingham tune ops`` / ``gingham tune model``.

Compilation (:mod:`gingham.compiler.schedule`) takes a tuned schedule from the database when
there is one, else the cost model's choice.
"""
