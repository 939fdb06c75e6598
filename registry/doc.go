// Package registry is SmartGo's name server, compatible with RocketMQ 4.x
// clients and brokers on the wire.
//
// Brokers send REGISTER_BROKER to every registry every 30 s with their
// topic table; clients ask GET_ROUTEINFO_BY_TOPIC and receive the topic's
// queues per broker name and the addresses of those brokers. Registries
// do not talk to each other.
//
// Tables (routes.go), all in memory and rebuilt from registrations:
//
//	topic       -> broker name -> QueueData (read/write queue counts, perm, sys flag)
//	broker name -> BrokerData (cluster, broker id -> address; id 0 = master)
//	cluster     -> set of broker names
//	broker addr -> last registration time, data version, HA address, connection
//
// Only a master's registration (id 0) writes queue data, and only on its
// first registration or when its data version changed; topics the master
// no longer lists lose that broker's queues. An address registered under
// a new id replaces its old id (slave promoted to master). A broker is
// removed when it unregisters, when its connection closes, or when the
// scan (every ScanInterval) finds it silent for BrokerExpiry; a broker
// name left without addresses takes its queue data, emptied topics and an
// emptied cluster with it. A scan late by more than BrokerExpiry (the
// registry itself stalled) expires nothing for one more heartbeat
// interval: the registrations sent meanwhile are still unread (scan).
//
// # KV config file
//
// The only persisted state is the KV config (e.g. namespace
// ORDER_TOPIC_CONFIG, whose value for a topic is served as the route's
// orderTopicConf), written after each change with
// fsutil.WriteFileAtomic (temp file, fsync, rename, fsync dir). Format,
// UTF-8 JSON, the same as Java's kvConfig.json:
//
//	{"configTable":{"<namespace>":{"<key>":"<value>",...},...}}
//
// Keys are written sorted. Pinned by TestRegistryKVConfigFile.
package registry
