# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module signing: modinfo and openssl as Debian 12 prints them, mokutil's answers, the per-kernel
decision, and the key pair checks preflight runs on the controller."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.filter.mok_problems import mok_problems
from ansible_collections.gpuops.cluster.plugins.module_utils import secureboot
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from conftest import fixture, fixtures
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

TODAY = datetime.date(2026, 11, 29)
CN = "gpuops test node MOK"
SERIAL = "1F703A5B5798A430C8C21B34254749BE5875B966"


def test_modinfo_of_a_module_dkms_signed():
    info = secureboot.parse_modinfo(fixture("modinfo", "debian12_kmod30_dkms3_signed_stand_in_nvidia.txt"))
    assert info["version"] == "580.95.05"
    assert info["signer"] == CN
    assert secureboot.normal_serial(info["sig_key"]) == SERIAL
    assert info["sig_hashalgo"] == "sha256"
    assert info["depends"] == ""
    # The signature's continuation lines are not fields.
    assert info["signature"].startswith("57:DC:2A") and "10:FA" not in info


def test_openssl_reads_the_certificate_the_module_was_signed_with():
    cert = secureboot.parse_openssl_x509(fixture("openssl_x509", "openssl3_der_mok_serial_subject_multiline.txt"))
    assert cert == {"common_name": CN, "serial": SERIAL}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("subject=\n    commonName = x\n", "no serial= line"),
        ("serial=ZZ\n", "the serial is not hex"),
        ("serial=01\nsubject=\n    organizationName = x\n", "no commonName"),
    ],
)
def test_openssl_output_without_what_the_check_needs_is_an_error(text, message):
    with pytest.raises(ParseError, match=message) as error:
        secureboot.parse_openssl_x509(text)
    assert "openssl x509" in str(error.value)


def test_modinfo_garbage_names_the_line():
    with pytest.raises(ParseError, match=r"modinfo: not a 'field: value' line at line 2: 'garbage'"):
        secureboot.parse_modinfo("version: 1\ngarbage\n")


def test_serials_compare_without_colons_case_or_leading_zeros():
    assert secureboot.normal_serial("00:1f:70") == secureboot.normal_serial("1F70") == "1F70"
    assert secureboot.normal_serial("") == secureboot.normal_serial("xyz") == ""


@pytest.mark.parametrize(
    ("name", "state"),
    [
        ("not_enrolled.txt", "not_enrolled"),
        ("enrolled.txt", "enrolled"),
        ("pending.txt", "pending"),
        ("in_db.txt", "enrolled"),
    ],
)
def test_mokutil_test_key_states(name, state):
    assert secureboot.parse_mokutil_test_key(fixture("mokutil_test_key", name)) == state


def test_mokutil_test_key_other_text_is_an_error():
    with pytest.raises(ParseError, match="mokutil --test-key: not an enrolment state"):
        secureboot.parse_mokutil_test_key("EFI variables are not supported on this system\n")
    with pytest.raises(ParseError, match="no output"):
        secureboot.parse_mokutil_test_key("\n")


def test_sb_state():
    assert secureboot.parse_mokutil_sb_state("SecureBoot enabled\n") == "enabled"
    assert secureboot.parse_mokutil_sb_state("SecureBoot disabled\n") == "disabled"
    assert secureboot.parse_mokutil_sb_state("EFI variables are not supported on this system\n") == "unknown"


def test_dkms_conf_module_names_in_order():
    conf = (
        'PACKAGE_NAME="nvidia"\nBUILT_MODULE_NAME[0]="nvidia"\nBUILT_MODULE_NAME[1]=nvidia-uvm\n'
        '  BUILT_MODULE_NAME[2]="nvidia-drm"\n'
    )
    assert secureboot.dkms_module_names(conf) == ("nvidia", "nvidia-uvm", "nvidia-drm")
    assert secureboot.dkms_module_names("") == ()


CERT = {"common_name": CN, "serial": SERIAL}


def found(**modules):
    return {secureboot.module_key(name): {"path": f"/x/{name}.ko", "modinfo": info} for name, info in modules.items()}


def test_a_kernel_with_every_module_signed_by_the_certificate_is_good():
    good = {
        "version": "580.95.05",
        "signer": CN,
        "sig_key": "1F:70:3A:5B:57:98:A4:30:C8:C2:1B:34:25:47:49:BE:58:75:B9:66",
    }
    modules = found(**{"nvidia": good, "nvidia_uvm": good})
    assert secureboot.module_problems("k", modules, ["nvidia", "nvidia-uvm"], "580.95.05", CERT) == []


