"""What the client remembers between runs: the server, the racer's name, and the
current race's room and secret token, so a crashed or closed client can rejoin its
race (``resume``). Kept in the user's config directory, readable by the user only."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from solrace.environ import variable
from solrace.protocol.fairness import MAX_SEED, is_salt
from solrace.protocol.limits import MAX_NAME_LEN
from solrace.protocol.messages import display_name
from solrace.quoting import as_typed

#: The variable naming the config directory, read as every ``SOLRACE_*`` variable is
#: (:func:`solrace.environ.variable`: trimmed, blank as unset) — read as written,
#: ``SOLRACE_CONFIG_DIR=" /x "`` was a directory named with its spaces.
ENV_CONFIG_DIR: Final = "SOLRACE_CONFIG_DIR"


def _xdg_config_home() -> str | None:
    """``$XDG_CONFIG_HOME`` where it is an absolute path, else None: the XDG Base
    Directory spec has a relative one "considered invalid and ignored" (it was taken,
    relative to wherever the command ran)."""
    value = os.environ.get("XDG_CONFIG_HOME")
    return value if value and os.path.isabs(value) else None


def config_dir() -> Path:
    """Where the client keeps its files (docs/client.md), whether or not it can."""
    base = _xdg_config_home() or os.path.join(Path.home(), ".config")
    return Path(variable(ENV_CONFIG_DIR) or os.path.join(base, "solrace"))


class ConfigDirUnusable(NotADirectoryError):
    """The config directory is not one: a file (or a device) stands where it, or a
    directory it would be made in, should be. Its message is the one line to say."""


def _named_by() -> str:
    """What chose the config directory, for a message."""
    if variable(ENV_CONFIG_DIR):
        return f"${ENV_CONFIG_DIR}"
    if _xdg_config_home():
        return "$XDG_CONFIG_HOME"
    return "the default"


def config_dir_problem() -> str | None:
    """Why the config directory cannot hold the client's files, in one line, or None.

    ``SOLRACE_CONFIG_DIR`` naming a file made ``races`` say "no saved races in
    FILE/races", ``replay`` "no saved race … in FILE/races", ``resume`` "nothing saved
    in FILE", and ``--name`` "could not remember the name in FILE: File exists" (a
    newcomer audit): none said that the directory is a file. Only what can be seen
    without writing is judged: a directory that cannot be written says so when it is.

    A relative ``SOLRACE_CONFIG_DIR`` is refused: it names another directory wherever
    the command runs (races saved from one not found from another), and ``"~/x"``, the
    tilde quoted so that no shell expanded it, made a directory named ``~`` there.
    Nothing is expanded here: ``~`` and ``$VAR`` are the shell's, and a program that
    expands them reads ``~`` where a directory of that name was meant."""
    given = variable(ENV_CONFIG_DIR)
    if given and not os.path.isabs(given):
        return (  # said as typed, a long one in part (refused before any system call)
            f"the config directory {as_typed([given])} (${ENV_CONFIG_DIR}) is not an "
            "absolute path (a shell expands ~ only where it is not quoted): set "
            f"${ENV_CONFIG_DIR} to an absolute path"
        )
    path = config_dir()
    for part in (path, *path.parents):
        try:
            # Whether anything is there first, then whether it is a directory: asked the
            # other way round, another saver's mkdir between the two (a bot and the bot
            # it raced, saving a computer's first race at once) read as a file there, and
            # the save failed "… is not a directory" (CI, once), as kept_in once did.
            exists = part.exists() or part.is_symlink()
            is_dir = exists and part.is_dir()
        except OSError:  # unreadable on the way (EACCES): left to the file operation
            return None
        if is_dir:
            return None
        if exists:
            fix = "set $SOLRACE_CONFIG_DIR to a directory"
            if part == path:
                return f"the config directory {path} ({_named_by()}) is not a directory: {fix}"
            return (
                f"the config directory {path} ({_named_by()}) cannot be made: {part} is "
                f"not a directory: {fix}"
            )
    return None


def usable_config_dir() -> Path:
    """:func:`config_dir`, or :class:`ConfigDirUnusable` saying why it cannot be used."""
    problem = config_dir_problem()
    if problem is not None:
        raise ConfigDirUnusable(problem)
    return config_dir()


@dataclass
class SavedRace:
    server: str
    room: str
    code: str
    racer: int
    token: str
    name: str
    version: int = 0
    #: The process of the window racing it (0: unknown, as in an older client's file).
    pid: int = 0
    #: The round's commitment once announced (its countdown on; None in a lobby, and in
    #: an older client's file): it names the race (its id) when the room has moved on.
    commitment: str | None = None
    #: The ``{seed, salt}`` of the room's last race_over the window saw (RoomView.
    #: revealed; None before any, and in an older client's file): ``resume`` sends it
    #: back as the proof that the round's seed went out (docs/protocol.md, ``resume``).
    revealed: dict[str, Any] | None = None


def kept_in(name: str, holds: str) -> Path:
    """The directory ``name`` of the config directory, where the client keeps
    ``holds``, or :class:`ConfigDirUnusable` when something else than a directory is
    there. A file named ``races`` made ``races`` say "no saved races in …/races"
    (status 0), ``verify`` "no saved race … in …/races", ``fetch`` mkdir's "…/races:
    File exists"; one named ``playing`` made ``resume`` say "nothing saved" (a newcomer
    audit). A directory that cannot be read or written is left to the file operation,
    which says so."""
    path = usable_config_dir() / name
    try:
        # Whether anything is there first, then whether it is a directory: asked the
        # other way round, another saver's mkdir between the two (a bot and a window
        # saving a computer's first race) read as a file there, and the save failed.
        other = (path.exists() or path.is_symlink()) and not path.is_dir()
    except OSError:  # unreadable on the way (EACCES): the file operation says it
        return path
    if other:
        raise ConfigDirUnusable(
            f"{path} is not a directory: the config directory keeps {holds} there "
            "(remove or rename that file)"
        )
    return path


def make_private_dir(path: Path) -> None:
    """Make the directory ``path``, and those of its parents that are missing, each
    readable and writable by the user only (0700) whatever the umask, as the XDG Base
    Directory spec asks of a directory a program makes to write in. Made as the umask
    had it, the config directory was 0777 under ``umask 000`` (anyone on the computer
    could put a ``race.json`` that ``resume`` reads, or a ``playing/`` of their own
    before the first save) and 0500 under ``umask 277`` (nothing could be saved in
    it). A directory already there is left as the user has it."""
    missing = []
    for part in (path, *path.parents):
        if part.is_dir():
            break
        missing.append(part)
    for part in reversed(missing):
        try:
            os.mkdir(part, 0o700)
        except FileExistsError:  # another saver made it meanwhile (or it is a file)
            if not part.is_dir():
                raise
            continue
        os.chmod(part, 0o700)  # the umask takes bits off mkdir's mode, never adds


def race_path() -> Path:
    """Where an older client saved its one current race (still read by ``resume``)."""
    return usable_config_dir() / "race.json"


def playing_dir() -> Path:
    """Where each race in progress on this computer is saved for ``resume``: one file
    per racer, so that two windows racing at once (Ann and Bob on one computer, as in
    the README) never overwrite or forget each other's token."""
    return kept_in("playing", "the races in progress for solrace resume")


