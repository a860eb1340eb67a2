# shortlink's tasks. `just` is a convenience: every recipe is a plain cargo command.

_default:
    @just --list

# Serve on the embedded SQLite database (sqlite://shortlink.db), or pass flags: just run --listen 0.0.0.0:8080
run *ARGS:
    cargo run --release -p shortlink-server -- {{ARGS}}

# Run every test, or one crate's: just test storage (PostgreSQL tests run when TEST_POSTGRES_URL is set)
test CRATE="":
    #!/usr/bin/env bash
    set -euo pipefail
    if [ -z "{{CRATE}}" ]; then cargo test --workspace; \
    elif [ "{{CRATE}}" = "shortlink" ] || [ "{{CRATE}}" = "server" ]; then cargo test -p shortlink-server; \
    else cargo test -p "shortlink-{{CRATE}}"; fi

# Formatting check and clippy with warnings as errors
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Redirect and creation throughput against a bare actix-web baseline, and the QR renderer's benchmark
bench:
    cargo build --release -p shortlink-server -p shortlink-bench
    ./target/release/shortlink-bench
    cargo bench -p shortlink-qr -- --warm-up-time 1 --measurement-time 3

# The dashboard in Chromium (Playwright and axe-core, as CI installs them): just e2e -k webhook
e2e *ARGS:
    cargo build -p shortlink-server
    cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error
    SHORTLINK_BIN=target/debug/shortlink target/ci-venv/bin/pytest tests/e2e -q {{ARGS}}

# What CI runs
ci:
    bash .ci/run
