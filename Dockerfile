# stockd container image: one binary, every role; pick it with STOCKD_ROLE or args.
#
#   make image                                   # here: host binary + --target runtime
#   docker build -t stockd .                     # elsewhere: compiled in the builder stage
#   docker run --rm -e STOCKD__MYSQL__URL=... stockd                  # api (STOCKD_ROLE)
#   docker run --rm -e STOCKD_ROLE=consumer ... stockd                # another role
#   docker run --rm ... stockd migrate                                # a subcommand
#   docker run --rm stockd config print                               # effective config
# Kubernetes manifests: deploy/kubernetes (docs/operations.md, "Containers and Kubernetes").
#
# Two ways to build, one runtime:
#   - `--target full` (the default, the last stage): compiles stockd in `builder`
#     from rust:*-bookworm. For machines that reach a registry.
#   - `--target runtime`: copies a binary built on the host
#     (`cargo build --release -p stockd --bin stockd` with
#     CARGO_TARGET_DIR=target/image, what `make image` runs). For this project's
#     machines: no registry is reachable, so there is no rust image, and the one
#     Rust toolchain is the host's (rustup cannot fetch another into an image).
#     The host is Debian bookworm, the runtime's base too, so the binary links the
#     same glibc. It also reuses the host's cargo cache: a rebuild takes seconds
#     (a warm `make image`: 10 s) instead of a cold release build inside the image.
#   scripts/image-base.sh builds the runtime's debian:bookworm-slim from Debian's
#   packages (debootstrap + import) where it cannot be pulled.

# ---- builder ---------------------------------------------------------------------
# Latest stable 1.x: Cargo.toml's rust-version (1.85) is a floor, and dependencies in
# Cargo.lock may need a newer compiler. Pin with --build-arg RUST_VERSION=1.xx.
ARG RUST_VERSION=1
FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /build

# Dependencies first, against stub sources, so this slow layer is rebuilt only when
# a manifest or Cargo.lock change. tests/it/main.rs must exist because Cargo.toml
# declares the `it` test target; it stays a stub (tests are not built here). The
# load generator's manifest and stub sources only complete the workspace (bench/,
# a member and the product's dev-dependency): `-p stockd` never builds it.
COPY Cargo.toml Cargo.lock ./
COPY bench/Cargo.toml ./bench/
RUN mkdir -p src tests/it bench/src \
    && echo 'fn main() {}' > src/main.rs \
    && : > src/lib.rs \
    && : > tests/it/main.rs \
    && echo 'fn main() {}' > bench/src/main.rs \
    && : > bench/src/lib.rs \
    && cargo build --release --locked -p stockd \
    && rm -rf src

# The real sources. `-p stockd --bin stockd`: the product alone, never the load
# generator (`stockd-bench`, docs/architecture.md, "The load generator";
# tests/it/deploy.rs checks this line). sql/ is embedded by include_str!
# (src/db/migrate.rs).
COPY src ./src
COPY sql ./sql
# COPY keeps the files' old mtimes; touch the crate roots so cargo does not take the
# stub build above for an up-to-date stockd.
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked -p stockd --bin stockd \
    && ./target/release/stockd --version

# ---- base: everything of the runtime but the binary ------------------------------
FROM debian:bookworm-slim AS base

# ca-certificates: TLS to managed Redis/MySQL/AMQP endpoints. Nothing else: stockd
# links no C libraries beyond glibc.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 stockd \
    && useradd --system --uid 10001 --gid stockd --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin stockd

COPY config /etc/stockd/config
# Migrations are embedded in the binary; the SQL is shipped for operators to read.
COPY sql /etc/stockd/sql
COPY deploy/docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
COPY deploy/healthcheck.sh /usr/local/bin/healthcheck.sh
RUN chmod 0755 /usr/local/bin/docker-entrypoint.sh /usr/local/bin/healthcheck.sh

WORKDIR /etc/stockd
# production.yaml binds the api to 0.0.0.0:8080 and logs JSON. Secrets come from
# the orchestrator: files named by STOCKD__…_FILE (Kubernetes Secrets mounted
# read-only) or STOCKD__ADMIN__TOKEN and URLs with passwords in the environment.
ENV STOCKD_CONFIG_DIR=/etc/stockd/config \
    STOCKD_ENV=production \
    STOCKD_ROLE=api
# api HTTP (/v1, /livez, /readyz), admin listener (admin.bind: admin routes and
# /metrics; production.yaml keeps it on loopback, set STOCKD__ADMIN__BIND=0.0.0.0:8081
# to publish it), the other roles' /metrics, /livez, /readyz (metrics.bind).
EXPOSE 8080 8081 9091

# /readyz of the role's own probe port over bash's /dev/tcp (the image has no curl;
# adding one only for this would grow the image and its attack surface). The OCI
# image format has no HEALTHCHECK: podman keeps it with --format docker (make image).
# start-period: a role waiting for its stores answers 503 "starting" meanwhile.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/healthcheck.sh"]

# Numeric so Kubernetes `runAsNonRoot` can check it without reading /etc/passwd.
USER 10001:10001
# stockd runs as PID 1 (the entrypoint execs it) and handles SIGTERM itself: readiness
# false, HTTP drains for http.shutdown_grace_secs (10 s), the consumer finishes its
# batch. Give containers a stop timeout above that (podman/docker stop -t 30;
# Kubernetes: terminationGracePeriodSeconds in deploy/kubernetes).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]

# ---- runtime: the host's binary (make image) --------------------------------------
FROM base AS runtime
COPY target/image/release/stockd /usr/local/bin/stockd

# ---- full: the builder's binary (the default target) -------------------------------
FROM base AS full
COPY --from=builder /build/target/release/stockd /usr/local/bin/stockd
