"""Tests of the real stack instrument every run a command trains (COOLSAMPLER_INSTRUMENT): the test-kit
modules join verl's external modules, and the tap writes into each run's own directory."""

from __future__ import annotations

from coolsampler.train.launch import INSTRUMENT_ENV, TAP_MODULE, _instrument


def test_instrument_adds_the_modules_and_a_tap_directory_per_run(tmp_path):
    env = {"VERL_USE_EXTERNAL_MODULES": "coolsampler.worker.losses", INSTRUMENT_ENV: TAP_MODULE}
    _instrument(env, tmp_path / "run")
    assert env["VERL_USE_EXTERNAL_MODULES"] == f"coolsampler.worker.losses,{TAP_MODULE}"
    assert env["COOLSAMPLER_TAP_DIR"] == str(tmp_path / "run" / "tap") and (tmp_path / "run" / "tap").is_dir()


def test_without_it_nothing_changes(tmp_path):
    env = {"VERL_USE_EXTERNAL_MODULES": "coolsampler.worker.losses"}
    _instrument(env, tmp_path)
    assert env == {"VERL_USE_EXTERNAL_MODULES": "coolsampler.worker.losses"}
