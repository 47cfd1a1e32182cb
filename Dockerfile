# jobrunner images, all from Debian 12 packages:
#   runtime  jobrunner + the job plugins (worker, scheduler, CLI)
#   redis    redis-server 7 with AOF on and noeviction (see docker-compose.yml)
FROM debian:bookworm-slim AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        gcc libc6-dev make cmake pkg-config libhiredis-dev libyaml-dev libjansson-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY runner runner
COPY jobs jobs
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DJR_TESTS=OFF -DJR_BENCH=OFF -DJR_WERROR=ON \
    && cmake --build /build -j"$(nproc)" \
    && cmake --install /build --prefix /opt/jobrunner

FROM debian:bookworm-slim AS runtime
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libhiredis0.14 libyaml-0-2 libjansson4 tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --no-create-home jobrunner
COPY --from=build /opt/jobrunner /opt/jobrunner
COPY config/jobrunner.yaml /etc/jobrunner/jobrunner.yaml
ENV PATH=/opt/jobrunner/bin:$PATH
USER jobrunner
# Exec form: signals reach jobrunner itself (graceful shutdown on SIGTERM).
ENTRYPOINT ["jobrunner"]
CMD ["worker", "-c", "/etc/jobrunner/jobrunner.yaml"]

FROM debian:bookworm-slim AS redis
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* && mkdir -p /data && chown redis:redis /data
USER redis
CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/data", \
     "--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction"]
