from __future__ import annotations

import re
from pathlib import Path

import pytest

from subspace.config import SETTINGS, Settings
from subspace.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_without_environment() -> None:
    settings = Settings.from_env({})
    assert settings.home == Path("./.subspace")
    assert settings.database_url == ""
    assert (settings.host, settings.port) == ("127.0.0.1", 8765)
    assert settings.index_debounce_ms is None


def test_values_are_parsed_by_type() -> None:
    settings = Settings.from_env(
        {"SUBSPACE_PORT": "9000", "SUBSPACE_HOME": "/srv/x", "SUBSPACE_INDEX_DEBOUNCE_MS": "0"}
    )
    assert settings.port == 9000
    assert settings.home == Path("/srv/x")
    assert settings.index_debounce_ms == 0


@pytest.mark.parametrize("raw", ["eighty", "1.5", "-3"])
def test_bad_number_names_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError, match="SUBSPACE_PORT"):
        Settings.from_env({"SUBSPACE_PORT": raw})


@pytest.mark.parametrize(
    ("raw", "kept"), [("true", True), ("1", True), ("Off", False), ("no", False)]
)
def test_a_yes_or_no_setting_reads_the_usual_spellings(raw: str, kept: bool) -> None:
    settings = Settings.from_env({"SUBSPACE_INDEX_KEEP_OTHER_MODELS": raw})
    assert settings.index_keep_other_models is kept


def test_a_yes_or_no_setting_refuses_anything_else() -> None:
    with pytest.raises(ConfigError, match="SUBSPACE_INDEX_KEEP_OTHER_MODELS must be true or false"):
        Settings.from_env({"SUBSPACE_INDEX_KEEP_OTHER_MODELS": "maybe"})


def test_every_setting_is_documented_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", readme, flags=re.MULTILINE))
    missing = {s.env for s in SETTINGS} - documented
    assert not missing, f"add these to the README's settings table: {sorted(missing)}"


def test_only_the_config_module_reads_the_environment() -> None:
    offenders = []
    for path in (ROOT / "src" / "subspace").rglob("*.py"):
        if path.name == "config.py":
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"os\.environ|os\.getenv|getenv\(", text):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
