"""Distributions: parsing, and their analytic figures checked against sampling (CI over draws)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.dists import Constant, DistError, Empirical, Exponential, LogNormal, Uniform, parse_dist


@pytest.mark.parametrize(
    "text, expected",
    [
        ("constant(2)", Constant(2.0)),
        ("uniform(1, 10)", Uniform(1.0, 10.0)),
        (" exponential( 0.5 ) ", Exponential(0.5)),
        ("lognormal(1.5, 0.3)", LogNormal(1.5, 0.3)),
    ],
)
def test_parse(text, expected):
    assert parse_dist(text) == expected
    assert parse_dist(str(expected)) == expected  # str() round-trips


@pytest.mark.parametrize(
    "text",
    [
        "uniform(10, 1)",
        "uniform(1)",
        "normal(0, 1)",
        "exponential(-1)",
        "lognormal(0, 1)",
        "lognormal(1, 50)",  # its mean overflows
        "lognormal(1e300, 1)",  # its variance does
        "lognormal(1, 1000)",  # a draw: exp(1000 × z)
        "lognormal(1e12, 50)",
        "lognormal(1e290, 2)",  # its tail: 1e290 × e^12
        "uniform(0, 1e308)",  # its variance and its tail
        "exponential(1e307)",  # its tail: 20.7 × the mean
        "constant(1e308)",  # finite, but past 1e12 s, every scenario number's bound
        "lognormal(1, 18)",  # its tail: e^108
        "constant(x)",
        "uniform 1 10",
        "",
        "exponential(nan)",
        "empirical(/no/such/file)",
    ],
)
def test_bad_strings_raise_one_line(text):
    with pytest.raises(DistError) as e:
        parse_dist(text)
    assert "\n" not in str(e.value)


def test_empirical(tmp_path):
    f = tmp_path / "w.txt"
    f.write_text("# seconds\n1\n2\n\n3\n")
    d = parse_dist(f"empirical({f})")
    assert isinstance(d, Empirical) and d.mean == 2.0
    assert d.expected_max(1) == pytest.approx(2.0)
    # max of 2 draws from {1,2,3}: P(3)=5/9, P(2)=3/9, P(1)=1/9
    assert d.expected_max(2) == pytest.approx((3 * 5 + 2 * 3 + 1) / 9)
    (tmp_path / "bad.txt").write_text("1\nx\n")
    with pytest.raises(DistError, match="line 2"):
        parse_dist(f"empirical({tmp_path / 'bad.txt'})")


@pytest.mark.parametrize("d", [Uniform(1, 10), Exponential(2.0), LogNormal(1.5, 0.3), Constant(3.0)])
def test_mean_and_variance_against_samples(d):
    x = d.draw(np.random.default_rng(1), 200_000)
    half = 1.96 * math.sqrt(d.var / len(x)) + 1e-12
    assert abs(x.mean() - d.mean) < 1.5 * half  # 1.5: leave room beyond the nominal 95%
    if d.var:
        assert x.var() == pytest.approx(d.var, rel=0.03)


@pytest.mark.parametrize("d", [Uniform(1, 10), Exponential(2.0), LogNormal(1.5, 0.3)])
@pytest.mark.parametrize("n", [1, 32, 1000])
def test_expected_max_closed_forms_match_integral_and_samples(d, n):
    from sim.dists import Dist

    assert d.expected_max(n) == pytest.approx(Dist.expected_max(d, n), rel=1e-4)  # closed form vs ∫(1 − F^n)
    maxima = d.draw(np.random.default_rng(n), (400, n)).max(axis=1)
    half = 1.96 * maxima.std(ddof=1) / math.sqrt(len(maxima))
    assert abs(maxima.mean() - d.expected_max(n)) < 1.5 * half + 1e-9


def test_sampler_gives_the_draw_sequence():
    d = Uniform(0, 1)
    s = d.sampler(np.random.default_rng(7))
    np.testing.assert_array_equal([s() for _ in range(10)], d.draw(np.random.default_rng(7), 4096)[:10])


@pytest.mark.parametrize("d", [Uniform(1, 10), Exponential(2.0), LogNormal(0.005, 0.3), Constant(3.0)])
@pytest.mark.parametrize(("first", "most"), [(16, 512), (1, 3), (4096, 4096), (16, 4096)])
def test_the_draw_sequence_is_the_same_whatever_the_batches(d, first, most):
    s = d.sampler(np.random.default_rng(11), first, most)
    drawn = [s() for _ in range(5000)]
    np.testing.assert_array_equal(drawn, d.draw(np.random.default_rng(11), 5000))
    # each a Python float, to the bit (a batch is held as raw doubles: nothing narrowed, no numpy scalar handed on)
    assert {type(x) for x in drawn} == {float}


def test_an_empirical_file_whose_mean_overflows_is_refused(tmp_path):
    f = tmp_path / "huge.txt"
    f.write_text("1.7e308\n1.7e308\n")  # each value finite, their mean not
    with pytest.raises(DistError, match="overflows"):
        parse_dist(f"empirical({f})")
