"""Argo CD's health check for DatasetGeneration (argocd/draftgen.io/DatasetGeneration/health.lua) run
the way Argo CD runs it: the object as a Lua table in the global `obj`, the script's returned table
read for `status` and `message`. Argo CD embeds gopher-lua, a Lua 5.1; lupa's Lua 5.1 runtime stands
in for it (argo-cd util/lua/lua.go: ExecuteHealthLua)."""

from __future__ import annotations

from lupa import lua51

from tests.conftest import REPO

CHECK = REPO / "argocd" / "draftgen.io" / "DatasetGeneration"
ARGO_CD_STATUSES = ("Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown")


def argocd_health(obj: dict) -> tuple[str, str]:
    lua = lua51.LuaRuntime(register_eval=False, register_builtins=False)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    hs = lua.execute((CHECK / "health.lua").read_text())
    return hs["status"], hs["message"]