def _playing_path(room: str, racer: int) -> Path:
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in room)
    return playing_dir() / f"{safe or 'room'}.{racer}.json"


def save_race(race: SavedRace) -> None:
    """Save ``race`` as this process's race in progress (its ``pid`` is this one's)."""
    race.pid = os.getpid()
    directory = playing_dir()
    make_private_dir(directory)
    with contextlib.suppress(OSError):
        os.chmod(directory, 0o700)  # tokens: readable by the user only (an older one's)
    _write_whole(_playing_path(race.room, race.racer), json.dumps(asdict(race)))


def _write_whole(path: Path, text: str) -> None:
    """Write ``text`` as the file ``path`` whole, or leave it as it was: written to a
    fresh temporary file (O_EXCL, 0600) renamed over it, removed if the save fails.
    One of a name known in advance (``<ROOM>.<RACER>.<pid>.tmp``) was opened as it
    found it, so a link planted there by whoever could write in ``playing/`` got the
    token (an audit), and a full disk left the token's first bytes in it for good."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: The most of a file of this directory (a race in progress, the profile) that is
#: read: each holds a few hundred bytes (a token, a room, a server URL).
MAX_CONFIG_FILE_BYTES: Final = 1024 * 1024


class NotAFile(ValueError):
    """A file the client keeps is a pipe or a device, or larger than it may be."""


#: The longest a kept file's open waits for another process's lease on it (a Samba
#: share's oplock, an NFS server's delegation) to be let go: Linux's default
#: ``lease-break-time`` (45 s), past which the kernel takes the lease back itself, and
#: a second. A plain open waits as long.
LEASE_BREAK_WAIT_S: Final = 46.0


def _open_without_waiting(path: Path) -> int:
    """``path`` opened for reading without waiting for a writer (O_NONBLOCK: a FIFO).
    Such an open of a file another process holds a lease on fails at once
    (EWOULDBLOCK) where a plain one waits the moment the holder takes to let go (told
    by the open itself): a good result file was said "Resource temporarily
    unavailable", and a save over it replaced what it held. It is tried again until
    the lease is let go, at most :data:`LEASE_BREAK_WAIT_S`; a FIFO's open never
    fails so, and is not waited for."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    deadline = time.monotonic() + LEASE_BREAK_WAIT_S
    while True:
        try:
            return os.open(path, flags)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def read_kept(path: Path, most: int = MAX_CONFIG_FILE_BYTES) -> str:
    """The text of a file the client keeps (a saved race, the profile, a race in
    progress), or of a result file named on the command line: opened without waiting
    and read only if it is a regular file, at most ``most`` bytes of it. A FIFO of that
    name waited for a writer for ever (``solrace races``, ``verify``, ``resume``), and a
    file of 150 MB was read whole. Raises :class:`NotAFile` saying which (without the
    path), UnicodeDecodeError or OSError."""
    fd = _open_without_waiting(path)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAFile("not a file")
        # A regular file: read it the ordinary, blocking way (a non-blocking read may
        # answer EAGAIN on some file systems, and a buffered read then gives None).
        os.set_blocking(fd, True)
        data = handle.read(most + 1)
    if len(data) > most:
        raise NotAFile(f"larger than {most // 2**20} MiB")
    return data.decode("utf-8")


