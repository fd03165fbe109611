"""views.py: the hidden-information gate. Real engine views pass; anything that could
carry a face-down card, the seed, or a key outside the contract is refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from solrace.protocol import views as v
from solrace.protocol.views import Phase
from solrace.rules import VARIANTS, deal, view

from . import samples


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("owner", [True, False])
def test_every_engine_view_passes_unchanged(variant: str, owner: bool) -> None:
    board = deal(variant, samples.SEED)
    raw = view(board, owner=owner)
    assert v.board_view_wire(raw, owner=owner) == raw
    for _ in range(25):  # and after some play, with cards turned up and moved
        moves = board.legal_moves()
        if not moves:
            break
        board.play(moves[len(moves) // 2])
        raw = view(board, owner=owner)
        assert v.board_view_wire(raw, owner=owner) == raw


def test_double_deck_foundations_are_pairs() -> None:
    wire = v.board_view_wire(samples.board_view("double_yukon"), owner=False)
    assert wire["foundations"] == {"C": [0, 0], "D": [0, 0], "H": [0, 0], "S": [0, 0]}


def test_thoughtful_stock_only_for_its_owner() -> None:
    raw = samples.board_view("klondike", owner=True, thoughtful=True)
    assert len(v.board_view_wire(raw, owner=True)["stock_cards"]) == 24  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="owner"):
        v.board_view_wire(raw, owner=False)


def mutated(change: Any) -> dict[str, Any]:
    raw = copy.deepcopy(samples.board_view("klondike"))
    change(raw)
    return raw


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda b: b["tableau"][1]["up"].insert(0, "ks"), "a face-down card in a column"),
        (lambda b: b["tableau"][1].update(cards=["KS"]), "an extra key in a column"),
        (lambda b: b["tableau"][1].update(down=-1), "a negative count"),
        (lambda b: b["tableau"][1].update(down=True), "a boolean count"),
        (lambda b: b.update(stock=["KS", "QH"]), "stock cards instead of a count"),
        (lambda b: b.update(waste=["10H"]), "not a card"),
        (lambda b: b.update(waste=["qh"]), "a face-down card in the waste"),
        (lambda b: b.update(waste="KS"), "a string, not an array"),
        (lambda b: b.update(seed=42), "a key outside the contract"),
        (lambda b: b.pop("recycles"), "a missing key"),
        (lambda b: b["foundations"].pop("S"), "a missing suit"),
        (lambda b: b["foundations"].update(H=14), "a rank past King"),
        (lambda b: b["foundations"].update(H="1"), "a rank as a string"),
        (lambda b: b["options"].update(draw=[1]), "a non-scalar option"),
        (lambda b: b.update(tableau=[["7H"]]), "a column as a bare card list"),
    ],
)
def test_refused_views(change: Any, why: str) -> None:
    with pytest.raises(ValueError):
        v.board_view_wire(mutated(change), owner=True)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda b: b["tableau"][1]["up"].append("ks"), "a face-down card beside withheld ones"),
        (lambda b: b["tableau"][1]["up"].append(["KS"]), "a list (unhashable) among cards"),
        (lambda b: b["waste"].append(7), "a card id instead of a name"),
    ],
)
def test_refused_fair_views(change: Any, why: str) -> None:
    """The same gate for a spectator's view, where ``None`` is allowed and nothing else
    but face-up cards is."""
    raw = mutated(lambda b: b["tableau"][1]["up"].insert(0, None))
    assert v.board_view_wire(raw, owner=False)["tableau"] == raw["tableau"]
    change(raw)
    with pytest.raises(ValueError, match="face-up card"):
        v.board_view_wire(raw, owner=False)


# ---------------------------------------------------------------- snapshots
@pytest.mark.parametrize("phase", list(Phase))
@pytest.mark.parametrize("racer_id", [1, None])
def test_snapshots_of_every_phase(phase: Phase, racer_id: int | None) -> None:
    wire = v.snapshot_wire(samples.snapshot(phase, racer_id))
    assert wire["phase"] == phase.value
    assert (wire["result"] is not None) == (phase == Phase.FINISHED)


@pytest.mark.parametrize("phase", [Phase.LOBBY, Phase.COUNTDOWN, Phase.RACING])
def test_no_seed_before_the_race_is_over(phase: Phase) -> None:
    snap = samples.snapshot(phase)
    snap["result"] = samples.result()
    with pytest.raises(ValueError, match="secret"):
        v.snapshot_wire(snap)


def test_a_finished_snapshot_carries_the_result() -> None:
    snap = samples.snapshot(Phase.FINISHED)
    snap["result"] = None
    with pytest.raises(ValueError):
        v.snapshot_wire(snap)


@pytest.mark.parametrize("phase", [Phase.COUNTDOWN, Phase.RACING, Phase.FINISHED])
def test_commitment_is_published_from_the_countdown_on(phase: Phase) -> None:
    snap = samples.snapshot(phase)
    snap["commitment"] = None
    with pytest.raises(ValueError, match="commitment"):
        v.snapshot_wire(snap)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda s: s.update(phase="paused"), "unknown phase"),
        (lambda s: s.update(seed=1), "a key outside the contract"),
        (lambda s: s["racers"][0].update(status="won"), "engine status, not race status"),
        (lambda s: s["racers"][0].update(token=samples.TOKEN), "a token in a racer entry"),
        (lambda s: s["racers"][0].update(ready="yes"), "ready not boolean"),
        (lambda s: s["settings"].update(seed=1), "a seed in the settings"),
        (lambda s: s["settings"].update(max_racers=9), "max_racers out of range"),
        (lambda s: s["you"].update(next_seq=-1), "negative seq"),
        (lambda s: s["you"]["board"]["tableau"][0]["up"].append("as"), "a face-down card"),
        (lambda s: s.update(code="k7qx2m"), "a code outside the alphabet"),
        (lambda s: s.update(version=-1), "negative version"),
        (lambda s: s.update(racers={"1": {}}), "racers as a map"),
    ],
)
def test_refused_snapshots(change: Any, why: str) -> None:
    snap: Any = copy.deepcopy(samples.snapshot(Phase.RACING, 1))
    change(snap)
    with pytest.raises(ValueError):
        v.snapshot_wire(snap)


def test_a_racers_own_thoughtful_stock_is_allowed_in_its_snapshot() -> None:
    snap: Any = samples.snapshot(Phase.RACING, 1)
    snap["you"]["board"] = samples.board_view("klondike", owner=True, thoughtful=True)
    assert "stock_cards" in v.snapshot_wire(snap)["you"]["board"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda r: r.update(salt="AB" * 32), "upper-case salt"),
        (lambda r: r.update(seed=2**64), "seed out of range"),
        (lambda r: r.update(reason="boredom"), "unknown reason"),
        (lambda r: r["standings"][0].update(log=["D", 5]), "a non-string log entry"),
        (lambda r: r["standings"][0].update(place=0), "place 0"),
        (lambda r: r["standings"][0].update(token=samples.TOKEN), "a token in a standing"),
    ],
)
def test_refused_results(change: Any, why: str) -> None:
    result: Any = copy.deepcopy(samples.result())
    change(result)
    with pytest.raises(ValueError):
        v.result_wire(result)


def test_scores_may_be_negative() -> None:
    result: Any = samples.result()
    result["standings"][0]["score"] = -52
    assert v.result_wire(result)["standings"][0]["score"] == -52  # type: ignore[index]


def test_room_summary() -> None:
    assert v.room_summary_wire(samples.room_summary())["host"] == "Ann"
    bad: Any = {**samples.room_summary(), "racers": ["Ann"]}
    with pytest.raises(ValueError):
        v.room_summary_wire(bad)


def test_enums_match_the_docs() -> None:
    assert [p.value for p in Phase] == ["lobby", "countdown", "racing", "finished"]
    assert {s.value for s in v.RacerStatus} == {
        "waiting", "playing", "finished", "stuck", "resigned", "left", "timeout",
    }  # fmt: skip
    assert {r.value for r in v.EndReason} == {"all_done", "time_limit", "abandoned"}


def test_a_fair_view_withholds_identities_and_only_spectators_get_one() -> None:
    board = deal("yukon", 7)
    shown = {c for col, d in zip(board.tableau, board.down, strict=True) for c in col[d:][:2]}
    fair = view(board, owner=False, shown=shown)
    assert None in fair["tableau"][1]["up"] and fair["withheld_foundation"] == 0
    assert v.board_view_wire(fair, owner=False)["tableau"] == fair["tableau"]
    with pytest.raises(ValueError):
        v.board_view_wire(fair, owner=True)  # an owner's view withholds nothing
    with pytest.raises(ValueError):
        v.board_view_wire({**fair, "waste": ["ks"]}, owner=False)  # never a face-down card
