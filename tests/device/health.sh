#!/usr/bin/env bash
# Run the node health check between runs (gpuops-health) on a real GPU machine, installed the way
# the validate role's health_check entry point installs it (its module list and launcher, no
# Ansible), with expectations from the machine's own PCI enumeration as gpu_facts derives them:
#   tests/device/health.sh OUTDIR
# Writes OUTDIR/health.txt: the expectations, each run's output and wall time (report mode five
# times, then node-problem-detector's mode), and nvidia-smi -q -x as read. Nothing on the machine
# changes but a temporary folder: report mode only reads, and its Xid state goes to that folder.
set -uo pipefail
out=${1:?usage: health.sh OUTDIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
lib=$work/lib
package=$lib/ansible_collections/gpuops/cluster/plugins/module_utils
mkdir -p "$package" "$out"
for level in ansible_collections ansible_collections/gpuops ansible_collections/gpuops/cluster \
  ansible_collections/gpuops/cluster/plugins ansible_collections/gpuops/cluster/plugins/module_utils; do
  : >"$lib/$level/__init__.py"
done
# The role's own list of modules (roles/validate/vars/main.yml), in one file of code as its
# health_check task writes it, and its launcher (python3 of the PATH for the node's /usr/bin/python3).
modules=$(sed -n '/^__validate_health_modules:/,/^[^ ]/s/^  - //p' "$repo/roles/validate/vars/main.yml")
# shellcheck disable=SC2086 # one module per word
python3 - "$repo" "$work/gpuops-health.json" $modules <<'EOF'
import json, sys
repo, out, modules = sys.argv[1], sys.argv[2], sys.argv[3:]
code = {"gpuops_health": open(f"{repo}/roles/validate/files/gpuops_health.py").read()}
code.update({m: open(f"{repo}/plugins/module_utils/{m}.py").read() for m in modules})
json.dump(code, open(out, "w"))
EOF
sed -e "1s|.*|#!$(command -v python3)|" "$repo/roles/validate/files/gpuops-health" >"$work/gpuops-health"
chmod 755 "$work/gpuops-health"
export GPUOPS_HEALTH_CODE=$work/gpuops-health.json

# Expectations as the role writes them: gpu_facts' PCI enumeration (lspci -Dnn), else none (the
# collection's module_utils as a package tree, for this script's own import of them).
cp "$repo"/plugins/module_utils/*.py "$package/"
python3 - "$work/health.json" <<'EOF' 2>"$work/facts.err"
import json, subprocess, sys
sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0] + "/lib")
from ansible_collections.gpuops.cluster.plugins.module_utils.gpu_inventory import build_gpu_facts
from ansible_collections.gpuops.cluster.plugins.module_utils.pci import classify, parse_lspci
try:
    text = subprocess.run(["lspci", "-Dnn"], capture_output=True, text=True, check=False).stdout
    facts = build_gpu_facts(classify(parse_lspci(text)))
    source = "lspci -Dnn"
except (OSError, Exception) as exc:  # noqa: BLE001 - any failure: the check's own sysfs count decides
    facts, source = {}, f"no lspci ({exc})"
config = {"node": "device", "pci_gpus": facts.get("pci_gpu_count", 0), "nvswitch_count": facts.get("nvswitch_count", 0),
          "hcas": [], "hca_pci": facts.get("hca_pci") or [], "fabric": "auto", "source": source}
json.dump(config, open(sys.argv[1], "w"), indent=1)
EOF

{
  echo "== expectations ($work/health.json)"
  cat "$work/health.json"
  cat "$work/facts.err"
  for n in 1 2 3 4 5; do
    echo "== gpuops-health --json, run $n"
    TIMEFORMAT="wall %R s"
    time "$work/gpuops-health" --json --config "$work/health.json" --state "$work/state.json"
    echo "exit $?"
  done
  echo "== gpuops-health (report)"
  "$work/gpuops-health" --config "$work/health.json" --state "$work/state.json"
  echo "exit $?"
  echo "== gpuops-health --mode npd"
  "$work/gpuops-health" --mode npd --config "$work/health.json" --state "$work/state.json"
  echo "exit $?"
  echo "== state file"
  cat "$work/state.json"
  echo
  echo "== dmesg | tail -3 (exit status)"
  dmesg 2>&1 | tail -3
  echo "== nvidia-smi --version"
  nvidia-smi --version
} >"$out/health.txt" 2>&1
nvidia-smi -q -x >"$out/smi_q_x.xml" 2>&1
cat "$out/health.txt"
rm -rf "$work"
