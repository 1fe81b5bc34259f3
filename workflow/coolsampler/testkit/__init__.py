"""The test kit: synthetic runs and claims, the sampler tap, faults, the acceptance core.

May import every layer but the CLI; no layer but the CLI imports it, so it never enters the image. The
worlds the pipeline makes (toy sums, chain worlds, their probes) are ``coolsampler.world``.
"""
