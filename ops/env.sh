# ops/env.sh: the addresses of the local test services (ops/postgres, ops/kafka, ops/qdrant) for the test suite.
#   . ops/env.sh          exports CRP_TEST_POSTGRES_URL, CRP_TEST_KAFKA, CRP_TEST_KAFKA_SECURE (the client
#                         settings file of `ops/kafka start --secure`; the other mechanisms' files are
#                         beside it), CRP_TEST_QDRANT (REST) and
#                         CRP_TEST_QDRANT_GRPC (the same server's gRPC port) into this shell
#   ops/env.sh            prints them as export lines:  eval "$(ops/env.sh)"
# Values already set in the environment win; the ports follow CRP_PG_PORT, CRP_KAFKA_PORT, CRP_QDRANT_PORT and
# CRP_QDRANT_GRPC_PORT.
CRP_TEST_POSTGRES_URL=${CRP_TEST_POSTGRES_URL:-postgresql+psycopg://postgres@127.0.0.1:${CRP_PG_PORT:-55432}/crp_test}
CRP_TEST_KAFKA=${CRP_TEST_KAFKA:-127.0.0.1:${CRP_KAFKA_PORT:-9092}}
# the file, not its content: the password stays out of the environment of every test process
CRP_TEST_KAFKA_SECURE=${CRP_TEST_KAFKA_SECURE:-${CRP_KAFKA_RUN:-${CRP_CACHE:-$HOME/.cache/crp-stream}/run/kafka-${CRP_KAFKA_PORT:-9092}}/secure/client.env}
CRP_TEST_QDRANT=${CRP_TEST_QDRANT:-http://127.0.0.1:${CRP_QDRANT_PORT:-6333}}
CRP_TEST_QDRANT_GRPC=${CRP_TEST_QDRANT_GRPC:-grpc://127.0.0.1:${CRP_QDRANT_GRPC_PORT:-6334}}
export CRP_TEST_POSTGRES_URL CRP_TEST_KAFKA CRP_TEST_KAFKA_SECURE CRP_TEST_QDRANT CRP_TEST_QDRANT_GRPC
if ! (return 0 2>/dev/null); then
    printf 'export CRP_TEST_POSTGRES_URL=%s\n' "$CRP_TEST_POSTGRES_URL"
    printf 'export CRP_TEST_KAFKA=%s\n' "$CRP_TEST_KAFKA"
    printf 'export CRP_TEST_KAFKA_SECURE=%s\n' "$CRP_TEST_KAFKA_SECURE"
    printf 'export CRP_TEST_QDRANT=%s\n' "$CRP_TEST_QDRANT"
    printf 'export CRP_TEST_QDRANT_GRPC=%s\n' "$CRP_TEST_QDRANT_GRPC"
fi
