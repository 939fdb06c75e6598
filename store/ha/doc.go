// Package ha ships a master's commitlog to its slaves (RocketMQ's classic
// HA stream, with a SmartGo handshake in front; the bytes are described in
// wire.go).
//
// On a master, Serve accepts slaves on the HA listener and streams the
// log to each from the offset it reports; WaitAck lets a sync master wait
// until a slave holds an offset. On a slave, StartClient keeps one
// connection to the master, appends what arrives with store.AppendRaw at
// exactly the offsets it comes with (the store's dispatcher builds consume
// queues and the index from it) and reports its end.
//
// Controlled mode (Options.Controlled: a controller elects the master)
// adds master epochs to the handshake: a slave cuts the tail of its log
// the new master does not have before it replicates, a write waits for
// every member of the sync state set the broker names and counts towards
// the fewest members only those the controller holds
// (SetSyncStateSetChanging), and consumers see only what every member has (the store's dispatch
// limit follows the confirm offset).
//
// The package reads the log only through the store's public API
// (ReadRaw, AppendRaw, the physical offsets), so replication cannot reach
// into the writer's state.
package ha
