"""The race: a room's state machine, sans I/O (no sockets, no Redis, no clock).

- :mod:`.state` folds a room's event stream into :class:`RoomState`;
- :mod:`.decisions` turns requests and the clock into new events;
- :mod:`.game` is one racer's engine and move log;
- :mod:`.fairness` derives each round's seed and salt.
"""

from .errors import RaceError
from .game import RacerGame
from .settings import RoomSettings, validate_settings
from .state import RacerState, RoomState, standings

__all__ = [
    "RaceError",
    "RacerGame",
    "RacerState",
    "RoomSettings",
    "RoomState",
    "standings",
    "validate_settings",
]
