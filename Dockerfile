# Multi-arch as it stands: the base image and every dependency (psycopg's binary wheel
# included) exist for linux/amd64 and linux/arm64, so `make image-push` needs no
# compiler or emulated build step beyond what buildx does.
FROM python:3.11-slim

LABEL org.opencontainers.image.title="runpod-reconciler" \
      org.opencontainers.image.description="Burst Kubernetes GPU pods onto RunPod" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    RECONCILER_DATABASE_URL=sqlite:////var/lib/reconciler/reconciler.db

RUN useradd --system --uid 10001 --home-dir /var/lib/reconciler --create-home reconciler

WORKDIR /src
COPY pyproject.toml README.md ./
COPY reconciler ./reconciler
COPY migrations ./migrations
# With the PostgreSQL driver, so that one image serves SQLite and replicas alike. The
# kubernetes client ships an asyncio twin of itself (kubernetes.aio, about 70 MB with its
# bytecode, 40 % of these layers) that the reconciler never imports: it goes.
RUN pip install '.[postgres]' \
 && rm -rf /src "$(python -c 'import kubernetes, os; print(os.path.dirname(kubernetes.__file__))')/aio"

USER 10001
WORKDIR /var/lib/reconciler
VOLUME ["/var/lib/reconciler"]
EXPOSE 8080

ENTRYPOINT ["reconciler"]
CMD ["sync"]
