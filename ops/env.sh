# ops/env.sh: the addresses of the local test services (ops/postgres, ops/kafka) for the test suite.
#   . ops/env.sh          exports CRP_TEST_POSTGRES_URL and CRP_TEST_KAFKA into this shell, and
#                         CRP_TEST_KAFKA_SECURE (the client settings file of `ops/kafka start --secure`)
#   ops/env.sh            prints them as export lines:  eval "$(ops/env.sh)"
# Values already set in the environment win; the ports follow CRP_PG_PORT and CRP_KAFKA_PORT.
CRP_TEST_POSTGRES_URL=${CRP_TEST_POSTGRES_URL:-postgresql+psycopg://postgres@127.0.0.1:${CRP_PG_PORT:-55432}/crp_test}
CRP_TEST_KAFKA=${CRP_TEST_KAFKA:-127.0.0.1:${CRP_KAFKA_PORT:-9092}}
# the file, not its content: the password stays out of the environment of every test process
CRP_TEST_KAFKA_SECURE=${CRP_TEST_KAFKA_SECURE:-${CRP_KAFKA_RUN:-${CRP_CACHE:-$HOME/.cache/crp-stream}/run/kafka-${CRP_KAFKA_PORT:-9092}}/secure/client.env}
export CRP_TEST_POSTGRES_URL CRP_TEST_KAFKA CRP_TEST_KAFKA_SECURE
if ! (return 0 2>/dev/null); then
    printf 'export CRP_TEST_POSTGRES_URL=%s\n' "$CRP_TEST_POSTGRES_URL"
    printf 'export CRP_TEST_KAFKA=%s\n' "$CRP_TEST_KAFKA"
    printf 'export CRP_TEST_KAFKA_SECURE=%s\n' "$CRP_TEST_KAFKA_SECURE"
fi
