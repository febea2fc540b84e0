"""Signed notes and note keys, checked against the published Go and C2SP examples."""

from __future__ import annotations

import base64
import hashlib

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memseal.ledger.errors import InvalidRequest, VerificationError
from memseal.ledger.note import (
    ALG_ED25519,
    MAX_SIGNATURES,
    Note,
    NoteSigner,
    VerifierKey,
    format_skey,
    format_vkey,
    key_id,
    open_note,
    parse_skey,
    parse_vkey,
    sign_note,
    split_note,
)

# Published examples from Go's golang.org/x/mod/sumdb/note documentation and tests.
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG64 = (
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM="
)
ENOCH_SIG64 = (
    "rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ="
)
PETER_SIG = f"— PeterNeumann {PETER_SIG64}\n"
ENOCH_SIG = f"— EnochRoot {ENOCH_SIG64}\n"
PETER_ID = bytes.fromhex("c74f20a3")
ENOCH_ID = bytes.fromhex("af0cfe78")

# The example in c2sp.org/signed-note ("Verifier keys").
C2SP_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
C2SP_NOTE = (
    "This is an example message.\n\n— example.com/foo "
    "Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)

PETER = parse_vkey(PETER_VKEY)
ENOCH = parse_vkey(ENOCH_VKEY)


def reject(note: str | bytes, known: list[VerifierKey], match: str) -> VerificationError:
    with pytest.raises(VerificationError, match=match) as info:
        open_note(note, known)
    assert info.value.step == "note"
    assert info.value.seq is None
    return info.value


def raw_vkey(name: str, key_data: bytes) -> str:
    """A vkey line with a correct id over arbitrary key data, to reach later checks."""
    kid = hashlib.sha256(name.encode() + b"\n" + key_data).digest()[:4]
    return f"{name}+{kid.hex()}+{base64.b64encode(key_data).decode()}"


# Keys -------------------------------------------------------------------------------------------


def test_key_id_known_answer() -> None:
    assert key_id("PeterNeumann", PETER.public_key) == PETER_ID
    assert PETER.key_id == PETER_ID
    assert ENOCH.key_id == ENOCH_ID
    assert ALG_ED25519 == 1


def test_vkey_text_round_trips() -> None:
    assert PETER.name == "PeterNeumann"
    assert PETER.text == PETER_VKEY
    assert format_vkey("PeterNeumann", PETER.public_key) == PETER_VKEY
    assert parse_vkey(f"  {PETER_VKEY}\n") == PETER


def test_c2sp_vkey_known_answer() -> None:
    key = parse_vkey(C2SP_VKEY)
    assert key.name == "example.com/foo"
    assert key.key_id == bytes.fromhex("530d903a")
    assert key.text == C2SP_VKEY


def test_every_mangled_vkey_is_rejected() -> None:
    for i in range(len(PETER_VKEY) + 1):
        for j in range(i + 1, len(PETER_VKEY) + 1):
            if (i, j) != (0, len(PETER_VKEY)):
                with pytest.raises(InvalidRequest):
                    parse_vkey(PETER_VKEY[i:j])
    for i, ch in enumerate(PETER_VKEY):
        with pytest.raises(InvalidRequest):
            parse_vkey(PETER_VKEY[:i] + chr(ord(ch) + 1) + PETER_VKEY[i + 1 :])


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "name\\+keyid\\+keydata"),
        ("PeterNeumann+c74f20a3", "name\\+keyid\\+keydata"),
        ("+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "name is empty"),
        ("Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "whitespace"),
        ("Peter\u3000Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "whitespace"),
        ("Peter\u200bNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "printable"),
        ("PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "lowercase hex"),
        ("PeterNeumann+c74f20a+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "lowercase hex"),
        ("PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "does not match"),
        ("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T", "base64"),
        ("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq_LDE4izWy10TW", "base64"),
        ("PeterNeumann+c74f20a3+", "empty"),
        # Go's own test vectors: wrong key length and unknown algorithm, ids adjusted.
        ("PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==", "base64"),
        ("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "algorithm 0x65"),
        (raw_vkey("PeterNeumann", b"\x01" + bytes(31)), "32 bytes, got 31"),
        (raw_vkey("PeterNeumann", b"\x01" + bytes(33)), "32 bytes, got 33"),
        (raw_vkey("PeterNeumann", b"\x04" + bytes(32)), "algorithm 0x04"),
    ],
)
def test_malformed_vkey(text: str, match: str) -> None:
    with pytest.raises(InvalidRequest, match=match):
        parse_vkey(text)


def test_verifier_key_refuses_inconsistent_fields() -> None:
    with pytest.raises(InvalidRequest, match="does not match"):
        VerifierKey(name="PeterNeumann", key_id=ENOCH_ID, public_key=PETER.public_key)
    with pytest.raises(InvalidRequest, match="32 bytes"):
        VerifierKey(name="PeterNeumann", key_id=PETER_ID, public_key=PETER.public_key[:31])
    with pytest.raises(InvalidRequest, match="32 bytes"):
        format_vkey("PeterNeumann", bytes(31))
    with pytest.raises(InvalidRequest, match="'\\+'"):
        format_vkey("a+b", PETER.public_key)


def test_verify_returns_false_instead_of_raising() -> None:
    signature = base64.b64decode(PETER_SIG64)[4:]
    message = TEXT.encode()
    assert PETER.verify(message, signature)
    assert not PETER.verify(message + b"x", signature)
    assert not PETER.verify(message, bytes([signature[0] ^ 1]) + signature[1:])
    assert not PETER.verify(message, signature[:63])
    assert not PETER.verify(message, b"")
    assert not ENOCH.verify(message, signature)


def test_skey_known_answer_round_trips() -> None:
    signer = parse_skey(PETER_SKEY)
    assert signer.name == "PeterNeumann"
    assert signer.key_id == PETER_ID
    assert signer.verifier == PETER
    assert signer.seed == base64.b64decode("AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz")[1:]
    assert format_skey(signer) == PETER_SKEY
    assert parse_skey(PETER_SKEY + "\n") == signer


def test_every_mangled_skey_is_rejected_without_leaking_the_key() -> None:
    secret = PETER_SKEY.rsplit("+", 1)[1][4:20]
    variants = [
        PETER_SKEY[i:j]
        for i in range(len(PETER_SKEY) + 1)
        for j in range(i + 1, len(PETER_SKEY) + 1)
        if (i, j) != (0, len(PETER_SKEY))
    ]
    variants += [
        PETER_SKEY[:i] + chr(ord(ch) + 1) + PETER_SKEY[i + 1 :] for i, ch in enumerate(PETER_SKEY)
    ]
    for text in variants:
        with pytest.raises(InvalidRequest) as info:
            parse_skey(text)
        assert secret not in str(info.value)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz", "PRIVATE\\+KEY"),
        (
            "private+key+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz",
            "PRIVATE",
        ),
        (PETER_SKEY.replace("c74f20a3", "c74f20a4"), "does not match"),
        (PETER_SKEY.replace("PeterNeumann", "PeterNeumanN"), "does not match"),
        (PETER_SKEY.replace("+AYEK", "+AoEK"), "algorithm 0x02"),
        ("PRIVATE+KEY+PeterNeumann+c74f20a3+" + PETER_VKEY.rsplit("+", 1)[1], "does not match"),
        ("PRIVATE+KEY+PeterNeumann+c74f20a3+AQAAAA==", "32 bytes, got 3"),
        (
            "PRIVATE+KEY+Peter\tNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz",
            "space",
        ),
    ],
)
def test_malformed_skey(text: str, match: str) -> None:
    with pytest.raises(InvalidRequest, match=match):
        parse_skey(text)


def test_signer_never_shows_its_seed() -> None:
    signer = parse_skey(PETER_SKEY)
    seed = signer.seed
    for shown in (repr(signer), str(signer), f"{signer}", repr([signer])):
        assert "PeterNeumann" in shown
        assert seed.hex() not in shown
        assert base64.b64encode(seed).decode() not in shown
        assert repr(seed)[2:-1] not in shown
        assert "AYEKFALVFGyNhPJEMzD1QIDr" not in shown


def test_signer_generate_from_seed_and_equality() -> None:
    signer = NoteSigner.generate("example.com/log")
    twin = NoteSigner.from_seed("example.com/log", signer.seed)
    assert twin == signer
    assert hash(twin) == hash(signer)
    assert twin != NoteSigner.generate("example.com/log")
    assert twin.verifier.verify(b"hi", signer.sign(b"hi"))
    assert len(signer.sign(b"hi")) == 64
    assert parse_skey(format_skey(signer)) == signer
    assert parse_vkey(signer.verifier.text) == signer.verifier
    with pytest.raises(InvalidRequest, match="32 bytes"):
        NoteSigner.from_seed("x", bytes(31))
    for bad in ("", "a b", "a+b", "a\nb"):
        with pytest.raises(InvalidRequest, match="name"):
            NoteSigner.generate(bad)
    with pytest.raises(InvalidRequest, match="does not match"):
        NoteSigner(name="other", key_id=signer.key_id, signing_key=signer.signing_key)


# Signing ----------------------------------------------------------------------------------------


def test_sign_known_answer() -> None:
    assert sign_note(TEXT, [parse_skey(PETER_SKEY)]) == TEXT + "\n" + PETER_SIG


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("abc", "end with a newline"),
        ("", "end with a newline"),
        ("a\x01b\n", "U\\+0001"),
        ("a\rb\n", "U\\+000D"),
        ("a\tb\n", "U\\+0009"),
        ("a\ud800\n", "UTF-8"),
    ],
)
def test_sign_rejects_bad_text(text: str, match: str) -> None:
    with pytest.raises(InvalidRequest, match=match):
        sign_note(text, [parse_skey(PETER_SKEY)])


def test_sign_rejects_bad_signer_lists() -> None:
    peter = parse_skey(PETER_SKEY)
    with pytest.raises(InvalidRequest, match="at least one"):
        sign_note(TEXT, [])
    with pytest.raises(InvalidRequest, match="same key"):
        sign_note(TEXT, [peter, parse_skey(PETER_SKEY)])
    seed = bytes(32)
    many = [NoteSigner.from_seed(f"w{i}", seed) for i in range(MAX_SIGNATURES + 1)]
    with pytest.raises(InvalidRequest, match="at most 100"):
        sign_note(TEXT, many)


def test_sign_keeps_blank_lines_inside_the_text() -> None:
    signer = parse_skey(PETER_SKEY)
    for text in ("\n", "a\n\nb\n", "a\n\n\n", f"a\n\n{PETER_SIG}"):
        note = open_note(sign_note(text, [signer]), [PETER])
        assert note.text == text


# Opening ----------------------------------------------------------------------------------------


def test_open_known_answers() -> None:
    note = open_note(TEXT + "\n" + PETER_SIG, [PETER])
    assert note == Note(text=TEXT, verified=(PETER,), unverified=())
    c2sp = parse_vkey(C2SP_VKEY)
    assert open_note(C2SP_NOTE, [c2sp]).verified == (c2sp,)
    assert open_note(C2SP_NOTE.encode(), [c2sp]).text == "This is an example message.\n"


def test_unknown_signers_are_ignored_and_reported() -> None:
    note = open_note(TEXT + "\n" + PETER_SIG + ENOCH_SIG, [PETER])
    assert note.verified == (PETER,)
    assert note.unverified == (("EnochRoot", ENOCH_ID),)
    both = open_note(TEXT + "\n" + ENOCH_SIG + PETER_SIG, [PETER, ENOCH])
    assert both.verified == (ENOCH, PETER)
    assert both.unverified == ()


def test_unknown_duplicates_are_listed_once() -> None:
    garbled = ENOCH_SIG[:60] + "ABCD" + ENOCH_SIG[60:]
    note = open_note(TEXT + "\n" + PETER_SIG + ENOCH_SIG + ENOCH_SIG + garbled, [PETER])
    assert note.unverified == (("EnochRoot", ENOCH_ID),)


def test_same_name_or_same_id_alone_is_an_unknown_key() -> None:
    signature = base64.b64decode(PETER_SIG64)[4:]
    other_id = f"— PeterNeumann {base64.b64encode(bytes(4) + signature).decode()}\n"
    other_name = f"— PeterNeumanM {PETER_SIG64}\n"
    note = open_note(TEXT + "\n" + other_id + other_name + PETER_SIG, [PETER])
    assert note.verified == (PETER,)
    assert note.unverified == (("PeterNeumann", bytes(4)), ("PeterNeumanM", PETER_ID))
    # Peter's valid signature under a wrong key id is not Peter's signature.
    reject(TEXT + "\n" + other_id, [PETER], "no valid signature by a known key")


def test_note_without_a_known_signer_is_rejected() -> None:
    reject(TEXT + "\n" + PETER_SIG + ENOCH_SIG, [], "no valid signature by a known key")
    reject(TEXT + "\n" + ENOCH_SIG, [PETER], "no valid signature by a known key")
    reject(C2SP_NOTE, [PETER, ENOCH], "no valid signature by a known key")


def test_bad_signature_by_a_known_key_rejects_the_note() -> None:
    garbled = PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    reject(TEXT + "\n" + garbled, [PETER], "invalid signature for key PeterNeumann\\+c74f20a3")
    # Another known key's good signature does not save it.
    reject(TEXT + "\n" + ENOCH_SIG + garbled, [PETER, ENOCH], "invalid signature")
    # Nor does a changed text under an otherwise good signature.
    reject(TEXT.replace("answer", "Answer") + "\n" + PETER_SIG, [PETER], "invalid signature")
    short = f"— PeterNeumann {base64.b64encode(PETER_ID + b'x').decode()}\n"
    reject(TEXT + "\n" + short, [PETER], "invalid signature")


def test_duplicate_signature_by_a_known_key_is_rejected() -> None:
    reject(TEXT + "\n" + PETER_SIG + PETER_SIG, [PETER], "duplicate signature by key PeterNeumann")


def test_listing_a_key_twice_is_fine_but_two_keys_with_one_id_are_not() -> None:
    assert open_note(TEXT + "\n" + ENOCH_SIG, [ENOCH, PETER, ENOCH]).verified == (ENOCH,)
    impostor = NoteSigner.generate("EnochRoot").verifier
    msgspec.structs.force_setattr(impostor, "key_id", ENOCH_ID)
    reject(TEXT + "\n" + ENOCH_SIG, [ENOCH, impostor], "ambiguous known key EnochRoot")
    # Unused, the clash does not matter (as in Go).
    assert open_note(TEXT + "\n" + PETER_SIG, [ENOCH, impostor, PETER]).verified == (PETER,)


def test_signature_count_limit_matches_go() -> None:
    reject(TEXT + "\n" + PETER_SIG * 101, [PETER], "more than 100 signatures")
    reject(TEXT + "\n" + PETER_SIG * 101, [], "more than 100 signatures")
    sig64 = base64.b64encode(bytes(4) + bytes(64)).decode()
    others = "".join(f"— w{i} {sig64}\n" for i in range(MAX_SIGNATURES - 1))
    note = open_note(TEXT + "\n" + others + PETER_SIG, [PETER])
    assert len(note.unverified) == MAX_SIGNATURES - 1


@pytest.mark.parametrize(
    "note",
    [
        # Go's malformed-note cases.
        TEXT,
        TEXT + "\n",
        TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + TEXT + "\n" + PETER_SIG,
        b"\xff" + (TEXT + "\n" + PETER_SIG).encode(),
        TEXT + "\n" + f"— Bad Name {PETER_SIG64}",
        TEXT + "\n" + f"— Bad Name {PETER_SIG64}\n",
        TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
        # And more.
        "",
        "\n\n",
        TEXT + "\n" + PETER_SIG + "\n",
        TEXT + "\n\n" + PETER_SIG.replace("\n", "\r\n"),
        (TEXT + "\n" + PETER_SIG).replace("\n", "\r\n"),
        TEXT + "\n" + PETER_SIG.replace("—", "-"),
        TEXT + "\n" + PETER_SIG.replace("— ", "—"),
        TEXT + "\n" + PETER_SIG.replace("— ", "—  "),
        TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "Peter+Neumann"),
        TEXT + "\n" + PETER_SIG.replace(PETER_SIG64, ""),
        TEXT + "\n" + PETER_SIG.replace(PETER_SIG64, PETER_SIG64[:-1]),
        TEXT + "\n" + PETER_SIG.replace(PETER_SIG64, PETER_SIG64 + " "),
        TEXT + "\n" + PETER_SIG.replace("AM=", "AN="),  # non-zero padding bits
        TEXT + "\n" + PETER_SIG.replace(PETER_SIG64, base64.b64encode(PETER_ID).decode()),
        "a\ud800\n\n" + PETER_SIG,
        "a\x7f\x00\n\n" + PETER_SIG,
    ],
)
def test_malformed_notes_are_rejected(note: str | bytes) -> None:
    reject(note, [PETER], "malformed note")


def test_split_note_reads_the_c2sp_example_without_keys() -> None:
    example = (
        "Ognuno sta solo sul cuor della terra\ntrafitto da un raggio di sole:\n\n"
        "ed è subito sera.\n\n— quasimodo.example/salvatore "
        "NnugSzTjtVAewIS+Z/iJhUPeFDkO/5QQ2i5ddnGITLlC+EhfLW9oJKONrMouFSQU0xMcXxj99ihAQwaqP3ZekRwNtIc=\n"
    )
    text, signatures = split_note(example)
    assert text.endswith("sole:\n\ned è subito sera.\n")
    assert [s.name for s in signatures] == ["quasimodo.example/salvatore"]
    assert signatures[0].key_id == bytes.fromhex("367ba04b")
    assert len(signatures[0].signature) == 64
    reject(example, [PETER], "no valid signature")
    with pytest.raises(InvalidRequest, match="em dash"):
        split_note(TEXT + "\nnot a signature\n")


def test_del_is_not_a_control_character_for_notes() -> None:
    # The spec forbids only characters below U+0020 besides newline.
    signer = parse_skey(PETER_SKEY)
    assert open_note(sign_note("a\x7fb\n", [signer]), [PETER]).text == "a\x7fb\n"


# Properties -------------------------------------------------------------------------------------

NOTE_TEXT = st.text(
    st.characters(codec="utf-8", min_codepoint=0x20, include_characters="\n"), max_size=200
).map(lambda s: s + "\n")
KEY_NAME = st.text(
    st.characters(
        codec="utf-8",
        exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"),
        exclude_characters="+",
    ),
    min_size=1,
    max_size=40,
).filter(str.isprintable)
SEED = st.binary(min_size=32, max_size=32)


@given(text=NOTE_TEXT, name=KEY_NAME, seed=SEED, other=KEY_NAME)
def test_sign_then_open_round_trips(text: str, name: str, seed: bytes, other: str) -> None:
    signer = NoteSigner.from_seed(name, seed)
    witness = NoteSigner.from_seed(other, bytes(reversed(seed)))
    signers = [signer] if (other, witness.key_id) == (name, signer.key_id) else [signer, witness]
    signed = sign_note(text, signers)
    note = open_note(signed, [signer.verifier])
    assert note.text == text
    assert note.verified == (signer.verifier,)
    assert note.unverified == tuple((s.name, s.key_id) for s in signers[1:])
    assert open_note(signed.encode("utf-8"), [signer.verifier]) == note


@given(name=KEY_NAME, seed=SEED)
def test_key_texts_round_trip(name: str, seed: bytes) -> None:
    signer = NoteSigner.from_seed(name, seed)
    assert parse_skey(format_skey(signer)) == signer
    assert parse_skey(format_skey(signer)).seed == seed
    assert parse_vkey(signer.verifier.text) == signer.verifier
    assert parse_vkey(format_vkey(name, signer.verifier.public_key)) == signer.verifier


@given(text=NOTE_TEXT, position=st.integers(min_value=0), replacement=st.characters(codec="utf-8"))
def test_any_change_to_the_text_is_caught(text: str, position: int, replacement: str) -> None:
    signed = sign_note(text, [parse_skey(PETER_SKEY)])
    position %= len(text)
    if text[position] == replacement:
        return
    tampered = signed[:position] + replacement + signed[position + 1 :]
    with pytest.raises(VerificationError) as info:
        open_note(tampered, [PETER])
    assert info.value.step == "note"
