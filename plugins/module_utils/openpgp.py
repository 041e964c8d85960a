# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The keys in an OpenPGP key file and their fingerprints, without gpg.

apt trusts every key of a ``Signed-By`` keyring, so a repository key is checked before it is
installed: each primary key in the file must be one the inventory names by fingerprint. gpg is
not on a minimal node, and the check must not depend on a keyring of its own, so the packets
are read here (RFC 4880 section 4 for the packet framing, RFC 9580 section 5.5.4 for the
fingerprints: SHA-1 over 0x99, a two-octet length and the key packet's body for version 4 keys;
SHA-256 over 0x9B, a four-octet length and the body for version 6 keys).

gpg and apt read every armour block of a file and every packet in it, so the check reads them
all too, and what is installed is a keyring rebuilt from the packets that were checked
(pinned_keyring), never the bytes as served: a second block, text between blocks, or a packet
that a verifier might read another way cannot carry an unpinned key past the check.

Pure functions; every fault is a ParseError naming what is wrong. Linear in the input.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError

PUBLIC_KEY, PUBLIC_SUBKEY, SECRET_KEY, SECRET_SUBKEY = 6, 14, 5, 7
# Keys larger than this are not repository keys (NVIDIA's are a few kB).
MAX_KEY_FILE = 1 << 20
_HEX = re.compile(r"[0-9A-F]+")
_BEGIN = re.compile(r"-----BEGIN PGP ([A-Z0-9 ,/]+)-----")
SIGNATURE, MARKER, TRUST, USER_ID, USER_ATTRIBUTE, PADDING = 2, 10, 12, 13, 17, 21
# The packets of a transferable public key (RFC 9580 section 10.1): kept in the keyring written.
KEY_PACKETS = {PUBLIC_KEY, PUBLIC_SUBKEY, SIGNATURE, USER_ID, USER_ATTRIBUTE}
# Packets a key file may carry that mean nothing to a verifier: dropped (trust is local to one keyring).
DROPPED_PACKETS = {MARKER: "marker", TRUST: "trust", PADDING: "padding"}


def _octets(data, start, size):
    """data[start:start + size]."""
    end = start + size
    return data[start:end]


def _armour_blocks(text, strict):
    """``[(label, binary)]`` of the ASCII-armoured blocks of ``text`` (RFC 4880 section 6.2).

    Every block, not the first alone: gpg and apt read them all. Strict (for a key that will be
    trusted): nothing but white space outside the blocks, every block a public key block that
    ends, a body of valid base64. Lenient (for reading what a node already trusts): blocks that
    do not decode are skipped.
    """
    blocks, label, body, in_headers = [], None, [], False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if label is None:
            match = _BEGIN.fullmatch(line)
            if match:
                label, body, in_headers = match.group(1), [], True
                if strict and label != "PUBLIC KEY BLOCK":
                    raise ParseError(f"line {number} begins a PGP {label}, not a public key block", command="key file")
            elif strict and line:
                raise ParseError(
                    f"line {number} is text outside an armour block ({line[:40]!r}); a key file holds "
                    "public key blocks only",
                    command="key file",
                )
            continue
        if line.startswith("-----END PGP"):
            blocks.append((label, _decode(body, strict, number)))
            label = None
            continue
        if in_headers:
            if not line:
                in_headers = False
            elif ":" not in line:  # no blank line after the headers (or none at all)
                in_headers = False
                body.append(line)
            continue
        if line.startswith("="):  # the CRC24 line; RFC 9580 section 6.1: not to be relied on
            continue
        body.append(line)
    if label is not None and strict:
        raise ParseError(f"the PGP {label} never ends (no -----END PGP line)", command="key file")
    return [(label, data) for label, data in blocks if data]


def _decode(body, strict, number):
    try:
        return base64.b64decode("".join(body), validate=strict)
    except (binascii.Error, ValueError):
        if strict:
            raise ParseError(
                f"the armour block that ends on line {number} is not valid base64", command="key file"
            ) from None
        return b""


