"""The configuration object: defaults, environment overrides, the user config file."""

from __future__ import annotations

import json
from pathlib import Path

import platformdirs
import pytest

from gingham.config import (DEFAULT_CFLAGS, Config, ConfigError, get_config,
                            read_config_file, write_config_file)

ENV = ("GINGHAM_DEVICE", "GINGHAM_CACHE_DIR", "GINGHAM_DEBUG", "GINGHAM_CC",
       "GINGHAM_NUM_THREADS", "GINGHAM_COMPILE_JOBS")


@pytest.fixture
def clean_env(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_defaults(clean_env):
    config = get_config()
    assert isinstance(config, Config)
    assert config.device is None
    assert config.cache_dir == Path(platformdirs.user_cache_dir("gingham"))
    assert config.debug == 0
    assert config.cc == "cc"
    assert config.cflags == DEFAULT_CFLAGS
    assert "-ffast-math" not in config.cflags and "-fopenmp" in config.cflags
    assert config.num_threads is None
    assert config.compile_jobs is None


def test_environment_overrides(clean_env, tmp_path):
    clean_env.setenv("GINGHAM_DEVICE", "opencl:1")
    clean_env.setenv("GINGHAM_CACHE_DIR", str(tmp_path / "c"))
    clean_env.setenv("GINGHAM_DEBUG", "3")
    clean_env.setenv("GINGHAM_CC", "clang")
    clean_env.setenv("GINGHAM_NUM_THREADS", "2")
    clean_env.setenv("GINGHAM_COMPILE_JOBS", "5")
    config = get_config()
    assert (config.device, config.cache_dir, config.debug, config.cc, config.num_threads,
            config.compile_jobs) == ("opencl:1", tmp_path / "c", 3, "clang", 2, 5)


@pytest.mark.parametrize("name,value", [("GINGHAM_DEBUG", "loud"), ("GINGHAM_DEBUG", "9"),
                                        ("GINGHAM_NUM_THREADS", "0"),
                                        ("GINGHAM_COMPILE_JOBS", "0"),
                                        ("GINGHAM_COMPILE_JOBS", "many")])
def test_bad_environment_values_name_the_variable(clean_env, name, value):
    clean_env.setenv(name, value)
    with pytest.raises(ConfigError, match=name):
        get_config()


def test_config_file_then_environment(clean_env):
    path = write_config_file({"device": "cpu", "debug": 1, "cflags": "-O2 -fopenmp"})
    assert path == get_config().config_file
    config = get_config()
    assert (config.device, config.debug, config.cflags) == ("cpu", 1, ("-O2", "-fopenmp"))
    clean_env.setenv("GINGHAM_DEVICE", "reference")
    assert get_config().device == "reference"  # the environment wins


def test_write_config_file_merges_and_removes(clean_env):
    write_config_file({"device": "cpu", "num_threads": 4})
    write_config_file({"device": "reference"})
    assert read_config_file() == {"device": "reference", "num_threads": 4}
    write_config_file({"num_threads": None})
    assert read_config_file() == {"device": "reference"}
    assert json.loads(get_config().config_file.read_text()) == {"device": "reference"}


def test_broken_config_file_is_reported_with_its_path(clean_env):
    path = get_config().config_file
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=str(path)):
        get_config()


def test_config_file_location_override(clean_env, tmp_path):
    clean_env.setenv("GINGHAM_CONFIG_FILE", str(tmp_path / "x" / "my.json"))
    assert write_config_file({"device": "cpu"}) == tmp_path / "x" / "my.json"
    assert get_config().device == "cpu"
