// Package controller is SmartGo's controller: a small Raft group (1, 3 or
// 5 replicas, on github.com/hashicorp/raft) that decides which broker of
// each broker group is master, so that a group whose master dies is
// writable again without an operator.
//
// # What it keeps
//
// The replicated state (state.go) holds, per broker group: its cluster,
// its members (controller-assigned broker id, remoting and HA addresses,
// and a token naming the broker's data directory), the master id, the
// master epoch (bumped by every election) and the sync state set (the ids
// whose logs hold every acknowledged message, always including the master)
// with its own epoch. Every change is a Raft log entry; snapshots compact
// the log. Liveness is not replicated: every broker heartbeats to every
// replica, and each replica keeps the last heartbeat of each broker in
// memory.
//
// # What it does
//
//   - Registration (leader): a broker registers with its group, gets an id
//     (assigned on first registration and reused for its token), and the
//     heartbeat period, timeout and master lease.
//   - Heartbeats (any replica): a broker reports its epoch and log end and
//     gets the group's state back; a broker claiming to be master at an
//     epoch older than the group's or than another live member reports
//     (or that is not the master) is refused with
//     ControllerFencedMasterEpoch and a log line.
//   - Sync state set (leader): the master asks to shrink the set (a slave
//     fell behind for too long) or to expand it (a slave caught up). The
//     change names the master's epoch and the set's epoch and applies only
//     if both are current.
//   - Elections (leader): when a master's heartbeats stop for the timeout,
//     the live member of the sync state set with the highest (epoch, log
//     end) becomes master, the epoch goes up and the set becomes just the
//     new master; every broker of the group is notified. Without such a
//     member nothing happens (unless unclean elections are allowed). An
//     operator can move the master to a named live member of the set. A
//     live broker acting as master at an epoch above the group's (the
//     replica lost an election) is elected again, above every epoch the
//     live brokers report (elect.go, repairBehind).
//   - Without a majority there is no leader: heartbeats are still answered,
//     brokers keep their masters, no election happens; the replica logs it
//     and reports it in its metadata.
//
// # Formats
//
// A Raft log entry's data is one byte 0x01 (the entry format) followed by
// the JSON of a command: {"op":"register"|"elect"|"alterSyncStateSet",
// "group":..., and the fields of that operation} (see command in state.go;
// TestControllerEntryBytesPinned pins examples). A snapshot is one byte
// 0x01 followed by the JSON of the whole state. The log file and the
// stable-state file are described in logstore.go. The wire protocol
// (request codes and JSON bodies) is in remoting/protocol/controller.go.
package controller
