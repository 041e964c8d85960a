#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: stack_check
short_description: Check a declared NVIDIA software stack against NVIDIA's tables and the node's GPUs
version_added: 1.0.0
description:
  - Evaluates the declared driver, kernel module flavour, CUDA toolkits, cuDNN, NCCL, DCGM and OFED
    choices against NVIDIA's published compatibility tables (CUDA release notes, CUDA compatibility
    guides, cuDNN support matrix, NCCL packaging, DCGM and Fabric Manager guides) and against the
    node's C(nvidia_gpu) facts, kernel and distribution.
  - Returns every problem found, each naming the variable to change and how, and the resolved
    stack the install roles use (kernel module flavour, Fabric Manager and nvlsm, exact package names
    and versions).
  - Fails when any problem is an error, listing all of them in one message, unless
    O(fail_on_error=false). Warnings never fail.
  - With O(nvidia_driver_source=ubuntu), reads Canonical's driver packages of the branch from the
    node's package index (C(apt-cache show), that is the configured mirror's C(Packages) as of the last
    C(apt-get update)), and decides the release to install, whether the kernel has precompiled signed modules at
    that release or DKMS builds them, and Fabric Manager and NSCQ at the same release.
  - Changes nothing on the node. Option names are the collection's inventory variables, so the
    messages name what to edit. The stack options, their types and defaults are the preflight role's
    variables, declared once in C(roles/preflight/meta/argument_specs.yml) (the
    C(gpuops.cluster.stack) documentation fragment is written from it); an empty string is read as unset.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
extends_documentation_fragment:
  - gpuops.cluster.readonly
  - gpuops.cluster.stack
options:
  nvidia_gpu:
    description: The node's C(nvidia_gpu) facts from M(gpuops.cluster.gpu_facts); empty for a node without GPUs.
    type: dict
    default: {}
  kernel:
    description: Running kernel release (C(ansible_facts.kernel)).
    type: str
  distribution:
    description: C(ansible_facts.distribution), e.g. C(Debian).
    type: str
    required: true
  distribution_major_version:
    description: C(ansible_facts.distribution_major_version), e.g. C("12").
    type: str
    required: true
  cpu_architecture:
    description: C(ansible_facts.architecture); picks the repository's C(x86_64) or C(sbsa) tree.
    type: str
    default: x86_64
  today:
    description: Date the branch lifecycle is judged at (C(YYYY-MM-DD)); empty means today.
    type: str
  fail_on_error:
    description: Fail when a problem is an error. The preflight role sets it to false to merge its own checks first.
    type: bool
    default: true
  package_indexes:
    description:
      - C(Packages) files (URLs; C(.xz) and C(.gz) are decompressed) to read Canonical's driver packages from,
        instead of the node's C(apt-cache). C(playbooks/bundle.yml) gives the Ubuntu archive's of the declared
        release for a host it does not reach (C(bundle_ubuntu_mirror)), since the bundle host's own index is
        another distribution's.
      - The versions read only decide what the manifest lists; the node installs from its own mirror, whose
        signature its apt checks.
    type: list
    elements: str
    default: []
notes:
  - The tables and their sources are in C(plugins/module_utils/compat.py). Rows NVIDIA has not
    confirmed only give warnings.
seealso:
  - module: gpuops.cluster.gpu_facts
  - name: CUDA compatibility
    description: NVIDIA's guide to minor-version and forward compatibility.
    link: https://docs.nvidia.com/deploy/cuda-compatibility/
"""

EXAMPLES = r"""
- name: Read the GPUs
  gpuops.cluster.gpu_facts:

- name: Check the stack before any change
  gpuops.cluster.stack_check:
    nvidia_driver_branch: "580"
    cuda_versions: ["12.8", "13.0"]
    cudnn_version: "9.17.0.29"
    nccl_version: "2.27.7"
    dcgm_major: 4
    ofed_flavour: doca
    nvidia_gpu: "{{ ansible_facts.nvidia_gpu }}"
    kernel: "{{ ansible_facts.kernel }}"
    distribution: "{{ ansible_facts.distribution }}"
    distribution_major_version: "{{ ansible_facts.distribution_major_version }}"
  register: stack

- name: Install the driver the check resolved
  ansible.builtin.apt:
    name: "{{ stack.resolved.packages.driver | map(attribute='name') }}"
