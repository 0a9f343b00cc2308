"""Kafka client security settings: validation (one line each), what every client is given
(runtime/kafka/security.py), the OAUTHBEARER token sources, and that the password is never shown."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import subprocess
import sys
import time
from pathlib import Path

import faust
import pytest

from crp_stream import redaction
from crp_stream.config import ConfigError, load_settings
from crp_stream.runtime.kafka.security import TokenProvider, client_kwargs, faust_kwargs
from tests.support.kafka_secure import make_ca

BROKER = {"CRP_BROKER": "kafka://127.0.0.1:9094"}
SCRAM = {
    **BROKER,
    "CRP_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
    "CRP_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    "CRP_KAFKA_SASL_USERNAME": "crp",
    "CRP_KAFKA_SASL_PASSWORD": "Sasl-PW-98765",
}


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"CRP_KAFKA_SECURITY_PROTOCOL": "TLS"}, "CRP_KAFKA_SECURITY_PROTOCOL: 'TLS' is not one of PLAINTEXT, SSL"),
        ({"CRP_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "kafka_sasl_mechanism: required with SASL_SSL"),
        ({**SCRAM, "CRP_KAFKA_SASL_MECHANISM": "GSSAPI"}, "is not one of PLAIN, SCRAM-SHA-256"),
        ({**SCRAM, "CRP_KAFKA_SASL_PASSWORD": ""}, "kafka_sasl_password: required with SCRAM-SHA-512"),
        ({"CRP_KAFKA_SASL_USERNAME": "crp"}, "kafka_sasl_username is set but kafka_security_protocol is PLAINTEXT"),
        ({"CRP_KAFKA_SSL_CAFILE": "/ca.pem"}, "kafka_ssl_cafile is set but kafka_security_protocol is PLAINTEXT"),
        (
            {**SCRAM, "CRP_KAFKA_SASL_MECHANISM": "OAUTHBEARER"},
            "OAUTHBEARER needs exactly one of kafka_oauth_token_file, kafka_oauth_token_command",
        ),
        ({"CRP_DERIVED_RETENTION": "soon"}, "CRP_DERIVED_RETENTION: "),
        ({"CRP_REPLICATION_FACTOR": "0"}, "CRP_REPLICATION_FACTOR: 0 is out of range"),
    ],
)
def test_bad_kafka_settings_give_one_line(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({}, {**BROKER, **env})
    assert fragment in str(info.value) and "\n" not in str(info.value)
    assert "Sasl-PW-98765" not in str(info.value)


def test_kafka_settings_come_from_a_toml_table_and_env_wins(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    conf = tmp_path / "crp.toml"
    conf.write_text(
        'broker = "kafka://b1:9094,b2:9094"\nderived_retention = "P30D"\nreplication_factor = 3\n'
        f'[kafka]\nsecurity_protocol = "sasl_ssl"\nsasl_mechanism = "SCRAM-SHA-256"\nsasl_username = "svc"\n'
        f'sasl_password = "From-Toml-PW"\nssl_cafile = "{ca}"\n'
    )
    s = load_settings({"config": str(conf)}, {"CRP_KAFKA_SASL_USERNAME": "svc2"})
    assert (s.kafka_security_protocol, s.kafka_sasl_mechanism, s.kafka_sasl_username) == (
        "SASL_SSL",
        "SCRAM-SHA-256",
        "svc2",
    )
    assert s.derived_retention_ms == 30 * 86_400_000 and s.replication_factor == 3
    assert "From-Toml-PW" not in repr(s)  # a logged Settings never shows it
    assert "From-Toml-PW" in redaction.secrets_in(s, {})  # nor does any redacted line
    kw = client_kwargs(s)
    assert kw["bootstrap_servers"] == "b1:9094,b2:9094"
    assert kw["security_protocol"] == "SASL_SSL" and kw["sasl_mechanism"] == "SCRAM-SHA-256"
    assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("svc2", "From-Toml-PW")
    context = kw["ssl_context"]
    assert isinstance(context, ssl.SSLContext) and context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED and context.get_ca_certs()  # our CA, loaded


def test_every_protocol_maps_to_aiokafka_and_faust_alike(tmp_path: Path) -> None:
    ca = str(make_ca(tmp_path))
    plain = load_settings({}, BROKER)
    assert client_kwargs(plain) == {"bootstrap_servers": "127.0.0.1:9094", "security_protocol": "PLAINTEXT"}
    assert faust_kwargs(plain) == {"broker": "kafka://127.0.0.1:9094"}

    tls = load_settings({}, {**BROKER, "CRP_KAFKA_SECURITY_PROTOCOL": "SSL", "CRP_KAFKA_SSL_CAFILE": ca})
    creds = faust_kwargs(tls)["broker_credentials"]
    assert isinstance(creds, faust.SSLCredentials) and creds.context is client_kwargs(tls)["ssl_context"]
    assert "sasl_mechanism" not in client_kwargs(tls)

    sasl = load_settings({}, {**SCRAM, "CRP_KAFKA_SSL_CAFILE": ca})
    creds = faust_kwargs(sasl)["broker_credentials"]
    assert isinstance(creds, faust.SASLCredentials)
    assert (creds.protocol.value, creds.mechanism.value, creds.username) == ("SASL_SSL", "SCRAM-SHA-512", "crp")
    assert creds.password == "Sasl-PW-98765" and creds.ssl_context is not None

    clear = load_settings({}, {**SCRAM, "CRP_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"})
    creds = faust_kwargs(clear)["broker_credentials"]
    assert creds.protocol.value == "SASL_PLAINTEXT" and "ssl_context" not in client_kwargs(clear)


def test_a_missing_or_broken_certificate_file_is_one_line(tmp_path: Path) -> None:
    base = {**BROKER, "CRP_KAFKA_SECURITY_PROTOCOL": "SSL"}
    with pytest.raises(ConfigError, match=r"kafka_ssl_cafile: .*nope\.pem: no such file"):
        client_kwargs(load_settings({}, {**base, "CRP_KAFKA_SSL_CAFILE": str(tmp_path / "nope.pem")}))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"kafka_ssl_\*: cannot load .*junk\.pem"):
        client_kwargs(load_settings({}, {**base, "CRP_KAFKA_SSL_CAFILE": str(junk)}))


def test_oauthbearer_token_from_a_file_or_a_command(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("eyJ.file-token.sig\n")
    oauth = {**BROKER, "CRP_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "CRP_KAFKA_SASL_MECHANISM": "OAUTHBEARER"}
    s = load_settings({}, {**oauth, "CRP_KAFKA_OAUTH_TOKEN_FILE": str(token)})
    provider = client_kwargs(s)["sasl_oauth_token_provider"]
    assert isinstance(provider, TokenProvider)
    assert asyncio.run(provider.token()) == "eyJ.file-token.sig"
    token.write_text("eyJ.rotated.sig")  # read again at the next connection
    assert asyncio.run(provider.token()) == "eyJ.rotated.sig"
    assert redaction.redact("token eyJ.rotated.sig") == "token ***"
    assert isinstance(faust_kwargs(s)["broker_credentials"], faust.OAuthCredentials)

    command = f"{sys.executable} -c \"print('eyJ.command-token.sig')\""
    s = load_settings({}, {**oauth, "CRP_KAFKA_OAUTH_TOKEN_COMMAND": command})
    assert asyncio.run(client_kwargs(s)["sasl_oauth_token_provider"].token()) == "eyJ.command-token.sig"
    failing = TokenProvider(None, f"{sys.executable} -c 'raise SystemExit(3)'")
    with pytest.raises(ConfigError, match="kafka_oauth_token_command: exited with 3"):
        asyncio.run(failing.token())
    token.write_text("")
    with pytest.raises(ConfigError, match="is empty"):
        asyncio.run(TokenProvider(str(token), None).token())


def test_the_cli_prints_one_line_for_bad_kafka_settings(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "crp_stream", "worker", "--data", str(tmp_path)],
        env={"PATH": "/usr/bin:/bin", **SCRAM, "CRP_KAFKA_SASL_MECHANISM": "SCRAM"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "crp-stream: CRP_KAFKA_SASL_MECHANISM: 'SCRAM' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"
    ]


def _alert(reason: str) -> Exception:
    """An aiokafka connection error caused by a TLS alert from the broker, as aiokafka raises it."""
    from aiokafka.errors import KafkaConnectionError

    tls = ssl.SSLError(1, f"[SSL: {reason}] ({reason.lower()})")
    tls.reason = reason
    try:
        raise KafkaConnectionError("Connection at 127.0.0.1:9095 closed") from tls
    except KafkaConnectionError as exc:
        return exc


def test_a_broker_refusing_our_client_certificate_is_named_so() -> None:
    from crp_stream.runtime.kafka.security import _client_cert_refused

    mtls = {**BROKER, "CRP_KAFKA_SECURITY_PROTOCOL": "SSL"}
    without = load_settings({}, mtls)
    line = _client_cert_refused(without, "h:1", _alert("SSLV3_ALERT_BAD_CERTIFICATE"))
    assert line is not None and "requires a client certificate (bad certificate)" in line
    assert "kafka_ssl_certfile and kafka_ssl_keyfile" in line
    with_cert = load_settings({}, {**mtls, "CRP_KAFKA_SSL_CERTFILE": "/c.pem", "CRP_KAFKA_SSL_KEYFILE": "/c.key"})
    line = _client_cert_refused(with_cert, "h:1", _alert("TLSV1_ALERT_UNKNOWN_CA"))
    assert line is not None and "refused the client certificate /c.pem (unknown ca)" in line
    # not about our certificate: a handshake cut short, or the broker's certificate failing our check
    assert _client_cert_refused(without, "h:1", _alert("UNEXPECTED_EOF_WHILE_READING")) is None
    assert _client_cert_refused(without, "h:1", _alert("CERTIFICATE_VERIFY_FAILED")) is None
    assert _client_cert_refused(without, "h:1", ConnectionRefusedError()) is None


def test_a_refused_oauthbearer_token_gets_the_rfc7628_reply() -> None:
    """After the token, an empty answer is success (done); an error challenge gets one %x01, then done."""
    from crp_stream.runtime.kafka.security import _OAuthAuthenticator

    class Fixed(TokenProvider):
        async def token(self) -> str:
            return "tok.en."

    async def exchange(answers: list[bytes]) -> list[bytes | None]:
        auth = _OAuthAuthenticator(sasl_oauth_token_provider=Fixed(None, "x"))
        sent, payload = [], None
        for answer in [*answers, b""]:
            step = await auth.step(payload)
            sent.append(None if step is None else step[0])
            if step is None:
                break
            payload = answer
        return sent

    accepted = asyncio.run(exchange([b""]))
    assert accepted == [b"n,,\x01auth=Bearer tok.en.\x01\x01", None]
    refused = asyncio.run(exchange([b'{"status":"invalid_token"}', b""]))
    assert refused == [b"n,,\x01auth=Bearer tok.en.\x01\x01", b"\x01", None]


def test_configuring_oauthbearer_installs_the_authenticator_on_every_connection(tmp_path: Path) -> None:
    from aiokafka.conn import AIOKafkaConnection

    from crp_stream.runtime.kafka.security import _OAuthAuthenticator

    token = tmp_path / "token"
    token.write_text("tok.en.")
    env = {
        **BROKER,
        "CRP_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "CRP_KAFKA_SASL_MECHANISM": "OAUTHBEARER",
        "CRP_KAFKA_OAUTH_TOKEN_FILE": str(token),
    }
    kwargs = client_kwargs(load_settings({}, env))

    async def authenticator() -> object:  # a connection is made on a loop (never opened here)
        args = {k: v for k, v in kwargs.items() if k != "bootstrap_servers"}
        return AIOKafkaConnection("127.0.0.1", 9094, **args).authenticator_oauth()

    assert isinstance(asyncio.run(authenticator()), _OAuthAuthenticator)


def test_a_token_command_runs_again_before_the_token_it_printed_expires(tmp_path: Path) -> None:
    from crp_stream.runtime.kafka.security import token_expires_in

    def jwt(claims: dict[str, object]) -> str:
        part = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
        return f"eyJhbGciOiJub25lIn0.{part}."

    assert token_expires_in("eyJ.not-base64!.sig") is None and token_expires_in("opaque-token") is None
    assert token_expires_in(jwt({"sub": "crp"})) is None
    left = token_expires_in(jwt({"exp": time.time() + 100}))
    assert left is not None and 95 < left <= 100
    calls = tmp_path / "calls"
    script = tmp_path / "token.py"  # a fresh token valid for `lifetime` seconds at each run, counted
    script.write_text(
        "import base64, json, sys, time\n"
        "open(sys.argv[1], 'a').write('x')\n"
        "claims = json.dumps({'exp': time.time() + float(sys.argv[2])}).encode()\n"
        "print('eyJhbGciOiJub25lIn0.' + base64.urlsafe_b64encode(claims).decode().rstrip('=') + '.')\n"
    )
    long_lived = TokenProvider(None, f"{sys.executable} {script} {calls} 3600")
    first = asyncio.run(long_lived.token())
    assert asyncio.run(long_lived.token()) == first and calls.read_text() == "x"  # kept: the minute
    calls.write_text("")
    short_lived = TokenProvider(None, f"{sys.executable} {script} {calls} 4")  # inside the margin
    assert asyncio.run(short_lived.token()) != asyncio.run(short_lived.token())
    assert calls.read_text() == "xx"
