"""The worker layer: code that runs inside verl's own processes (the μ-GRPO loss, the temperature
controller, rewards, the CPU platform, prefork, the vLLM extension).

Imports only ``coolsampler.spec`` and itself: it is the training image's package code, so nothing of the
analysis or the pipeline may come along.
"""