"""

RETURN = r"""
problems:
  description: Every problem, errors first. Empty when the stack is sound.
  returned: always
  type: list
  elements: dict
  contains:
    severity:
      description: V(error) (the stack cannot work) or V(warning).
      type: str
    variable:
      description: The inventory variable to change.
      type: str
      sample: cuda_versions
    message:
      description: What is wrong, with the versions involved.
      type: str
      sample: "CUDA 13.0 removed Volta (NVIDIA Tesla V100 SXM2 16GB (compute capability 7.0)): CUDA 12.x is the
        last toolkit for it."
    fix:
      description: What to change.
      type: str
      sample: "use CUDA 12.x, e.g. cuda_versions: ['12.9']."
error_count:
  description: Number of problems that are errors.
  returned: always
  type: int
report:
  description: RV(resolved.decisions) as a table, one line per decision (empty when RV(resolved) is null).
  returned: always
  type: str
resolved:
  description: The stack as the install roles should apply it; null when a declared value is malformed.
  returned: always
  type: dict
  contains:
    gpu_present:
      description: NVIDIA GPUs were found on the node.
      type: bool
    kernel_module:
      description: The kernel module flavour, V(open) or V(proprietary).
      type: str
    kernel_module_reason:
      description: Why that flavour.
      type: str
      sample: required by NVIDIA B200 (compute capability 10.0)
    driver:
      description:
        - C(branch), C(version) (exact or null), C(minimum_version) (what the installed version must
          reach), C(installed_version), C(action) (install, keep, upgrade, downgrade), C(native_cuda),
          C(package_scheme) (branch-suffixed up to R580, unsuffixed from R590), C(apt_pin),
          C(dnf_module_stream), C(lifecycle) (C(kind), C(eol), C(ended)), C(source) (V(nvidia) or
          V(ubuntu)), C(modules) (V(dkms), built on the node, or V(precompiled), Canonical's signed
          modules) and C(kernel) (the kernel the modules are for).
        - With O(nvidia_driver_source=ubuntu), C(version) is the release read from the node's package
          index, never null.
      type: dict
    fabricmanager:
      description:
        - C(required) (NVSwitches present), C(version) and C(nvswitch_count).
        - C(version) is O(nvidia_driver_fabricmanager_version), else O(nvidia_driver_version), else
          null, which means the version of the driver the packages install.
      type: dict
    nvlsm:
      description: C(required) on NVLink5 NVSwitch systems (HGX B200/B300).
      type: dict
    cuda:
      description: C(versions), C(default) and C(forward_compat) (the minors that need cuda-compat).
      type: dict
    cudnn:
      description: C(version), C(major) and C(cuda_major); null when no cuDNN is declared.
      type: dict
    nccl:
      description: C(version) (with its package revision), C(cuda_build) and C(pinned_build); null when none.
      type: dict
    dcgm:
      description: C(major) and C(cuda_major); null when none.
      type: dict
    gpudirect:
      description: GPUDirect RDMA method, V(peermem), V(dmabuf) or V(none).
      type: str
    ofed:
      description: C(flavour), the RDMA stack the ofed role installs (V(doca), V(mlnx_ofed), V(inbox) or V(none)).
      type: dict
    repository:
      description: C(family) (apt or dnf), C(distribution) (CUDA repository directory, e.g. C(debian12)) and C(arch).
      type: dict
    decisions:
      description:
        - Each choice made for this node as C(decision), C(value) and C(reason) (the fact or the
          variable it came from), in the order of an install.
      type: list
      elements: dict
      sample:
        - {decision: Fabric Manager, value: "yes, 580.95.05", reason: "4 NVSwitch(es) on PCI: NVSwitch systems need..."}
        - {decision: GPUDirect RDMA, value: peermem, reason: ofed_flavour doca ships nvidia-peermem}
    packages:
      description:
        - Per component (C(driver_pinning), C(driver), C(driver_compute_only), C(fabricmanager),
          C(nvlsm), C(cuda), C(cuda_compat), C(cudnn), C(nccl), C(dcgm)) a list of C(name) and
          C(version), the version in the package manager's form (a trailing C(*) is a glob) or
          null where the branch pin decides.
      type: dict
      sample:
        driver: [{name: nvidia-open-580, version: null}]
        nccl: [{name: libnccl2, version: "2.26.5-1+cuda12.8"}, {name: libnccl-dev, version: "2.26.5-1+cuda12.8"}]
