"""The model version lifecycle as a state machine: the moves it allows, the ones it refuses, their reasons."""

from __future__ import annotations

import itertools

import pytest

from tritium.core.model_repository.lifecycle import (
    TRANSITIONS,
    UNLOADED,
    ModelState,
    TransitionRefused,
    VersionStatus,
)

S = ModelState
STATES = [S.UNKNOWN, S.LOADING, S.READY, S.UNLOADING, S.UNAVAILABLE]
ALLOWED = {
    (S.UNKNOWN, S.LOADING),
    (S.UNKNOWN, S.UNAVAILABLE),
    (S.LOADING, S.READY),
    (S.LOADING, S.UNAVAILABLE),
    (S.READY, S.UNLOADING),
    (S.READY, S.UNAVAILABLE),
    (S.UNLOADING, S.UNAVAILABLE),
    (S.UNAVAILABLE, S.UNAVAILABLE),
}


def _at(state: str) -> VersionStatus:
    status = VersionStatus(1)
    status.state = state
    return status


def test_the_states_are_tritons_names():
    assert STATES == ["UNKNOWN", "LOADING", "READY", "UNLOADING", "UNAVAILABLE"]


def test_the_table_lists_exactly_the_allowed_moves_each_with_why():
    assert set(TRANSITIONS) == ALLOWED
    assert all(isinstance(why, str) and why for why in TRANSITIONS.values())


@pytest.mark.parametrize("source,target", sorted(ALLOWED))
def test_an_allowed_move_sets_state_and_reason(source: str, target: str):
    status = _at(source)
    status.move(target, "why")
    assert (status.state, status.reason) == (target, "why")


@pytest.mark.parametrize("source,target", sorted(set(itertools.product(STATES, STATES)) - ALLOWED))
def test_any_other_move_is_refused_and_changes_nothing(source: str, target: str):
    status = _at(source)
    status.reason = "before"
    with pytest.raises(TransitionRefused, match=f"version 1: {source} -> {target} is not a lifecycle transition"):
        status.move(target, "after")
    assert (status.state, status.reason) == (source, "before")


def test_a_version_is_born_unknown_then_loading_with_no_reason():
    assert VersionStatus(3).state == S.UNKNOWN
    status = VersionStatus.loading(3)
    assert (status.version, status.state, status.reason, status.model) == (3, S.LOADING, "", None)


def test_a_version_a_reload_drops_is_unavailable_unloaded():
    status = VersionStatus.unloaded(2)
    assert (status.state, status.reason) == (S.UNAVAILABLE, "unloaded") == (S.UNAVAILABLE, UNLOADED)
    assert status.unloaded_on_purpose and not status.failed


def test_the_whole_life_of_a_version():
    status = VersionStatus.loading(1)
    status.move(S.READY)
    status.move(S.UNLOADING)
    assert status.unloaded_on_purpose
    status.move(S.UNAVAILABLE, UNLOADED)
    assert (status.state, status.reason) == ("UNAVAILABLE", "unloaded")
    with pytest.raises(TransitionRefused):
        status.move(S.READY)  # a version comes back only as a fresh load


def test_a_failed_load_is_failed_not_unloaded_until_it_is_unloaded():
    status = VersionStatus.loading(1)
    status.move(S.UNAVAILABLE, "Invalid argument: bad model")
    assert status.failed and not status.unloaded_on_purpose
    status.move(S.UNAVAILABLE, UNLOADED)
    assert not status.failed and status.unloaded_on_purpose


def test_a_ready_version_cannot_load_again_or_skip_draining_back_to_loading():
    status = VersionStatus.loading(1)
    status.move(S.READY)
    for target in (S.LOADING, S.READY, S.UNKNOWN):
        with pytest.raises(TransitionRefused):
            status.move(target)
    assert status.state == S.READY
