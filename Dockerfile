# Railyard: the daemon and every bundled plugin, in a small non-root runtime image whose compiled
# plugin cache is baked in (a JavaScript or Python plugin loads in milliseconds, not 30 s).
#
#   podman build -t railyard .            (or docker build)
#   deploy/secrets.sh                     (API key + provenance keyring, once)
#   podman run --rm -p 8080:8080 -v "$PWD/deploy/base/secrets:/etc/railyard/keys:ro,U" \
#       railyard serve --config /etc/railyard/config/railyard.toml --backend http://HOST:8000/v1
#
# The config is deploy/base/railyard.toml (the Kubernetes ConfigMap replaces it).
# `--build-arg ARTIFACTS=prebuilt` packs a daemon and plugins built outside instead (a context
# holding railyard, plugins/ and deploy/; scripts/container-smoke.sh uses it in CI).
ARG ARTIFACTS=source

# --- source: the host (release) and the plugins (Rust for wasm32-wasip2, JavaScript, Python) ---
FROM docker.io/library/rust:1.95-bookworm AS source
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates nodejs npm python3-venv \
    && rm -rf /var/lib/apt/lists/*
# npm and pip trust the system's CAs too (a proxy's CA added to the build machine's store).
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt
RUN rustup target add wasm32-wasip2
WORKDIR /src
# componentize-py only (the SDKs in scripts/requirements.txt are for the tests).
COPY scripts/requirements.txt scripts/requirements.txt
RUN python3 -m venv .venv \
    && .venv/bin/pip install --quiet "$(grep '^componentize-py==' scripts/requirements.txt)"
COPY . .
# host/build.rs builds the plugins into target/plugins. The daemon is built profile-guided
# (scripts/pgo-build.sh: an instrumented build run on a training mix of traffic, then the release
# build with that profile; about twice the build time, 2-9 % less CPU per request, BENCHMARKS.md
# §26); `--build-arg PGO=0` builds it plainly (release profile: LTO).
ARG PGO=1
RUN mkdir -p /out/plugins \
    && if [ "$PGO" = 1 ]; then scripts/pgo-build.sh /out/railyard; \
       else cargo build --release --locked -p railyard && cp target/release/railyard /out/railyard; fi
RUN cd target/plugins/wasm32-wasip2/release \
    && cp allowlist.wasm flow.wasm llama31_compat.wasm normalise.wasm pii_filter.wasm \
          schema_validator.wasm text_tool_calls.wasm tool_linkage.wasm /out/plugins/ \
    && cp /src/target/plugins/components/prompt-guard.wasm \
          /src/target/plugins/components/tool-limits.wasm /out/plugins/

# --- prebuilt: the same, built outside ---
FROM scratch AS prebuilt
COPY railyard /out/railyard
COPY plugins /out/plugins

FROM ${ARTIFACTS} AS artifacts

# --- runtime ---
FROM docker.io/library/debian:bookworm-slim
# CA certificates: hosted backends and MCP servers are reached over https.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 railyard \
    && useradd --system --uid 10001 --gid railyard --home-dir /nonexistent --shell /usr/sbin/nologin railyard
COPY --from=artifacts /out/railyard /usr/local/bin/railyard
COPY --from=artifacts /out/plugins /opt/railyard/plugins
COPY deploy/base/railyard.toml /etc/railyard/config/railyard.toml
COPY deploy/secrets.sh /tmp/secrets.sh
ENV RAILYARD_CACHE_DIR=/var/cache/railyard
# Precompile every plugin into the cache, with the config the image ships (it names the keys the
# runtime gets mounted: throwaway ones here) plus tool-limits, which that config does not load.
RUN /tmp/secrets.sh build /etc/railyard/keys >/dev/null \
    && railyard plugins --config /etc/railyard/config/railyard.toml >/dev/null \
    && printf '[[plugins]]\nname = "tool-limits"\npath = "/opt/railyard/plugins/tool-limits.wasm"\nrails = []\n[plugins.config.tools.t]\nrules = [{ argument = "a", max = { "*" = 1 } }]\n' >/tmp/tl.toml \
    && railyard plugins --config /tmp/tl.toml >/dev/null \
    && rm -rf /etc/railyard/keys /tmp/secrets.sh /tmp/tl.toml /var/cache/railyard/.live-* \
    && chmod -R a+rX /var/cache/railyard
USER 10001:10001
EXPOSE 8080 8081 8090
ENTRYPOINT ["/usr/local/bin/railyard"]
CMD ["serve", "--config", "/etc/railyard/config/railyard.toml", "--log-format", "json"]
