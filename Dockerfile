# stockd container image: one binary, every role; pick it with STOCKD_ROLE or args.
#
#   docker build -t stockd .
#   docker run --rm -e STOCKD__MYSQL__URL=... stockd                  # api (STOCKD_ROLE)
#   docker run --rm -e STOCKD_ROLE=consumer ... stockd                # another role
#   docker run --rm ... stockd migrate                                # a subcommand
#   docker run --rm stockd config print                               # effective config
# A full local stack (Redis, MariaDB, RabbitMQ, every role): deploy/compose.yaml.

# ---- builder ---------------------------------------------------------------------
# Latest stable 1.x: Cargo.toml's rust-version (1.85) is a floor, and dependencies in
# Cargo.lock may need a newer compiler. Pin with --build-arg RUST_VERSION=1.xx.
ARG RUST_VERSION=1
FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /build

# Dependencies first, against stub sources, so this slow layer is rebuilt only when
# Cargo.toml or Cargo.lock change. tests/it/main.rs must exist because Cargo.toml
# declares the `it` test target; it stays a stub (tests are not built here).
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src tests/it \
    && echo 'fn main() {}' > src/main.rs \
    && : > src/lib.rs \
    && : > tests/it/main.rs \
    && cargo build --release --locked --no-default-features \
    && rm -rf src

# The real sources. --no-default-features: the production binary carries no load
# generator (cargo feature `bench`); its `stockd bench` is refused with the reason
# (docs/architecture.md, "The load generator"; tests/it/deploy.rs checks this line).
# sql/ is embedded by include_str! (src/db/migrate.rs).
COPY src ./src
COPY sql ./sql
# COPY keeps the files' old mtimes; touch the crate roots so cargo does not take the
# stub build above for an up-to-date stockd.
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked --no-default-features --bin stockd \
    && ./target/release/stockd --version

# ---- runtime ---------------------------------------------------------------------
FROM debian:bookworm-slim

# ca-certificates: TLS to managed Redis/MySQL/AMQP endpoints. Nothing else: stockd
# links no C libraries beyond glibc.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 stockd \
    && useradd --system --uid 10001 --gid stockd --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin stockd

COPY --from=builder /build/target/release/stockd /usr/local/bin/stockd
COPY config /etc/stockd/config
# Migrations are embedded in the binary; the SQL is shipped for operators to read.
COPY sql /etc/stockd/sql
COPY deploy/docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN chmod 0755 /usr/local/bin/docker-entrypoint.sh

WORKDIR /etc/stockd
# production.yaml binds the api to 0.0.0.0:8080 and logs JSON. Secrets
# (STOCKD__ADMIN__TOKEN, URLs with passwords) come from the orchestrator's env.
ENV STOCKD_CONFIG_DIR=/etc/stockd/config \
    STOCKD_ENV=production \
    STOCKD_ROLE=api
# api HTTP (/v1, /livez, /readyz, /metrics). Non-api roles will serve /metrics on
# metrics.bind (planned, 9091) once that exists; publish it then.
EXPOSE 8080

# No HEALTHCHECK: debian-slim has no curl/wget, and adding one only for this grows
# the image and its attack surface. Orchestrators probe over HTTP themselves
# (Kubernetes httpGet on /livez and /readyz; a load balancer on /readyz).

# Numeric so Kubernetes `runAsNonRoot` can check it without reading /etc/passwd.
USER 10001:10001
# stockd runs as PID 1 (the entrypoint execs it) and handles SIGTERM itself: readiness
# false, HTTP drains for http.shutdown_grace_secs (10 s), the consumer finishes its
# batch. Give containers a stop timeout above that (compose: stop_grace_period: 30s).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
