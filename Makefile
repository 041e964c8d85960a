# gpuops.cluster — developer entry points. `make test` runs every tier; each tier runs alone too:
#   make lint | sanity | unit | galaxy | docs | core-matrix | install-matrix | molecule [SCENARIO=name]
# Everything Python lives in .venv (from requirements.txt); nothing is installed globally by pip.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# The project's Python: one that requirements.txt's ansible-core runs its controller on (3.12 or
# later for 2.21: python3 where it is, else python3.13 or python3.12 from the PATH or pyenv).
PYTHON ?= $(shell tests/scripts/core-python.sh $(shell sed -n 's/^ansible-core==//p' requirements.txt))
VENV ?= .venv
BIN := $(CURDIR)/$(VENV)/bin
CACHE := $(CURDIR)/.cache
SCENARIO ?=
GPUSIM_REPO_DIR := $(CACHE)/gpusim/www

export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export GPUSIM_REPO_DIR

# The base image of the platform MOLECULE_DISTRO names (debian12, debian13, ubuntu2204,
# ubuntu2404): a tag computed from its recipe, unless MOLECULE_IMAGE is given. DEMO_DISTRO says the
# same for make demo (make demo DEMO_DISTRO=ubuntu2404).
MOLECULE_DISTRO ?= $(or $(DEMO_DISTRO),debian12)
export MOLECULE_DISTRO
ifdef MOLECULE_IMAGE
IMAGE_TARGET :=
else
MOLECULE_IMAGE := $(shell MOLECULE_DISTRO=$(MOLECULE_DISTRO) tests/image/build.sh --print-tag)
IMAGE_TARGET := image
endif
export MOLECULE_IMAGE

