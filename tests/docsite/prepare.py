# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""prepare.py ROOT SRC: the docsite's sources beside antsibull-docs' pages (tests/scripts/docs.sh).

- SRC/guide/: README.md (as readme.md) and docs/*.md, their links rewritten for the site: a guide's
  link to another guide stays a page link, a link to any other file of the repository goes to that
  file on the repository's web page (galaxy.yml's repository);
- SRC/index.rst: the guides, then the collection's pages;
- SRC/ansible_devel.inv: a Sphinx inventory of the docs.ansible.com labels the generated pages refer
  to (every ansible.builtin module, filter, test and lookup, the return-values and action-plugin
  pages), so that the site builds offline and a reference that does not resolve is a warning.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zlib
from pathlib import Path

import yaml

LINK = re.compile(r"(\]\()([^)\s]+)(\))")
BUILTIN_TYPES = ("module", "filter", "test", "lookup")
# Pages of docs.ansible.com the generated module pages link to by label.
ANSIBLE_LABELS = {
    "common_return_values": ("reference_appendices/common_return_values.html#common-return-values", "Return Values"),
    "action_plugins": ("plugins/action.html#action-plugins", "Action plugins"),
    "ansible_configuration_settings": (
        "reference_appendices/config.html#ansible-configuration-settings",
        "Ansible Configuration Settings",
    ),
}


def site_link(target, source, guides, blob):
    """A guide's link as the site needs it; ``source`` is the guide's path in the repository."""
    if re.match(r"[a-z]+:", target) or target.startswith("#"):
        return target
    path, _hash, anchor = target.partition("#")
    resolved = (source.parent / path).as_posix()
    resolved = re.sub(r"(^|/)[^/]+/\.\./", r"\1", resolved).removeprefix("./")
    if resolved in guides:
        return guides[resolved] + ("#" + anchor if anchor else "")
    return f"{blob}/{resolved}" + ("#" + anchor if anchor else "")


def inventory(path):
    """docs.ansible.com's labels the pages may use, as a Sphinx (version 2) inventory."""
    lines = [f"{label} std:label -1 {uri} {title}" for label, (uri, title) in ANSIBLE_LABELS.items()]
    for kind in BUILTIN_TYPES:
        listed = json.loads(subprocess.run(["ansible-doc", "--list", "--json", "-t", kind, "ansible.builtin"],
                                           capture_output=True, text=True, check=True).stdout)  # fmt: skip
        for fqcn in sorted(listed):
            name = fqcn.rsplit(".", 1)[1]
            label = f"ansible_collections.ansible.builtin.{name}_{kind}"
            anchor = label.replace(".", "-").replace("_", "-")
            lines.append(f"{label} std:label -1 collections/ansible/builtin/{name}_{kind}.html#{anchor} {fqcn} {kind}")
    head = "# Sphinx inventory version 2\n# Project: Ansible\n# Version: devel\n"
    head += "# The remainder of this file is compressed using zlib.\n"
    path.write_bytes(head.encode() + zlib.compress(("\n".join(lines) + "\n").encode()))
    return len(lines)


def main():
    root, src = Path(sys.argv[1]), Path(sys.argv[2])
    blob = yaml.safe_load((root / "galaxy.yml").read_text())["repository"].rstrip("/") + "/blob/main"
    # The guides in the order a user needs them (the README's), then any other page of docs/.
    order = ["operating.md", "components.md", "air-gap.md", "platforms.md", "development.md"]
    pages = sorted((root / "docs").glob("*.md"), key=lambda p: (order.index(p.name) if p.name in order else 99, p.name))
    sources = [root / "README.md", *pages]
    guides = {p.relative_to(root).as_posix(): ("readme.md" if p.name == "README.md" else p.name) for p in sources}
    (src / "guide").mkdir(parents=True, exist_ok=True)
    for path in sources:
        relative = path.relative_to(root)

        def rewrite(match, relative=relative):
            return match.group(1) + site_link(match.group(2), relative, guides, blob) + match.group(3)

        text = LINK.sub(rewrite, path.read_text())
        (src / "guide" / guides[relative.as_posix()]).write_text(text)
    pages = "\n".join(f"   guide/{Path(name).stem}" for name in guides.values())
    (src / "index.rst").write_text(
        ".. _docsite_root_index:\n\n"
        "gpuops.cluster\n==============\n\n"
        "An Ansible collection that turns bare servers into a working GPU training cluster.\n\n"
        f".. toctree::\n   :maxdepth: 1\n   :caption: Guides:\n\n{pages}\n\n"
        ".. toctree::\n   :maxdepth: 2\n   :caption: Reference:\n\n   collections/index\n\n"
        ".. toctree::\n   :maxdepth: 1\n   :caption: Plugin indexes:\n   :glob:\n\n   collections/index_*\n"
    )
    count = inventory(src / "ansible_devel.inv")
    print(f"docsite sources: {len(guides)} guides, {count} docs.ansible.com labels")


if __name__ == "__main__":
    main()
