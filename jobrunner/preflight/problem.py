"""A finding that makes the run impossible, naming where: the file, and the row and field when a row
is to blame."""

from __future__ import annotations


class PreflightProblem(Exception):
    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where, self.message = where, message
