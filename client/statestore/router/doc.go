// Package router is the front ends' side of the state store: a Router
// sends one command to the broker owning the key's shard with the
// SmartGo-only remoting code StateStoreInvoke (9100, format in
// remoting/protocol/statestore.go), finds that broker through the route of
// SystemTopic (or a fixed broker table), receives the notifications brokers
// push (StateStoreNotify, 9101) and tells brokers when MQTT clients leave
// (StateStoreDropClient, 9102).
//
// A broker in the front end's own process (Options.Local, wired by
// `smartgo standalone`) is called directly instead, through LocalBroker,
// with the Router as its protocol.StateStoreSink for pushed notifications:
// the same requests and responses without the loopback round trip.
//
// Shard mapping: the global shard list is every (broker name, queue) of
// SystemTopic sorted by broker name then queue, and a key's shard is
// statestore.ShardOf(key, len(list)). Adding brokers or queues moves keys:
// the layout is fixed when the first key is written (no resharding).
//
// The package is apart from client/statestore (the application client
// over MQTT 5) so that servers, which route, do not link an MQTT client.
package router
