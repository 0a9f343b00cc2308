# Shortcuts for the scripts under ops/ (each also runs on its own).
.PHONY: setup lint format test test-integration services-start services-stop services-status compose-config ci

setup:            ## .venv with crp-stream[test] (idempotent)
	ops/setup

lint: setup       ## ruff format --check, ruff check, mypy --strict, lint-imports, core coverage >= 95% by the unit tests (what CI runs before the tests)
	.venv/bin/ruff format --check crp_stream tests ops migrations
	.venv/bin/ruff check crp_stream tests ops migrations
	.venv/bin/mypy
	.venv/bin/lint-imports --no-logo
	.venv/bin/coverage run --data-file=.coverage.core --source=crp_stream/core -m pytest -q -x -p no:cacheprovider tests/unit -m "not postgres and not kafka and not qdrant and not heavy"
	.venv/bin/coverage report --data-file=.coverage.core --fail-under=95 --skip-covered

format: setup     ## apply ruff's formatting and safe fixes
	.venv/bin/ruff format crp_stream tests ops migrations
	.venv/bin/ruff check --fix crp_stream tests ops migrations

test: setup       ## the whole suite against real PostgreSQL, Kafka and Qdrant (started if needed)
	ops/test -q

test-integration: setup  ## only the postgres/kafka/qdrant tests; fails on any skip
	ops/test-integration

services-start:
	ops/postgres start
	ops/kafka start
	ops/qdrant start

services-stop:
	-ops/qdrant stop
	-ops/kafka stop
	-ops/postgres stop

services-status:
	-ops/postgres status
	-ops/kafka status
	-ops/qdrant status

compose-config:   ## validate compose/docker-compose.yml (needs Debian's docker-compose)
	docker-compose -f compose/docker-compose.yml config >/dev/null && echo "compose: ok"

ci:               ## what CI runs
	CI=true bash .ci/run
