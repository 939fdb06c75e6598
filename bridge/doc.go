// Package bridge joins the MQTT server engine (package mqtt) to the
// SmartGo brokers: Backend implements mqtt.Backend with the client SDK, and
// Bridge is a bridge node (an mqtt.Server on that backend). Bridge nodes
// keep no state of their own: sessions and retained messages live in
// system topics of the cluster, so any node can serve any device and a
// restarted node picks everything up again.
//
// # Ingress
//
// A device PUBLISH is routed to a broker topic: the first Options.Routes
// entry whose MQTT filter matches the topic, else Options.DefaultTopic
// (MQTT_INGRESS). It is sent with SendOrderly on the queue picked by a hash
// of the publisher's client id (client.HashSelector), so one client's
// messages keep their order in one queue, and Publish returns only when the
// broker acknowledged the store: the server sends PUBACK/PUBREC after that.
//
// A route marked IngressOnly stores into its broker topic and is not
// consumed for delivery (device telemetry meant for back ends only).
// Options.IngressProps may add broker properties to a client's message
// (a property bag decoded from the topic); it cannot replace the MQTT_*
// ones below, and its error fails the publish. Components send to
// devices with Backend.PublishTo(EgressTopic), as back ends do.
//
// The backend implements mqtt.AsyncBackend, so the engine keeps reading a
// connection while its messages are stored (pipelined ingress). The
// backend keeps one chain per ordering key (the client id, else the MQTT
// topic); a goroutine per busy chain stores its messages in arrival order
// and completes each (the PUBACK) only once the broker stored it. What
// arrived while a store was in flight is taken in one go: when the producer
// has an ordered batch send (SendBatchOrderly: one request, stored on the
// key's queue with consecutive offsets), runs of non-retained messages of
// one broker topic (up to 256 messages, 1 MiB) go out as one batch;
// otherwise, and for retained messages, one SendOrderly each. The SDK's
// plain SendBatch picks its own queue, so it is not used (that would break
// the per-client queue).
//
// # Message properties
//
// The MQTT side of a message travels in broker message properties, so a
// SmartGo (or RocketMQ) consumer gets all of it:
//
//	MQTT_TOPIC             the MQTT topic name
//	MQTT_QOS               "0", "1" or "2": the publish QoS
//	MQTT_RETAIN            "1" when the retain flag was set (absent otherwise)
//	MQTT_CLIENT_ID         the publishing client id (absent for internal publishers)
//	MQTT_USERNAME          the publisher's user name, when it gave one
//	MQTT_USER_PROPERTIES   user properties in order, duplicates kept, as a JSON
//	                       array of [name, value] pairs: [["unit","C"],["unit","K"]]
//	MQTT_RESPONSE_TOPIC    the v5 response topic
//	MQTT_CORRELATION_DATA  the v5 correlation data, standard padded base64
//	                       ("=" stands for present but empty)
//	MQTT_CONTENT_TYPE      the v5 content type
//	MQTT_PAYLOAD_FORMAT    "0" or "1" when the v5 payload format indicator was sent
//	MQTT_EXPIRY_AT         when the message expires, Unix milliseconds (from the v5
//	                       message expiry interval at arrival)
//	MQTT_EMPTY_PAYLOAD     "1": the MQTT payload was empty; the broker body is then
//	                       the single byte 0x00 (brokers refuse empty bodies)
//
// Absent MQTT fields have no property (brokers refuse empty values). Names
// and values may not hold the bytes 0x01 and 0x02 (property separators): a
// topic, response topic, content type, client id or user name holding one
// is refused (ErrUnencodable); user properties are safe because JSON
// escapes them.
//
// A client id goes into every session record and every message of its
// client, and a broker record holds 32,767 bytes of properties
// (client.MaxPropertiesLen): the bridge accepts ids of at most
// MaxClientIDLen (31,743) bytes, the record's limit less 1,024 for the
// other properties (names, separators, UNIQ_KEY, the CRC trailer, a short
// topic and user name). New caps mqtt.Options.MaxClientIDLen at it, so a
// longer id (MQTT allows 65,535 bytes) is refused at CONNECT with 0x85
// "client identifier not valid" (3.1.1: return code 0x02 "identifier
// rejected"): stored, it failed every session save (0x88 at each CONNECT,
// a client retrying for ever) and every QoS 1 publish (0x80)
// (TestClientIDBound). The user name goes into every message too: the
// client id and user name together may take MaxIdentityLen (the same
// 31,743) bytes (mqtt.Options.MaxIdentityLen, capped likewise), else the
// CONNECT is refused with 0x86 "bad user name or password" (3.1.1: 0x04)
// rather than its every publish. A publish whose topic and user
// properties still overflow the record gets 0x83 "implementation
// specific error" with the reason (mqtt.ErrUnstorable).
//
// # Delivery (egress)
//
// Every node consumes all device-facing topics (every route topic, the
// default topic and Options.EgressTopic, MQTT_EGRESS) and hands each
// message to its server, which delivers it to the matching local plain
// subscriptions (shared subscriptions: below). Each node must see every
// message, so each runs its own pull consumer assigned every queue (group
// MQTT_BRIDGE_LIVE, never committing: a node always starts at the end of
// the topics, and what a restarted node missed reaches sessions through
// their resume points below). Back ends send to devices by producing to
// MQTT_EGRESS with MQTT_TOPIC set (MQTT_QOS default 1); a message without
// MQTT_TOPIC is delivered on its broker topic's name.
//
// A session whose queue is full (mqtt.Options.MaxQueuedMessages, the
// option bridge.max_queued_messages, beyond the messages in flight) does
// not lose the QoS 1/2 messages it cannot hold: the live consumer hands
// messages over with mqtt.Server.DeliverLive, and the session, in
// overflow, takes no live QoS 1/2 message from then on. The node notes,
// per queue, the offset of the first one it did not take; a goroutine per
// overflowed session reads the queues back from there (256 messages at a
// time, so the node holds at most that much more) and hands them over
// with mqtt.Server.Refill, matched against the session's current
// subscriptions, as its queue drains to half; when it reaches the live
// consumer's position it hands the last stretch over with live delivery
// paused, and the session is live again, without gap or duplicate, in
// each queue's order. Records of the session written meanwhile (offline
// save, handoff, checkpoint) resume from that position, and name the
// messages handed over by their offsets (the latest 4096 handed over are
// remembered; older unacknowledged ones are stored whole). QoS 0 still
// goes out live (or is dropped for a backed-up socket). Memory stays
// bounded by the queue limit; the log is the buffer. A resumed session
// gets at most Options.MaxOfflineMessages from the log at once; a longer
// backlog makes it start in overflow, its reader going on from there.
//
// # Shared subscriptions
//
// A shared subscription $share/<group>/<filter> is one broker consumer
// group in clustering mode over every device-facing topic, named
// MQTT_SHARE_<group's [A-Za-z0-9_-] characters, others as "_", at most
// 32>_<16 hex digits of the FNV-1a 64 hash of the whole
// "$share/<group>/<filter>">. Every node with a member of it runs a
// consumer in that group (reconciled with the server's shared
// subscriptions every Options.ShareRefresh and when a session's
// subscriptions change, by a walk of the server's subscription tree held
// to about 2% of a core: the pause between walks is at least 50 times the
// last walk), so the brokers split the
// queues among those nodes: each message reaches one node, which hands it
// to one local member (round robin, connected members first). A new
// group starts at the topics' end offsets, decided by the brokers before
// the first member's SUBACK on the node (Backend.PrepareShares; the
// START_SHARE_GROUP request, protocol/sharestart.go), so what is
// published after the SUBACK reaches it though its consumer starts later.
// The brokers store that start as the group's offset of every queue, so a
// queue the consumer is assigned only later (a first rebalance that
// failed, a queue added, a member of another node that held it and left)
// starts there too, on this node or any other, not at the max offset of
// that moment. The earliest start wins: a broker decides each start in one
// step and moves no offset that another node's start (until a member of
// the group joins) or a connected member relies on, so members that
// subscribe to the same group on two nodes at once get everything
// published after the first SUBACK. A consumer that starts without a mark
// (the start failed, or its session was resumed with the subscription)
// starts the group itself, at the ends only where it has no offset. The group
// commits its offsets (every second and when a node leaves), so a queue
// that moves continues where its previous owner stopped; messages near a
// rebalance may come twice (at least once), but never to a member of the
// node as new while its first copy is in flight: the node remembers what
// its members hold across its consumers of the group (shareacks.go), so a
// queue it reads again from the committed offset (its consumer stopped
// and started again, the queue came back) skips those. A queue's offset is its first
// message a member is not done with (shareacks.go: acknowledged, or no
// longer held by the member's session), not what was polled, so a crash
// of the node loses none of what its members had not acknowledged. A
// member whose session ends holding messages it did not acknowledge
// (mqtt.Releaser; also when another node takes the session over without
// its state: a clean start there, a session of expiry 0, a claim made
// without this node's handoff) gives them back: the next local member
// in turn gets them, or, with none left, they stay uncommitted for the
// node that takes over the queue. A member whose queue is
// full passes the message to the next member in turn; when every local
// member's is, the group's consumer on this node waits (polling every 20
// ms) until one has room. The live consumer above
// delivers plain subscriptions only. A member whose session is offline
// keeps its node in the group: its share of the messages waits in its
// session. Shared subscriptions are not replayed into resumed sessions.
//
// A group exists while some session holds it. One that nobody held when a
// member subscribed (no node runs its consumer, no other session's record
// lists it) starts at that SUBACK, not at the offsets the brokers kept
// from its last member (written over by the start, as for a new group: no
// node hands that backlog to a member later), unless another node started
// it meanwhile (the earliest start wins). Whether the subscribing session itself held it is
// judged from the session as it was before this SUBSCRIBE, never from its
// latest record (a checkpoint may have written the new subscription
// already, and a brand-new member would count itself): Backend.held notes,
// per local session, the shares LoadSession resumed it with (from a record
// or a handoff, on any node, also after a crash) and then those of each
// SaveSubscriptions. So a resumed session that subscribes to its share
// again before the node has started the group's consumer (mosquitto_sub -c
// does at once, at any QoS) keeps what was published while it was away.
//
// # Retained messages
//
// A retained PUBLISH is also written to Options.RetainedTopic
// (MQTT_RETAINED), with the same properties, on the queue picked by a hash
// of the MQTT topic. Every node replays that topic from its start at Start
// and then follows it; the latest record of a topic (by queue offset) wins
// and one with MQTT_EMPTY_PAYLOAD deletes it.
//
// The retained topic is under the brokers' retention
// (store.file_reserved_time, 72 h by default) like any topic, so a
// retained message is written again (compact.go) before it ages out: a
// node scans its copy of the retained topic every Options.RefreshAge/8
// (at most every 5 minutes) and writes each retained message whose newest
// copy is Options.RefreshAge (24 h) old again, unchanged, on the same
// queue, with MQTT_REFRESH_OF, the queue offset of the record whose state
// it carries (its origin). Readers order a topic's states by origin: a
// copy of an older state than the one a node holds changes nothing, so a
// copy that lost a race against a publish (or a clear) of the topic
// never takes it back; the node that sees such a stale copy stored after
// the newer state writes the newer state again (a clear too, the only
// time a clear is copied), so that a replay that finds the newer original
// deleted by retention still ends at it. One node copies a topic: the
// one picked by the FNV-1a hash of the MQTT topic among the bridge nodes
// the registries list; the others copy it once its newest copy is half
// as old again (its node died; copies of one state are idempotent). A
// node writes at most 1,000 copies a second. Expired retained messages
// are not copied: they die with their records. Nodes of earlier versions
// read a copy as a publish of its state.
//
// # Sessions
//
// A persistent session is stored as JSON records in Options.SessionTopic
// (MQTT_SESSION), one per change, on the queue picked by a hash of the
// client id, so one client's records are totally ordered by their queue
// offset; every node replays the topic at Start and follows it, latest
// record per client wins. A record:
//
//	{"clientId":"dev1","node":"<node id>","online":true?,"deleted":true?,
//	 "connect":true?,"gen":18?,"since":12?,
//	 "username":"u","subscriptions":[{"filter":"cmd/#","qos":1,"noLocal":false,
//	   "rap":false,"rh":0,"id":0}],
//	 "expiryMs":3600000,"disconnectedAtMs":1763800000000,
//	 "resume":[{"topic":"MQTT_EGRESS","broker":"broker-a","queue":0,
//	            "from":17,"live":20,"pending":[17,19],"sent":[17],"sentIds":[5],
//	            "prev":{"store":1763799999000,"born":1763799998990,"size":2}?}],
//	 "pending":[{"topic":"t","payload":"<base64>","qos":1,"retain":true?,
//	             "subIds":[7]?,"sent":true?,"id":9?,...}],
//	 "released":[12]?,"received":[7]?,
//	 "will":{"wid":"<16 hex>-<n>","topic":"will/dev1","payload":"<base64>","qos":1,
//	         "retain":true?,"clientId":"dev1","username":"u"?,"delayMs":5000?,
//	         "sessionMs":3600000?,"dueAtMs":1763800005000?,"retry":true?,...}?,
//	 "prepared":"<tag>"?,"owner":"<tag>"?,"refreshOf":17?}
//
// ("prepared": an offline record Backend.PrepareSessionReplacing wrote
// for a client that had not connected, with the tag of the owner it was
// prepared for, Replacer.Tag: the IoT hub's identity generation id; a
// later prepare for another tag replaces it; nodes of earlier versions
// ignore it, and prepared records they wrote have none. "owner": on the
// records of a connection, the tag of the owner the connection was for,
// Backend.SetOwnerTag: the IoT hub's generation id of the identity it
// authenticated as; an offline one is replaced by a prepare for another
// tag, whatever its user name and whenever it ended; absent when unknown
// and on earlier versions' records, which are judged by when they ended,
// Replacer.Left, and only when they name a user. LoadSession does not
// resume a record whose owner, or prepared tag, is another than the
// connecting client's SetOwnerTag: the connection starts a new session;
// nor does the MQTT server resume a session it holds in memory that a
// connect of another owner last attached, Backend.OwnerTag)
//
// ("since": on a node's offline save of its local session, 1 + the
// offset where that session last went live on the node: its connect
// request, clean-start announcement or first claim. A record of another
// node stored after that offset and before the save, other than the
// handoff answering that connect request (its "gen" is the same), stays
// the client's latest record: the save was on its way while the client
// went on elsewhere, say with a clean start. Absent when unknown and on
// earlier versions' records, which nodes apply by offset alone.)
//
// ("refreshOf": a copy that compaction wrote of the client's record at
// that offset of the queue, carrying its state; see Compaction below)
//
// and a will-done marker, which carries no session state:
//
//	{"clientId":"dev1","node":"<node id>","expiryMs":0,"willDone":"<wid>"}
//
// or, with "claim" (the writing process's id, 16 hex) and "claimPrev"
// (the claim it takes over, "<node id>/<process id>"; absent: none), a
// claim to publish that will:
//
//	{"clientId":"dev1","node":"<node id>","expiryMs":0,"willDone":"<wid>",
//	 "claim":"<16 hex>","claimPrev":"<node id>/<16 hex>"?}
//
// or, with "revoke" (a claim, "<node id>/<process id>"), the will's own
// node voiding that claim on it (the node is alive and holds the will):
//
//	{"clientId":"dev1","node":"<node id>","expiryMs":0,"willDone":"<wid>",
//	 "revoke":"<node id>/<16 hex>"}
//
// or, with "owe" and the will (its "retry" set), the will's node owing
// it: its publish failed and the node tries it again; no later record of
// the node settles it (a new connection's will, a handoff, a delete),
// only its will-done marker:
//
//	{"clientId":"dev1","node":"<node id>","expiryMs":0,"will":{"wid":"<wid>",...,
//	 "dueAtMs":1763800001000,"retry":true},"willDone":"<wid>","owe":true}
//
// Kinds of record: a connect request ("connect"), a clean-start
// announcement ("connect" and "deleted"; "expiryMs" the new session's
// expiry when it has one, else 0), a claim or subscription change
// of a connected session ("online"), an offline save, a handoff (an
// offline save, or "deleted" for a session that ended with its
// connection, answering the connect request at queue offset gen-1), and a
// delete ("deleted").
//
// SaveSession (a client went offline, or the node shuts down) writes the
// subscriptions, expiry and, per consumed queue, the resume point: "live"
// is the first message whose delivery ended after the disconnect (earlier
// ones reached the session before the engine took its state), "pending"
// are the log offsets of the session's unacknowledged messages ("sent"
// those of them that went out to the client already, "sentIds" the packet
// ids they went out with, in the same order) and "from" the smallest of
// both; "prev" names the message at from-1 as the node delivered it (its
// store and born times in ms and its body's length; absent when the node
// did not remember it), so that a resume sees when the queue's broker
// lost its log's tail and gave offsets below "from" again, and resumes
// from the first of them (sessions_reused.go). Pending messages that did not come from the log (retained
// deliveries, SendTo) are stored whole (at most 1 MiB of payload, the
// rest dropped with a log line), with the QoS, retain flag and
// subscription identifiers of their delivery, "sent" and the packet "id".
// "released" are the packet ids of QoS 2 messages the client received
// (PUBREC) and the node released (PUBREL) without a PUBCOMP yet. A
// resumed session sends, before anything else, PUBREL for each released
// id and the messages sent before again, with DUP and their packet ids
// (MQTT 4.4: a QoS 2 receiver recognises them). "received" are the packet
// ids of QoS 2 messages the client sent that were stored and PUBREC'd and
// whose PUBREL has not come: the resumed session treats a PUBLISH with
// one of them as a duplicate and answers its PUBREL with PUBCOMP.
// RecordQoS2 (mqtt.QoS2Backend) writes an online record before each
// PUBREC, PUBCOMP and PUBREL of a session that outlives its connection,
// so these survive a crash of the node (docs/durability.md).
//
// LoadSession (a client resumes on a node that does not hold its session
// in memory: another node, or after a restart) writes a connect request
// and waits until the node's tail has applied it: the client's record
// before it is then its latest state (see Takeover). It waits (bounded)
// until the node's live consumer has delivered what the brokers stored so
// far, then returns the subscriptions and, read back from the log, the
// pending offsets plus every later message matching a (non-shared)
// subscription, QoS 1/2 only (at the lower of message and subscription
// QoS, with the identifiers of the matching subscriptions and the retain
// flag under Retain As Published, as live delivery gives them; pending
// ones that were sent come back with DUP), unexpired, up to where the
// live consumer is, ordered by store time
// then commitlog offset (one publisher's messages keep their order),
// bounded by Options.MaxOfflineMessages: the excess stays in the log, and
// the session starts in overflow (see Delivery: mqtt.SessionState.Overflow)
// from the first message of each queue not handed over, as it does from
// where the replay got to when reading fails on the way. The last
// stretch of that read pauses the node's live delivery (concurrent
// resumes share the pause), until 50 ms after return, so no
// message falls between the replay and the session's installation. The
// node then writes an "online" claim record (the resume points and pending
// messages of the record it loaded, with its own live positions for
// queues that record does not name), so a later resume elsewhere starts
// there even if this node dies without saving. Delivery is at least once:
// messages near a disconnect may come twice. Messages whose MQTT_TOPIC is
// not a valid MQTT topic name are never delivered (a log line says so).
//
// While such a session is connected, its online record moves on: every
// Options.CheckpointInterval (30 s) for each one that received or
// acknowledged messages since its last record, and on every SUBSCRIBE or
// UNSUBSCRIBE (SaveSubscriptions, mqtt.SubscriptionBackend: the server
// calls it before the SUBACK/UNSUBACK, so a crash of the node loses no
// acknowledged subscription). The record holds the session's
// subscriptions, its unacknowledged messages and resume points taken at
// the same moment (mqtt.Server.Snapshot), like an offline save: after a
// crash of the node the client gets again what it had not acknowledged
// and what came after, and at most about one interval of what it had. A
// session whose unacknowledged messages do not fit a record keeps its
// previous resume points. The offline save of a connection that ended is
// not written when the client has connected to this node again by the
// time the save would go out: the new connection's records stand. A save
// still on its way when the client's next connection ends its session
// is written before that delete (the server orders a client's saves and
// deletes: mqtt/persistorder.go).
//
// DeleteSession of a client connected to this node (a clean start: the
// server holds the connection's output, its CONNACK first, until the call
// returns) writes a clean-start announcement. Otherwise it writes a
// "deleted" record, also when the client's latest record is this node's
// announcement of a session with an expiry (it ended before writing
// another record: a DISCONNECT set its expiry to 0), unless the current
// record belongs to another node
// and this node's own last record has expired by now (the expiry of a
// stale offline copy of a session that resumed elsewhere); a client id
// never stored costs no write.
//
// # Takeover
//
// Every connect is a record of the client's queue (a connect request from
// LoadSession, or a clean-start announcement), and every node follows the
// topic. A node whose server holds the client id (connected, or offline in
// memory) drops it (mqtt.Server.EvictOrdered: DISCONNECT 0x8E for v5, the
// connection closed for 3.1.1, no save) when another node's connect,
// announcement or claim is newer than the record that stands for the local
// session (the node's last record written for that session instance; a
// local session with no such record yet, or with one being written, is
// judged once it is stored, at most Options.SendTimeout later). Answering
// a connect request, it writes a handoff record with the session's state
// at that moment (subscriptions, unacknowledged messages, resume points).
// A connect request stored while the local session's records said it
// was connected here (after its connect or online record, before any
// offline save) is answered too when a record of the session (a
// checkpoint, the offline save of a connection that ended just then) was
// stored after it before the node applied it: the connecting node waits
// for the handoff.
// The connecting node, when the live record before its request (deletes
// and clean-start announcements of sessions without expiry end a stored
// session: a node keeps no record for them; an announcement with
// "expiryMs" stands for a session that outlives its connection and is
// kept) was another node's connect, announcement or claim, waits for the
// handoff that answers its request (its "gen" is the request's offset
// plus one; bounded by Options.HandoffTimeout; past it, that node is taken
// as dead and the session resumes from the latest record of another node
// after the request, else from the record before it) and resumes from
// it, before its CONNACK. A handoff is the session as of its request:
// another node's record of the session's state stored after the request
// (one that resumed without waiting, from the offline save before it)
// stays the client's current record when the handoff comes later. A
// node that sees a connect request stored more than three quarters of
// Options.HandoffTimeout ago (by the broker's store time: it was hung or cut off) drops its copy of the session but writes
// no handoff: the connecting node has resumed without it by then, and a
// handoff stored after that node's newer records would take them back. A session therefore lives on one node at a time, and
// A -> B -> A resumes from B's state. The will of a session taken over is
// published when the new connect is a clean start or the will has no
// delay.
//
// A node whose server holds the session offline in memory asks the
// cluster before it resumes it (Backend.SessionCurrent, the
// mqtt.SessionConfirmer): its tail catches up with the session topic as
// the brokers hold it at that moment (one round trip for the ends of the
// topic's queues), and the copy in memory is resumed only when the
// client's latest record is the node's own. Otherwise (another node's
// clean start, resume or handoff came later) the server ends its copy as
// a takeover does and the connect loads the session like any other
// (TestBridgeInMemoryResumeConfirmed). A connect of a session the node does
// not hold, or holds connected, costs nothing more.
//
// # Wills
//
// A will outlives the node its client is connected to (will.go). Every
// record a node writes while the client is connected to it (a claim, a
// checkpoint, a subscription or QoS 2 record, a clean-start
// announcement) carries the connection's will: "will" holds the message
// (the fields of a pending message, with its publisher's client id and
// user name), its Will Delay Interval ("delayMs"), the session expiry
// ("sessionMs": a session that ends sooner publishes its will then) and
// an id ("wid": the writing process's random prefix and a counter) that
// stays the same for one connection. The offline save of a session whose
// connection ended with its will delay running carries the will too, with
// when it is due ("dueAtMs"); the node that publishes it then (the delay
// passed) writes a will-done marker. A connect that did not start clean,
// whose records before the CONNACK cannot carry the will (the session is
// not installed yet), is followed by an online record with it
// (mqtt.WillBackend, after the CONNACK, before the server reads the
// client's next packet). Every node's tail keeps the wills stored and
// not settled yet ("owed"), per client, in the order of the client's
// queue: a record of a node settles that node's earlier wills of the
// client (an offline save, a handoff, a delete, a record with another
// will), and a connect request of another node cancels a will with a
// delay (the client resumed its session before the delay passed; a will
// without delay is not cancelled: its connection ended when its node
// did). A node that ends a session without a record (a clean session
// ending, a session taken over by a clean start) writes a will-done
// marker for its will. The offline save or delete of a connection that
// ended may be stored after the records of the client's next connection
// on the same node (it reconnected at once): the node then stores the
// new connection's will again (an online record).
//
// A will whose node is gone is published once, by a live node. Every
// HeartbeatInterval each node reads the bridge nodes the registries list;
// a node with owed wills that two looks in a row did not list is gone
// since the first of them. The listed node with the smallest id writes a
// claim for each of the gone node's wills once its delay (from that first
// look; or "dueAtMs", when the delay was running already) has passed.
// A claim holds when the will is still owed and its claim is still the
// one the claim takes over ("claimPrev"); every node's tail decides the
// same. The process whose claim holds publishes the will (once the
// broker stored it), then settles it with a will-done marker; a claim
// written while the lists disagreed, after another, comes second and
// does nothing. A claim whose process is gone before its marker (an
// earlier process of this node, or a node seen gone like the will's own)
// is taken over by a new claim, and the will published then: a will is
// not lost when its publisher dies; it is published twice when the
// publisher dies after publishing and before its marker is stored (the
// contract is at least once: the will message and its marker are two
// writes, to two topics, that nothing binds; each publisher that dies
// between the two adds one copy, TestBridgeWillPublisherDiesBeforeItsMarker). A
// node restarted under the same node id (bridge node_id set) publishes
// its earlier process's wills itself: those without delay at Start,
// before it accepts connections, the others when their delay from Start
// has passed. A will-done marker is read as a session record by nodes of
// an earlier version, and a claim as a will-done marker: upgrade every
// node before relying on them. A claim stored twice (written again
// after a write that reported failed but was stored) holds by its first
// copy; the second, the same process's, changes nothing.
//
// A node only looks gone when the registries stop listing it while it
// lives (its heartbeats cut, its clients still connected): a live
// connection's will must not go out. A claim on another node's will
// therefore waits (Options.WillClaimGrace, 3 s) before its
// process publishes; the will's node, when its tail applies a claim
// that holds on a will it stored and still holds (its client connected,
// its delay running, its publish tried again), writes a revoke naming
// that claim. The revoke voids the claim on every node's tail (the will
// is owed without claim again), the claimer does not publish (the
// goroutine that was to publish checks that its claim still holds, also
// when it starts after the revoke), and from the revoke on, for five
// heartbeat intervals (at least 10 s), the claimers take the node for
// alive whatever the registries say; after that a claim and a
// revoke may follow again. A revoke whose write fails is written again
// while the claim stands. A node cut off from the brokers as well
// cannot revoke: its clients' wills go out (their node looks dead in
// every way the others can see). A revoke is read as a will-done
// marker by nodes of an earlier version.
//
// A will whose publish failed on its node stays owed (mqtt: the server
// tries it again with backoff, and Server.Will gives it, due at once,
// meanwhile): the node writes a will-owed marker for it (mqtt.WillOwer),
// after which no record of the node settles it, not the records of the
// client's next connection, on this node, nor a handoff to another
// node; the session's delete or offline save carries it too, and a
// node that ends a session without a record writes no will-done marker
// for it; WillPublished's marker settles it once it went out. A
// will-owed marker whose write fails is written again, with backoff,
// while the node owes the will (settled again if it went out
// meanwhile). A node
// of an earlier version reads a will-owed marker as a will-done marker. One the
// broker can never store (ErrUnencodable, or refused as an invalid
// message, e.g. a topic and user properties over a record's 32,767 bytes
// of properties: both mqtt.ErrUnstorable) is dropped and settled
// instead, by its node or by a claimer.
//
// Known limits: a will is published a few heartbeat intervals after its node
// died, plus its delay; a resume within the delay cancels the will even
// when it came after the delay measured from the death itself; a clean
// start of the client on a live node while its earlier node is gone
// does not publish the delayed will at once, the detection does; wills
// over 1 MiB of payload are not stored.
//
// # Compaction
//
// The session topic is under the brokers' retention like the retained
// topic, so the latest record of an offline session is copied the same
// way (compact.go): an offline save, handoff or prepared record of a
// session with expiry left whose newest copy is Options.RefreshAge old is
// written again, unchanged but for "refreshOf" (the offset of the record
// whose state it carries, its origin) and without its will, by the node
// the FNV-1a hash of the client id picks among the listed nodes (the
// others half as late again), at most 1,000 copies a second per node
// together with the retained ones. A copy of the state a node holds
// only moves its copy time on; one of an older state (stored after a
// connect request, an online record or a delete that raced it) changes
// nothing, and the node then writes the newer state's copy after it: a
// delete too (a "deleted" record with "refreshOf", for ten minutes after
// the tail applied the delete), so that a replay that finds the newer
// original deleted by retention still ends at it. Only a node that never
// read the original (it was deleted) applies a copy as a record. Expired
// sessions are not copied: they die with their records.
//
// A connected session's records are not copied: its node writes a new
// online record (a checkpoint) once the client's current record is its
// own and Options.RefreshAge old, so a session connected and idle longer
// than retention still resumes elsewhere after its node crashed
// (TestBridgeConnectedSessionOutlivesRetention).
//
// Known limits: a will still owed when its offline save is copied (a
// will delay or publish retries of over Options.RefreshAge) is not
// carried by the copy, and will-owed markers are not copied; a node of
// an earlier version reads a copy as a record of its state, which may
// bring back an older state it raced with.
//
// Memory: a node keeps the store time of the newest copy of every live
// session record it read, and, for ten minutes, the end of each stored
// session (a clean session's end is not kept: it had no stored session).
//
// Memory: a node keeps the latest live record of every stored session
// (a clean start's announcement while it is the latest record of a
// session with an expiry; none for sessions without expiry or deleted
// ones; its own records once, not
// again as decoded by its tail), its own last record of each persistent
// session it held, the position of the record standing for each of its
// local sessions (a clean one costs just that), a delete or
// announcement it wrote until its tail passes it, and the stored will of
// every client connected with one anywhere in the cluster (its message
// and some 100 bytes), until it is settled. A clean session that
// ends or moves to another node leaves nothing behind on any node. A
// connect waiting for a handoff is told of the records of other nodes
// that the tail applies for its client meanwhile.
//
// Known limits: a persistent connect of a client whose session without
// expiry is connected to another node does not wait for that node's
// handoff (the node still drops the client on seeing the request; such a
// session carries no state); clients that connect to two nodes at the
// same moment may see one extra takeover; a node that
// crashes while holding a session is waited for HandoffTimeout at the next
// connect of that client; SaveSubscriptions needs the engine to call it
// (mqtt.Server.SaveSubscriptions), otherwise a crash loses the
// subscriptions made since the session's last record.
//
// # Extending a node
//
// Bridge.Server exposes the mqtt.Server (Handle, SendTo, Stats) and
// Options.WrapBackend lets a component hook the backend calls (the state
// store front learns of session ends that way). A wrapper that does not
// forward every optional interface the server uses (subscription saves,
// QoS 2 records, stored and owed wills, share preparation) has the server
// reach the backend's directly for all of them.//
// # AMQP 0-9-1
//
// AMQPBackend implements amqp.Backend, the storage of the AMQP 0-9-1
// engine (package amqp), on the brokers:
//
//   - Each durable queue's messages are a topic of its own,
//     AMQPQueueTopic(vhost, name) ("AMQP_Q_" + a readable part + "_" + a
//     hash of both names), with one queue: the AMQP queue's offsets are
//     that queue's consume-queue offsets. OpenQueue creates the topic when
//     no master has it, on one master picked by a hash of the topic name
//     among the masters sorted by name; when a topic is routed to several
//     broker groups, every node uses the first by name. A message is one
//     broker message whose body is a record (amqp_format.go): exchange,
//     routing key, the content header's raw properties, the body.
//   - A queue log's appends are sent by one goroutine at a time, in the
//     order of the Append calls, each request after the previous one was
//     answered, carrying what arrived meanwhile as one ordered batch: the
//     offsets follow the call order (amqp_log.go).
//   - The committed offset is consumer group AMQPOffsetGroup's offset on
//     the queue's topic, stored by the broker like any group's.
//   - The durable exchanges, queues and bindings are snapshots appended
//     to AMQPDefinitionsTopic (one queue); the newest is the definitions.
//     Saves run one at a time. A load passes over a newer snapshot the
//     broker does not serve (a damaged record) or that does not decode,
//     logged at ERROR, and loads the one before it (without the changes
//     the bad one held), trying up to 100; so a damaged snapshot costs
//     its last change, not the start of the AMQP server.
//   - DeleteQueue deletes the topic, which removes its committed offsets
//     too: a queue declared again under the name starts empty.
//
// The brokers' retention keeps what the queues still need: a queue
// topic's messages from AMQPOffsetGroup's committed offset on, and the
// newest definitions snapshot, are never deleted, however old, nor to
// free disk space (cmd/smartgo sets broker.Options.Retained; the brokers
// refuse writes on a full disk instead). The newest snapshot is also
// refreshed, so that it holds back no more than 6 h of the log: each
// backend that loaded or saved a snapshot looks at the newest one every
// minute (a node whose AMQP server never had definitions asks nothing)
// and appends it again once it is 6 h old (the snapshot the topic
// holds, never one of its own that may be older). A message must also fit a broker message
// (store.max_message_size, 4 MiB by default, minus the record's header).
//
// Each node serving AMQP runs its own engine: a durable queue's log is
// shared storage, but its consumers, deliveries and unacknowledged
// messages live in one engine. Two nodes that open the same durable
// queue would each deliver all of its messages, and their committed
// offsets would overwrite each other. Serve AMQP from one node of a
// cluster (v1).
package bridge
