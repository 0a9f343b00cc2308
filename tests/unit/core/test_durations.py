"""Unit tests for crp_stream.core.durations (docs/contract.md durations: ISO 8601 or "none")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crp_stream.core.durations import format_duration, parse_duration

DAY = 86_400.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("P1Y", 365 * DAY),
        ("P5Y", 5 * 365 * DAY),
        ("P1M", 30 * DAY),
        ("P6M", 180 * DAY),
        ("P30D", 30 * DAY),
        ("P1W", 7 * DAY),
        ("PT6H", 6 * 3600.0),
        ("PT1M", 60.0),
        ("PT90S", 90.0),
        ("P1DT2H", DAY + 7200.0),
        ("P1Y2M3DT4H5M6S", 365 * DAY + 60 * DAY + 3 * DAY + 4 * 3600 + 5 * 60 + 6),
        ("PT0.5S", 0.5),
        ("PT1,5S", 1.5),
        ("P0.5D", DAY / 2),
        ("PT1H30.5M", 3600 + 30.5 * 60),
        ("P0D", 0.0),
        ("PT0S", 0.0),
    ],
)
def test_parse_valid(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, abs=1e-9)


def test_none_means_never() -> None:
    assert parse_duration("none") is None
    assert format_duration(None) == "none"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "P",
        "PT",
        "P1DT",
        "1D",
        "P1D2H",
        "p1d",
        "P1.5DT2H",
        "P1W2D",
        "PT-1H",
        "P-1D",
        "+P1D",
        "30 days",
        "P1Y1Y",
        "None",
        "NONE",
        "P\u0663D",
        "P" + "9" * 80 + "D",
        "P1D ",
    ],
)
def test_parse_invalid(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_invalid_reason_quotes_the_text_and_examples() -> None:
    with pytest.raises(ValueError, match=r"'30 days' is not an ISO 8601 duration \(e\.g\. P1Y"):
        parse_duration("30 days")


def test_fraction_only_on_last_component() -> None:
    with pytest.raises(ValueError, match="only the last component"):
        parse_duration("PT1.5H30M")


@pytest.mark.parametrize("text", ["-P1D", "-PT6H", "-P30D"])
def test_negative_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="negative duration"):
        parse_duration(text)


def test_too_long_text_rejected_without_echoing_it() -> None:
    text = "P" + "1" * 5000 + "D"
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert len(str(info.value)) < 120


def test_non_string_rejected() -> None:
    with pytest.raises(ValueError, match="expected a duration string"):
        parse_duration(30)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "PT0S"),
        (365 * DAY, "P365D"),
        (30 * DAY, "P30D"),
        (6 * 3600.0, "PT6H"),
        (DAY + 7200.0, "P1DT2H"),
        (3723.25, "PT1H2M3.25S"),
        (182.5 * DAY, "P182DT12H"),
        (0.000001, "PT0.000001S"),
    ],
)
def test_format(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_format_rejects_negative_and_non_finite(bad: float) -> None:
    with pytest.raises(ValueError):
        format_duration(bad)


def test_years_and_months_format_as_days() -> None:
    assert format_duration(parse_duration("P1Y")) == "P365D"
    assert format_duration(parse_duration("P1M")) == "P30D"


@given(st.integers(min_value=0, max_value=10**15))
def test_round_trip_to_the_microsecond(micros: int) -> None:
    seconds = micros / 1_000_000
    text = format_duration(seconds)
    back = parse_duration(text)
    assert back is not None
    assert round(back * 1_000_000) == micros
    assert format_duration(back) == text
