# linserve image: the gRPC server and its OpenAI-compatible HTTP API with the
# shipped default model.
#
#   docker build -t linserve .
#   docker run -p 50051:50051 -p 8080:8080 -p 127.0.0.1:9464:9464 \
#     -v linserve-sessions:/var/lib/linserve linserve
#
# Arguments after the image name are more server flags (`linserve --help`);
# a later flag overrides the entry point's. tests/docker builds this file and
# runs the image without a Docker engine.

# Build stage: the project's own setup and build scripts on Debian 12, so the
# image is built exactly as a developer's checkout is.
FROM debian:12 AS build
# Where the sources are built. tests/docker passes the checkout's own path:
# a precompiled header records the absolute paths it was made at, so only at
# the checkout's path do the build's precompiled headers, and every unit that
# loads one, come from the compiler cache the checkout's build filled.
ARG LINSERVE_SRC_DIR=/src
WORKDIR ${LINSERVE_SRC_DIR}
# A UTF-8 locale as on a developer's machine. ccache keys on the locale, so
# with it the build below can reuse objects a checkout's build compiled.
ENV LANG=C.UTF-8
# Setup on its own layer: source changes reuse the installed packages. Only
# what the build needs: the test tools (sanitizers, Redis, nginx, podman...)
# would double the stage's install time.
COPY scripts/setup scripts/setup
# The base may keep every downloaded .deb (debootstrap's does; the official
# images' docker-clean hook deletes them): apt-get clean drops ~1.5 GB.
RUN scripts/setup --build-only && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY . .
# The build directory sits under the sources so that the compiler cache stores
# paths relative to them, like any other checkout's; the cache is a build-time
# mount, never part of an image.
RUN --mount=type=cache,id=linserve-ccache,target=/root/.cache/ccache \
    LINSERVE_BUILD_DIR=${LINSERVE_SRC_DIR}/build scripts/build \
      -DLINSERVE_BUILD_TESTS=OFF -DLINSERVE_BUILD_BENCH=OFF

# Runtime stage: the shared libraries the binaries load (ldd on them,
# dpkg -S on the libraries), no compiler, no headers.
FROM debian:12-slim
ARG LINSERVE_SRC_DIR=/src
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libtorch1.13 libopenblas0-pthread libgrpc++1.51 libprotobuf32 libabsl20220623 \
      libssl3 libhiredis0.14 libprometheus-cpp-core1.0 libcpp-httplib0.11 \
      libpcre2-8-0 libutf8proc2 \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
# LibTorch links libblas.so.3: make OpenBLAS back it, not the ~20x slower
# reference BLAS that apt may also have installed.
RUN alt=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu | grep openblas | head -n1) \
 && update-alternatives --set libblas.so.3-x86_64-linux-gnu "$alt"

COPY --from=build ${LINSERVE_SRC_DIR}/build/server/linserve \
     ${LINSERVE_SRC_DIR}/build/client/linserve-client \
     ${LINSERVE_SRC_DIR}/build/tools/quantize/linserve-quantize /usr/local/bin/
COPY --from=build ${LINSERVE_SRC_DIR}/models/default /usr/local/share/linserve/models/default
# Fail the build, not the first start, when a library is missing.
RUN for b in /usr/local/bin/linserve /usr/local/bin/linserve-client \
             /usr/local/bin/linserve-quantize; do \
      if ldd "$b" | grep 'not found'; then echo "$b: missing libraries" >&2; exit 1; fi; \
    done

# The session store is the only state: a volume owned by an unprivileged user.
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/linserve \
      --no-create-home --shell /usr/sbin/nologin linserve \
 && mkdir -p /var/lib/linserve/sessions \
 && chown -R linserve:linserve /var/lib/linserve
VOLUME /var/lib/linserve
WORKDIR /var/lib/linserve
USER linserve

# OpenBLAS's own threads would spin against LibTorch's OpenMP pool.
ENV OPENBLAS_NUM_THREADS=1
# gRPC, the HTTP API (/v1/..., /health), GET /health alone on a listener
# API clients cannot fill (for probes) and Prometheus /metrics. /metrics is
# plain HTTP without tenants (server/README.md): publish 9464 to the
# scraper's network only.
EXPOSE 50051 8080 8081 9464
# SERVING once the model is loaded; NOT_SERVING from the moment SIGTERM
# starts the drain.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/linserve-client", "health", "--server=127.0.0.1:50051", "--timeout_seconds=5"]
# linserve is PID 1 itself (no shell): SIGTERM drains running streams for up
# to --shutdown_grace_seconds (30 s by default) and exits 0; give `docker stop`
# a longer --time than that, or pass a shorter grace.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/linserve", \
            "--model=/usr/local/share/linserve/models/default", \
            "--listen=0.0.0.0:50051", \
            "--http_listen=0.0.0.0:8080", \
            "--health_listen=0.0.0.0:8081", \
            "--metrics_host=0.0.0.0", "--metrics_port=9464", \
            "--store_dir=/var/lib/linserve/sessions"]
