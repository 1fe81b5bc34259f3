"""The generated worlds and their probes (coolsampler.world), one test module per module."""
