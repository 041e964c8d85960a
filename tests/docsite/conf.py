# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Sphinx configuration of the collection's docsite (make docs, tests/scripts/docs.sh): the guides
# (README.md and docs/, Markdown through myst-parser) and antsibull-docs' pages of every module,
# filter and role. References into docs.ansible.com resolve through a local inventory that
# tests/docsite/prepare.py writes (no network at build time), so every warning is ours.

project = "gpuops.cluster"
copyright = "gpuops.cluster contributors"  # Sphinx's own name for it
html_title = "gpuops.cluster"
html_short_title = "gpuops.cluster"
extensions = ["myst_parser", "sphinx.ext.intersphinx", "sphinx_antsibull_ext"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
pygments_style = "ansible"
highlight_language = "YAML+Jinja"
html_theme = "sphinx_ansible_theme"
html_show_sphinx = False
html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False
default_role = "any"
nitpicky = True
# GitHub's anchors for Markdown headings, so that the guides' links (#the-whole-cluster-siteyml) work.
myst_heading_anchors = 4
intersphinx_mapping = {"ansible_devel": ("https://docs.ansible.com/projects/ansible/devel/", "ansible_devel.inv")}
