"""The SGLang client: rids, retry decisions, the aiohttp client (protocol: draftgen_contracts.sglang_protocol)."""
