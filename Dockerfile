# Multi-arch as it stands: the base image and every dependency (psycopg's binary wheel
# included) exist for linux/amd64 and linux/arm64, so `make image-push` needs no
# compiler or emulated build step beyond what buildx does.
#
# Two stages from the same base (pin both to one digest if you pin): the first installs
# the reconciler into a virtual environment and trims it, the second copies only that
# environment, so nothing of the build (the source, binutils, pip's caches) is in the
# image. tests/image/test_hygiene.py holds what the image adds to the base under 100 MB.
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# `strip`, for this stage only.
RUN apt-get update \
 && apt-get install --yes --no-install-recommends binutils \
 && rm -rf /var/lib/apt/lists/*

# Without pip, setuptools or wheel: the base image's pip installs into it.
RUN python -m venv --without-pip /opt/reconciler

WORKDIR /src
COPY pyproject.toml README.md ./
COPY reconciler ./reconciler
COPY migrations ./migrations
# With the PostgreSQL driver, so that one image serves SQLite and replicas alike.
RUN pip --python /opt/reconciler/bin/python install --no-compile '.[postgres]'

# What the reconciler never runs goes, roughly halving the environment:
# - kubernetes.aio, the client's asyncio twin (about 70 MB with its bytecode);
# - the libraries' own tests and test suites, type stubs, and the RECORD lists of
#   installed files (which the removals below would make untrue);
# - the symbol tables of the compiled extensions (strip, as Debian does its packages;
#   already-stripped libraries, vendored ones among them, are left as they are);
# - the libraries' Python source: their bytecode is compiled next to where the source
#   was (`compileall -b`), which Python imports without the source. Their tracebacks
#   keep file, line and function but lose the line's text. The reconciler's own source
#   stays (its tracebacks are whole, and Alembic reads its migrations as .py files),
#   with bytecode that never checks the source's time (the image's files never change).
#   Compiled by absolute path: bytecode without source names the file it was compiled
#   from in its tracebacks.
WORKDIR /opt/reconciler/lib/python3.11/site-packages
RUN set -eu \
 && rm -rf kubernetes/aio \
 && find . -type d \( -name tests -o -name testing \) -prune -exec rm -rf {} + \
 && find . -type f \( -name '*_test.py' -o -name 'test_*.py' -o -name '*.pyi' \
      -o -path '*.dist-info/RECORD' \) -delete \
 && for so in $(find . -type f -name '*.so*'); do \
      if readelf --sections "$so" | grep -q '\.symtab'; then strip --strip-unneeded "$so"; fi; \
    done \
 && /opt/reconciler/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash "$PWD/reconciler" \
 && /opt/reconciler/bin/python -m compileall -q -j 0 -b -x '/site-packages/reconciler/' "$PWD" \
 && find . -path ./reconciler -prune -o -type d -name __pycache__ -prune -exec rm -rf {} + \
 && find . -path ./reconciler -prune -o -type f -name '*.py' -exec rm {} +


FROM python:3.11-slim

LABEL org.opencontainers.image.title="runpod-reconciler" \
      org.opencontainers.image.description="Burst Kubernetes GPU pods onto RunPod" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PATH=/opt/reconciler/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    RECONCILER_DATABASE_URL=sqlite:////var/lib/reconciler/reconciler.db

RUN useradd --system --uid 10001 --home-dir /var/lib/reconciler --create-home reconciler

COPY --from=build /opt/reconciler /opt/reconciler

USER 10001
WORKDIR /var/lib/reconciler
VOLUME ["/var/lib/reconciler"]
EXPOSE 8080

ENTRYPOINT ["reconciler"]
CMD ["sync"]
