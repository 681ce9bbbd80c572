"""Katib's generated gRPC modules, loaded by `kubetune.katibapi` (shared with the suggestion
bridge, which speaks the same API to Katib algorithm images)."""

from __future__ import annotations

from kubetune.katibapi import load, pb, pb_grpc

__all__ = ["load", "pb", "pb_grpc"]
