"""EAGLE-3 hidden-state extraction: layer choice and batch planning (`selection`), the `Backend` interface
(`backend`), its transformers implementation (`transformers_backend`) and the safetensors shard store
(`store`). `extract` runs them over a corpus;
`cli` is `jobrunner extract`."""
