package mqtt

import (
	"context"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// UserProperty is an MQTT 5 user property (name, value); order and
// duplicates are kept end to end.
type UserProperty = packets.UserProperty

// Message is an application message as the server and its Backend see it:
// a PUBLISH without its per-hop fields (packet id, DUP, topic alias,
// subscription identifiers). A Message handed to the backend or to a
// Handler must not be modified afterwards; it is shared by every receiver.
type Message struct {
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool

	// MQTT 5 properties, forwarded unaltered.
	HasPayloadFormat bool
	PayloadFormat    byte
	ContentType      string
	ResponseTopic    string
	CorrelationData  []byte
	User             []UserProperty
	// Expiry is when the message expires (zero: never); the remaining
	// interval is sent as Message Expiry Interval on delivery.
	Expiry time.Time

	// ClientID is the publishing client (empty for internal publishers);
	// used for No Local.
	ClientID string
	// Username is the publisher's user name, when known.
	Username string
}

// expired reports whether m has expired at now.
func (m *Message) expired(now time.Time) bool {
	return !m.Expiry.IsZero() && !now.Before(m.Expiry)
}

// ClientInfo identifies a connected client to hooks and handlers.
type ClientInfo struct {
	ClientID   string
	Username   string
	RemoteAddr string
	Version    byte // protocol level: 3, 4 or 5
	// ConnID identifies the connection among all of this server's
	// connections (never reused while the server runs).
	ConnID uint64
}

// Subscription is one stored subscription of a session.
type Subscription struct {
	Filter            string // as subscribed, "$share/g/f" included
	QoS               byte
	NoLocal           bool
	RetainAsPublished bool
	RetainHandling    byte
	// Identifier is the v5 subscription identifier (0: none).
	Identifier uint32
}

// SessionState is what a Backend stores of a session between connections:
// its subscriptions, expiry and the QoS 1/2 messages not yet acknowledged
// by the client, in delivery order.
type SessionState struct {
	ClientID      string
	Username      string
	Subscriptions []Subscription
	// Expiry is the session expiry interval after disconnect; the session
	// is deleted at DisconnectedAt+Expiry.
	Expiry         time.Duration
	DisconnectedAt time.Time
	// Pending are QoS 1/2 messages queued for the client or delivered but
	// unacknowledged (they are resent with DUP on reconnect).
	Pending []Pending
	// Released are the packet ids of QoS 2 messages the client received
	// (PUBREC) and the server released (PUBREL) without a PUBCOMP yet, in
	// send order: on reconnect the server sends PUBREL for each again
	// (MQTT 4.4), before anything else.
	Released []uint16
	// Received are the packet ids of QoS 2 messages the server received
	// and stored (PUBREC sent) whose PUBREL has not come yet: a PUBLISH
	// with one of them is a duplicate, and its PUBREL gets a PUBCOMP
	// (MQTT 4.3.3).
	Received []uint16
	// Overflow, when set, says the backend holds more of the session's
	// messages than Pending, to read again from its log (a resume with a
	// longer backlog than the backend hands over at once): the server
	// installs the session in overflow (see DeliverLive) and calls
	// Overflow with its instance (SessionInstance) before any live message
	// can reach it; the backend then hands the rest over with Refill.
	Overflow func(inst uint64)
}

// Pending is a QoS 1/2 message a session holds for its client, with what
// its delivery to this session carries: a message delivered at QoS 1 to a
// QoS 1 subscription must come back at QoS 1 after the session moved or
// the server restarted, with its retain flag and subscription
// identifiers, and with DUP when it was sent before.
type Pending struct {
	Msg *Message
	// QoS is the QoS it is delivered at (the lower of the message's and
	// the subscription's); 0 means Msg.QoS.
	QoS byte
	// Retain is the retain flag it is delivered with (set for a retained
	// message sent on subscribe, or under Retain As Published).
	Retain bool
	// SubIDs are the v5 subscription identifiers it is delivered with,
	// each once (AddSubID).
	SubIDs []uint32
	// Sent: it went out to the client at least once and was not
	// acknowledged; its next delivery carries DUP.
	Sent bool
	// PacketID is the packet id it went out with (Sent), which its
	// redelivery on a resumed session keeps (MQTT 4.4), so a QoS 2
	// receiver recognises it; 0: unknown, a new one is taken.
	PacketID uint16
}

// Deliverer is the server side of delivery: the backend calls Deliver for
// every stored message, and the server hands it to every matching local
// subscription. Deliver does not block on slow clients.
type Deliverer interface {
	Deliver(msg *Message)
}

// AsyncBackend is an optional extension of Backend for pipelined ingress:
// when the backend implements it, the server hands every client PUBLISH
// (not handler topics, wills or Server.Publish) to PublishAsync and keeps
// reading the connection while the stores are in flight, up to
// Options.ReceiveMaximum unacknowledged QoS 1/2 messages per connection.
//
// PublishAsync must store the messages of one publishing client (one
// Message.ClientID) in the order of the calls, and call done exactly once
// per message, after the message is stored durably (nil) or failed; done
// may run on any goroutine, also before PublishAsync returns, and must not
// be called with a lock the backend needs to accept further messages. The
// server sends PUBACK/PUBREC from done, in the order the PUBLISHes arrived
// on the connection; a backend completing several messages at once should
// call done for the last one first, so that the acknowledgements leave in
// one write. The retain semantics are those of Backend.Publish.
type AsyncBackend interface {
	Backend
	PublishAsync(ctx context.Context, msg *Message, done func(error))
}

// OwnerTagger is an optional extension of Backend for a back end that
// tells owners of one client id apart (the bridge's Backend.SetOwnerTag:
// the IoT hub's generation id of the device identity a connection is
// for). The server asks it, after Options.Authenticate, for the owner of
// each connect ("": unknown) and keeps it on the session. A session it
// holds in memory (connected or offline) that was last attached by a
// connect of another known owner is not resumed: it ends (its will, if
// any, is published) and the connect starts a new session with session
// present 0, as with clean start (Backend.DeleteSession follows), just as
// the back end's LoadSession gives no stored session of an earlier owner.
type OwnerTagger interface {
	OwnerTag(clientID string) string
}

// SessionConfirmer is an optional extension of Backend for a back end that
// several servers share (the bridge's cluster). A session this server
// holds offline in memory may have been started anew or resumed on
// another server since it went offline, which this server may learn of
// only later. Before it resumes such a session, the server asks
// SessionCurrent: true resumes the session from memory; false ends it
// here as another node's takeover does (Server.Evict with
// EvictSuperseded: no SaveSession or DeleteSession, its delayed will
// dropped) and loads the session with LoadSession, as for one not held
// here. An error refuses the connect with 0x88, as LoadSession's does;
// Options.SessionLoadTimeout bounds the call. A connect of a session not
// held here, or held by a connection, does not call it.
type SessionConfirmer interface {
	SessionCurrent(ctx context.Context, clientID string) (bool, error)
}

// RetainedCounter is an optional extension of Backend: the number of
// retained messages it holds, published in $SYS and returned by
// Server.RetainedCount.
type RetainedCounter interface {
	RetainedCount() int
}

// Backend is what the server needs from the system behind it. The
// in-memory implementation is NewMemoryBackend; bridge implements it
// on RocketMQ. A Backend may also implement AsyncBackend.
type Backend interface {
	// Start binds the backend to the server's delivery side. The server
	// calls it once from Server.Start, before any Publish. ctx ends when
	// Server.Start's context does (a signal during start-up) or at Close;
	// it bounds the start only and must not be kept.
	Start(ctx context.Context, d Deliverer) error
	// Publish stores msg durably and returns only then (the server sends
	// PUBACK/PUBREC after it returns nil). A message with Retain set also
	// replaces the retained message of its topic (an empty payload deletes
	// it). Stored messages come back through Deliverer.Deliver, to this
	// server and to every other node.
	Publish(ctx context.Context, msg *Message) error
	// Retained returns the unexpired retained messages whose topics match
	// filter (a plain filter, never $share).
	Retained(ctx context.Context, filter string) ([]*Message, error)
	// LoadSession returns the stored session of clientID, if any. It
	// returns once ctx ends (Options.SessionLoadTimeout bounds it): the
	// CONNECT waiting for it is then refused with 0x88.
	LoadSession(ctx context.Context, clientID string) (*SessionState, bool, error)
	// SaveSession stores (replaces) a session.
	SaveSession(ctx context.Context, s *SessionState) error
	// DeleteSession removes a stored session; deleting a missing one is
	// not an error. For a clean start the server calls it with the new
	// session installed and connected, before the CONNACK is written
	// (the connection's output is held until it returns): a multi-node
	// backend records the clean start there.
	DeleteSession(ctx context.Context, clientID string) error
	// Close releases the backend.
	Close() error
}
