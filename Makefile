# Shortcuts for the scripts under ops/ (each also runs on its own).
.PHONY: setup test test-integration services-start services-stop services-status compose-config ci

setup:            ## .venv with crp-stream[test] (idempotent)
	ops/setup

test: setup       ## the whole suite against real PostgreSQL and Kafka (started if needed)
	ops/test -q

test-integration: setup  ## only the postgres/kafka tests; fails on any skip
	ops/test-integration

services-start:
	ops/postgres start
	ops/kafka start

services-stop:
	-ops/kafka stop
	-ops/postgres stop

services-status:
	-ops/postgres status
	-ops/kafka status

compose-config:   ## validate compose/docker-compose.yml (needs Debian's docker-compose)
	docker-compose -f compose/docker-compose.yml config >/dev/null && echo "compose: ok"

ci:               ## what CI runs
	CI=true bash .ci/run
