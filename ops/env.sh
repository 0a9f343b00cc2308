# ops/env.sh: the addresses of the local test services (ops/postgres, ops/kafka, ops/qdrant) for the test suite.
#   . ops/env.sh          exports CRP_TEST_POSTGRES_URL, CRP_TEST_KAFKA and CRP_TEST_QDRANT into this shell
#   ops/env.sh            prints them as export lines:  eval "$(ops/env.sh)"
# Values already set in the environment win; the ports follow CRP_PG_PORT, CRP_KAFKA_PORT and CRP_QDRANT_PORT.
CRP_TEST_POSTGRES_URL=${CRP_TEST_POSTGRES_URL:-postgresql+psycopg://postgres@127.0.0.1:${CRP_PG_PORT:-55432}/crp_test}
CRP_TEST_KAFKA=${CRP_TEST_KAFKA:-127.0.0.1:${CRP_KAFKA_PORT:-9092}}
CRP_TEST_QDRANT=${CRP_TEST_QDRANT:-http://127.0.0.1:${CRP_QDRANT_PORT:-6333}}
export CRP_TEST_POSTGRES_URL CRP_TEST_KAFKA CRP_TEST_QDRANT
if ! (return 0 2>/dev/null); then
    printf 'export CRP_TEST_POSTGRES_URL=%s\n' "$CRP_TEST_POSTGRES_URL"
    printf 'export CRP_TEST_KAFKA=%s\n' "$CRP_TEST_KAFKA"
    printf 'export CRP_TEST_QDRANT=%s\n' "$CRP_TEST_QDRANT"
fi
