"""What the client remembers between runs: the server, the racer's name, and the
current race's room and secret token, so a crashed or closed client can rejoin its
race (``resume``). Kept in the user's config directory, readable by the user only."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from solrace.protocol.limits import MAX_NAME_LEN
from solrace.protocol.messages import display_name


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(Path.home(), ".config")
    return Path(os.environ.get("SOLRACE_CONFIG_DIR") or os.path.join(base, "solrace"))


@dataclass
class SavedRace:
    server: str
    room: str
    code: str
    racer: int
    token: str
    name: str
    version: int = 0


def race_path() -> Path:
    """Where the current race is saved for ``resume``."""
    return config_dir() / "race.json"


def save_race(race: SavedRace) -> None:
    directory = config_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = race_path()
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(asdict(race), handle)
    os.replace(tmp, path)


def load_race() -> SavedRace | None:
    try:
        data = json.loads(race_path().read_text(encoding="utf-8"))
        return SavedRace(**data)
    except (OSError, ValueError, TypeError):
        return None


def clear_race() -> None:
    race_path().unlink(missing_ok=True)


def default_name() -> str:
    """The remembered name, else the login name, else "racer": the first of them the
    server would take (a name saved by an older client that the server refuses must
    not make every later command fail over a ``--name`` nobody gave)."""
    candidates = []
    try:
        data = json.loads((config_dir() / "profile.json").read_text(encoding="utf-8"))
        candidates.append(str(data["name"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    candidates.append(os.environ.get("USER", "")[:MAX_NAME_LEN])
    for name in candidates:
        try:
            return display_name(name)
        except ValueError:
            continue
    return "racer"


def save_name(name: str) -> None:
    directory = config_dir()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "profile.json").write_text(json.dumps({"name": name}), encoding="utf-8")
