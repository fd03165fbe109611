"""``solrace fetch``: a result file compared with the server's archived copy, and a race
this computer never saw end fetched from it (client/solrace_client/archive.py)."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from solrace_client.archive import differences, is_race_id
from solrace_client.cli import main
from solrace_client.results import SavedResult, load_result, race_id

from tests.net.conftest import Cluster

from .conftest import YUKON, bot_race, synthetic_result


async def _run(argv: list[str]) -> int:
    """``main`` in a worker thread: it runs its own event loop, like the console script."""
    return await asyncio.wait_for(asyncio.to_thread(main, argv), 20)


def _edited(path: Path, edit: Any) -> Path:
    data = json.loads(path.read_text())
    edit(data)
    out = path.with_name("edited.json")
    out.write_text(json.dumps(data))
    return out


def _swap_names(data: dict[str, Any]) -> None:
    first, second = data["result"]["standings"][:2]
    first["name"], second["name"] = second["name"], first["name"]


def _drop_last_racer(data: dict[str, Any]) -> None:
    data["result"]["standings"].pop()


async def test_an_edit_verify_cannot_see_is_caught_against_the_servers_archive(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """An audit swapped two racers' names in a result file: it still verifies (it adds
    up), and only the server's copy can tell. fetch compares the file with it."""
    server = await cluster.node()
    result, joined = await bot_race(server.url, max_moves=300)
    rid = race_id(joined["room"], result)
    assert await _run(["fetch", rid, "--server", server.url]) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK: ") and f"is the race {server.url} archived" in out
    saved = load_result(rid)
    assert saved.path is not None
    swapped = _edited(saved.path, _swap_names)
    assert await _run(["verify", str(swapped)]) == 0  # consistent: verify passes it
    capsys.readouterr()
    assert await _run(["fetch", str(swapped), "--server", server.url]) == 1
    out = capsys.readouterr().out
    first, second = (s["name"] for s in result["standings"][:2])
    assert f"FAIL: {swapped} is not the race {server.url} archived:" in out
    assert f'result.standings[0].name: "{second}" here, "{first}" on the server' in out
    dropped = _edited(saved.path, _drop_last_racer)
    assert await _run(["fetch", str(dropped), "--server", server.url]) == 1
    assert "result.standings: 1 entries here, 2 on the server" in capsys.readouterr().out


