"""The train layer: verl's overrides, paths, platforms, the image, the training key, the job.

Imports ``coolsampler.spec`` and ``coolsampler.worker``, never the results, paper or CLI layers; verl only
in ``verl_config``, when a check runs.
"""
