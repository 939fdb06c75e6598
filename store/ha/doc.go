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
// The package reads the log only through the store's public API
// (ReadRaw, AppendRaw, the physical offsets), so replication cannot reach
// into the writer's state.
package ha
