"""The world layer: the generated worlds runs train in, and the probes that measure them.

The smoke study's and the rehearsal's toy sums and tiny Qwen2 (``toy``), a study's chain world and its
reward, which verl loads by path (``chain``), the screen's probe of a warm-started world (``probe``) and
the drift probe of a trained run (``drift_probe``). Rules and their scripts make data and models with
them, so they are pipeline code, not test instruments.

Imports only ``coolsampler.spec`` (plus torch and transformers inside the functions that make or read a
model): the rules, their scripts and the test kit build on it; no training module imports it, so it is
no part of the training key.
"""
