"""The test kit: synthetic runs and claims, the toy models and data, the sampler tap, the acceptance core.

May import every layer but the CLI; no layer but the CLI imports it, so it never enters the image.
"""