async def test_a_race_never_seen_here_is_fetched_saved_and_verifies(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """A friend's race, by its id: saved as the server archived it, then replay and
    verify work on it (as far as a file without the countdown's commitment goes)."""
    server = await cluster.node()
    result, joined = await bot_race(server.url, max_moves=300)
    rid = race_id(joined["room"], result)
    played = load_result(rid)
    assert played.path is not None
    played.path.unlink()
    assert await _run(["fetch", rid, "--server", server.url]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"saved race {rid} as {server.url} archived it") and "verify" in out
    fetched = load_result(rid)
    assert fetched.result == played.result and fetched.settings == played.settings
    assert fetched.deal == played.deal and fetched.code is None  # never the room's code
    # untimed: when it was raced is unknown, so it never passes for the room's newest
    # race (test_results: ...not_the_rooms_proof)
    assert fetched.saved_at_ms is None
    assert await _run(["verify", rid]) == 0
    out = capsys.readouterr().out
    assert "OK as far as checked" in out and "FAIL" not in out
    assert await _run(["fetch", rid, "--server", server.url]) == 0  # now the same file
    assert "OK: " in capsys.readouterr().out


async def test_a_saved_race_is_fetched_from_its_own_server_without_server(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer audit: a race run with ``--server`` was saved without it, so ``solrace
    fetch RACE`` asked ws://127.0.0.1:8765 ("cannot reach") until --server was typed
    again. The saved race names its server; a typed --server still wins, and a file
    saved before it was kept still works (the default, then)."""
    server = await cluster.node()
    result, joined = await bot_race(server.url, max_moves=300)
    rid = race_id(joined["room"], result)
    saved = load_result(rid)
    assert saved.server == server.url and saved.path is not None
    assert json.loads(saved.path.read_text())["server"] == server.url
    monkeypatch.setenv("SOLRACE_SERVER", "ws://127.0.0.1:9")  # as for resume: not this
    assert await _run(["fetch", rid]) == 0
    assert f"is the race {server.url} archived" in capsys.readouterr().out
    assert await _run(["fetch", rid, "--server", "ws://127.0.0.1:9"]) == 2  # typed wins
    assert "cannot reach ws://127.0.0.1:9" in capsys.readouterr().err
    gone = json.loads(saved.path.read_text())
    saved.path.write_text(json.dumps({**gone, "server": "ws://127.0.0.1:9"}))
    assert await _run(["fetch", rid]) == 2  # the file's server, said to be the file's
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("(the server the race was saved from: --server asks another)")
    )
    saved.path.write_text(json.dumps(gone))
    older = json.loads(saved.path.read_text())
    del older["server"]
    saved.path.write_text(json.dumps(older))
    assert load_result(rid).server is None
    assert await _run(["fetch", rid]) == 2  # $SOLRACE_SERVER's, which is not running
    assert "cannot reach ws://127.0.0.1:9" in capsys.readouterr().err
    saved.path.unlink()
    assert await _run(["fetch", rid, "--server", server.url]) == 0  # fetched: its server too
    capsys.readouterr()
    assert load_result(rid).server == server.url


async def test_fetch_says_in_one_line_what_it_cannot_do(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    server = await cluster.node()
    unknown = "r_000000000000.0123abcd"
    assert await _run(["fetch", unknown, "--server", server.url]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"solrace: {server.url} has no finished race {unknown} (not over yet, not run "
        "there, or its archive has expired)"
    )
    assert await _run(["fetch", "nonsense", "--server", server.url]) == 2
    err = capsys.readouterr().err.strip()
    assert "no saved race 'nonsense'" in err and "nor is it a race id" in err
    assert len(err.splitlines()) == 1
    assert await _run(["fetch", unknown, "--server", "ws://127.0.0.1:9"]) == 2
    assert "cannot reach ws://127.0.0.1:9" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["fetch"])
    assert exited.value.code == 2
    assert "the following arguments are required: race" in capsys.readouterr().err


def _saved(result: dict[str, Any], **extra: Any) -> SavedResult:
    return SavedResult(
        race="r_x.00000000", room="r_x", settings=dict(YUKON), result=result, **extra
    )


def test_differences_name_each_departure_and_stop_after_three() -> None:
    archived = _saved(synthetic_result())
    assert differences(_saved(synthetic_result()), archived) == []
    # A file keeps what the server does not: where it was saved, the code, the time.
    assert differences(_saved(synthetic_result(), code="SYN123", saved_at_ms=5), archived) == []
    moved = synthetic_result()
    moved["standings"][1]["times"][0] -= 1
    assert differences(_saved(moved), archived) == [
        "result.standings[1].times[0]: 999 here, 1000 on the server"
    ]
    many = copy.deepcopy(moved)
    many["seed"] += 1
    many["salt"] = "0" * 64
    many["reason"] = "time_up"
    assert len(differences(_saved(many), archived)) == 3
    other = "f" * 64
    said = differences(_saved(synthetic_result(), published_commitment=other), archived)
    theirs = archived.result["commitment"]
    # each cut as quoting.json_quoted cuts, saying how long it was
    assert said == [
        f'the commitment seen at the countdown: "{other[:40]}"… (64 characters) here, '
        f'"{theirs[:40]}"… (64 characters) on the server'
    ]
    # The settings seen at the countdown are held to the archive's too: a server that
    # archived a race under settings other than the room had (a time limit cut) differs.
    seen = {**YUKON, "time_limit_s": 60}
    assert differences(_saved(synthetic_result(), countdown_settings=seen), archived) == [
        f"the settings seen at the countdown.time_limit_s: 60 here, {YUKON['time_limit_s']} "
        "on the server"
    ]
    # A hostile server's value reaches the line escaped, not as a terminal's control.
    renamed = synthetic_result()
    renamed["standings"][0]["name"] = "\x1b[2J\u202e"
    assert differences(_saved(synthetic_result()), _saved(renamed)) == [
        'result.standings[0].name: "Ann" here, "\\u001b[2J\\u202e" on the server'
    ]
    # A hostile server's key too: it names where the two depart (``result.KEY``), and
    # a direction override or a line separator in it reached the terminal as it was
    # (printable() replaces only C0 and C1 controls).
    keyed = synthetic_result()
    keyed["\u202edlrow"] = 1
    assert differences(_saved(synthetic_result()), _saved(keyed)) == [
        'result."\\u202edlrow": null here, 1 on the server'
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("r_8f3k2a91c0d4.5e0c9a1f", True),
        ("r_x.nocommit", True),
        ("r_x.5E0C9A1F", False),
        ("r_x", False),
        ("../r_x.5e0c9a1f", False),
        ("r_x.5e0c9a1f.json", False),
    ],
)
def test_race_ids(text: str, expected: bool) -> None:
    assert is_race_id(text) is expected


def test_a_race_file_naming_many_servers_has_only_the_first_few_tried(
    synthetic_race: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A race file whose ``server`` listed 500 URLs had ``fetch`` try them all, one
    after another (past 60 s, a newcomer walk). It tries the first
    MAX_SERVERS — a deployment's nodes — and says how many it left untried."""
    from solrace_client.connection import MAX_SERVERS

    urls = [f"ws://127.0.0.1:{9000 + i}" for i in range(500)]
    data = json.loads(synthetic_race.read_text())
    synthetic_race.write_text(json.dumps({**data, "server": ",".join(urls)}))
    tried: list[str] = []

    async def unreachable(servers: str, race: str) -> tuple[str, SavedResult]:
        tried.extend(servers.split(","))
        raise ConnectionRefusedError

    monkeypatch.setattr("solrace_client.archive.fetch_archived", unreachable)
    assert main(["fetch", str(synthetic_race)]) == 2
    assert tried == urls[:MAX_SERVERS]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 500, err
    assert f"the first {MAX_SERVERS} of the 500 it names were tried" in err, err