def saved_race_files() -> list[Path]:
    """Every file holding a race in progress, newest first (an older client's
    ``race.json`` too)."""
    paths = [race_path(), *playing_dir().glob("*.json")]
    found = []
    for path in paths:
        with contextlib.suppress(OSError):
            found.append((path.stat().st_mtime, path))
    return [path for _, path in sorted(found, key=lambda item: item[0], reverse=True)]


def _read(path: Path) -> SavedRace | None:
    try:
        data = json.loads(read_kept(path))
        race = SavedRace(**data)
    except (OSError, ValueError, TypeError, RecursionError):  # nested 200,000 deep
        return None
    if not _well_formed(race):
        return None
    if not is_proof(race.revealed):
        race.revealed = None  # edited by hand: the race resumes, with no proof
    return race


def is_proof(value: object) -> bool:
    """Whether ``value`` is a ``{seed, salt}`` pair as a race_over reveals them: a seed
    in 0..MAX_SEED and 64 lower-case hex digits — what the server takes (one it
    ignores if it is not the room's). A seed past 64 bits, edited in by hand, was sent
    on and failed to encode: a traceback, and no resume (a review)."""
    if not isinstance(value, dict) or set(value) != {"seed", "salt"}:
        return False
    seed, salt = value["seed"], value["salt"]
    whole = isinstance(seed, int) and not isinstance(seed, bool)
    return whole and 0 <= seed <= MAX_SEED and is_salt(salt)


