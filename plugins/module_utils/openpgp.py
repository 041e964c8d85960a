# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The keys in an OpenPGP key file and their fingerprints, without gpg.

apt trusts every key of a ``Signed-By`` keyring, so a repository key is checked before it is
installed: each primary key in the file must be one the inventory names by fingerprint. gpg is
not on a minimal node, and the check must not depend on a keyring of its own, so the packets
are read here (RFC 4880 section 4 for the packet framing, RFC 9580 section 5.5.4 for the
fingerprints: SHA-1 over 0x99, a two-octet length and the key packet's body for version 4 keys;
SHA-256 over 0x9B, a four-octet length and the body for version 6 keys).

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


def dearmor(text):
    """The binary packets of an ASCII-armored OpenPGP block, or b"" when it is not one."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("-----BEGIN PGP"))
    except StopIteration:
        return b""
    body = []
    in_headers = True
    for line in lines[start + 1 :]:
        if line.startswith("-----END PGP"):
            break
        if in_headers:
            if not line.strip():
                in_headers = False
            elif ":" not in line:
                in_headers = False
                body.append(line.strip())
            continue
        if line.startswith("="):  # the CRC24 line
            continue
        body.append(line.strip())
    try:
        return base64.b64decode("".join(body), validate=False)
    except (binascii.Error, ValueError):
        return b""


def is_armored(data):
    return data.lstrip()[:15] == b"-----BEGIN PGP "


def packets(data):
    """``(tag, body)`` of each packet of binary OpenPGP data."""
    pos, end = 0, len(data)
    while pos < end:
        first = data[pos]
        if not first & 0x80:
            raise ParseError(f"byte {pos} is not the start of an OpenPGP packet (0x{first:02x})", command="key file")
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
                length, header = int.from_bytes(data[pos + 2 : pos + 6], "big"), 6
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
                length, header = end - pos - 1, 1
            else:
                if pos + 1 + size > end:
                    raise ParseError(f"the packet at byte {pos} is cut off", command="key file")
                length, header = int.from_bytes(data[pos + 1 : pos + 1 + size], "big"), 1 + size
        body_start = pos + header
        if body_start + length > end:
            raise ParseError(
                f"the packet at byte {pos} claims {length} bytes, the file has {end - body_start} left",
                command="key file",
            )
        yield tag, data[body_start : body_start + length]
        pos = body_start + length


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


def keys(data):
    """``[{"fingerprint", "key_id", "primary"}]`` of the keys in a key file (binary or armored).

    Refuses secret keys (a keyring must never carry one) and a file without a public key.
    """
    if len(data) > MAX_KEY_FILE:
        raise ParseError(f"{len(data)} bytes: larger than any repository key ({MAX_KEY_FILE} bytes at most)")
    if is_armored(data):
        data = dearmor(data.decode("ascii", "replace"))
        if not data:
            raise ParseError("ASCII armour without a readable body", command="key file")
    found = []
    for tag, body in packets(data):
        if tag in (SECRET_KEY, SECRET_SUBKEY):
            raise ParseError("the file holds a secret key: publish only the public key", command="key file")
        if tag in (PUBLIC_KEY, PUBLIC_SUBKEY):
            fpr = fingerprint(body)
            key_id = fpr[-16:] if len(fpr) == 40 else fpr[:16]
            found.append({"fingerprint": fpr, "key_id": key_id, "primary": tag == PUBLIC_KEY})
    if not found:
        raise ParseError("no public key in the file", command="key file")
    return found


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
