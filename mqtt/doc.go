// Package mqtt is SmartGo's MQTT 3.1.1/5.0 server engine. It knows nothing
// of RocketMQ: it stores and distributes messages through the Backend
// interface (NewMemoryBackend is the in-memory one used by tests and the
// standalone mode; bridge implements it on the broker).
//
// # Architecture
//
// Plain TCP connections are raw non-blocking descriptors in a few epoll
// instances (edge-triggered). A poller goroutine reads ready sockets into
// its own buffer and keeps per connection only the unparsed bytes (nil
// when drained); the connection is then handed to a bounded worker pool
// that decodes (mqtt/packets) and handles its packets in order, one worker
// per connection at a time. A read shorter than the buffer ends the read
// loop (the receive queue is drained; edge-triggered epoll reports the
// next arrival) unless the event carried a hang-up, so a request costs one
// read(2), not a second one for EAGAIN. Writes go to the socket at the end
// of a unit of work: while a worker handles one connection's packets, the
// output it causes (its own answers, a handler's response, the deliveries
// to subscribers while more of the publisher's input follows) is appended
// to each connection's buffer and written once per connection when the
// unit ends, before the worker parks or calls a handler or a synchronous
// backend, or when 64 KiB (at most MaxOutbound/4) is held. A request
// answered by a handler thus costs one write(2) for the response and its
// PUBACK, and a publisher's batch one write per subscriber. Output from
// outside a unit goes straight to the socket; only what the socket refuses
// is buffered (see Backpressure below). Keep alive, connect
// timeout, session expiry and will delay run on one hashed timing wheel.
// An idle connection owns no goroutine and no buffer (about 1 KiB of heap,
// measured by TestMQTTScaleIdleConnections). TLS connections use
// crypto/tls with a reader and a writer goroutine each.
//
// A client whose requests an inline handler answers (Server.HandleInline)
// gets its socket's SO_RCVLOWAT raised above the size of a few
// acknowledgements: its PUBACK of a response then waits in the socket for
// its next request instead of waking the process on its own, and is read
// with it. A sweep on the wheel lowers the mark of a connection that read
// nothing for 50 ms when anything but PUBACKs waits in its socket (it
// peeks at every sweep), and whatever waits after a second; a session
// waiting for the client's receive quota lowers it at once, so a lone
// small packet (PINGREQ, a short PUBLISH) is read within about 200 ms
// (lowat_linux.go).
//
// The pool starts a worker for a task whenever no waiting worker is left
// unclaimed, so a handler or backend call that blocks (the state store
// front waits for a broker) holds up only its own connection, up to
// Options.Workers blocked at once.
//
// # Backpressure
//
// Output the socket does not take waits in the connection's buffer. Over
// Options.MaxOutbound/2 buffered bytes the client's QoS 0 messages are
// dropped (allowed by MQTT): Stats.DroppedQoS0 counts them and one Warn
// line per client every 10 s names it with the count. A client still
// dropping QoS 0 messages Options.SlowReaderTimeout after its buffer went
// over that mark (it has not drained below MaxOutbound/4 since), or whose
// buffer passes MaxOutbound (QoS 1/2 in flight, acknowledgements), is
// disconnected and counted in
// Stats.SlowReaders: reason 0x97 quota exceeded (a per-client limit the
// server imposes; 0x89 server busy would blame the server and invite the
// same client back unchanged). The v5 DISCONNECT goes only if the socket
// takes it before the close: over MaxOutbound the stream may be cut
// mid-packet, so none is sent and the log line carries the code. QoS 1/2
// messages wait in the session queue (Options.MaxQueuedMessages; beyond
// it a backend delivering with DeliverLive hands them over again from
// its log as the queue drains (overflow.go), otherwise they are dropped
// with one Warn line per client every 10 s). Per connection the
// server thus holds at most MaxOutbound bytes plus the kernel's socket
// buffer.
//
// # Inbound memory
//
// Input is read into a pooled 4 KiB array per connection while it fits;
// an input that outgrows it (a large packet arriving, a burst) moves to
// an array of its own whose size is charged to one server-wide budget,
// Options.MaxInboundMemory (Stats.InboundBytes). When the budget is used
// up, connections read only into the room they already have; one that
// needs more stops being read (TCP backpressure, Stats.InboundThrottled)
// and waits in a queue for memory to be released, except one at a time
// (the pass), which reads on until a whole packet is handled, so a packet
// of up to MaxPacketSize always completes and the total stays under the
// budget plus one packet. Clients whose packets fit 4 KiB go on
// unaffected. While connections wait, a client holding memory that sent
// nothing for Options.InboundStallTimeout inside a packet is disconnected
// (0x97, Stats.InboundStalled, rate-limited log). A throttled client that
// hangs up leaving too few bytes to finish its packet is closed at once.
// Details in inbound.go. The garbage collector's headroom comes on top:
// 100 clients each stalled in 3 MiB of a 4 MiB PUBLISH took a standalone
// to 552 MB RSS before; with the 128 MiB default it stays near 320 MB, and
// does not grow with the number of such clients.
//
// Locks, in order: Server.mu (sessions) -> conn.ackMu -> session.mu ->
// conn.inMu -> conn.outMu; conn.inMu -> the inbound budget's lock;
// subIndex.mu, the pool's and the wheel's locks, the $SYS tree's
// and a connection's log budget are leaves. No session lock
// is held while calling the backend or another session.
//
// # Client identifiers
//
// A CONNECT's client id may hold up to 65,535 bytes (MQTT's bound);
// Options.MaxClientIDLen lowers that for a back end that cannot store
// longer ones (the bridge: bridge.MaxClientIDLen). A longer id is refused
// with 0x85 "client identifier not valid" (3.1.1: return code 0x02
// "identifier rejected"), before authentication and any session load.
// Options.MaxIdentityLen bounds the client id and user name together for
// a back end that stores both with every message (the bridge:
// bridge.MaxIdentityLen): over it, 0x86 "bad user name or password"
// (3.1.1: 0x04). A PUBLISH the back end can never store (ErrUnstorable:
// its topic and properties over a record's room) is answered 0x83
// "implementation specific error" with the reason, not 0x80.
//
// # Credentials file (Options.CredentialsFile)
//
// One user per line, '#' starts a comment line:
//
//	<user>:pbkdf2-sha256:<iterations>:<salt>:<hash>
//
// salt and hash are unpadded standard base64; hash is PBKDF2-HMAC-SHA256 of
// the password with that salt and iteration count, of the hash's length.
// HashPassword makes a line (16-byte random salt, 100,000 iterations, 32-byte
// key). User names may not contain ':'.
//
// # Authentication and connection hooks (hooks.go)
//
// Options.Authenticate sees every CONNECT (client id, user name,
// password, clean start, and the TLS client certificate chain on a TLS
// listener whose tls.Config requests one) before the credentials file: it
// accepts, refuses (its error picks 0x86, 0x88 or 0x87 and is the reason
// string), or leaves the decision to the file. Options.OnConnect and
// OnDisconnect are told of every accepted connection and its end, with a
// connection id (ClientInfo.ConnID) that tells a takeover's two
// connections apart. Server.SendToSubscriber delivers into one client's
// session through that session's own subscriptions, for topics every
// client subscribes to under the same name (per-device replies).
//
// # ACL file (Options.ACLFile)
//
// Line-oriented, '#' starts a comment line:
//
//	default allow|deny             what applies when no rule matches (deny)
//	client <client id>             following rules apply to that client
//	user <user name>               following rules apply to that user
//	all                            following rules apply to everyone
//	allow|deny publish|subscribe|pubsub <topic filter>
//
// Filters may hold %c (client id) and %u (user name); a rule is skipped
// when the substituted value holds '+', '#' or '/'. Sections are tried in
// the order client, user, all and the first matching rule decides. For
// publish, the rule filter must match the topic; for subscribe it must
// cover the requested filter ("a/#" covers "a/+", not the reverse; a
// "$share/g/" prefix is ignored). A denied SUBSCRIBE gets 0x87 (0x80 in
// 3.1.1); a denied PUBLISH gets PUBACK/PUBREC 0x87 in v5 and is dropped
// silently in 3.1.1. Subscribe rules also decide each delivery: a message
// reaches a granted subscription only if a subscription to its topic alone
// would be granted, so "deny subscribe secret/#" before "allow subscribe
// #" keeps secret/x out of a "#" subscription (checked per message only
// when the file has a deny-subscribe rule).
//
// # Reserved topics and internal handlers
//
// Topics under Options.ReservedFilters (default statestore/#,
// clients/statestore/#) may be neither published to nor named in a
// subscription by clients, unless Options.Reserved allows it: such a
// SUBSCRIBE gets 0x8F topic filter invalid (0x80 in 3.1.1). A filter that
// reaches reserved topics only through a wildcard ("#", "+/+",
// "clients/#") is granted, and the reserved topics are kept out of it at
// delivery, live or retained, as MQTT keeps '$' topics out of filters
// starting with a wildcard: a reserved topic goes only to a subscription
// that has the reserved filter's literal name at each of its literal
// levels (reserved.go). Refused subscriptions are logged at debug level
// with the client and the filter, at most 10 lines per connection every
// 10 s; a SUBSCRIBE whose subscriptions the backend cannot record
// (SubscriptionBackend) is undone and refused with 0x80.
//
// A backend that implements QoS2Backend records the QoS 2 state of a
// session that outlives its connection (the packet ids received and not
// yet released, and those released and not yet completed) before the
// server sends each PUBREC, PUBCOMP and PUBREL of it, so a session
// resumed after a crash continues its exchanges exactly once.
//
// The $SYS tree (sys.go) is the server's own: its counters, published
// every Options.SysInterval under mosquitto's topic names; clients may
// subscribe to it as the ACL allows and never publish into it (PUBACK
// 0x87 in v5, dropped in 3.1.1; a will there is not published).
//
// A topic name starting with "$share/" is a shared subscription's filter,
// never a message's topic (no subscription could get it as such; MQTT 5
// §4.7.2 lets a server keep clients off topics starting with '$'): a v5
// PUBLISH to one is refused with 0x90 topic name invalid in its
// PUBACK/PUBREC (QoS 0: dropped), a 3.1.1 one is acknowledged and
// dropped (3.1.1 has no negative acknowledgement, MQTT-3.3.5-2; mosquitto
// 2.0 does the same, with 0x87 in v5), and a will there is not published.
// The connection stays up.
//
// Server.Handle claims a filter for an internal
// handler that receives matching PUBLISHes with the client's identity;
// the worker waits for it (and writes what it held before calling it).
// Server.HandleAsync registers an AsyncHandler instead, which never
// blocks and finishes with a done callback, then or later, from any
// goroutine: the state store front hands a request to its shard and
// answers from there, so no worker waits for a broker; its acknowledgement
// is queued like PublishAsync's (below), in PUBLISH order. Server.SendTo puts a message into a client's session without a
// subscription (the state store's RPC responses); Server.SendToConnected
// does so only while the client is connected (nothing is queued for an
// offline session: the state store's KEYNOTIFY notifications).
// Server.Disconnect ends a client's connection with a reason (v5
// DISCONNECT; 3.1.1: the connection is closed) and logs it.
//
// # Pipelined ingress
//
// A Backend that also implements AsyncBackend gets client PUBLISHes with
// PublishAsync (and an AsyncHandler its own, the same way): the connection keeps decoding while stores are in flight,
// up to Options.ReceiveMaximum owed acknowledgements per connection (then
// its worker parks until some complete). PUBACK/PUBREC leave only after
// the store completed and always in the order the PUBLISHes arrived;
// acknowledgements completed together go out in one write. A 3.1.1 client
// whose publish fails is disconnected, as on the synchronous path.
package mqtt
