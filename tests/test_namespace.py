"""The top level lists what a notebook types (issue 44: at most 50 names); helpers live one dot deeper."""

from __future__ import annotations

import importlib

import pytest

import pbmarl as pb

#: name -> the subpackage it moved to when it left the top level
MOVED = {"GaussianPolicy": "pbmarl.policies", "DeterministicPolicy": "pbmarl.policies", "noise": "pbmarl.policies",
         "to_openspiel_policy": "pbmarl.evaluation"}


def test_the_top_level_has_at_most_50_names_and_each_resolves() -> None:
    assert len(pb.__all__) <= 50, sorted(pb.__all__)
    assert len(set(pb.__all__)) == len(pb.__all__)
    assert sorted(pb.__dir__()) == sorted(pb.__all__)
    for name in pb.__all__:
        assert getattr(pb, name) is not None, name


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_lives_in_its_subpackage_and_pb_says_where(name: str) -> None:
    where = MOVED[name]
    assert name not in pb.__all__
    assert name in importlib.import_module(where).__all__
    sub = where.split(".", 1)[1]
    assert getattr(getattr(pb, sub), name) is getattr(importlib.import_module(where), name)
    with pytest.raises(AttributeError, match=rf"^module 'pbmarl' has no attribute '{name}': pbmarl\.{name} moved to "
                                             rf"{where}\.{name} \(`from {where} import {name}` or `pb\.{sub}\.{name}`\)$"):
        getattr(pb, name)
