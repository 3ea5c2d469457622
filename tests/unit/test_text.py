"""The app's one way of wording time and ids (:mod:`workflows.text`): under a minute it
counts seconds or says "just now" / "in a moment", never "0 minutes"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workflows.text import duration, relative, short_id

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def words(text: str) -> str:
    """The text with its no-break spaces (a number stays with its unit) as spaces."""
    return text.replace("\xa0", " ")


@pytest.mark.parametrize(
    ("span", "said"),
    [
        (timedelta(0), "0 seconds"),
        (timedelta(milliseconds=850), "850 ms"),
        (timedelta(seconds=1), "1 second"),
        (timedelta(seconds=45), "45 seconds"),
        (timedelta(minutes=4, seconds=10), "4 minutes, 10 seconds"),
        (timedelta(hours=2, minutes=5, seconds=9), "2 hours, 5 minutes"),
        (timedelta(hours=2, seconds=10), "2 hours"),
        (timedelta(days=3, hours=4), "3 days, 4 hours"),
        (timedelta(days=36_500), "100 years"),
        (timedelta(minutes=-5), "minus 5 minutes"),
    ],
)
def test_a_duration_reads_in_words_down_to_the_second(span, said):
    assert words(duration(span)) == said


def test_depth_bounds_the_units_said():
    assert words(duration(timedelta(hours=2, minutes=5), depth=1)) == "2 hours"


@pytest.mark.parametrize(
    ("offset", "said"),
    [
        (timedelta(seconds=-2), "just now"),
        (timedelta(seconds=-40), "40 seconds ago"),
        (timedelta(minutes=-3, seconds=-5), "3 minutes, 5 seconds ago"),
        (timedelta(seconds=3), "in a moment"),
        (timedelta(seconds=30), "in 30 seconds"),
        (timedelta(hours=5), "in 5 hours"),
    ],
)
def test_a_moment_reads_from_now_without_zero_minutes(offset, said):
    assert words(relative(NOW + offset, NOW)) == said


def test_a_number_and_its_unit_never_part_at_a_line_end():
    assert duration(timedelta(seconds=45)) == "45\xa0seconds"


def test_a_short_id_is_the_first_eight_characters():
    assert short_id("0b9c3c6e-5f3e-4a52-9d51-2f0d8a1e7c11") == "0b9c3c6e"