"""

import datetime
import lzma
import zlib

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.cluster.plugins.module_utils.bundle import BundleError
from ansible_collections.gpuops.cluster.plugins.module_utils.canonical import index_names, parse_index
from ansible_collections.gpuops.cluster.plugins.module_utils.mirror import MAX_TEXT, reader
from ansible_collections.gpuops.cluster.plugins.module_utils.stack import (
    check_stack,
    errors,
    format_decisions,
    format_problems,
)
from ansible_collections.gpuops.cluster.plugins.module_utils.stack_spec import STACK_SPEC, STACK_VARIABLES

# The declared variables (stack_spec.py, written from the preflight role's argument specs) and the
# node's facts the rules read.
STACK_OPTIONS = (*STACK_VARIABLES, "kernel", "distribution", "distribution_major_version", "cpu_architecture")


def read_urls(module, urls):
    """The text of each ``Packages`` file at ``urls`` (read as the bundle modules read a mirror),
    decompressed by its suffix, joined."""
    read = reader(module)
    texts = []
    for url in urls:
        try:
            data = read(url)
        except BundleError as err:
            module.fail_json(msg=f"package_indexes: {err} (bundle_ubuntu_mirror)")
        try:
            # Bounded: a small file that inflates past what any archive's index is would be refused.
            if url.endswith(".xz"):
                data = lzma.LZMADecompressor().decompress(data, max_length=MAX_TEXT + 1)
            elif url.endswith(".gz"):
                data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, MAX_TEXT + 1)
        except (lzma.LZMAError, zlib.error, EOFError) as err:
            module.fail_json(msg=f"package_indexes: {url} does not decompress ({err}); is it a Packages file?")
        if len(data) > MAX_TEXT:
            module.fail_json(msg=f"package_indexes: {url} is larger than {MAX_TEXT} bytes; is it a Packages file?")
        texts.append(data.decode("utf-8", "replace"))
    return "\n\n".join(texts)


def read_index(module, stack):
    """Canonical's driver packages of the branch in the node's package index (or in the Packages
    files of package_indexes), or None where they are not wanted or apt-cache cannot answer
    (check_stack reports that)."""
    branch = str(stack.get("nvidia_driver_branch") or "")
    if stack.get("nvidia_driver_source") != "ubuntu" or stack.get("distribution") != "Ubuntu":
        return None
    if not (branch.isdigit() and len(branch) == 3):
        return None
    if module.params["package_indexes"]:
        kernel = stack.get("nvidia_driver_kernel") or stack.get("kernel") or ""
        wanted = set(index_names(branch, kernel))
        index = parse_index(read_urls(module, module.params["package_indexes"]))
        return {name: entries for name, entries in index.items() if name in wanted}
    apt_cache = module.get_bin_path("apt-cache")
    if not apt_cache:
        return None
    kernel = stack.get("nvidia_driver_kernel") or stack.get("kernel") or ""
    rc, out, err = module.run_command(
        [apt_cache, "show", *index_names(branch, kernel)], environ_update={"LC_ALL": "C", "LANG": "C"}
    )
    # apt-cache exits 100 when a name is unknown ("No packages found" when none is known); the names it
    # knows are printed all the same.
    if rc not in (0, 100):
        module.warn(f"apt-cache show failed ({rc}): {(err or out).strip()[:300]}")
        return None
    return parse_index(out)


def main():
    module = AnsibleModule(
        argument_spec={
            **{name: dict(spec) for name, spec in STACK_SPEC.items()},
            "nvidia_gpu": {"type": "dict", "default": {}},
            "kernel": {"type": "str"},
            "distribution": {"type": "str", "required": True},
            "distribution_major_version": {"type": "str", "required": True},
            "cpu_architecture": {"type": "str", "default": "x86_64"},
            "today": {"type": "str"},
            "fail_on_error": {"type": "bool", "default": True},
            "package_indexes": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    params = module.params
    today = params["today"] or datetime.date.today().isoformat()
    try:
        datetime.date.fromisoformat(today)
    except ValueError:
        module.fail_json(msg=f"today: {today!r} is not a date; write it as YYYY-MM-DD or leave it empty.")
    stack = {name: None if params[name] == "" else params[name] for name in STACK_OPTIONS}
    problems, resolved = check_stack(stack, params["nvidia_gpu"], today=today, index=read_index(module, stack))
    failed = errors(problems)
    report = format_decisions(resolved["decisions"], "Decisions, with their reasons") if resolved else ""
    result = {
        "changed": False,
        "problems": problems,
        "error_count": len(failed),
        "resolved": resolved,
        "report": report,
    }
    if failed and params["fail_on_error"]:
        module.fail_json(msg=format_problems(problems), **result)
    for item in problems if params["fail_on_error"] else []:
        if item["severity"] == "warning":
            module.warn("{}: {} Fix: {}".format(item["variable"], item["message"], item["fix"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
