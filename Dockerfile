# One image for every Wakeline service: a thin wrapper around the wheel, built in the
# first stage and installed in the second (no checkout in the image). The migrations and
# the scripted model's policies are package data in that wheel. docker-compose.yml picks
# the command: `wakeline-brain`, `wakeline-runner`, `wakeline-archiver`, `wakeline-gateway`,
# `wakeline migrate|topics|acls` (or the equivalent `python -m ...`).
FROM python:3.11-slim AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY libs libs
COPY services services
# The `wakeline` command's client: a package of its own, which the project depends on.
COPY clients/python clients/python
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . clients/python

FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap && rm -rf /var/lib/apt/lists/*
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
WORKDIR /app
CMD ["wakeline-gateway"]
