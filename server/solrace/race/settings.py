"""A room's settings, validated once when the room is created."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

# The protocol's limits are the rooms' limits: one definition for both layers.
from solrace.protocol.limits import (
    DEFAULT_MAX_RACERS,
    DEFAULT_SPECTATOR_DELAY_S,
    DEFAULT_TIME_LIMIT_S,
    MAX_RACERS,
    MAX_SPECTATOR_DELAY_S,
    MAX_TIME_LIMIT_S,
    MIN_RACERS,
    MIN_SPECTATOR_DELAY_S,
    MIN_TIME_LIMIT_S,
)
from solrace.protocol.views import RoomSettings as SettingsWire
from solrace.quoting import json_quoted
from solrace.rules import InvalidOptionError, RulesError, UnknownVariantError, variant_class
from solrace.rules.options import options_to_json

from .errors import RaceError

#: ``deals``: ``winnable`` rooms deal only seeds a solver has won (docs/fairness.md).
DEALS: Final = ("winnable", "random")
#: Variants whose rooms deal ``random`` unless asked otherwise: the solver leaves most
#: of their deals ``unknown`` at the server's budget, so certifying one walks many
#: seeds (Australian, pure Python: 8 seeds on average, p50 4.6 s and p95 18 s a
#: certificate, longer than a host's start waits; docs/winnability.md).
RANDOM_BY_DEFAULT: Final = frozenset({"australian"})

#: ``difficulty`` a winnable room may ask for (solrace.solver's difficulty bands).
DIFFICULTIES: Final = ("easy", "medium", "hard")
#: ``spectators``: ``fair`` boards withhold what a racer has not seen; ``open`` ones
#: are whole (a private room's only).
SPECTATORS: Final = ("fair", "open")


def default_deals(variant: str, difficulty: str | None = None) -> str:
    """A room's ``deals`` when its creator does not say: ``winnable`` for every variant
    the solver certifies within budget (and whenever a difficulty is asked for, which
    only a certified deal has), ``random`` for the others."""
    if difficulty is not None or variant not in RANDOM_BY_DEFAULT:
        return "winnable"
    return "random"


@dataclass(frozen=True)
class RoomSettings:
    variant: str = "yukon"
    options: Mapping[str, Any] = field(default_factory=dict)
    max_racers: int = DEFAULT_MAX_RACERS
    time_limit_s: int = DEFAULT_TIME_LIMIT_S
    private: bool = False
    spectator_delay_s: int = DEFAULT_SPECTATOR_DELAY_S
    quick: bool = False
    deals: str = "winnable"
    difficulty: str | None = None
    #: ``fair`` (withheld identities, docs/fairness.md) or ``open``: whole boards, only
    #: in a private room, and only if every racer's ready flag agrees.
    spectators: str = "fair"

    def to_dict(self) -> SettingsWire:
        """The protocol's RoomSettings."""
        return SettingsWire(
            variant=self.variant,
            options=dict(self.options),
            max_racers=self.max_racers,
            time_limit_s=self.time_limit_s,
            private=self.private,
            spectator_delay_s=self.spectator_delay_s,
            quick=self.quick,
            deals=self.deals,
            difficulty=self.difficulty,
            spectators=self.spectators,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoomSettings:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def _whole(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RaceError(
            "bad_message", f"{name} must be a whole number from {low} to {high}", field=name
        )
    return value


def validate_settings(settings: RoomSettings) -> RoomSettings:
    """Check every field; the engine validates variant and options (its own errors,
    same words)."""
    try:
        # the request's values as the protocol writes them: "spider", not 'spider'
        board = variant_class(settings.variant, json_quoted)(dict(settings.options))
    except UnknownVariantError as exc:
        raise RaceError("bad_options", str(exc), field="variant") from None
    except InvalidOptionError as exc:  # named by a dotted path when it is one option
        where = "options" if exc.option is None else f"options.{exc.option}"
        raise RaceError("bad_options", str(exc), field=where) from None
    except RulesError as exc:
        raise RaceError("bad_options", str(exc), field="options") from None
    _whole("max_racers", settings.max_racers, MIN_RACERS, MAX_RACERS)
    _whole("time_limit_s", settings.time_limit_s, MIN_TIME_LIMIT_S, MAX_TIME_LIMIT_S)
    _whole(
        "spectator_delay_s",
        settings.spectator_delay_s,
        MIN_SPECTATOR_DELAY_S,
        MAX_SPECTATOR_DELAY_S,
    )
    for flag in ("private", "quick"):
        if not isinstance(getattr(settings, flag), bool):
            raise RaceError("bad_message", f"{flag} must be true or false", field=flag)
    if settings.deals not in DEALS:
        raise RaceError("bad_message", f"deals must be one of {', '.join(DEALS)}", field="deals")
    if settings.difficulty is not None:
        if settings.difficulty not in DIFFICULTIES:
            why = f"difficulty must be one of {', '.join(DIFFICULTIES)}"
            raise RaceError("bad_message", why, field="difficulty")
        if settings.deals != "winnable":
            raise RaceError("bad_message", "a difficulty needs winnable deals", field="difficulty")
    if settings.spectators not in SPECTATORS:
        raise RaceError("bad_message", "spectators must be fair or open", field="spectators")
    if settings.spectators == "open" and not settings.private:
        raise RaceError("bad_message", "open spectating needs a private room", field="spectators")
    # Store the options fully resolved, so every node and every verifier agrees.
    return replace(settings, options=options_to_json(board.options, board.allowed_options))