def test_each_way_a_module_would_not_load_is_named():
    modules = found(
        nvidia={"version": "580.95.05", "signer": "DKMS module signing key", "sig_key": "0A:0B"},
        nvidia_modeset={"version": "580.95.05"},
        nvidia_drm={"version": "580.65.06", "signer": CN, "sig_key": SERIAL},
    )
    names = ["nvidia", "nvidia-modeset", "nvidia-drm", "nvidia-uvm"]
    problems = secureboot.module_problems("6.1.0-57-amd64", modules, names, "580.95.05", CERT)
    assert problems == [
        f"/x/nvidia.ko: signed by 'DKMS module signing key' (key A0B), not by '{CN}' (serial {SERIAL})",
        "/x/nvidia_modeset.ko: unsigned; Secure Boot refuses it",
        "/x/nvidia_drm.ko: version 580.65.06, the driver is 580.95.05",
        "nvidia-uvm: no module for kernel 6.1.0-57-amd64",
    ]
    # Same name, another key: the serial tells them apart.
    other = found(nvidia={"version": "580.95.05", "signer": CN, "sig_key": "01"})
    assert "not by" in secureboot.module_problems("k", other, ["nvidia"], None, CERT)[0]
    # Without a certificate only presence and version count.
    assert secureboot.module_problems("k", modules, ["nvidia"], "580.95.05", None) == []


def pair(days_before=30, days_after=365, common_name=CN, key=None):
    key = key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)] if common_name else [])
    start = datetime.datetime(2026, 11, 29, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - datetime.timedelta(days=days_before))
        .not_valid_after(start + datetime.timedelta(days=days_after))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return key_pem, cert.public_bytes(serialization.Encoding.PEM).decode(), key


def test_a_good_pair_and_no_pair_are_no_problem():
    key, cert, _private = pair()
    assert mok_problems(key, cert, "2026-11-29") == []
    assert mok_problems("", "", "2026-11-29") == []
    # An EC key serves as well as RSA.
    key, cert, _private = pair(key=ec.generate_private_key(ec.SECP256R1()))
    assert mok_problems(key, cert, "2026-11-29") == []


def test_the_bad_pairs_preflight_refuses_name_the_variable_and_the_fix():
    key, cert, _private = pair()
    only_key = mok_problems(key, "", "2026-11-29")
    assert only_key and "nvidia_driver_mok_key is set and nvidia_driver_mok_certificate is empty" in only_key[0]
    only_cert = mok_problems("", cert, "2026-11-29")
    assert "nvidia_driver_mok_certificate is set and nvidia_driver_mok_key is empty" in only_cert[0]
    _old_pem, expired, old_key = pair(days_before=800, days_after=-1)
    old_pem = old_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    assert "nvidia_driver_mok_certificate expired on 2026-11-28" in mok_problems(old_pem, expired, "2026-11-29")[0]
    other_key, _cert, _key = pair()
    mismatch = mok_problems(other_key, cert, "2026-11-29")
    assert mismatch == [
        "nvidia_driver_mok_key is not the private key of nvidia_driver_mok_certificate (their public keys differ): "
        "give the pair that belongs together"
    ]
    no_cn_key, no_cn, _private = pair(common_name=None)
    assert "has no common name" in mok_problems(no_cn_key, no_cn, "2026-11-29")[0]
    future_key, future, _private = pair(days_before=-3)
    assert "valid only from 2026-12-02" in mok_problems(future_key, future, "2026-11-29")[0]


def test_unreadable_or_encrypted_keys_are_refused_without_quoting_them():
    key, cert, private = pair()
    encrypted = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    ).decode()
    problems = mok_problems(encrypted, cert, "2026-11-29")
    assert "not an unencrypted PEM private key" in problems[0] and "openssl pkey" in problems[0]
    assert "ENCRYPTED" not in problems[0] and "secret" not in problems[0]
    assert "is not a PEM X.509 certificate" in mok_problems(key, "-----BEGIN CERTIFICATE-----\nxx\n", "2026-11-29")[0]
    with pytest.raises(AnsibleFilterError, match="today is 'soon'"):
        mok_problems(key, cert, "soon")


def test_the_fleet_test_pair_serves():
    keys = Path(__file__).resolve().parents[3] / "gpusim" / "keys"
    key = (keys / "mok-fleet.key").read_text()
    cert = (keys / "mok-fleet.pem").read_text()
    assert mok_problems(key, cert, "2026-11-29") == []
    assert [p.name for p in fixtures("mokutil_test_key")] == [
        "enrolled.txt",
        "in_db.txt",
        "not_enrolled.txt",
        "pending.txt",
    ]
