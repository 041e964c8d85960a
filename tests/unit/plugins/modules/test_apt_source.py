# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""openpgp's fingerprints against gpg's, and apt_source against a fake node: the key checked
before anything is written, the deb822 file, the refresh of one source, check mode, removal."""

from __future__ import annotations

import io
import shutil
import subprocess

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import openpgp
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from ansible_collections.gpuops.cluster.plugins.modules import apt_source
from conftest import GPUSIM
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from module_harness import Node, run_module

KEYS = GPUSIM / "keys"
ARCHIVE_FPR = "DDD2F499504D61685FB2FDC94B9F49872D40B3F2"
WRONG_FPR = "88A16F1370CB253F6D3BDAACBB42F09FF42E283A"
needs_gpg = pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg (gnupg) makes the reference keys")


def gpg(home, *args):
    return subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", "--quiet", "--yes", *args], check=True, capture_output=True
    ).stdout


def gpg_fingerprints(home, key_file):
    out = gpg(home, "--with-colons", "--show-keys", str(key_file)).decode()
    return [line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:")]


@pytest.fixture(scope="module")
def keyfiles(tmp_path_factory):
    """Public keys exported by gpg: the committed test keys, and an RSA key with a subkey."""
    if shutil.which("gpg") is None:
        pytest.skip("gpg (gnupg) makes the reference keys")
    root = tmp_path_factory.mktemp("keys")
    home = root / "gnupg"
    home.mkdir(mode=0o700)
    for name in ("archive", "wrong"):
        gpg(home, "--import", str(KEYS / f"{name}.secret.asc"))
    files = {
        "archive.gpg": gpg(home, "--export", ARCHIVE_FPR),
        "archive.asc": gpg(home, "--export", "--armor", ARCHIVE_FPR),
        "wrong.gpg": gpg(home, "--export", WRONG_FPR),
        "both.gpg": gpg(home, "--export", ARCHIVE_FPR, WRONG_FPR),
    }
    rsa_home = root / "rsa"
    rsa_home.mkdir(mode=0o700)
    gpg(rsa_home, "--passphrase", "", "--quick-gen-key", "rsa test <rsa@gpuops.invalid>", "rsa2048", "sign", "never")
    primary = next(
        line.split(":")[9]
        for line in gpg(rsa_home, "--with-colons", "--list-keys").decode().splitlines()
        if line.startswith("fpr:")
    )
    gpg(rsa_home, "--passphrase", "", "--quick-add-key", primary, "rsa2048", "encr", "never")
    files["rsa.gpg"] = gpg(rsa_home, "--export")
    files["secret.gpg"] = gpg(home, "--export-secret-keys", ARCHIVE_FPR)
    for name, data in files.items():
        (root / name).write_bytes(data)
    return root


@needs_gpg
@pytest.mark.parametrize("name", ["archive.gpg", "archive.asc", "wrong.gpg", "both.gpg", "rsa.gpg"])
def test_fingerprints_match_gpg(keyfiles, name):
    found = openpgp.keys((keyfiles / name).read_bytes())
    assert [k["fingerprint"] for k in found] == gpg_fingerprints(keyfiles / "gnupg", keyfiles / name)
    assert all(k["key_id"] == k["fingerprint"][-16:] for k in found)


@needs_gpg
def test_subkeys_are_not_primaries(keyfiles):
    found = openpgp.keys((keyfiles / "rsa.gpg").read_bytes())
    assert [k["primary"] for k in found] == [True, False]  # the signing key, then its encryption subkey
    assert openpgp.unexpected_primaries(found, []) == [found[0]["fingerprint"]]


@needs_gpg
def test_old_format_packet_headers_read_the_same(keyfiles):
    data = (keyfiles / "archive.gpg").read_bytes()
    rewritten = b""
    for tag, body in openpgp.packets(data):
        # RFC 4880 4.2.1: old format, two-octet length.
        rewritten += bytes([0x80 | (tag << 2) | 1]) + len(body).to_bytes(2, "big") + body
    assert rewritten != data
    assert openpgp.keys(rewritten) == openpgp.keys(data)


@needs_gpg
def test_a_secret_key_is_refused(keyfiles):
    with pytest.raises(ParseError, match="secret key"):
        openpgp.keys((keyfiles / "secret.gpg").read_bytes())


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "no public key"),
        (b"hello", "not the start of an OpenPGP packet"),
        (b"\xc6\x05\x04", "claims 5 bytes"),
        (b"\xc6", "cut off"),
        (b"\xc6\xe1abc", "partial length"),
        (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!\n-----END PGP PUBLIC KEY BLOCK-----\n", "armour"),
        (b"\xc6\x02\x03\x00", "version 3"),
    ],
)
def test_broken_key_files_raise_parse_errors(data, reason):
    with pytest.raises(ParseError, match=reason):
        openpgp.keys(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600))
def test_random_bytes_raise_only_parse_errors(data):
    for read in (openpgp.keys, lambda d: openpgp.pinned_keyring(d, [ARCHIVE_FPR])):
        try:
            read(data)
        except ParseError:
            pass


ARMOUR_LINES = st.sampled_from(
    [
        "-----BEGIN PGP PUBLIC KEY BLOCK-----",
        "-----END PGP PUBLIC KEY BLOCK-----",
        "-----BEGIN PGP MESSAGE-----",
        "Version: x",
        "",
        "mDMEaW",
        "=AbCd",
        "xsBNBF",
        "-----BEGIN PGP ",
        "!!",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ARMOUR_LINES | st.text(max_size=30), max_size=20))
def test_random_armour_raises_only_parse_errors(lines):
    text = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n" + "\n".join(lines)
    openpgp.dearmor(text)
    try:
        openpgp.pinned_keyring(text.encode("utf-8", "replace"), [ARCHIVE_FPR])
    except ParseError:
        pass


def test_a_huge_file_is_refused_without_reading_it():
    with pytest.raises(ParseError, match="larger than any repository key"):
        openpgp.keys(b"\x99" * (openpgp.MAX_KEY_FILE + 1))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("eb69 3b30 35cd 5710 e231  e123 a4b4 6996 3bf8 63cc", "EB693B3035CD5710E231E123A4B469963BF863CC"),
        ("0xEB693B3035CD5710E231E123A4B469963BF863CC", "EB693B3035CD5710E231E123A4B469963BF863CC"),
        ("A4B469963BF863CC", None),
        ("not a fingerprint", None),
    ],
)
def test_normalize_fingerprint(text, expected):
    assert openpgp.normalize_fingerprint(text) == expected


# -- the whole file, as gpg and apt read it -------------------------------------------------------
def _two_blocks(keyfiles):
    """The vendor's armoured block, then a second armoured block of another key."""
    home = keyfiles / "gnupg"
    return (keyfiles / "archive.asc").read_bytes() + gpg(home, "--export", "--armor", WRONG_FPR)