ALL_SCENARIOS := $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))
# The platform make test runs a scenario on (SCENARIO@DISTRO), where it is not MOLECULE_DISTRO.
# Every role runs on Ubuntu 24.04: site.yml there (every role it applies), with the driver
# scenario (NVIDIA's packages, and Canonical's on one node), k8s_node (containerd 2.2) and mig.
# Slurm runs on its four releases: 21.08 (slurm_cluster on Ubuntu 22.04), 22.05 (slurm, the role
# alone, on Debian 12), 23.11 (site and mig on Ubuntu 24.04) and 24.11 (fleet on Debian 13). The
# other role scenarios stay on Debian 12 (containerd 1.6 through container_toolkit); they pass on
# Ubuntu 24.04 by hand.
CI_PLATFORMS := nvidia_driver@ubuntu2404 site@ubuntu2404 k8s_node@ubuntu2404 mig@ubuntu2404 slurm_cluster@ubuntu2204 fleet@debian13 rack@debian13
# Scenarios make test leaves out (none now; make test-matrix runs every scenario everywhere).
CI_SKIP :=
SCENARIOS := $(if $(SCENARIO),$(SCENARIO),$(foreach s,$(filter-out $(CI_SKIP),$(ALL_SCENARIOS)),$(or $(filter $(s)@%,$(CI_PLATFORMS)),$(s))))
# make test-matrix: every scenario on every platform (outside CI: several hours).
DISTROS := debian12 debian13 ubuntu2204 ubuntu2404
MATRIX := $(foreach d,$(DISTROS),$(addsuffix @$(d),$(ALL_SCENARIOS)))
# The base images a list of SCENARIO[@DISTRO] needs.
distros_of = $(sort $(foreach s,$(1),$(if $(findstring @,$(s)),$(lastword $(subst @, ,$(s))),$(MOLECULE_DISTRO))))
GPUSIM_SOURCES := $(wildcard tests/gpusim/repo/*.py tests/gpusim/keys/*.asc)
# The supported ansible-core releases older than requirements.txt's pin (meta/runtime.yml's range):
# make core-matrix runs sanity and the unit tests on each.
ANSIBLE_CORES := 2.19.14 2.20.10
# The community bundle (the `ansible` package) of each supported core, 2.19 to 2.21: make
# install-matrix installs the built tarball offline beside each alone and parses site.yml there.
ANSIBLE_BUNDLES := 12.3.0 13.8.0 14.5.0

# make test writes one row per step here (tests/scripts/test_times.py) and prints the table at the end.
TIMES ?= $(CACHE)/test-times.tsv
export TIMES

.PHONY: help test test-matrix lint sanity unit galaxy docs core-matrix install-matrix molecule demo demo-down bench bench-fleet bench-fleet-paper bench-bundle bench-heal fuzz venv docker image gpusim-repo gpusim-profiles stack-spec role-docs build clean

help:
	@echo "make demo [DEMO_DISTRO=ubuntu2404]  a simulated GPU cluster in Docker, set up by site.yml (again: re-apply)"
	@echo "make demo-down               remove the demo cluster"
	@echo "make test                    every tier: lint, sanity, unit, molecule"
	@echo "make lint | sanity | unit    one tier"
	@echo "make galaxy                  galaxy-importer (Automation Hub's rules) and antsibull-docs on the built collection"
	@echo "make docs                    the docsite in .cache/docs/html (antsibull-docs, Sphinx), rendered and checked"
	@echo "make core-matrix             sanity and unit tests on ansible-core $(ANSIBLE_CORES)"
	@echo "make install-matrix          the built tarball installed offline with ansible $(ANSIBLE_BUNDLES) alone; site.yml parsed"
	@echo "make molecule [SCENARIO=x]   Molecule scenarios (all, or one; x@ubuntu2404 on that platform)"
	@echo "make test-matrix             every scenario on Debian 12 and 13, Ubuntu 22.04 and 24.04 (hours)"
	@echo "make bench                   time a no-op site.yml run on the demo cluster (bench/run.py)"
	@echo "make bench-fleet             the slurm role over 4, 8 and 16 simulated GPU nodes (bench/fleet.py)"
	@echo "make bench-fleet-paper       a recorded fleet of 1,000 and 10,000 nodes on the controller, no Docker"
	@echo "make bench-bundle            the air-gap manifest over 10, 100 and 1000 declared hosts (bench/bundle.py)"
	@echo "make bench-heal              a month of faults on 1000 nodes through the node state machine (bench/heal.py)"
	@echo "make fuzz [FUZZ_SECONDS=240]  mutations of the real captures through every reader (bench/fuzz.py)"
	@echo "make stack-spec              write the files derived from the stack variables' one declaration"
	@echo "make role-docs               write each role's README variables table from its argument_specs"
	@echo "make venv | docker | image | gpusim-repo | build | clean"

# Every tier, each setup step, tier and scenario timed; the table is printed even when a step fails,
# so a slow or failed run says where its time went. Docker and the base images are set up beside
# the tiers before Molecule (most of that waits on the archives; log: .cache/setup-images.log);
# Molecule waits for them. The tiers run in groups (tests/scripts/tiers.sh), a group's tiers side by
# side: each is mostly one process. Molecule runs alone after them: its two scenarios at a time
# keep both cores busy. A third job, or tiers beside it, slow every scenario: the core matrix beside
# Molecule at the lowest priority (nice 19, its own scheduler group) made Molecule 413 s slower, about
# the matrix's own time, and its unit tests missed hypothesis deadlines.
TIER_GROUPS := "lint sanity docs" "unit galaxy" "core-matrix install-matrix"
test:
	@mkdir -p $(CACHE); rm -f $(TIMES); \
	trap 'python3 tests/scripts/test_times.py report $(TIMES)' EXIT; \
	( start=$$(date +%s); rc=0; \
	  $(MAKE) --no-print-directory docker $(IMAGE_TARGET) >$(CACHE)/setup-images.log 2>&1 || rc=$$?; \
	  python3 tests/scripts/test_times.py record $(TIMES) beside "docker, images (beside)" $$(( $$(date +%s) - start )); \
	  exit $$rc ) & images=$$!; \
	for step in venv gpusim-repo; do \
	  start=$$(date +%s); \
	  $(MAKE) --no-print-directory $$step; \
	  python3 tests/scripts/test_times.py record $(TIMES) setup $$step $$(( $$(date +%s) - start )); \
	done; \
	tests/scripts/tiers.sh $(TIER_GROUPS); \
	start=$$(date +%s); \
	if ! wait $$images; then cat $(CACHE)/setup-images.log; echo "ERROR: docker or a base image failed (above)" >&2; exit 1; fi; \
	cat $(CACHE)/setup-images.log; \
	python3 tests/scripts/test_times.py record $(TIMES) setup "waiting for the images" $$(( $$(date +%s) - start )); \
	start=$$(date +%s); \
	$(MAKE) --no-print-directory molecule; \
	python3 tests/scripts/test_times.py record $(TIMES) wall "molecule, $${MOLECULE_JOBS:-2} at a time" $$(( $$(date +%s) - start )); \
	echo "==> all tiers passed"

venv: $(VENV)/.stamp
$(VENV)/.stamp: requirements.txt
	@echo "==> creating $(VENV) from requirements.txt"
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check $$(grep -E '^uv==' requirements.txt)
	UV=$(BIN)/uv tests/scripts/venv-install.sh $(VENV) -r requirements.txt
	touch $@

lint: venv
	@echo "==> yamllint"
	yamllint --strict .
	@echo "==> ruff"
	ruff check .
	ruff format --check .
	@echo "==> ansible-lint (profile: production)"
	ansible-lint --offline
	@echo "==> gpusim profiles match their specs"
	$(BIN)/python tests/gpusim/assemble.py --check
	@echo "==> files derived from the stack declaration (roles/preflight/meta/argument_specs.yml) are current"
	$(BIN)/python tests/scripts/stack_spec.py --check
	@echo "==> the roles' README variables tables match their argument_specs"
	$(BIN)/python tests/scripts/role_docs.py --check
	@echo "==> changelog fragments and the release history (antsibull-changelog, as the docsite's build reads them)"
	$(BIN)/antsibull-changelog lint
	$(BIN)/antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
	@echo "==> the execution environment definition builds a context (ansible-builder create; pulls nothing)"
	$(MAKE) --no-print-directory build >/dev/null
	$(BIN)/ansible-builder create -f execution-environment.yml -c $(CACHE)/ee --output-filename Containerfile >/dev/null
	test -s $(CACHE)/ee/Containerfile && test -n "$$(ls $(CACHE)/ee/_build/collection/gpuops-cluster-*.tar.gz)"
	@echo "==> what another execution environment gets from this collection (meta/execution-environment.yml), and only that"
	$(BIN)/ansible-builder introspect --sanitize .collections >$(CACHE)/ee-introspect.txt
	grep -q "matplotlib>=3.6  # from collection gpuops.cluster" $(CACHE)/ee-introspect.txt
	grep -q "skopeo  # from collection gpuops.cluster" $(CACHE)/ee-introspect.txt
	! grep -Eq "(pytest|molecule|ruff|ansible-lint).*from collection gpuops.cluster" $(CACHE)/ee-introspect.txt

# The stack variables are declared once, in the preflight role's argument specs; this writes the
# files derived from them (stack_check's spec and docs, preflight's defaults and README table).
stack-spec: venv
	$(BIN)/python tests/scripts/stack_spec.py

# Each role's README variables table, written from its argument_specs.
role-docs: venv
	$(BIN)/python tests/scripts/role_docs.py

sanity: venv
	tests/scripts/sanity.sh

# What Galaxy, Automation Hub and the docsite run on the built collection, with ansible-core and only
# the collections galaxy.yml declares (tests/scripts/galaxy.sh).
galaxy: venv
	tests/scripts/galaxy.sh

# The docsite (guides and every module, filter and role page; Sphinx warnings are errors) in
# .cache/docs/html, and a headless Chromium's pictures of its index and a role page, checked
# (tests/scripts/docs.sh).
docs: venv
	tests/scripts/docs.sh

# The version contract as a user meets it: each supported core's community bundle alone installs the
# built tarball offline and parses site.yml (tests/scripts/install-matrix.sh).
install-matrix: venv
	tests/scripts/install-matrix.sh $(ANSIBLE_BUNDLES)

# ansible-test sanity and the unit tests on the other supported cores (tests/scripts/core-matrix.sh).
core-matrix: venv
	tests/scripts/core-matrix.sh $(ANSIBLE_CORES)

unit: venv
	@tests/scripts/registry-tools.sh
	@echo "==> pytest (unit)"
	@mkdir -p $(CACHE)
	$(BIN)/pytest tests/unit | tee $(CACHE)/unit.log

docker:
	tests/scripts/ensure-docker.sh

# The base image of each platform the scenarios to run need, built side by side (most of a build
# waits on the archive); each build's output is printed when it ends.
image: docker
	@mkdir -p $(CACHE); rc=0; pids=; \
	for distro in $(call distros_of,$(SCENARIOS)); do \
	  MOLECULE_DISTRO=$$distro tests/image/build.sh >$(CACHE)/image-$$distro.log 2>&1 & pids="$$pids $$!:$$distro"; \
	done; \
	for job in $$pids; do \
	  distro=$${job#*:}; if wait $${job%%:*}; then cat $(CACHE)/image-$$distro.log; \
	  else cat $(CACHE)/image-$$distro.log; echo "ERROR: the $$distro base image failed (above)" >&2; rc=1; fi; \
	done; exit $$rc

gpusim-repo: $(GPUSIM_REPO_DIR)/.stamp
$(GPUSIM_REPO_DIR)/.stamp: $(GPUSIM_SOURCES) | venv
	$(BIN)/python tests/gpusim/repo/build.py --out $(GPUSIM_REPO_DIR) --cache $(CACHE)/gpusim
	touch $@

gpusim-profiles: venv
	$(BIN)/python tests/gpusim/assemble.py

# MOLECULE_JOBS scenarios at a time (default 2; 1 prints each log as it goes).
molecule: venv docker $(IMAGE_TARGET) gpusim-repo
	tests/scripts/molecule-all.sh $(SCENARIOS)

# Every scenario on every platform, one result line each (tests/scripts/molecule-all.sh's summary);
# the README's distributions table comes from its log.
test-matrix: venv docker gpusim-repo
	$(MAKE) --no-print-directory image SCENARIOS="$(MATRIX)"
	tests/scripts/molecule-all.sh $(MATRIX)

# The demo cluster: inventories/demo as containers, site.yml applied, a summary printed. The time
# printed includes building what it needs (virtualenv, base image, stand-in repository).
# The demo builds its own platform's base image only (not every platform make test's scenarios use).
DEMO_IMAGE := $(if $(IMAGE_TARGET),$(MAKE) --no-print-directory image SCENARIO=demo@$(MOLECULE_DISTRO),true)
demo:
	@start=$$(date +%s); $(MAKE) --no-print-directory venv docker gpusim-repo; $(DEMO_IMAGE); \
	  tests/scripts/demo.sh up "$$start"

# A benchmark, not a test: brings the demo cluster up first if it is not (make demo), then times
# a no-op run of site.yml on it. BENCH_ARGS passes options (--runs 3, --top 20, --connection FILE).
bench: venv docker gpusim-repo
	@$(DEMO_IMAGE)
	$(BIN)/python bench/run.py --up $(BENCH_ARGS)

# The slurm role over 4, 8 and 16 simulated GPU nodes: a no-op run, one node down, one added with
# --limit (bench/fleet.py; about 30 minutes on 2 cores). BENCH_ARGS: --sizes 4,8 --keep.
bench-fleet: venv docker $(IMAGE_TARGET) gpusim-repo
	$(BIN)/python bench/fleet.py $(BENCH_ARGS)

# What a run does on the controller with a recorded fleet of 1,000 and 10,000 nodes, no Docker
# (bench/fleet_paper.py; about 2 minutes). PAPER_SIZES=100,1000.
PAPER_SIZES ?= 1000,10000
bench-fleet-paper: venv
	$(BIN)/python bench/fleet.py --paper $(PAPER_SIZES)

# The air-gap manifest over fleets of 10, 100 and 1000 declared hosts against a CUDA-sized index
# (bench/bundle.py; seconds). BENCH_ARGS: --hosts 100,500 --stanzas 40000.
bench-bundle: venv
	$(BIN)/python bench/bundle.py $(BENCH_ARGS)

# A month of faults on a simulated fleet through the node state machine (bench/heal.py; seconds).
# BENCH_ARGS: --nodes 10000 --days 90 --interval 60.
bench-heal: venv
	$(BIN)/python bench/heal.py $(BENCH_ARGS)

# A fuzzing campaign, not a test: prints runs, outcomes by exception type and slow inputs.
FUZZ_SECONDS ?= 240
fuzz: venv gpusim-repo
	$(BIN)/python bench/fuzz.py $(FUZZ_SECONDS)

demo-down: venv docker
	tests/scripts/demo.sh down

build: venv
	rm -rf build && mkdir -p build
	ansible-galaxy collection build --output-path build .

clean:
	rm -rf $(VENV) .cache build .pytest_cache .ruff_cache
