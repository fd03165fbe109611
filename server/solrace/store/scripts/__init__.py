"""Lua scripts run by the store (data only; a package so wheels ship the ``*.lua``)."""
