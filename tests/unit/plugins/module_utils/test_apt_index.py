# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Packages index read as apt reads it: Debian's version order (checked against dpkg itself), the
stanzas a bundle needs, and what a set of pinned requests takes from the repository."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from ansible_collections.gpuops.cluster.plugins.module_utils import apt_index
from ansible_collections.gpuops.cluster.plugins.module_utils.errors import ParseError
from conftest import fixtures
from hypothesis import given, settings
from hypothesis import strategies as st

SHA = "ab" * 32


def stanza(name, version, depends="", *, arch="amd64", provides="", pre_depends="", recommends=""):
    lines = [
        f"Package: {name}",
        f"Version: {version}",
        f"Architecture: {arch}",
        f"Filename: pool/{name}_{version}_{arch}.deb",
        "Size: 100",
        f"SHA256: {SHA}",
    ]
    if depends:
        lines.append(f"Depends: {depends}")
    if pre_depends:
        lines.append(f"Pre-Depends: {pre_depends}")
    if recommends:
        lines.append(f"Recommends: {recommends}")
    if provides:
        lines.append(f"Provides: {provides}")
    return "\n".join(lines) + "\n"


def index(*stanzas):
    return apt_index.parse_packages("\n".join(stanzas))


def taken(artifacts):
    return [(e["package"], e["version"]) for e in artifacts]


# Pairs whose order dpkg's own documentation and its test suite dwell on: tildes, epochs, revisions,
# leading zeros, letters against other characters.
PAIRS = [
    ("1.0~rc1", "1.0"),
    ("1.0", "1.0-1"),
    ("1.0-1", "1.0-1ubuntu1"),
    ("580.95.05-0ubuntu0.24.04.1", "580.95.05-1"),
    ("580.95.05-1", "1:580.65.06-1"),
    ("2.28.9-1+cuda12.8", "2.28.9-1+cuda13.0"),
    ("9.10.2.21-1", "9.10.2.21-1~"),
    ("1.0a", "1.0+"),
    ("1.0.0", "1.00"),
    ("1.0-0", "1.0"),
    ("6.8.0-149.149", "6.8.0-149.150"),
    ("1~~", "1~~a"),
    ("1~", "1"),
    ("1:1.0", "1:1.0"),
]


def dpkg_order(a, b):
    for op, result in (("lt", -1), ("eq", 0)):
        if subprocess.run(["dpkg", "--compare-versions", a, op, b], check=False).returncode == 0:
            return result
    return 1


needs_dpkg = pytest.mark.skipif(shutil.which("dpkg") is None, reason="dpkg is the reference; not installed here")


@needs_dpkg
@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_version_order_is_dpkgs(first, second):
    assert apt_index.compare_versions(first, second) == dpkg_order(first, second)
    swapped = (second, first)
    assert apt_index.compare_versions(*swapped) == -dpkg_order(first, second)


VERSIONS = st.builds(
    lambda epoch, upstream, revision: (f"{epoch}:" if epoch else "") + upstream + (f"-{revision}" if revision else ""),
    st.sampled_from([None, 0, 1, 2]),
    st.from_regex(r"[0-9][0-9a-z.+~]{0,6}", fullmatch=True),
    st.one_of(st.none(), st.from_regex(r"[0-9a-z.+~]{1,5}", fullmatch=True)),
)


@needs_dpkg
@settings(max_examples=150, deadline=None)
@given(VERSIONS, VERSIONS)
def test_random_versions_order_as_dpkg_orders_them(a, b):
    assert apt_index.compare_versions(a, b) == dpkg_order(a, b)


def test_not_a_version_is_named():
    with pytest.raises(ParseError, match="'x1' is not a Debian version"):
        apt_index.compare_versions("x1", "1")


def test_relations_operators_and_alternatives():
    groups = apt_index.parse_relations("a (>= 1.0), b:any | c (<< 2) [amd64], d")
    assert [[r["name"] for r in g] for g in groups] == [["a"], ["b", "c"], ["d"]]
    assert groups[0][0]["op"] == ">=" and groups[0][0]["version"] == "1.0"
    assert groups[1][0]["arch"] == "any"
    assert apt_index.satisfies("1.0-1", ">=", "1.0")
    assert not apt_index.satisfies("2", "<<", "2")
    assert apt_index.satisfies("580.178.04-0ubuntu0.24.04.1", "<=", "580.178.04-1")


