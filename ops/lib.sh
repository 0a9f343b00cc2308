# ops/lib.sh: shared by ops/test, ops/test-integration and .ci/run (sourced, bash only).
# crp_services_up starts PostgreSQL, Kafka and the Qdrant server unless they already run, and remembers
# which ones it started; crp_services_down stops only those. CRP_TEST_SERVICES=external skips all three:
# the caller then provides CRP_TEST_POSTGRES_URL, CRP_TEST_KAFKA and CRP_TEST_QDRANT itself.

CRP_OPS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CRP_REPO=$(cd "$CRP_OPS/.." && pwd)
CRP_STARTED=()
CRP_SERVICES="postgres kafka qdrant"

crp_services_up() {
    if [[ ${CRP_TEST_SERVICES:-local} == external ]]; then
        echo "services: external (CRP_TEST_SERVICES=external); not starting any" >&2
        return 0
    fi
    local s
    for s in $CRP_SERVICES; do
        if "$CRP_OPS/$s" status >/dev/null 2>&1; then
            echo "services: $s already running; reusing it" >&2
        else
            CRP_STARTED+=("$s")
            if [[ $s == kafka ]]; then
                # with the SASL_SSL listener the tests use; its stdout (the client settings, a password
                # among them) stays out of the logs: the tests read $RUN/secure/client.env
                "$CRP_OPS/$s" start --secure >/dev/null
            else
                "$CRP_OPS/$s" start >&2
            fi
        fi
    done
}

crp_services_down() {
    local s
    for s in "${CRP_STARTED[@]}"; do
        "$CRP_OPS/$s" stop >/dev/null 2>&1 || echo "services: could not stop $s" >&2
    done
    CRP_STARTED=()
}

crp_python() {
    printf '%s' "${CRP_VENV:-$CRP_REPO/.venv}/bin/python"
}