def dearmor(text):
    """The binary packets of every public key block of ASCII-armoured text, or b"" when there is none."""
    return b"".join(data for label, data in _armour_blocks(text, strict=False) if label == "PUBLIC KEY BLOCK")


def armour(data):
    """``data`` as one ASCII-armoured public key block, with its CRC24 (RFC 4880 section 6.1)."""
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _bit in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    encoded = base64.b64encode(data).decode("ascii")
    lines = [_octets(encoded, i, 64) for i in range(0, len(encoded), 64)]
    checksum = base64.b64encode((crc & 0xFFFFFF).to_bytes(3, "big")).decode("ascii")
    return "\n".join(
        ["-----BEGIN PGP PUBLIC KEY BLOCK-----", "", *lines, "=" + checksum, "-----END PGP PUBLIC KEY BLOCK-----", ""]
    ).encode("ascii")


def is_armored(data):
    return data.lstrip()[:15] == b"-----BEGIN PGP "


def _framed(data):
    """``(tag, body, raw)`` of each packet of binary OpenPGP data; raw (the header and body) is
    None for an old-format packet of indeterminate length."""
    pos, end = 0, len(data)
    while pos < end:
        first = data[pos]
        if not first & 0x80:
            raise ParseError(f"byte {pos} is not the start of an OpenPGP packet (0x{first:02x})", command="key file")
        indeterminate = False
        if first & 0x40:  # new format
            tag = first & 0x3F
            if pos + 1 >= end:
                raise ParseError(f"the packet at byte {pos} is cut off", command="key file")
            octet = data[pos + 1]
            if octet < 192:
                length, header = octet, 2
            elif octet < 224:
                if pos + 2 >= end:
                    raise ParseError(f"the packet at byte {pos} is cut off", command="key file")
                length, header = ((octet - 192) << 8) + data[pos + 2] + 192, 3
            elif octet == 255:
                length, header = int.from_bytes(_octets(data, pos + 2, 4), "big"), 6
                if pos + 6 > end:
                    raise ParseError(f"the packet at byte {pos} is cut off", command="key file")
            else:
                raise ParseError(
                    f"the packet at byte {pos} has a partial length, which key packets never have", command="key file"
                )
        else:  # old format
            tag = (first >> 2) & 0x0F
            size = {0: 1, 1: 2, 2: 4}.get(first & 0x03)
            if size is None:
                length, header, indeterminate = end - pos - 1, 1, True
            else:
                if pos + 1 + size > end:
                    raise ParseError(f"the packet at byte {pos} is cut off", command="key file")
                length, header = int.from_bytes(_octets(data, pos + 1, size), "big"), 1 + size
        body_start = pos + header
        if body_start + length > end:
            raise ParseError(
                f"the packet at byte {pos} claims {length} bytes, the file has {end - body_start} left",
                command="key file",
            )
        raw = None if indeterminate else _octets(data, pos, header + length)
        yield tag, _octets(data, body_start, length), raw
        pos = body_start + length


def packets(data):
    """``(tag, body)`` of each packet of binary OpenPGP data."""
    for tag, body, _raw in _framed(data):
        yield tag, body


