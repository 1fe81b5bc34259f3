"""The paper layer: labels, figures, tables, their writers and the report.

Imports ``coolsampler.spec`` and ``coolsampler.results`` (plus matplotlib), never verl, vLLM or torch.
"""
