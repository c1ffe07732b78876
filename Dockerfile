# linserve image. Build stage: the project's own scripts on Debian 12.
# Runtime stage: only the shared libraries the binaries load.
# For now the image runs the engine benchmark; the server replaces it as the
# entry point once it lands.
FROM debian:12 AS build
WORKDIR /src
# Setup first, on its own layer, so that source changes reuse the packages.
COPY scripts/setup scripts/setup
RUN scripts/setup && rm -rf /var/lib/apt/lists/*
COPY . .
RUN LINSERVE_BUILD_DIR=/build scripts/build -DLINSERVE_BUILD_TESTS=OFF

FROM debian:12-slim
# libtorch1.13 brings its own dependencies; OpenBLAS replaces the reference BLAS.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libtorch1.13 libopenblas0-pthread libabsl20220623 libssl3 \
 && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 --no-create-home linserve
COPY --from=build /build/bench/linserve-engine-bench /usr/local/bin/
# OpenBLAS's own threads would spin against LibTorch's OpenMP pool.
ENV OPENBLAS_NUM_THREADS=1
USER linserve
ENTRYPOINT ["/usr/local/bin/linserve-engine-bench"]
