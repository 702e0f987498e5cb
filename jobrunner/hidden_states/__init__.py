"""EAGLE-3 hidden-state extraction: layer choice and batch planning (`selection`), the `Backend` interface
(`backend`), its transformers implementation (`transformers_backend`) and the safetensors shard store
(`store`). `jobrunner extract` (jobrunner/extract.py) wires them together."""
