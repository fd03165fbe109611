"""What the client remembers for ``solrace resume`` when two windows race at once on one
computer (the README's "race in two terminals": Ann and Bob share a config directory):
each window's race is its own, ``resume`` after a crash takes the crashed window's,
and a window whose race ends forgets only its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest
from solrace.quoting import quoted
from solrace_client import config

from tests.support import terminal

ANN = config.SavedRace("ws://127.0.0.1:8765", "r_room", "ABC123", 1, "a" * 32, "Ann")
BOB = config.SavedRace("ws://127.0.0.1:8765", "r_room", "ABC123", 2, "b" * 32, "Bob")


def save_in_a_process_that_ended(race: config.SavedRace) -> None:
    """``race`` saved by another process that has exited since (a crashed window)."""
    script = (
        "import sys; from solrace_client import config; "
        f"config.save_race(config.SavedRace(**{asdict(race)!r}))"
    )
    subprocess.run([sys.executable, "-c", script], check=True, env=os.environ)


def test_resume_after_a_crash_takes_the_crashed_windows_race(config_dir: Path) -> None:
    save_in_a_process_that_ended(ANN)  # Ann's window crashed
    config.save_race(BOB)  # Bob's window, still racing, saved after it (a phase change)
    saved = config.load_race()
    assert saved is not None and (saved.name, saved.token) == ("Ann", ANN.token)


def test_a_race_that_ends_forgets_only_its_own_token(config_dir: Path) -> None:
    config.save_race(ANN)
    config.save_race(BOB)
    config.clear_race(BOB.room, BOB.token)  # Bob's race is over (or he left)
    saved = config.load_race()
    assert saved is not None and saved.token == ANN.token  # Ann can still resume
    config.clear_race(ANN.room, ANN.token)
    assert config.load_race() is None


def test_the_token_is_readable_by_the_user_only(config_dir: Path) -> None:
    config.save_race(ANN)
    (path,) = config.saved_race_files()
    assert path.stat().st_mode & 0o077 == 0


def test_an_older_clients_race_json_is_still_resumed(config_dir: Path) -> None:
    config_dir.mkdir(parents=True)
    legacy = {k: v for k, v in asdict(ANN).items() if k != "pid"}
    (config_dir / "race.json").write_text(json.dumps(legacy))
    saved = config.load_race()
    assert saved is not None and saved.token == ANN.token
    config.clear_race(ANN.room, ANN.token)
    assert config.load_race() is None


@pytest.mark.parametrize(
    "field, value",
    [
        ("pid", "x"),
        ("pid", [1]),
        ("pid", 10**30),
        ("pid", -1),
        ("server", 5),
        ("racer", True),
        ("version", "3"),
        ("name", None),
        ("code", 7),
        ("commitment", 5),
    ],
)
def test_a_saved_race_with_a_field_of_the_wrong_type_is_skipped(
    config_dir: Path, field: str, value: object
) -> None:
    """A race file edited by hand is skipped like an unreadable one, and the next
    readable race is resumed (``"pid": "x"`` made `solrace resume` print a traceback)."""
    config_dir.mkdir(parents=True)
    bad = {**asdict(ANN), field: value}
    (config_dir / "race.json").write_text(json.dumps(bad))
    assert config.load_race() is None
    config.save_race(BOB)
    saved = config.load_race()
    assert saved is not None and saved.name == "Bob"


def _resume_refused_in_one_line() -> subprocess.CompletedProcess[str]:
    """``solrace resume`` run as a user would, which must end with status 2 and one
    line, no traceback."""
    done = subprocess.run(
        [str(terminal.SOLRACE), "resume"],
        capture_output=True,
        text=True,
        env=os.environ,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done


def test_resume_with_a_malformed_saved_race_says_so_in_one_line(config_dir: Path) -> None:
    config_dir.mkdir(parents=True)
    (config_dir / "race.json").write_text(json.dumps({**asdict(ANN), "pid": "x"}))
    _resume_refused_in_one_line()


@pytest.mark.parametrize("server", ["", " , "])
def test_resume_of_a_saved_race_naming_no_server_says_so_in_one_line(
    config_dir: Path, server: str
) -> None:
    """A race file cut or edited to ``"server": ""`` (or only commas) was read as a
    race: ``solrace resume`` printed a traceback (session.py: ValueError "no server to
    connect to"). It is a file that cannot be read, as one of a wrong type, and the
    next readable race is resumed."""
    (config_dir / "playing").mkdir(parents=True)
    (config_dir / "playing" / "r_room.1.json").write_text(
        json.dumps({**asdict(ANN), "server": server})
    )
    done = _resume_refused_in_one_line()
    assert "is unreadable" in done.stderr, done.stderr
    config.save_race(BOB)
    saved = config.load_race()
    assert saved is not None and saved.name == "Bob"


def test_a_saved_races_proof_is_kept_and_a_malformed_one_dropped(config_dir: Path) -> None:
    """The pair a window saves with its race (``revealed``: its view's last race_over)
    comes back for ``resume``; one edited into something else is dropped, and the race
    still resumes (without a proof), as an older client's file without one does."""
    race = config.SavedRace(**{**asdict(ANN), "revealed": {"seed": 3, "salt": "a" * 64}})
    config.save_race(race)
    saved = config.load_race()
    assert saved is not None and saved.revealed == {"seed": 3, "salt": "a" * 64}
    too_big = {"seed": 2**70, "salt": "a" * 64}  # a traceback on sending it (a review)
    malformed = ({"seed": True, "salt": "a" * 64}, {"seed": 3}, [3, "a"], "x", too_big)
    for bad in (*malformed, {"seed": -1, "salt": "a" * 64}, {"seed": 3, "salt": "A" * 64}):
        (path,) = config.saved_race_files()
        path.write_text(json.dumps({**asdict(ANN), "revealed": bad}))
        saved = config.load_race()
        assert saved is not None and saved.token == ANN.token and saved.revealed is None


@pytest.mark.parametrize(
    ("value", "named_by"),
    [("  {dir}  ", "$SOLRACE_CONFIG_DIR"), ("   ", "$XDG_CONFIG_HOME"), ("", "$XDG_CONFIG_HOME")],
    ids=["spaced", "blank", "empty"],
)
def test_solrace_config_dir_is_read_trimmed_and_blank_is_unset(
    value: str, named_by: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As every SOLRACE_* variable is read (solrace.environ): ``SOLRACE_CONFIG_DIR="
    /x "`` was the directory " /x " (one named with spaces, made in the working
    directory), and a blank one the directory "   ", while the server's variables and
    $SOLRACE_SERVER were trimmed, blank as unset."""
    given = tmp_path / "conf"
    monkeypatch.setenv("SOLRACE_CONFIG_DIR", value.format(dir=given))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    expected = given if named_by == "$SOLRACE_CONFIG_DIR" else tmp_path / "xdg" / "solrace"
    assert config.config_dir() == expected
    # and what chose it is named when it is not a directory
    given.write_text("")
    (tmp_path / "xdg").write_text("")
    problem = config.config_dir_problem()
    assert problem is not None and problem.startswith(
        f"the config directory {expected} ({named_by})"
    ), problem


@pytest.mark.parametrize("value", ["~/x", "x", "./solrace", "~"])
def test_a_relative_solrace_config_dir_is_refused_in_one_line(
    value: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``SOLRACE_CONFIG_DIR="~/x"`` (quoted: no shell expands it) was taken as it is
    written: a directory named ``~`` made in the working directory, and a race saved
    from one directory not found from another. A relative path names a different
    directory wherever the command runs, so it is refused, as the XDG spec ignores
    relative paths in its own variables; nothing is expanded (a shell's job)."""
    from solrace_client.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOLRACE_CONFIG_DIR", value)
    problem = config.config_dir_problem()
    assert problem == (
        f"the config directory {value} ($SOLRACE_CONFIG_DIR) is not an absolute path (a "
        "shell expands ~ only where it is not quoted): set $SOLRACE_CONFIG_DIR to an "
        "absolute path"
    )
    assert main(["races"]) == 2
    assert capsys.readouterr().err == f"solrace: {problem}\n"
    with pytest.raises(config.ConfigDirUnusable):
        config.save_name("Ann")
    assert list(tmp_path.iterdir()) == []  # no "~" made here


def test_a_long_relative_solrace_config_dir_is_said_in_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative ``SOLRACE_CONFIG_DIR`` of 5,000 characters was said whole in its
    refusal, one 5 KB line: no system call refused it as too long (it is refused
    first), so it is quoted as anything typed is, at most its first characters."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOLRACE_CONFIG_DIR", "x" * 5000)
    problem = config.config_dir_problem()
    assert problem is not None and len(problem) < 250
    assert problem.startswith(
        f"the config directory {quoted('x' * 5000)} ($SOLRACE_CONFIG_DIR) is not an absolute"
    )


def test_a_relative_xdg_config_home_is_ignored_as_the_spec_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The XDG Base Directory spec: "If an implementation encounters a relative path in
    any of these variables it should consider the path invalid and ignore it." It was
    taken, relative to wherever the command ran."""
    monkeypatch.delenv("SOLRACE_CONFIG_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", "rel")
    assert config.config_dir() == tmp_path / ".config" / "solrace"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config.config_dir() == tmp_path / "xdg" / "solrace"


def test_the_races_directory_made_by_another_saver_meanwhile_is_used(
    config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two savers of the first race on a computer (a bot and a window watching its
    room): the other's ``mkdir`` of ``races`` came between kept_in's ``is_dir`` (no)
    and its ``exists`` (yes), and the save failed "races is not a directory" (seen in
    tests/client/test_results.py's two saves at once, 1 run of 2). Here the directory
    appears at the first look at whether anything is there, as the other saver's
    ``mkdir`` would."""
    races = config.usable_config_dir() / "races"
    exists = Path.exists

    def made_meanwhile(path: Path, *args: object, **kwargs: object) -> bool:
        if path == races:
            races.mkdir(parents=True, exist_ok=True)
        return exists(path)

    monkeypatch.setattr(Path, "exists", made_meanwhile)
    assert config.kept_in("races", "its finished races") == races
    assert races.is_dir()  # made by the other saver, as the test means, not left out


def _pipe(path: Path) -> None:
    os.mkfifo(path)


def _nested(path: Path) -> None:
    path.write_text("[" * 200_000, encoding="utf-8")


@pytest.mark.parametrize("make", [_pipe, _nested], ids=["pipe", "nested"])
def test_a_race_in_progress_or_the_name_kept_unreadable_is_one_that_cannot_be_read(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    """A race in progress (``playing/r_x.1.json``) and the profile that cannot be read:
    a FIFO (a newcomer audit: ``solrace resume`` waited for ever for a writer, and
    every command that takes the remembered name), or arrays nested 200,000 deep under
    the 1 MiB cap (a review: ``json.loads`` raised RecursionError, which neither reader
    caught: a traceback). Each is a file that cannot be read: no race to resume
    (status 2, one line), and the login name."""
    home = tmp_path / "config"
    (home / "playing").mkdir(parents=True)
    make(home / "playing" / "r_x.1.json")
    make(home / "profile.json")
    env = {**os.environ, "SOLRACE_CONFIG_DIR": str(home), "USER": "ann"}
    solrace = Path(sys.executable).parent / "solrace"
    done = subprocess.run(
        [str(solrace), "resume"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    code = "from solrace_client import config; print(config.default_name())"
    named = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert (named.returncode, named.stdout) == (0, "ann\n"), named


def test_a_config_directory_another_saver_makes_meanwhile_is_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bot and the bot it raced saved a computer's first race at once (CI, once): the
    check asked whether the config directory is a directory (not yet), the other saver
    made it, and the check then found something there that was "not a directory". What
    is there is asked first, then whether it is a directory."""
    made = tmp_path / "config"
    monkeypatch.setenv(config.ENV_CONFIG_DIR, str(made))
    real_is_dir = Path.is_dir

    def is_dir_then_made(path: Path) -> bool:
        found = real_is_dir(path)
        if path == made and not found:
            made.mkdir()  # another saver's mkdir, just after this one looked
        return found

    monkeypatch.setattr(Path, "is_dir", is_dir_then_made)
    assert config.config_dir_problem() is None


def test_a_file_planted_at_the_tokens_temporary_name_is_not_written_through(
    config_dir: Path, tmp_path: Path
) -> None:
    """Each save of a race in progress (every phase change) wrote its token first to
    ``playing/<ROOM>.<RACER>.<pid>.tmp``, opened without O_EXCL: whoever could write in
    ``playing/`` (another local user, where it was not the racer's own: a config
    directory made under ``umask 000``, or one they made first) learned the room and
    the pid from the first save's file names and planted a link at that name; the
    next save wrote the token into a file of theirs (an audit). The temporary file is
    a fresh one, made by this save only."""
    config.save_race(ANN)
    playing = config.playing_dir()
    stolen = tmp_path / "stolen"
    stolen.write_text("", encoding="utf-8")
    (playing / f"r_room.1.{os.getpid()}.tmp").symlink_to(stolen)
    config.save_race(ANN)
    assert ANN.token not in stolen.read_text(encoding="utf-8")
    (path,) = config.saved_race_files()
    assert not path.is_symlink() and path.stat().st_mode & 0o077 == 0


def test_a_save_that_fails_leaves_no_part_of_the_token_behind(config_dir: Path) -> None:
    """A full disk (here a file size limit: the write fails with EFBIG) failed the save
    of a race in progress and left its temporary file, the token's first bytes in it,
    for good (one per process: a new pid names a new one). The race goes on (the
    window says in one line that resume will not work); nothing of the save stays."""
    script = (
        "import resource, sys; from solrace_client import config; "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (40, 40)); "
        f"race = config.SavedRace(**{asdict(ANN)!r})\n"
        "try:\n    config.save_race(race)\n"
        "except OSError as exc:\n    print(exc.strerror)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=os.environ, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "File too large\n"), done
    assert sorted(p.name for p in (config_dir / "playing").iterdir()) == []


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
@pytest.mark.parametrize("saves", ["race", "name"])
def test_the_directories_made_are_the_users_only_whatever_the_umask(
    tmp_path: Path, umask: int, saves: str
) -> None:
    """The config directory (and the parents it is made in) is made readable and
    writable by the user only, as the XDG Base Directory spec asks of a directory made
    to write in: under ``umask 000`` it was made 0777, and anyone on the computer could
    put files in it (an older client's ``race.json``, which ``resume`` reads, or a
    ``playing/`` of their own, before the first save); under ``umask 277`` it was made
    0500 and no race could be saved in it."""
    home = tmp_path / "home" / ".config" / "solrace"
    save = (
        f"config.save_race(config.SavedRace(**{asdict(ANN)!r}))"
        if saves == "race"
        else "config.save_name('ann')"
    )
    script = f"import os; os.umask({umask}); from solrace_client import config; {save}"
    env = {**os.environ, "SOLRACE_CONFIG_DIR": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    for made in (home, home.parent, home.parent.parent, *home.glob("*/")):
        assert made.stat().st_mode & 0o777 == 0o700, made


def test_a_name_that_cannot_be_remembered_leaves_the_one_remembered(
    config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--name Bob`` on a full disk (here a file size limit: EFBIG) said "could not
    remember the name" and went on, but the profile had been emptied before the write
    failed: the next command, with no ``--name``, raced as the login name, not as the
    name remembered before (``Ann``). A window reading the profile while another
    saved a name read it empty alike. The name is written whole, or not at all."""
    config.save_name("Ann")
    script = (
        "import resource; from solrace_client import config; "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (5, 5))\n"
        "try:\n    config.save_name('Bob' * 10)\n"
        "except OSError as exc:\n    print(exc.strerror)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=os.environ, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "File too large\n"), done
    monkeypatch.setenv("USER", "login")
    assert config.default_name() == "Ann"
    assert sorted(p.name for p in config_dir.iterdir()) == ["profile.json"]
