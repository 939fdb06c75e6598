// Package statestore holds SmartGo's two client sides of the state store:
//
//   - Router, used by front ends (bridge's StateStoreFront): it sends
//     one command to the broker owning the key's shard with the
//     SmartGo-only remoting code StateStoreInvoke (9100, format in
//     remoting/protocol/statestore.go), finds that broker through the
//     route of SystemTopic (or a fixed broker table), receives the
//     notifications brokers push (StateStoreNotify, 9101) and tells brokers
//     when MQTT clients leave (StateStoreDropClient, 9102). A broker in the
//     front end's own process (RouterOptions.Local, wired by `smartgo
//     standalone`) is called directly instead, through LocalBroker, with
//     the Router as its protocol.StateStoreSink for pushed notifications:
//     the same requests and responses without the loopback round trip.
//
//   - Client, an application client over MQTT 5 (paho.golang) speaking the
//     protocol of ../../shared/docs/statestore-protocol.md: SET/GET/DEL/
//     VDEL/KEYNOTIFY with __ts, __ft and correlation ids, notifications
//     on Notifications(), and the lease-and-fencing helper:
//
//     lock, err := c.Acquire(ctx, []byte("lock"), []byte("me"), 10*time.Second) // SET lock me NEX PX 10000
//     ... c.Set(ctx, key, val, statestore.SetOptions{FencingToken: lock.Token})
//     err = lock.Release(ctx)                                                   // VDEL lock me
//
// Shard mapping: the global shard list is every (broker name, queue) of
// SystemTopic sorted by broker name then queue, and a key's shard is
// statestore.ShardOf(key, len(list)). Adding brokers or queues moves keys:
// the layout is fixed when the first key is written (no resharding).
package statestore