@needs_gpg
def test_every_armour_block_is_read_as_gpg_reads_it(keyfiles):
    two = _two_blocks(keyfiles)
    (keyfiles / "two.asc").write_bytes(two)
    # gpg sees both keys in the file (and apt trusts both of a Signed-By keyring)...
    assert gpg_fingerprints(keyfiles / "gnupg", keyfiles / "two.asc") == [ARCHIVE_FPR, WRONG_FPR]
    # ...and so does the check now, not the first block alone.
    assert [k["fingerprint"] for k in openpgp.keys(two)] == [ARCHIVE_FPR, WRONG_FPR]
    assert openpgp.pinned_keyring(two, [ARCHIVE_FPR])["unexpected"] == [WRONG_FPR]


@needs_gpg
@pytest.mark.parametrize(
    "tail, reason",
    [
        (b"\nhello\n", "line [0-9]+ is text outside an armour block"),
        (b"-----BEGIN PGP SIGNATURE-----\n\niQ==\n-----END PGP SIGNATURE-----\n", "not a public key block"),
        (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDME\n", "never ends"),
        (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nm!!E\n-----END PGP PUBLIC KEY BLOCK-----\n", "not valid base64"),
    ],
)
def test_anything_but_public_key_blocks_is_refused(keyfiles, tail, reason):
    with pytest.raises(ParseError, match=reason):
        openpgp.pinned_keyring((keyfiles / "archive.asc").read_bytes() + tail, [ARCHIVE_FPR])


@needs_gpg
def test_the_keyring_is_built_from_the_checked_packets(keyfiles):
    key = (keyfiles / "archive.gpg").read_bytes()
    trust, marker = b"\xcc\x02\x00\x00", b"\xca\x03PGP"  # a trust packet, a marker packet
    built = openpgp.pinned_keyring(marker + key + trust, [ARCHIVE_FPR])
    assert built["keyring"] == key
    assert built["dropped"] == {"marker": 1, "trust": 1}
    # Armour in, armour out: our armour holds the same packets, with a CRC24 gpg accepts.
    (keyfiles / "rebuilt.asc").write_bytes(openpgp.armour(built["keyring"]))
    assert gpg_fingerprints(keyfiles / "gnupg", keyfiles / "rebuilt.asc") == [ARCHIVE_FPR]
    assert openpgp.dearmor(openpgp.armour(key).decode()) == key


@needs_gpg
@pytest.mark.parametrize(
    "extra, reason",
    [
        (b"\xcb\x04b\x00\x00\x00", "type 11, which is not part of a public key"),  # literal data
        (b"\xd1\x00", "type 17 before the first public key"),  # a user attribute, alone
    ],
)
def test_packets_that_are_not_a_key_are_refused(keyfiles, extra, reason):
    key = (keyfiles / "archive.gpg").read_bytes()
    data = extra + key if "before" in reason else key + extra
    with pytest.raises(ParseError, match=reason):
        openpgp.pinned_keyring(data, [ARCHIVE_FPR])


@needs_gpg
def test_a_subkey_bound_by_nothing_signs_nothing_for_gpgv(keyfiles, tmp_path):
    """Another key appended as a subkey of the pinned one, with its own signatures but no binding
    signature of the pinned key (which an attacker cannot make): the check keeps it, as it keeps
    the pinned key's packets, and gpgv, which apt runs, still refuses what it signed."""
    home = keyfiles / "gnupg"
    data = (keyfiles / "archive.gpg").read_bytes()
    for tag, body in openpgp.packets((keyfiles / "wrong.gpg").read_bytes()):
        if tag == openpgp.PUBLIC_KEY:
            data += bytes([0xC0 | openpgp.PUBLIC_SUBKEY, len(body)]) + body
        elif tag == openpgp.SIGNATURE:
            data += bytes([0xC0 | tag, len(body)]) + body
    built = openpgp.pinned_keyring(data, [ARCHIVE_FPR])
    assert built["unexpected"] == [] and built["keyring"] == data
    (tmp_path / "keyring.gpg").write_bytes(built["keyring"])
    (tmp_path / "Release").write_text("Origin: test\n")
    release, signature = str(tmp_path / "Release"), str(tmp_path / "Release.gpg")
    gpg(home, "--local-user", WRONG_FPR, "--detach-sign", "-o", signature, release)
    verdict = subprocess.run(
        ["gpgv", "--keyring", str(tmp_path / "keyring.gpg"), signature, release],
        check=False,
        capture_output=True,
        text=True,
    )
    assert verdict.returncode != 0 and "Good signature" not in verdict.stderr, verdict.stderr


# -- the module ---------------------------------------------------------------------------------
class AptNode(Node):
    """A node whose files live under tmp_path; apt-get update is recorded, its answer given."""

    def __init__(self, monkeypatch, tmp_path, key, update=(0, "Hit:1 http://mirror ./ InRelease\n", "")):
        super().__init__(monkeypatch, {"apt-get": "/usr/bin/apt-get"}, {})
        self.update = update
        self.key = key
        self.downloads = []
        root = str(tmp_path)
        monkeypatch.setattr(apt_source.Host, "path", lambda host, path: root + path)
        monkeypatch.setattr(apt_source, "fetch_url", self.fetch_url)

    def fetch_url(self, module, url, timeout=30):
        self.downloads.append(url)
        if self.key is None:
            return None, {"status": 404, "msg": "HTTP Error 404: Not Found"}
        return io.BytesIO(self.key), {"status": 200}

    def run_command(self, argv, **kwargs):
        assert kwargs.get("environ_update", {}).get("LC_ALL") == "C"
        self.calls.append(list(argv))
        return self.update


ARGS = {
    "name": "nvidia-cuda",
    "uris": ["http://mirror/cuda/debian12/x86_64/"],
    "suites": ["/"],
    "key_url": "http://mirror/keys/cuda.gpg",
    "key_fingerprint": [ARCHIVE_FPR.lower()],
    "fingerprint_variable": "cuda_repository_key_fingerprint",
}
SOURCE = """\
X-Repolib-Name: nvidia-cuda
Signed-By: /etc/apt/keyrings/nvidia-cuda.gpg
Suites: /
Types: deb
URIs: http://mirror/cuda/debian12/x86_64/
"""


@needs_gpg
def test_adds_key_and_source_then_refreshes_only_this_source(monkeypatch, tmp_path, keyfiles):
    key = (keyfiles / "archive.gpg").read_bytes()
    node = AptNode(monkeypatch, tmp_path, key)
    result = run_module(apt_source.main, ARGS).result
    assert result["changed"] and result["key_changed"] and result["source_changed"] and result["cache_updated"]
    assert result["pending"] is False
    assert result["fingerprints"] == [ARCHIVE_FPR]
    assert (tmp_path / "etc/apt/keyrings/nvidia-cuda.gpg").read_bytes() == key
    assert (tmp_path / "etc/apt/sources.list.d/nvidia-cuda.sources").read_text() == SOURCE
    assert oct((tmp_path / "etc/apt/keyrings/nvidia-cuda.gpg").stat().st_mode & 0o777) == "0o644"
    (argv,) = node.calls
    assert argv[-1] == "update"
    assert f"Dir::Etc::sourcelist={tmp_path}/etc/apt/sources.list.d/nvidia-cuda.sources" in argv
    assert "Dir::Etc::sourceparts=-" in argv

    # Again: the key is downloaded and checked, nothing else happens.
    node.calls.clear()
    again = run_module(apt_source.main, ARGS).result
    assert not again["changed"] and not again["cache_updated"]
    assert node.calls == [] and len(node.downloads) == 2


@needs_gpg
def test_armoured_key_goes_to_asc_and_replaces_the_binary_one(monkeypatch, tmp_path, keyfiles):
    AptNode(monkeypatch, tmp_path, (keyfiles / "archive.gpg").read_bytes())
    run_module(apt_source.main, ARGS)
    AptNode(monkeypatch, tmp_path, (keyfiles / "archive.asc").read_bytes())
    result = run_module(apt_source.main, ARGS).result
    assert result["keyring"] == "/etc/apt/keyrings/nvidia-cuda.asc"
    assert not (tmp_path / "etc/apt/keyrings/nvidia-cuda.gpg").exists()
    # The checked packets in armour of the module's own, not the served text.
    written = (tmp_path / "etc/apt/keyrings/nvidia-cuda.asc").read_bytes()
    assert written == openpgp.armour((keyfiles / "archive.gpg").read_bytes())
    assert (
        "Signed-By: /etc/apt/keyrings/nvidia-cuda.asc"
        in (tmp_path / "etc/apt/sources.list.d/nvidia-cuda.sources").read_text()
    )


@needs_gpg
@pytest.mark.parametrize("served", ["wrong.gpg", "both.gpg", "two blocks"])
def test_another_key_is_refused_before_anything_is_written(monkeypatch, tmp_path, keyfiles, served):
    key = _two_blocks(keyfiles) if served == "two blocks" else (keyfiles / served).read_bytes()
    node = AptNode(monkeypatch, tmp_path, key)
    exited = run_module(apt_source.main, ARGS)
    assert exited.failed
    msg = exited.result["msg"]
    assert WRONG_FPR in msg and "cuda_repository_key_fingerprint" in msg and "Nothing was written" in msg
    assert not (tmp_path / "etc").exists()
    assert node.calls == []


@needs_gpg
def test_check_mode_downloads_and_checks_but_writes_nothing(monkeypatch, tmp_path, keyfiles):
    node = AptNode(monkeypatch, tmp_path, (keyfiles / "archive.gpg").read_bytes())
    result = run_module(apt_source.main, ARGS, check_mode=True).result
    assert result["changed"] and result["pending"]
    assert not (tmp_path / "etc").exists() and node.calls == []
    node.key = (keyfiles / "wrong.gpg").read_bytes()
    assert run_module(apt_source.main, ARGS, check_mode=True).failed


@needs_gpg
def test_a_failed_refresh_takes_the_source_out_for_the_next_run(monkeypatch, tmp_path, keyfiles):
    AptNode(monkeypatch, tmp_path, (keyfiles / "archive.gpg").read_bytes(), update=(100, "", "E: 404 Not Found"))
    exited = run_module(apt_source.main, ARGS)
    assert exited.failed and "404 Not Found" in exited.result["msg"]
    assert not (tmp_path / "etc/apt/sources.list.d/nvidia-cuda.sources").exists()


@pytest.mark.parametrize(
    "change, words",
    [
        ({"key_fingerprint": ["A4B469963BF863CC"]}, ["cuda_repository_key_fingerprint", "not a short key ID"]),
        ({"key_fingerprint": []}, ["cuda_repository_key_fingerprint is empty"]),
        ({"name": "../evil"}, ["name '../evil'"]),
        ({"suites": ["a b"]}, ["suites"]),
    ],
)
def test_bad_options_get_a_clear_error(monkeypatch, tmp_path, change, words):
    node = AptNode(monkeypatch, tmp_path, b"")
    exited = run_module(apt_source.main, {**ARGS, **change})
    assert exited.failed
    for word in words:
        assert word in exited.result["msg"]
    assert node.downloads == []


def test_a_failed_download_names_the_url(monkeypatch, tmp_path):
    AptNode(monkeypatch, tmp_path, None)
    exited = run_module(apt_source.main, ARGS)
    assert exited.failed and "http://mirror/keys/cuda.gpg" in exited.result["msg"] and "404" in exited.result["msg"]


def test_absent_removes_the_source_and_both_keyrings(monkeypatch, tmp_path):
    node = AptNode(monkeypatch, tmp_path, None)
    for path in ("etc/apt/sources.list.d/mlnx-ofed.sources", "etc/apt/keyrings/mlnx-ofed.asc"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    args = {"name": "mlnx-ofed", "state": "absent"}
    assert run_module(apt_source.main, args, check_mode=True).result["changed"]
    assert (tmp_path / "etc/apt/keyrings/mlnx-ofed.asc").exists()
    result = run_module(apt_source.main, args).result
    assert result["changed"] and result["key_changed"] and result["source_changed"]
    assert not list((tmp_path / "etc/apt").rglob("mlnx-ofed*"))
    assert not run_module(apt_source.main, args).result["changed"]
    assert node.downloads == [] and node.calls == []
