"""How every etcd member we run is configured beyond its addresses and certificates (`cara up`'s supervisor, the
test fleet; the systemd unit in deploy/ spells the same flags)."""

from __future__ import annotations

ETCD_MEMBER_FLAGS = ("--snapshot-count=10000",)
"""Flags every etcd member we run gets. etcd keeps the raft log in memory until it snapshots, every
`--snapshot-count` entries: at etcd 3.4's default of 100,000 a member's memory grows for hours under a steady
write rate before the first snapshot frees it. 10,000 is etcd 3.6's default (and kubeadm's setting): the log in
memory stays a few megabytes."""


__all__ = ["ETCD_MEMBER_FLAGS"]
