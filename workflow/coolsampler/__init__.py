"""coolsampler: the pipeline behind "Cool the Sampler, Not the Learner", split by layer (docs/layers.md;
``tests/test_layers.py`` checks the directions). Imports nothing: every layer is imported by name.
"""
