"""Saved races (``solrace_client.results``): where a result is written, whatever the
server that sent it says its room and commitment are."""

from __future__ import annotations

from pathlib import Path

import pytest
from solrace_client.results import finished_race, load_result, race_id, results_dir, write_result

from .conftest import YUKON, synthetic_result


def test_a_solrace_servers_race_id_is_kept() -> None:
    result = synthetic_result()
    assert race_id("r_2147d18c011a", result) == f"r_2147d18c011a.{result['commitment'][:8]}"


@pytest.mark.parametrize(
    ("room", "commitment"),
    [
        ("./../../../evil", None),  # the temporary file and the result two levels up
        ("./.", "/profile"),  # <config>/profile.json replaced
        ("./" + "../" * 30 + "TMP/evil", None),  # anywhere, from the root (TMP: tmp_path)
        ("/TMP/evil", None),
        ("", "../../xx"),
        ("r" * 5000, None),  # too long a name for a file
    ],
)
def test_a_hostile_room_or_commitment_cannot_write_outside_the_results(
    config_dir: Path, tmp_path: Path, room: str, commitment: str | None
) -> None:
    """A hostile server names the room (and the commitment) the race id, and so the
    file, is made of: the result is saved in the results directory all the same."""
    room = room.replace("TMP", str(tmp_path).lstrip("/"))
    deep = config_dir / "a" / "b"
    deep.mkdir(parents=True)
    (config_dir / "profile.json").write_text('{"name": "Ann"}')
    result = synthetic_result()
    if commitment is not None:
        result["commitment"] = commitment
    before = {p for p in tmp_path.rglob("*") if p.is_file()}
    path = write_result(finished_race(room, result, YUKON, "SYN123"))
    after = {p for p in tmp_path.rglob("*") if p.is_file()}
    assert after - before == {path}
    assert path.resolve().parent == results_dir().resolve()
    assert (config_dir / "profile.json").read_text() == '{"name": "Ann"}'
    assert load_result(path.stem).result["seed"] == result["seed"]
