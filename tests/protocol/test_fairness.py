"""fairness.py: the commitment is sha256(seed as 8 bytes BE ‖ salt bytes)."""

from __future__ import annotations

import hashlib

import pytest
from solrace.protocol.fairness import commitment, is_commitment, is_salt, verify

SALT = "00" * 31 + "ff"


def test_commitment_matches_the_documented_byte_layout() -> None:
    expected = hashlib.sha256(bytes.fromhex("000000000000002a") + bytes.fromhex(SALT)).hexdigest()
    assert commitment(42, SALT) == expected
    assert is_commitment(expected)


def test_golden_vector() -> None:
    """Pinned so another language's checker can test itself against this one."""
    assert commitment(0, "00" * 32) == hashlib.sha256(bytes(40)).hexdigest()
    assert commitment(2**64 - 1, "ab" * 32) == (
        hashlib.sha256(b"\xff" * 8 + b"\xab" * 32).hexdigest()
    )


def test_verify() -> None:
    c = commitment(7, SALT)
    assert verify(c, 7, SALT)
    assert not verify(c, 8, SALT)
    assert not verify(c, 7, "11" * 32)


@pytest.mark.parametrize(
    ("c", "seed", "salt"),
    [
        ("nothex", 7, SALT),
        ("é" * 64, 7, SALT),
        (commitment(7, SALT), -1, SALT),
        (commitment(7, SALT), 2**64, SALT),
        (commitment(7, SALT), True, SALT),
        (commitment(7, SALT), 7, "AB" * 32),
        (commitment(7, SALT), 7, "ab"),
        (commitment(7, SALT).upper(), 7, SALT),
    ],
)
def test_verify_never_raises_on_a_bad_reveal(c: str, seed: int, salt: str) -> None:
    assert verify(c, seed, salt) is False


@pytest.mark.parametrize(("seed", "salt"), [(-1, SALT), (2**64, SALT), (1, "zz" * 32), (1, "")])
def test_commitment_refuses_bad_input(seed: int, salt: str) -> None:
    with pytest.raises(ValueError):
        commitment(seed, salt)


def test_salt_shape() -> None:
    assert is_salt("0f" * 32)
    assert not is_salt("0f" * 32 + "\n")
    assert not is_salt(None)


def test_a_certified_commitment_binds_the_certificate() -> None:
    line = ["3:2>F", "D", "W>5"]
    c = commitment(7, SALT, line)
    assert (
        c
        == hashlib.sha256(
            (7).to_bytes(8, "big") + bytes.fromhex(SALT) + hashlib.sha256(b"3:2>F\nD\nW>5").digest()
        ).hexdigest()
    )
    assert verify(c, 7, SALT, line)
    assert not verify(c, 7, SALT)  # the certificate is part of the commitment
    assert not verify(c, 7, SALT, line[:-1])
    assert not verify(commitment(7, SALT), 7, SALT, line)


@pytest.mark.parametrize("bad", [True, -1, 2**70, 1.5, "D", {"D": 1}, [1], [""]])
def test_a_certificate_that_is_not_a_list_of_moves_does_not_verify(bad: object) -> None:
    """A race file anyone can edit: ``verify`` never raises on it (a ``true`` raised
    TypeError, and ``solrace verify`` printed a traceback)."""
    c = commitment(7, SALT, ["D"])
    assert not verify(c, 7, SALT, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        commitment(7, SALT, bad)  # type: ignore[arg-type]
