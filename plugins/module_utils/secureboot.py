# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module signing under UEFI Secure Boot: pure parsers and decisions.

- ``parse_modinfo``: the fields of ``modinfo <file>`` (kmod): ``version``, ``signer``, ``sig_key``,
  ``sig_hashalgo``. kmod prints a PKCS#7 signature's signer as the signing certificate's common
  name and ``sig_key`` as its serial number in colon-separated hex (checked with Debian 12's kmod 30
  on a module DKMS 3.0.10 signed).
- ``parse_openssl_x509``: the subject's common name and the serial of ``openssl x509 -noout
  -serial -subject -nameopt multiline``.
- ``module_problems``: why one kernel's NVIDIA modules would not load: missing, another driver
  version, unsigned, or signed by another key than the certificate the kernel is to trust.
- ``parse_mokutil_test_key``: ``mokutil --test-key <der>``: enrolled, pending (in the request
  shim's MokManager takes at the next boot) or not enrolled. Its exit code is not used: mokutil
  releases disagree on it (0.3 returns 1 for "already enrolled", later ones print "already in the
  enrollment request" for a pending key).
- ``dkms_module_names``: the modules a dkms.conf builds (``BUILT_MODULE_NAME[n]``).
- ``certificate_problems``: a signing key pair from the inventory, checked on the controller
  (``cryptography``, which ansible-core requires) before any host changes.
"""

from __future__ import annotations

import re

from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError, text_lines

# Only certificate_problems needs it, on the controller (ansible-core depends on it); the nodes'
# modules import this file without it.
try:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import NameOID

    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - a node without python3-cryptography
    HAS_CRYPTOGRAPHY = False

# The modules every NVIDIA driver package builds; nvidia-peermem comes with it too where the
# driver's dkms.conf lists it (the dkms.conf is read when there is one).
DEFAULT_MODULES = ("nvidia", "nvidia-modeset", "nvidia-drm", "nvidia-uvm")
MODULE_SUFFIXES = (".ko", ".ko.xz", ".ko.zst", ".ko.gz")
MODINFO = "modinfo"
TEST_KEY = "mokutil --test-key"
X509 = "openssl x509"
_FIELD = re.compile(r"([a-z_]+):[ \t]*(.*)\Z")
_BUILT = re.compile(r"""^[ \t]*BUILT_MODULE_NAME\[[0-9]+\][ \t]*=[ \t]*["']?([A-Za-z0-9_-]+)["']?[ \t]*$""", re.M)
_HEX = re.compile(r"[0-9A-Fa-f:]+\Z")
_MOK_STATES = (
    ("is already in the enrollment request", "pending"),
    ("is already enrolled", "enrolled"),
    ("is already in db", "enrolled"),
    ("is not enrolled", "not_enrolled"),
)


def parse_modinfo(text):
    """``{field: value}`` of the one-line fields ``modinfo`` prints for one module file. The
    continuation lines of a multi-line field (``signature``) are skipped."""
    fields = {}
    for number, line in enumerate(text_lines(text, MODINFO), 1):
        if not line.strip() or line[0] in " \t":
            continue
        match = _FIELD.match(line)
        if not match:
            raise ParseError("not a 'field: value' line", MODINFO, number, line)
        # modinfo prints a field once per value (alias, depends); the first one is kept.
        fields.setdefault(match.group(1), match.group(2).strip())
    return fields


def normal_serial(value):
    """A serial or key id as upper-case hex without colons or leading zeros."""
    value = (value or "").strip()
    if not value or not _HEX.match(value):
        return ""
    return value.replace(":", "").upper().lstrip("0") or "0"


def parse_openssl_x509(text):
    """``{"common_name", "serial"}`` from ``openssl x509 -noout -serial -subject -nameopt multiline``."""
    common_name = serial = None
    for number, line in enumerate(text_lines(text, X509), 1):
        stripped = line.strip()
        if stripped.startswith("serial="):
            serial = normal_serial(stripped.split("=", 1)[1])
            if not serial:
                raise ParseError("the serial is not hex", X509, number, line)
        elif stripped.startswith("commonName") and "=" in stripped and common_name is None:
            common_name = stripped.split("=", 1)[1].strip()
    if serial is None:
        raise ParseError("no serial= line", X509)
    if not common_name:
        raise ParseError("the subject has no commonName, which the kernel shows as the modules' signer", X509)
    return {"common_name": common_name, "serial": serial}


def dkms_module_names(text):
    """The ``BUILT_MODULE_NAME[n]`` values of a dkms.conf, in order, or () when it has none."""
    return tuple(dict.fromkeys(_BUILT.findall(text or "")))


def module_key(name):
    """Module names compare with '-' and '_' as one (modprobe's rule)."""
    return name.replace("-", "_")


def module_problems(kernel, found, names, version=None, certificate=None):
    """The problems of one kernel's NVIDIA modules, as sentences.

    ``found``: ``{name: {"path", "modinfo"}}`` for each module file found (``modinfo``: the parsed
    fields); ``names``: the modules that must be there; ``version``: the driver version they must
    carry; ``certificate``: ``{"common_name", "serial"}`` they must be signed with, or None.
    """
    problems = []
    for name in names:
        entry = found.get(module_key(name))
        if entry is None:
            problems.append(f"{name}: no module for kernel {kernel}")
            continue
        info = entry["modinfo"]
        where = entry["path"]
        if version and info.get("version") != version:
            problems.append(f"{where}: version {info.get('version') or 'none'}, the driver is {version}")
        if certificate is None:
            continue
        signer = info.get("signer", "")
        key = normal_serial(info.get("sig_key"))
        if not signer and not key:
            problems.append(f"{where}: unsigned; Secure Boot refuses it")
        elif signer != certificate["common_name"] or key != certificate["serial"]:
            problems.append(
                f"{where}: signed by '{signer or 'unknown'}' (key {key or 'unknown'}), not by "
                f"'{certificate['common_name']}' (serial {certificate['serial']})"
            )
    return problems


def parse_mokutil_test_key(text):
    """``enrolled``, ``pending`` or ``not_enrolled`` from ``mokutil --test-key``'s output."""
    for number, line in enumerate(text_lines(text, TEST_KEY), 1):
        for phrase, state in _MOK_STATES:
            if phrase in line:
                return state
        if line.strip():
            raise ParseError("not an enrolment state mokutil prints", TEST_KEY, number, line)
    raise ParseError("no output", TEST_KEY)


def parse_mokutil_sb_state(text):
    """``enabled``, ``disabled`` or ``unknown`` from ``mokutil --sb-state``."""
    for line in text_lines(text, "mokutil --sb-state"):
        if "SecureBoot enabled" in line:
            return "enabled"
        if "SecureBoot disabled" in line:
            return "disabled"
    return "unknown"


def _pair_problems(key_pem, cert_pem, today, key_variable, cert_variable):
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
    except ValueError as exc:
        return [f"{cert_variable} is not a PEM X.509 certificate ({exc}): give the certificate's PEM text"]
    try:
        key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        return [
            f"{key_variable} is not an unencrypted PEM private key ({exc}): DKMS signs without a passphrase, "
            f"so give the key decrypted (openssl pkey -in key.pem -out plain.pem) and keep it in the vault"
        ]
    problems = []
    after = getattr(cert, "not_valid_after_utc", None) or cert.not_valid_after
    before = getattr(cert, "not_valid_before_utc", None) or cert.not_valid_before
    if after.date() < today:
        problems.append(
            f"{cert_variable} expired on {after.date().isoformat()}: make a new key pair, enrol it "
            f"(nvidia_driver_mok_password) and rebuild the modules with it"
        )
    if before.date() > today:
        problems.append(f"{cert_variable} is valid only from {before.date().isoformat()}: check the signer's clock")
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if key.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
        problems.append(
            f"{key_variable} is not the private key of {cert_variable} (their public keys differ): give the pair "
            f"that belongs together"
        )
    if not cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME):
        problems.append(
            f"{cert_variable} has no common name (CN) in its subject; modinfo shows the signer by it and the "
            f"role checks every module against it: make the certificate with -subj '/CN=<name>/'"
        )
    return problems


def certificate_problems(key_pem, cert_pem, today, key_variable, cert_variable):
    """Why a module signing key pair from the inventory cannot serve, as sentences naming the
    variables: one given without the other, either unreadable, the certificate outside its dates
    on ``today`` (a ``datetime.date``), the key not the certificate's, no common name. Needs the
    ``cryptography`` package (the controller has it: ansible-core depends on it)."""
    key_pem = (key_pem or "").strip()
    cert_pem = (cert_pem or "").strip()
    problems = []
    if key_pem and not cert_pem:
        problems.append(
            f"{key_variable} is set and {cert_variable} is empty: give the key's certificate (PEM) too, "
            f"or neither, and the role makes a key pair on each node"
        )
    elif cert_pem and not key_pem:
        problems.append(
            f"{cert_variable} is set and {key_variable} is empty: DKMS signs with the private key, so give "
            f"it too (PEM, from the vault), or neither, and the role makes a key pair on each node"
        )
    elif key_pem and not HAS_CRYPTOGRAPHY:
        problems.append("the controller's Python has no cryptography package to read the key pair with: pip install it")
    elif key_pem:
        problems = _pair_problems(key_pem, cert_pem, today, key_variable, cert_variable)
    return problems
