# costgate gateway image. Build: docker build -t costgate:0.1.0 .
# The same image runs under docker-compose.yml and the helm chart (deploy/helm/costgate).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY policies ./policies
COPY engine ./engine
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True
COPY --from=build /install /usr/local
# The uid matches the chart's runAsUser; /data holds SQLite and generated files when no
# external database is configured.
RUN useradd --uid 10001 --create-home costgate && mkdir -p /data /etc/costgate && chown costgate /data
USER 10001
WORKDIR /data
EXPOSE 4000
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4000/healthz', timeout=2)"]
ENTRYPOINT ["costgate"]
CMD ["serve", "--config", "/etc/costgate/config.yaml", "--host", "0.0.0.0", "--port", "4000"]
