"""The operator's decisions, one question per module, each with its tests beside it."""