def fingerprint(body):
    """The fingerprint of a public-key packet's body, upper-case hex (v4: 40 digits, v6: 64)."""
    if not body:
        raise ParseError("an empty key packet", command="key file")
    version = body[0]
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version in (5, 6):
        prefix = b"\x9a" if version == 5 else b"\x9b"
        return hashlib.sha256(prefix + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise ParseError(f"a version {version} key, which has no fingerprint this reader knows", command="key file")


def _binary(data):
    """The packets of a key file (binary, or every armour block of it, read strictly)."""
    if len(data) > MAX_KEY_FILE:
        raise ParseError(f"{len(data)} bytes: larger than any repository key ({MAX_KEY_FILE} bytes at most)")
    if is_armored(data):
        data = b"".join(block for _label, block in _armour_blocks(data.decode("ascii", "replace"), strict=True))
        if not data:
            raise ParseError("ASCII armour without a readable body", command="key file")
    return data


def _key(tag, body):
    fpr = fingerprint(body)
    return {"fingerprint": fpr, "key_id": fpr[-16:] if len(fpr) == 40 else fpr[:16], "primary": tag == PUBLIC_KEY}


def keys(data):
    """``[{"fingerprint", "key_id", "primary"}]`` of the keys in a key file (binary or armored).

    Refuses secret keys (a keyring must never carry one) and a file without a public key.
    """
    found = []
    for tag, body in packets(_binary(data)):
        if tag in (SECRET_KEY, SECRET_SUBKEY):
            raise ParseError("the file holds a secret key: publish only the public key", command="key file")
        if tag in (PUBLIC_KEY, PUBLIC_SUBKEY):
            found.append(_key(tag, body))
    if not found:
        raise ParseError("no public key in the file", command="key file")
    return found


def pinned_keyring(data, expected):
    """The keyring to install from a served key file, built from the packets that were checked.

    Returns ``{"keyring": bytes, "keys": [...], "unexpected": [...], "dropped": {...}}``: the
    binary packets of each transferable public key (its primary key, user IDs, signatures and
    subkeys; RFC 9580 section 10.1) whose primary fingerprint is in ``expected``; the keys found
    (as keys()); the primary fingerprints that are not in ``expected`` (the caller refuses the file
    when there is any); and how many trust, marker or padding packets were left out. Never the
    served bytes: text between armour blocks, a second block, or packets a verifier might read
    another way do not reach the keyring. Any other packet (a secret key, a message, literal
    data), or a key packet before the first primary key, is a ParseError.
    """
    allowed = set(expected)
    found, unexpected, kept, dropped = [], [], [], {}
    current = None  # the fingerprint of the primary key the packets belong to
    for tag, body, raw in _framed(_binary(data)):
        if tag in (SECRET_KEY, SECRET_SUBKEY):
            raise ParseError("the file holds a secret key: publish only the public key", command="key file")
        if tag in DROPPED_PACKETS:
            dropped[DROPPED_PACKETS[tag]] = dropped.get(DROPPED_PACKETS[tag], 0) + 1
            continue
        if tag not in KEY_PACKETS:
            raise ParseError(
                f"a packet of type {tag}, which is not part of a public key (keys, user IDs, signatures "
                "and subkeys only)",
                command="key file",
            )
        if tag == PUBLIC_KEY:
            current = _key(tag, body)
            found.append(current)
            if current["fingerprint"] not in allowed:
                unexpected.append(current["fingerprint"])
        elif current is None:
            raise ParseError(f"a packet of type {tag} before the first public key", command="key file")
        elif tag == PUBLIC_SUBKEY:
            found.append(_key(tag, body))
        if raw is None:
            raise ParseError(f"a packet of type {tag} of indeterminate length", command="key file")
        if current["fingerprint"] in allowed:
            kept.append(raw)
    if not found:
        raise ParseError("no public key in the file", command="key file")
    return {"keyring": b"".join(kept), "keys": found, "unexpected": unexpected, "dropped": dropped}


def normalize_fingerprint(text):
    """``EB693B30...`` from ``eb69 3b30 ...`` or ``0xEB693B30...``; None when it is not a full fingerprint."""
    value = re.sub(r"\s+", "", str(text or "")).upper()
    if value.startswith("0X"):
        value = value[2:]
    if len(value) in (40, 64) and _HEX.fullmatch(value):
        return value
    return None


def unexpected_primaries(found, expected):
    """The primary fingerprints of ``found`` (from keys()) that are not in ``expected`` (normalized)."""
    allowed = set(expected)
    return [k["fingerprint"] for k in found if k["primary"] and k["fingerprint"] not in allowed]