def test_a_stanza_without_a_checksum_is_refused_with_its_line():
    text = stanza("a", "1") + "\n" + stanza("b", "1").replace(f"SHA256: {SHA}\n", "")
    with pytest.raises(ParseError) as caught:
        apt_index.parse_packages(text)
    assert "has no SHA256" in str(caught.value) and caught.value.line_number == 8 and caught.value.line == "b"


def test_an_html_error_page_is_not_an_index():
    with pytest.raises(ParseError, match="not a field of a Packages stanza at line 1"):
        apt_index.parse_packages("<html><body>404 Not Found</body></html>\n", "http://mirror/Packages")


def test_versions_are_newest_first_and_the_pin_takes_the_newest_that_matches():
    repo = index(stanza("libnccl2", "2.27.7-1+cuda12.8"), stanza("libnccl2", "2.28.9-1+cuda13.0"),
                 stanza("libnccl2", "2.28.9-1+cuda12.8"))  # fmt: skip
    assert [e["version"] for e in repo["libnccl2"]] == ["2.28.9-1+cuda13.0", "2.28.9-1+cuda12.8", "2.27.7-1+cuda12.8"]
    artifacts, _outside, problems = apt_index.closure([("libnccl2", "2.2*+cuda12.8")], repo)
    assert taken(artifacts) == [("libnccl2", "2.28.9-1+cuda12.8")] and not problems


def test_dependencies_in_the_repository_are_taken_and_the_rest_come_from_the_os():
    repo = index(
        stanza("cuda-toolkit-12-8", "12.8.1-1", "cuda-compiler-12-8 (>= 12.8.1), cuda-libraries-12-8 (>= 12.8.1)"),
        stanza("cuda-compiler-12-8", "12.8.1-1", "cuda-nvcc-12-8 (>= 12.8.93)"),
        stanza("cuda-nvcc-12-8", "12.8.93-1", "libc6 (>= 2.34), build-essential | c-compiler"),
        stanza("cuda-libraries-12-8", "12.8.1-1", "libcublas-12-8 (>= 12.8.4.1)"),
        stanza("libcublas-12-8", "12.8.4.1-1", pre_depends="dpkg (>= 1.17)"),
        stanza("libcublas-12-8", "12.9.0.13-1"),
    )
    artifacts, outside, problems = apt_index.closure([("cuda-toolkit-12-8", None)], repo)
    assert taken(artifacts) == [
        ("cuda-compiler-12-8", "12.8.1-1"),
        ("cuda-libraries-12-8", "12.8.1-1"),
        ("cuda-nvcc-12-8", "12.8.93-1"),
        ("cuda-toolkit-12-8", "12.8.1-1"),
        ("libcublas-12-8", "12.9.0.13-1"),
    ]
    assert outside == ["build-essential | c-compiler", "libc6 (>= 2.34)"]
    assert not problems
    assert artifacts[0]["filename"] == "pool/cuda-compiler-12-8_12.8.1-1_amd64.deb" and artifacts[0]["sha256"] == SHA


def test_recommends_come_with_an_install_with_recommends_and_never_refuse_it():
    """apt-get install with recommends (the cuda role): what the repository can meet is taken, the
    rest left out without a problem; without recommends, none of it."""
    repo = index(
        stanza(
            "cuda-toolkit-12-8", "12.8.1-1", recommends="cuda-nsight-12-8, libnvidia-gl-580 | libgl1, nsight (>= 3000)"
        ),
        stanza("cuda-nsight-12-8", "12.8.90-1", "cuda-nsight-compute-12-8"),
        stanza("cuda-nsight-compute-12-8", "12.8.1-1"),
        stanza("nsight", "2024.1-1"),
    )
    artifacts, outside, problems = apt_index.closure([("cuda-toolkit-12-8", None)], repo, recommends=True)
    assert [name for name, _version in taken(artifacts)] == [
        "cuda-nsight-12-8",
        "cuda-nsight-compute-12-8",
        "cuda-toolkit-12-8",
    ]
    assert outside == [] and problems == []
    plain, _outside, _problems = apt_index.closure([("cuda-toolkit-12-8", None)], repo)
    assert taken(plain) == [("cuda-toolkit-12-8", "12.8.1-1")]