#: Each SavedRace field's type (bool is no int here: ``"racer": true`` is no racer).
_FIELD_TYPES: dict[str, type] = {
    "server": str,
    "room": str,
    "code": str,
    "racer": int,
    "token": str,
    "name": str,
    "version": int,
    "pid": int,
}
#: The largest process id a saved file may name (os.kill overflows on a larger one).
_MAX_PID = 2**31 - 1


def _well_formed(race: SavedRace) -> bool:
    """Every field of the type ``resume`` uses: a file edited by hand or cut short
    (``"pid": "x"``, ``"server": 5``) is skipped like an unreadable one; it made
    ``solrace resume`` print a traceback."""
    for field, kind in _FIELD_TYPES.items():
        value = getattr(race, field)
        if not isinstance(value, kind) or isinstance(value, bool):
            return False
    if race.commitment is not None and not isinstance(race.commitment, str):
        return False
    if not any(url.strip() for url in race.server.split(",")):
        # no server to resume on (connection.server_list would name none): ``"server":
        # ""`` made ``solrace resume`` print a traceback ("no server to connect to")
        return False
    return 0 <= race.pid <= _MAX_PID and race.version >= 0


def _window_open(pid: int) -> bool:
    """Whether the process that saved a race still runs (its window is open)."""
    if pid <= 0 or os.name == "nt":  # unknown (on Windows os.kill would end it)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (EPERM): it exists
        return True
    return True


def saved_races() -> list[SavedRace]:
    """Every readable race in progress saved on this computer, newest first."""
    return [race for race in map(_read, saved_race_files()) if race is not None]


def resume_candidates() -> list[SavedRace]:
    """The races ``solrace resume`` tries, in turn: those whose window is gone (a crash,
    a closed terminal), newest first; else the newest one still open in another window
    (taken over only when no window is gone)."""
    races = saved_races()
    closed = [race for race in races if not _window_open(race.pid)]
    return closed or races[:1]


def saved_in_room(code: str) -> bool:
    """Whether a race of the room with ``code`` is saved on this computer: a seat there
    that ``solrace resume`` can take back (a join whose reply was lost saved none)."""
    try:
        return any(race.code == code for race in saved_races())
    except ConfigDirUnusable:  # nothing can be saved there
        return False


def load_race() -> SavedRace | None:
    """The race ``solrace resume`` rejoins first (:func:`resume_candidates`)."""
    return next(iter(resume_candidates()), None)


def is_saved(race: SavedRace) -> bool:
    """Whether ``race`` (its room and token) is still saved: :func:`clear_race` has not
    forgotten it."""
    return any((r.room, r.token) == (race.room, race.token) for r in saved_races())


def clear_race(room: str, token: str) -> None:
    """Forget the race of ``room`` played with ``token`` (over, left, or refused for
    good) — only that one: another window's race stays saved."""
    for path in saved_race_files():
        race = _read(path)
        if race is not None and race.room == room and race.token == token:
            path.unlink(missing_ok=True)


def default_name() -> str:
    """The remembered name, else the login name, else "racer": the first of them the
    server would take (a name saved by an older client that the server refuses must
    not make every later command fail over a ``--name`` nobody gave)."""
    candidates = []
    try:
        data = json.loads(read_kept(usable_config_dir() / "profile.json"))
        candidates.append(str(data["name"]))
    except (OSError, ValueError, KeyError, TypeError, RecursionError):  # nested too deep
        pass
    candidates.append(os.environ.get("USER", "")[:MAX_NAME_LEN])
    for name in candidates:
        try:
            return display_name(name)
        except ValueError:
            continue
    return "racer"


def save_name(name: str) -> None:
    """Remember ``name`` for the next command without ``--name``. Written whole or not
    at all: written in place, the profile was emptied first, and a full disk (or a
    command reading it meanwhile) lost the name remembered before for the login name."""
    directory = usable_config_dir()
    make_private_dir(directory)
    _write_whole(directory / "profile.json", json.dumps({"name": name}))
