# One image for every process of docker-compose.yml: web (uvicorn), worker and beat (Celery).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MCPHOST_VAR_DIR=/var/lib/mcphost
# uvicorn's supervisor of its worker processes logs in LOG_FORMAT too (docs/operations.md).
ENV UVICORN_LOG_CONFIG=/app/mcpsite/uvicorn_logging.json

WORKDIR /app

# Dependencies before the code, so this layer is rebuilt only when the lock file changes.
COPY requirements.lock ./
RUN pip install --no-cache-dir -r requirements.lock

COPY . .

# Never run the server as root; the var dir holds nothing important when SECRET_KEY is set.
# A fixed uid and gid (10001), so Kubernetes can check runAsNonRoot (deploy/kubernetes/).
RUN groupadd --system --gid 10001 mcphost \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/mcphost \
        --shell /usr/sbin/nologin mcphost \
    && mkdir -p /var/lib/mcphost/beat /var/lib/mcphost/media \
    && chown -R mcphost /var/lib/mcphost
USER 10001:10001

EXPOSE 8000
CMD ["uvicorn", "mcpsite.asgi:application", "--host", "0.0.0.0", "--port", "8000", \
     "--loop", "uvloop", "--http", "httptools", "--lifespan", "on", "--no-access-log", \
     "--timeout-graceful-shutdown", "10"]
