"""`jobrunner copy-code`: jobrunner copied for another image's Python (`cli` says why)."""
