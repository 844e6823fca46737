"""Test modules have names unique across tests/: the tiers' folders are not packages, so pytest
imports each module by its base name, and a second `test_x.py` in another folder stops the whole
collection ("import file mismatch") before any test runs."""

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_name_is_unique_across_the_tiers():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    twice = sorted(n for n, count in names.items() if count > 1)
    assert not twice, f"test modules named alike in several folders (rename one, e.g. *_spark.py): {twice}"
