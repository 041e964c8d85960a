# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two speed-ups of the test harness, each proven to change nothing but time:
tests/gpusim/pack.py (a profile's hardware layer in one reproducible tar) and
tests/image/ansiballz_bytecode_cache.py (compiled code kept for zipimport, in the base images)."""

from __future__ import annotations

import importlib
import sys
import tarfile
import zipfile
import zipimport

import pytest
from conftest import ROOT, load_script

GPUSIM = ROOT / "tests" / "gpusim"


@pytest.fixture(scope="module")
def pack():
    return load_script(GPUSIM / "pack.py", "gpusim_pack")


def test_pack_is_reproducible_and_lays_out_the_node(pack, tmp_path, capsys):
    assert pack.main(["pcie-l40s", "--out", str(tmp_path / "a")]) == 0
    assert pack.main(["pcie-l40s", "--out", str(tmp_path / "b")]) == 0
    first, second = capsys.readouterr().out.split()
    assert first.rsplit("/", 1)[1] == second.rsplit("/", 1)[1]
    assert open(first, "rb").read() == open(second, "rb").read()
    with tarfile.open(first) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert all(m.isfile() and m.uid == 0 and m.gid == 0 for m in members.values())
        assert members["usr/local/sbin/ibstat"].mode == 0o755
        assert members["opt/nccl-tests/current/build/all_reduce_perf"].mode == 0o755
        assert members["usr/share/gpusim/profile/nvidia-smi-q-x.xml"].mode == 0o644
        assert tar.extractfile("etc/gpusim-profile").read() == b"pcie-l40s\n"
        profile = GPUSIM / "profiles" / "pcie-l40s"
        assert {n for n in members if n.startswith("usr/share/gpusim/profile/")} == {
            f"usr/share/gpusim/profile/{p.name}" for p in profile.iterdir()
        }
        # The source's shebang is ansible-test's; the node's copy names the nodes' python3.
        source = (GPUSIM / "bin" / "lspci").read_bytes()
        assert source.startswith(b"#!/usr/bin/env python\n")
        assert tar.extractfile("usr/local/bin/lspci").read() == b"#!/usr/bin/python3\n" + source.split(b"\n", 1)[1]
    # Each profile its own archive: the name carries the content's digest.
    assert pack.main(["dgx-h100", "--out", str(tmp_path / "a")]) == 0
    assert capsys.readouterr().out.strip() != first


def test_pack_refuses_an_unknown_profile_by_name(pack, tmp_path):
    with pytest.raises(SystemExit, match=r"no gpusim profile 'dgx-z900'; the profiles are .*pcie-l40s"):
        pack.main(["dgx-z900", "--out", str(tmp_path)])
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


SOURCE = "def inner():\n    return 'from the zip'\n\nVALUE = inner()\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The shim loaded with its cache under tmp_path, zipimport restored afterwards."""
    original = zipimport._compile_source
    module = load_script(ROOT / "tests" / "image" / "ansiballz_bytecode_cache.py", "ansiballz_bytecode_cache")
    monkeypatch.setattr(module, "CACHE", str(tmp_path / "cache"))
    yield module
    zipimport._compile_source = original


def import_from_zip(path, name):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}.py", SOURCE)
    sys.path.insert(0, str(path))
    try:
        importlib.invalidate_caches()
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(path))
        sys.modules.pop(name, None)
        sys.path_importer_cache.pop(str(path), None)


def test_bytecode_cache_compiles_once_and_names_the_payload_in_hand(cache, tmp_path, monkeypatch):
    first = import_from_zip(tmp_path / "ansible_a_payload.zip", "gpuops_zip_probe")
    assert first.VALUE == "from the zip"
    assert len(list((tmp_path / "cache").iterdir())) == 1

    # A second payload (another temporary folder, the same source): read from the cache, not compiled.
    def refuse(*_):
        raise AssertionError("compiled again")

    monkeypatch.setattr(cache, "_compile", refuse)
    (tmp_path / "run2").mkdir()
    second = import_from_zip(tmp_path / "run2" / "ansible_a_payload.zip", "gpuops_zip_probe")
    assert second.VALUE == "from the zip"
    # Tracebacks name the zip in hand, down to nested functions.
    assert second.inner.__code__.co_filename.startswith(str(tmp_path / "run2"))


def test_bytecode_cache_falls_back_to_compiling(cache, tmp_path):
    (tmp_path / "cache").write_text("a file where the folder should be")
    probe = import_from_zip(tmp_path / "ansible_b_payload.zip", "gpuops_zip_probe_b")
    assert probe.VALUE == "from the zip"


def test_bytecode_cache_keys_on_the_source(cache, tmp_path):
    # zipimport hands the source over as bytes.
    code = cache._compile_source(str(tmp_path / "x.zip/m.py"), SOURCE.encode())
    other = cache._compile_source(str(tmp_path / "x.zip/m.py"), SOURCE.replace("from the zip", "changed").encode())
    assert "from the zip" in code.co_consts[0].co_consts
    assert "changed" in other.co_consts[0].co_consts
    assert len(list((tmp_path / "cache").iterdir())) == 2
