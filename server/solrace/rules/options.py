"""Room options of each variant, their defaults and their validation (docs/rules.md).

Options are resolved once, when a board is made, into a frozen :class:`Options`; the
engine then reads plain attributes. Each variant lists which options a caller may set;
the rest are fixed by the variant (Australian always draws one card, once through).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final, get_args, get_type_hints

from solrace.quoting import json_quoted

from .errors import InvalidOptionError

SCORINGS: Final = ("standard", "vegas", "none")
#: The most passes a ``max_passes`` names: the largest integer a room option may be on
#: the wire (protocol.messages). Unbounded, the engine took values no request could
#: carry: past 64 bits the client's encoder failed with a traceback.
MAX_PASSES: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Options:
    """Every option of every variant, resolved. ``max_passes`` None means unlimited."""

    auto_flip: bool = True
    foundation_to_tableau: bool = False
    undo: bool = True
    auto_complete: bool = True
    scoring: str = "standard"
    draw: int = 1
    max_passes: int | None = None
    thoughtful: bool = False


OPTION_NAMES: Final = tuple(f.name for f in fields(Options))

#: Each option's types, as :class:`Options` declares them (``max_passes``: int or None).
_TYPES: Final = {name: get_args(hint) or (hint,) for name, hint in get_type_hints(Options).items()}
_KIND_WORDS: Final = {bool: "true or false", int: "a whole number", str: "text"}


def option_kind(name: str) -> str:
    """What a value of option ``name`` is, in words: ``a whole number or null``."""
    words = [_KIND_WORDS[kind] for kind in _TYPES[name] if kind is not type(None)]
    return " or ".join(words) + (" or null" if type(None) in _TYPES[name] else "")


def is_of_kind(name: str, value: Any) -> bool:
    """Whether ``value`` is of option ``name``'s type (:class:`Options`'), whatever its
    range: ``"draw": 7`` is a draw count (one the engine refuses), ``"draw": "3"`` is no
    count at all — what no server writes, so a file holding it is malformed rather
    than a race that fails to verify (solrace_client.results). Exact types: JSON's
    true is not the number 1 here, as it is to ``isinstance``."""
    return type(value) in _TYPES[name]


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidOptionError(
            f"option {name} must be true or false, not {json_quoted(value)}", name
        )
    return value


def _check_value(name: str, value: Any) -> Any:
    """Validate one option's value regardless of variant."""
    if name in ("auto_flip", "foundation_to_tableau", "undo", "auto_complete", "thoughtful"):
        return _check_bool(name, value)
    if name == "scoring":
        if value not in SCORINGS:
            raise InvalidOptionError(
                f"option scoring must be one of {', '.join(SCORINGS)}, not {json_quoted(value)}",
                name,
            )
        return value
    if name == "draw":
        # the type too: 3.0 == 3, and a float draw count ended the first draw in a TypeError
        if type(value) is not int or value not in (1, 3):
            raise InvalidOptionError(f"option draw must be 1 or 3, not {json_quoted(value)}", name)
        return value
    if name == "max_passes":
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PASSES:
            raise InvalidOptionError(
                f"option max_passes must be a whole number 1 to {MAX_PASSES} or null "
                f"(unlimited), not {json_quoted(value)}",
                name,
            )
        return value
    raise InvalidOptionError(
        f"unknown option {json_quoted(name)}", name
    )  # pragma: no cover - guarded by caller


def resolve_options(
    variant: str,
    allowed: Mapping[str, Any],
    fixed: Mapping[str, Any],
    given: Mapping[str, Any] | None,
) -> Options:
    """Resolve ``given`` against a variant's ``allowed`` options (name → default).

    ``fixed`` holds values the variant imposes and a caller cannot set. Vegas scoring
    changes ``max_passes``'s default (docs/rules.md, Klondike options), so that default is
    computed after the others are known.
    """
    given = dict(given or {})
    if not isinstance(given, dict):  # pragma: no cover - dict() above
        raise InvalidOptionError("options must be a mapping")
    values: dict[str, Any] = dict(allowed)
    for name, value in given.items():
        if name not in allowed:
            choices = ", ".join(sorted(allowed)) or "none"
            raise InvalidOptionError(
                f"variant {variant} has no option {json_quoted(name)} (options: {choices})", name
            )
        values[name] = _check_value(name, value)
    if "max_passes" in allowed and "max_passes" not in given and values.get("scoring") == "vegas":
        values["max_passes"] = 3 if values.get("draw") == 3 else 1
    values.update(fixed)
    return Options(**values)


def options_to_json(options: Options, allowed: Mapping[str, Any]) -> dict[str, Any]:
    """The options a variant exposes, in a stable order, as JSON-ready values."""
    return {name: getattr(options, name) for name in OPTION_NAMES if name in allowed}
