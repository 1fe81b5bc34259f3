"""The results layer: verl's logs parsed into the metrics table, the analysis and the claims.

Imports only ``coolsampler.spec`` and pandas/numpy: logs are analysed on a laptop, without verl, vLLM or
torch.
"""
