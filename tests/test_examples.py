"""The PyTorch-style example trains: two epochs on the generated-C device reaches a test
accuracy no untrained model would (the digits have 10 classes)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pytorch_style.py"


def test_pytorch_style_example_trains():
    spec = importlib.util.spec_from_file_location("pytorch_style", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.main(["--device", "cpu", "--epochs", "2"]) > 0.85
