# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm hostlist expressions, both ways, with Slurm's semantics."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.cluster.plugins.filter.hostlist_compress import hostlist_compress
from ansible_collections.gpuops.cluster.plugins.filter.hostlist_expand import hostlist_expand
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("expression", "hosts"),
    [
        ("node[01-03,05]", ["node01", "node02", "node03", "node05"]),
        ("node[8-11]", ["node8", "node9", "node10", "node11"]),
        ("node[098-101]", ["node098", "node099", "node100", "node101"]),
        ("gpu[1-2]-ib", ["gpu1-ib", "gpu2-ib"]),
        ("rack[1-2]-gpu[01-02]", ["rack1-gpu01", "rack1-gpu02", "rack2-gpu01", "rack2-gpu02"]),
        ("head,gpu[1-2],login01", ["head", "gpu1", "gpu2", "login01"]),
        ("gpu1,gpu[1-2]", ["gpu1", "gpu2"]),
        ("", []),
    ],
)
def test_expand(expression, hosts):
    assert hostlist_expand(expression) == hosts


@pytest.mark.parametrize(
    ("hosts", "expression"),
    [
        (["gpu01", "gpu02", "gpu03", "gpu07"], "gpu[01-03,07]"),
        (["node1", "node2", "node10"], "node[1-2,10]"),
        ([f"node{i:02d}" for i in range(1, 11)], "node[01-10]"),
        (["node1", "node01"], "node01,node1"),
        (["gpu3"], "gpu3"),
        (["head", "gpu2", "gpu1", "login"], "gpu[1-2],head,login"),
        # Slurm 22.05 refuses text after a bracket ("Invalid hostlist"): such hosts stay one by one.
        (["a1-ib", "a2-ib", "a3"], "a1-ib,a2-ib,a3"),
        (["node-01-gpu", "node-02-gpu"], "node-01-gpu,node-02-gpu"),
        (["n1-ib", "n2-ib", "n3-ib"], "n1-ib,n2-ib,n3-ib"),
        (["gpu02", "gpu01", "gpu02"], "gpu[01-02]"),
    ],
)
def test_compress(hosts, expression):
    assert hostlist_compress(hosts) == expression


@given(st.sets(st.integers(min_value=0, max_value=300), min_size=1, max_size=40), st.sampled_from([0, 2, 3]))
def test_compress_then_expand_gives_the_same_hosts(numbers, width):
    hosts = {f"gpu{str(n).zfill(width)}" for n in numbers}
    assert set(hostlist_expand(hostlist_compress(sorted(hosts)))) == hosts


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("node[01-03", "without its ']'"),
        ("node01-03]", "without its '\\['"),
        ("node[[1-2]]", "brackets inside brackets"),
        ("node[5-3]", "runs backwards"),
        ("node[a-b]", "is not a number or a range"),
    ],
)
def test_bad_expressions_are_refused_with_what_is_wrong(expression, message):
    with pytest.raises(AnsibleFilterError, match=message):
        hostlist_expand(expression)


def test_compress_refuses_an_expression_inside_the_list():
    with pytest.raises(AnsibleFilterError, match="expand it first"):
        hostlist_compress(["node[01-02]"])
