# jobrunner images, all from Debian 12 packages:
#   sdk      the build tools, jobrunner's headers and pkg-config file: build
#            your own job plugins FROM it (docs/examples/plugin/Dockerfile)
#   runtime  jobrunner + the bundled job plugins (worker, scheduler, CLI); it
#            also loads every plugin in /opt/jobrunner/plugins (a volume, or
#            COPY your .so files there in an image built FROM this one)
#   redis    redis-server 7 with AOF on, noeviction and a password (and TLS
#            with REDIS_TLS_DIR, a cluster node with REDIS_CLUSTER=1: config/redis-start;
#            config/redis-cluster-create makes the cluster of docker-compose.cluster.yml)
#   certs    openssl: the one-shot service of docker-compose.tls.yml that
#            makes the CA and certificates of the TLS variant (config/tls-certs)
FROM debian:bookworm-slim AS sdk
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        gcc libc6-dev make cmake pkg-config libhiredis-dev libyaml-dev libjansson-dev libmicrohttpd-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY runner runner
COPY jobs jobs
COPY config config
COPY docs/jobrunner.1 docs/jobrunner.1
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DJR_TESTS=OFF -DJR_BENCH=OFF -DJR_WERROR=ON \
    && cmake --build /build -j"$(nproc)" \
    && cmake --install /build --prefix /opt/jobrunner \
    && rm -rf /build
ENV PKG_CONFIG_PATH=/opt/jobrunner/lib/pkgconfig PATH=/opt/jobrunner/bin:$PATH
WORKDIR /plugin

FROM debian:bookworm-slim AS runtime
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libhiredis0.14 libyaml-0-2 libjansson4 libmicrohttpd12 libssl3 ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --no-create-home jobrunner \
    && mkdir -p /opt/jobrunner/plugins
COPY --from=sdk /opt/jobrunner/bin /opt/jobrunner/bin
COPY --from=sdk /opt/jobrunner/lib/jobrunner /opt/jobrunner/lib/jobrunner
COPY config/jobrunner.yaml /etc/jobrunner/jobrunner.yaml
COPY config/container.yaml /etc/jobrunner/container.yaml
COPY config/healthcheck /opt/jobrunner/bin/jobrunner-healthcheck
ENV PATH=/opt/jobrunner/bin:$PATH
USER jobrunner
# Exec form: signals reach jobrunner itself (graceful shutdown on SIGTERM).
ENTRYPOINT ["jobrunner"]
CMD ["worker", "-c", "/etc/jobrunner/container.yaml"]

FROM debian:bookworm-slim AS redis
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* && mkdir -p /data && chown redis:redis /data
COPY config/redis-start /usr/local/bin/jobrunner-redis
COPY config/redis-cluster-create /usr/local/bin/jobrunner-redis-cluster-create
USER redis
# The password comes from REDIS_PASSWORD (see .env); never baked into the image.
CMD ["jobrunner-redis"]

FROM debian:bookworm-slim AS certs
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openssl \
    && rm -rf /var/lib/apt/lists/*
# The owners of the keys: user redis of the redis image, jobrunner of runtime.
COPY --from=redis /etc/passwd /usr/share/jobrunner-certs/passwd.redis
COPY --from=runtime /etc/passwd /usr/share/jobrunner-certs/passwd.runtime
COPY config/tls-certs /usr/local/bin/jobrunner-tls-certs
CMD ["jobrunner-tls-certs", "/tls", "/tls-ca"]