def test_a_version_already_taken_that_meets_a_relation_is_kept():
    # The driver pins its common package exactly; a later, looser relation keeps that version.
    repo = index(
        stanza("nvidia-driver-580-open", "580.95.05-1", "nvidia-kernel-common-580 (= 580.95.05-1)"),
        stanza("nvidia-fabricmanager-580", "580.95.05-1", "nvidia-kernel-common-580 (>= 580)"),
        stanza("nvidia-kernel-common-580", "580.95.05-1"),
        stanza("nvidia-kernel-common-580", "580.105.08-1"),
    )
    requests = [("nvidia-driver-580-open", "580.95.05-*"), ("nvidia-fabricmanager-580", "580.95.05-*")]
    artifacts, _outside, problems = apt_index.closure(requests, repo)
    assert ("nvidia-kernel-common-580", "580.95.05-1") in taken(artifacts) and not problems


def test_virtual_packages_and_other_architectures():
    repo = index(
        stanza("dcgm-exporter", "4.4.1-1", "libdcgm"),
        stanza("datacenter-gpu-manager-4-core", "4.4.1-1", provides="libdcgm (= 4.4.1)"),
        stanza("docs", "1", arch="all"),
        stanza("arm-only", "1", arch="arm64"),
    )
    artifacts, _outside, problems = apt_index.closure([("dcgm-exporter", None), ("docs", None)], repo)
    assert taken(artifacts) == [("datacenter-gpu-manager-4-core", "4.4.1-1"), ("dcgm-exporter", "4.4.1-1"),
                                ("docs", "1")]  # fmt: skip
    _artifacts, _outside, problems = apt_index.closure([("arm-only", None)], repo)
    assert problems == ["arm-only: not in the repository for amd64 (versions there: none)"]


def test_what_cannot_be_met_is_named_with_what_the_repository_has():
    repo = index(
        stanza("nvidia-driver-580-open", "580.95.05-1", "libnvidia-compute-580 (= 580.95.05-1)"),
        stanza("libnvidia-compute-580", "580.105.08-1"),
    )
    _artifacts, _outside, problems = apt_index.closure([("nvidia-driver-580-open", "580.82*"), ("cuda", None)], repo)
    assert problems == [
        "nvidia-driver-580-open=580.82*: not in the repository for amd64 (versions there: 580.95.05-1)",
        "cuda: not in the repository for amd64 (versions there: none)",
    ]
    _artifacts, _outside, problems = apt_index.closure([("nvidia-driver-580-open", None)], repo)
    assert problems == [
        "nvidia-driver-580-open 580.95.05-1: needs libnvidia-compute-580 (= 580.95.05-1), which no version in the"
        " repository meets"
    ]


def test_canonicals_index_capture():
    """The Ubuntu 24.04 capture (apt-cache show of the 580 server packages): each Canonical module
    package's version and checksum as the archive gives them."""
    text = next(p for p in fixtures("ubuntu_archive") if p.name.startswith("noble")).read_text()
    repo = apt_index.parse_packages(text)
    module = "linux-modules-nvidia-580-server-open-6.8.0-149-generic"
    artifacts, outside, problems = apt_index.closure([(module, None)], repo)
    assert taken(artifacts) == [(module, "6.8.0-149.149")] and not problems
    assert artifacts[0]["filename"].startswith("pool/restricted/l/linux-restricted-signatures/")
    assert "nvidia-kernel-common-580-server (<= 580.178.04-1)" in outside


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("Size: 100", "Size: 1\N{SUPERSCRIPT TWO}", "Size is not a number"),  # isdigit() takes it, int() does not
        ("Version: 1", "Version: \N{SUPERSCRIPT TWO}:1", "is not a Debian version"),
        ("Version: 1", "Version: \N{ARABIC-INDIC DIGIT THREE}:1", "is not a Debian version"),
    ],
)
def test_digits_other_than_ascii_are_refused_as_parse_errors(old, new, message):
    text = stanza("a", "1").replace(old, new)
    assert new in text
    with pytest.raises(ParseError, match=message):
        apt_index.parse_packages(text)
    with pytest.raises(ParseError):
        apt_index.split_version("1.0\n")
