"""Helpers shared by the tests: tiny real tokenizers and models built on the fly."""
