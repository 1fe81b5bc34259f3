"""The spec layer: fixed facts, the temperature grammar, runs, keys, studies, targets, schemas.

Imports only ``coolsampler.spec`` (never verl, vLLM or torch): everything else builds on it, and verl's
trainer process loads the parts the controller needs.
"""
