# stockd developer / CI entry points. Services (Redis, MariaDB, RabbitMQ) are
# managed by scripts/services.sh without systemd.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

CARGO        ?= cargo
TEST_THREADS ?= 4
STOCKD       := ./target/release/stockd
BENCH        := ./target/release/stockd-bench

.PHONY: help services run test test-cluster lint check bench demo clean-test-data fuzz chaos image test-image

help:
	@echo "targets: services run test test-cluster lint check bench demo clean-test-data fuzz chaos image test-image"
	@echo "  test uses TEST_THREADS=$(TEST_THREADS) (override: make test TEST_THREADS=8)"

services:
	scripts/services.sh up

# As the least-privilege users of scripts/services.sh: the migration user
# applies the schema, every role runs as the runtime users (`services.sh env`).
run: services
	$(CARGO) build --release
	env STOCKD_ENV=local $$(scripts/services.sh env migrate) $(STOCKD) migrate
	env STOCKD_ENV=local $$(scripts/services.sh env runtime) $(STOCKD) --role all

test: services
	$(CARGO) test --workspace --all-targets -- --test-threads=$(TEST_THREADS)

# The integration suite against the local clusters (scripts/services.sh
# cluster): a 6-node Redis Cluster and a 3-node RabbitMQ cluster on private
# loopback ports. Tests read the STOCKD__REDIS__MODE/URLS and STOCKD__AMQP__URLS
# lines `cluster env` prints; tests on a private server stay standalone.
test-cluster: services
	scripts/services.sh cluster up
	env $$(scripts/services.sh cluster env 2>/dev/null) \
		$(CARGO) test --test it -- --test-threads=$(TEST_THREADS)

# The whole workspace: the product and the load generator (bench/).
lint:
	$(CARGO) fmt --all --check && $(CARGO) clippy --workspace --all-targets -- -D warnings

check: lint test

# The load generator is the workspace's `stockd-bench` (bench/); it starts the
# `stockd` beside it, so both are built (docs/architecture.md, "The load generator").
# Then the instruction counts (scripts/bench-instructions.sh, ~4 minutes under
# callgrind), then `stockd-bench report`: keeps both results in docs/bench/ and
# rewrites BENCHMARKS.md's generated block from them (commit those files).
bench: services
	$(CARGO) build --release --workspace && $(BENCH)
	scripts/bench-instructions.sh
	$(BENCH) report

demo: services
	$(CARGO) build --release --workspace && $(BENCH) --demo

clean-test-data:
	scripts/clean-test-data.sh

# Fuzz the HTTP API with schemathesis (pinned and installed by
# scripts/test-tools.sh) against a fresh in-process api: the same test as in
# `make test` (tests/it/openapi.rs), with FUZZ_EXAMPLES test cases per operation
# and phase instead of 30. Generation stays deterministic; to explore, also set
# STOCKD_FUZZ_SEED=<n> (a failing run prints its seed), and STOCKD_FUZZ_CHECKS=all
# to add schemathesis' stricter checks to the four the test requires.
FUZZ_EXAMPLES ?= 500

fuzz: services
	STOCKD_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(CARGO) test --test it openapi::schemathesis -- --nocapture

# The fault suite (tests/chaos, docs/chaos.md): private redis-server, mariadbd
# and RabbitMQ nodes on free loopback ports, stockd roles as processes, one
# injected fault per scenario, an audit at the end. Replay with CHAOS_SEED=<n>.
# s18-s22 (network partitions) need root: private network namespaces and
# nftables rules inside them (scripts/net-tools.sh installs iproute2/nftables).
# .ci/run runs it after `make test`.
chaos: services
	$(CARGO) test --test chaos -- --ignored --test-threads=1 --nocapture

# The container image (Dockerfile; docs/operations.md, "Containers and
# Kubernetes"). The binary is built here, on the host, and copied in by the
# Dockerfile's `runtime` target: no registry is reachable for a rust image, and
# the host's toolchain and cargo cache make a rebuild take seconds. The product
# alone (`-p stockd`), in its own target dir: the path the Dockerfile copies. scripts/image-base.sh makes debian:bookworm-slim from
# Debian's packages when it cannot be pulled. ENGINE=docker where a Docker
# engine runs (it keeps HEALTHCHECK by default; podman needs --format docker).
IMAGE  ?= stockd:local
ENGINE ?= podman

image:
ifeq ($(ENGINE),podman)
	scripts/container-tools.sh engine
	scripts/image-base.sh
endif
	CARGO_TARGET_DIR=target/image $(CARGO) build --release --locked -p stockd --bin stockd
ifeq ($(ENGINE),podman)
	CONTAINERS_CONF=$(CURDIR)/scripts/lib/podman-containers.conf \
		podman build --format docker --network host --target runtime -t $(IMAGE) .
else
	$(ENGINE) build --target runtime -t $(IMAGE) .
endif
	@$(ENGINE) image inspect --format 'image $(IMAGE): {{.Size}} bytes' $(IMAGE)

# The image run for real against the shared services (scripts/test-image.sh:
# every role, a store outage at start-up, drain under load, podman kube play of
# the Kubernetes manifests). Removes every container it made, also on failure.
test-image: services image
	IMAGE=$(IMAGE) scripts/test-image.sh
