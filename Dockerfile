# One image for every Wakeline service; docker-compose.yml picks the module to run.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY libs libs
COPY services services
COPY deploy deploy
RUN pip install --no-cache-dir .
CMD ["python", "-m", "wakeline_gateway"]
