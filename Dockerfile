# inbox-receiver as a sidecar container. Debian packages only. From the
# checkout root (docs/receiver/deployment.md, "Docker"):
#   docker build -t inbox-receiver .
#   docker run --rm -p 8080:8080 \
#     -v "$PWD/examples/github-only.toml:/etc/inbox-receiver/receiver.toml:ro" \
#     -e INBOX_DATABASE_URL=postgresql://... -e GITHUB_WEBHOOK_SECRET=... inbox-receiver

FROM debian:12 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config \
      libcpp-httplib-dev libssl-dev libpq-dev libtomlplusplus-dev libsimdjson-dev libboost1.81-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY receiver/ receiver/
# The tests need a database; `make test` runs them. Only the binary here.
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DINBOX_RECEIVER_TESTS=OFF \
 && cmake --build build -j"$(nproc)" \
 && strip build/inbox-receiver

FROM debian:12-slim
# Runtime libraries of the -dev packages above (Debian 12 names).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcpp-httplib0.11 libssl3 libpq5 libtomlplusplus3 libsimdjson14 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home --shell /usr/sbin/nologin inbox
COPY --from=build /src/build/inbox-receiver /usr/local/bin/inbox-receiver
COPY examples/ /usr/share/doc/inbox-receiver/examples/
USER inbox
EXPOSE 8080
# SIGTERM: stop accepting, answer in-flight requests ([http] drain_ms), exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/inbox-receiver"]
CMD ["serve", "--config", "/etc/inbox-receiver/receiver.toml"]
