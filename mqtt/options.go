package mqtt

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// Defaults of Options.
const (
	// DefaultMaxPacketSize carries the largest state store request (a
	// 64 KiB key and a 3 MiB value, statestore.DefaultMaxKeySize and
	// DefaultMaxValueSize) and keeps every PUBLISH payload within the
	// broker's 4 MiB message limit.
	DefaultMaxPacketSize     = 4 << 20
	DefaultListen            = "0.0.0.0:1883"
	DefaultReceiveMaximum    = 1024
	DefaultKeepAliveMax      = 20 * time.Minute
	DefaultSessionExpiryMax  = 24 * time.Hour
	DefaultMaxQueuedMessages = 1000
	DefaultMaxOutbound       = 4 << 20
	DefaultTopicAliasMaximum = 64
	DefaultConnectTimeout    = 10 * time.Second
	// DefaultSessionLoadTimeout outlasts a cluster backend's resume
	// under a reconnect storm (the bridge bounds each of its steps by
	// seconds) yet frees the CONNECT of a backend that hangs.
	DefaultSessionLoadTimeout = 30 * time.Second
	DefaultSlowReaderTimeout  = 10 * time.Second
	DefaultWorkers            = 256
	DefaultSysInterval        = 10 * time.Second
	DefaultPollLinger         = time.Millisecond
	// DefaultMaxInboundMemory lets 32 packets of DefaultMaxPacketSize
	// arrive at once; the process stays well under a gigabyte of input
	// whatever its clients send.
	DefaultMaxInboundMemory    = 128 << 20
	DefaultInboundStallTimeout = 10 * time.Second
)

// DefaultReservedFilters are the topic filters no client may publish to or
// name in a subscription unless a Handler claims them or Options.Reserved
// allows it: the state store request and response trees. (The $SYS tree
// is not among them: it is read-only for every client and subscribable
// as the ACL allows; see sys.go.)
var DefaultReservedFilters = []string{"statestore/#", "clients/statestore/#"}

// Options configures a Server. DefaultOptions gives a usable set; a zero
// field of the numeric kind means its default (documented per field).
type Options struct {
	// Listen are plain TCP listen addresses ("127.0.0.1:1883", ":0").
	Listen []string
	// TLSListen are TLS listen addresses; they need TLSCertFile and
	// TLSKeyFile (or TLSConfig).
	TLSListen   []string
	TLSCertFile string
	TLSKeyFile  string
	// TLSConfig, when set, is used instead of loading the files above.
	TLSConfig *tls.Config

	// MaxPacketSize is the largest packet accepted from a client, fixed
	// header included (advertised in CONNACK). 0 means DefaultMaxPacketSize.
	MaxPacketSize int
	// MaxInboundMemory bounds the input all connections together buffer
	// beyond a small array each (4 KiB): partly received large packets,
	// bursts. When it is used up, connections that need more stop being
	// read (TCP backpressure) until memory is released, except one at a
	// time, so that one packet always completes; clients whose packets
	// fit the small array go on. See inbound.go. 0 means
	// DefaultMaxInboundMemory.
	MaxInboundMemory int64
	// InboundStallTimeout: while connections wait for inbound memory,
	// a client holding some and sending nothing for this long, stalled
	// inside a packet, is disconnected (v5: 0x97). 0 means
	// DefaultInboundStallTimeout.
	InboundStallTimeout time.Duration
	// ReceiveMaximum is how many unacknowledged QoS 1/2 PUBLISHes a client
	// may have in flight towards the server (advertised in CONNACK); a
	// client exceeding it is disconnected with 0x93. 0 means
	// DefaultReceiveMaximum.
	ReceiveMaximum int
	// TopicAliasMaximum is the number of topic aliases the server accepts
	// from a client (0 means DefaultTopicAliasMaximum; negative disables).
	TopicAliasMaximum int
	// KeepAliveMax caps the keep alive a client asks for; a larger (or
	// zero) request is answered with Server Keep Alive. 0 means
	// DefaultKeepAliveMax.
	KeepAliveMax time.Duration
	// SessionExpiryMax caps the session expiry a client asks for. 0 means
	// DefaultSessionExpiryMax.
	SessionExpiryMax time.Duration
	// MaxClientIDLen is the longest client identifier, in bytes, a CONNECT
	// may carry; a longer one is refused with 0x85 "client identifier not
	// valid" (3.1.1: return code 0x02 "identifier rejected"). 0 means
	// MQTT's own bound of 65,535. bridge.New caps it at
	// bridge.MaxClientIDLen (what a broker record can hold) and sets that
	// when it is 0; an operator may set less (bridge.max_client_id_len).
	MaxClientIDLen int
	// MaxIdentityLen is the most bytes a CONNECT's client identifier and
	// user name may take together, for a back end that stores both with
	// every message and session record; over it (the client id within
	// MaxClientIDLen) the CONNECT is refused with 0x86 "bad user name or
	// password" (3.1.1: return code 0x04) and a reason naming the sizes.
	// 0 means no bound beyond each one's own. bridge.New caps it at
	// bridge.MaxIdentityLen (what a broker record can hold) and sets that
	// when it is 0; an operator may set less (bridge.max_identity_len).
	MaxIdentityLen int
	// MaxQueuedMessages bounds the QoS 1/2 messages one session keeps
	// queued (offline or beyond the client's receive maximum): a memory
	// bound. What a full queue does with the next message depends on the
	// backend: under Server.DeliverLive (the bridge) the session enters
	// overflow and the backend hands the messages over again from its log
	// as the queue drains (nothing is lost); under Deliver (the engine on
	// its own, the memory backend) the message is dropped, counted in
	// Stats.Dropped and logged. 0 means DefaultMaxQueuedMessages.
	MaxQueuedMessages int
	// MaxOutbound bounds the bytes buffered for one connection's socket: a
	// reader slower than that is disconnected at once. Over half of it,
	// QoS 0 messages to the client are dropped (counted in
	// Stats.DroppedQoS0 and logged); see SlowReaderTimeout. 0 means
	// DefaultMaxOutbound.
	MaxOutbound int
	// SlowReaderTimeout is how long a connection's output may stay backed
	// up (over MaxOutbound/2 bytes waiting for the socket, where QoS 0
	// messages to it are dropped, until it drains below MaxOutbound/4)
	// before the client is disconnected, at its next dropped message (v5:
	// DISCONNECT 0x97 quota exceeded). 0 means DefaultSlowReaderTimeout;
	// negative disables the time limit (MaxOutbound still applies).
	SlowReaderTimeout time.Duration
	// ConnectTimeout is how long a new connection may take to send
	// CONNECT. 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// SessionLoadTimeout bounds Backend.LoadSession at a CONNECT that
	// resumes a session (the context it gets ends then): a backend that
	// does not answer in time gets the client CONNACK 0x88 server
	// unavailable (v3.1.1: 3) instead of holding the connection until the
	// server stops. 0 means DefaultSessionLoadTimeout.
	SessionLoadTimeout time.Duration
	// Workers bounds the goroutines that handle packets. 0 means
	// DefaultWorkers.
	Workers int
	// Pollers is the number of epoll goroutines (0: 1 per 4 CPUs, at least 1).
	Pollers int
	// PollLinger is the longest a busy poller sleeps between rounds to
	// gather what arrives meanwhile (wake-up moderation, linger_linux.go):
	// each request may wait about this long more (twice as long after a
	// round that found nothing), and each wake-up serves more requests.
	// A few clients that come back within a round wait less: the sleep
	// follows them down to their own round trip. 0 means
	// DefaultPollLinger; negative never lingers.
	PollLinger time.Duration
	// SysInterval is how often the $SYS tree is published (sys.go). 0
	// means DefaultSysInterval; negative disables the tree.
	SysInterval time.Duration
	// Version is what $SYS/broker/version reports after "smartgo version ",
	// for example "1.2.0 (0123456789ab)". Empty means the main module's
	// version and VCS revision from the binary's build information (which
	// says "(devel)" for a binary not built from a released module).
	Version string

	// CredentialsFile, when set, turns on user name/password
	// authentication against the file (format in doc.go).
	CredentialsFile string
	// AllowAnonymous lets clients without a user name connect when a
	// credentials file is set.
	AllowAnonymous bool
	// ACLFile, when set, loads publish/subscribe rules (format in doc.go).
	ACLFile string

	// ReservedFilters are topic filters reserved for internal handlers;
	// nil means DefaultReservedFilters, an empty non-nil slice none. A
	// subscription that reaches them only through a wildcard is granted
	// and never receives their topics (reserved.go).
	ReservedFilters []string
	// Reserved, when set, is asked whether a client may publish to a
	// reserved topic or subscribe with a filter naming one (subscribe
	// true); nil denies.
	Reserved func(c ClientInfo, topicOrFilter string, subscribe bool) bool

	// Authenticate, when set, is asked about every CONNECT before the
	// credentials file: (true, nil) accepts the client without the file,
	// (false, nil) leaves the decision to the file (or lets the client in
	// when there is none), an error refuses it (ErrBadCredentials: 0x86,
	// ErrUnavailable: 0x88, others 0x87; the error text is the v5 reason
	// string and the log's detail). It runs on a connection worker and
	// may block briefly (a registry lookup); see hooks.go.
	Authenticate func(*ConnectRequest) (bool, error)
	// OnConnect is called once the server accepted a connection (CONNACK
	// sent); OnDisconnect once such a connection ended, for any reason
	// (a takeover's new connection may be announced before the old one's
	// end: ClientInfo.ConnID tells them apart). Both run on server
	// goroutines and must not block.
	OnConnect    func(ClientInfo)
	OnDisconnect func(ClientInfo)
	// OnAcked, when set, is told of every QoS 1 or 2 message a client
	// acknowledged (its PUBACK, or PUBCOMP), with the client id. It runs
	// under the session's lock: it must not block nor call into the
	// server, nor change or keep msg (a Recycler may reuse it).
	OnAcked func(clientID string, msg *Message)
	// Authorize, when set, is asked about every PUBLISH no Handler claims
	// and every SUBSCRIBE filter, after the reserved-topic and ACL checks:
	// an error refuses it (0x87 not authorized; the error text is the
	// detail). It must be fast: it runs for every message.
	Authorize func(c ClientInfo, topicOrFilter string, subscribe bool) error

	// Logger receives one line per refused or dropped client; nil discards.
	Logger *slog.Logger
}

// DefaultOptions returns options listening on DefaultListen with every
// limit at its default.
func DefaultOptions() Options {
	return Options{
		Listen:              []string{DefaultListen},
		MaxPacketSize:       DefaultMaxPacketSize,
		ReceiveMaximum:      DefaultReceiveMaximum,
		TopicAliasMaximum:   DefaultTopicAliasMaximum,
		KeepAliveMax:        DefaultKeepAliveMax,
		SessionExpiryMax:    DefaultSessionExpiryMax,
		MaxQueuedMessages:   DefaultMaxQueuedMessages,
		MaxOutbound:         DefaultMaxOutbound,
		ConnectTimeout:      DefaultConnectTimeout,
		SessionLoadTimeout:  DefaultSessionLoadTimeout,
		SlowReaderTimeout:   DefaultSlowReaderTimeout,
		Workers:             DefaultWorkers,
		SysInterval:         DefaultSysInterval,
		PollLinger:          DefaultPollLinger,
		MaxInboundMemory:    DefaultMaxInboundMemory,
		InboundStallTimeout: DefaultInboundStallTimeout,
	}
}

// Validate checks the options.
func (o Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if len(o.Listen)+len(o.TLSListen) == 0 {
		return bad("no listen address")
	}
	if len(o.TLSListen) > 0 && o.TLSConfig == nil && (o.TLSCertFile == "" || o.TLSKeyFile == "") {
		return bad("TLS listener without certificate and key")
	}
	if o.MaxPacketSize != 0 && (o.MaxPacketSize < 64 || o.MaxPacketSize > packets.MaxPacketSizeLimit) {
		return bad("MaxPacketSize %d outside [64, %d]", o.MaxPacketSize, packets.MaxPacketSizeLimit)
	}
	if o.ReceiveMaximum < 0 || o.ReceiveMaximum > 65535 {
		return bad("ReceiveMaximum %d outside [0, 65535]", o.ReceiveMaximum)
	}
	if o.TopicAliasMaximum > 65535 {
		return bad("TopicAliasMaximum %d over 65535", o.TopicAliasMaximum)
	}
	if o.KeepAliveMax < 0 || o.KeepAliveMax > 65535*time.Second {
		return bad("KeepAliveMax %v outside [0, 65535s]", o.KeepAliveMax)
	}
	if o.SessionExpiryMax < 0 {
		return bad("negative SessionExpiryMax")
	}
	if o.MaxClientIDLen < 0 || o.MaxIdentityLen < 0 {
		return bad("negative MaxClientIDLen or MaxIdentityLen")
	}
	if o.MaxInboundMemory < 0 || o.InboundStallTimeout < 0 {
		return bad("negative inbound memory limit or stall timeout")
	}
	if o.MaxQueuedMessages < 0 || o.MaxOutbound < 0 || o.Workers < 0 || o.Pollers < 0 || o.ConnectTimeout < 0 || o.SessionLoadTimeout < 0 {
		return bad("negative limit")
	}
	for _, f := range o.ReservedFilters {
		if !packets.ValidTopicFilter(f) || packets.IsShared(f) {
			return bad("reserved filter %q is not a topic filter", f)
		}
		if strings.Count(f, "/") >= maxReservedLevels {
			return bad("reserved filter %q has over %d levels", f, maxReservedLevels)
		}
	}
	return nil
}

// withDefaults fills zero fields.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.MaxPacketSize == 0 {
		o.MaxPacketSize = d.MaxPacketSize
	}
	if o.ReceiveMaximum == 0 {
		o.ReceiveMaximum = d.ReceiveMaximum
	}
	if o.TopicAliasMaximum == 0 {
		o.TopicAliasMaximum = d.TopicAliasMaximum
	} else if o.TopicAliasMaximum < 0 {
		o.TopicAliasMaximum = 0
	}
	if o.KeepAliveMax == 0 {
		o.KeepAliveMax = d.KeepAliveMax
	}
	if o.SessionExpiryMax == 0 {
		o.SessionExpiryMax = d.SessionExpiryMax
	}
	if o.MaxQueuedMessages == 0 {
		o.MaxQueuedMessages = d.MaxQueuedMessages
	}
	if o.MaxOutbound == 0 {
		o.MaxOutbound = d.MaxOutbound
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = d.ConnectTimeout
	}
	if o.SessionLoadTimeout == 0 {
		o.SessionLoadTimeout = d.SessionLoadTimeout
	}
	if o.SlowReaderTimeout == 0 {
		o.SlowReaderTimeout = d.SlowReaderTimeout
	}
	if o.Workers == 0 {
		o.Workers = d.Workers
	}
	if o.SysInterval == 0 {
		o.SysInterval = d.SysInterval
	}
	if o.PollLinger == 0 {
		o.PollLinger = d.PollLinger
	}
	if o.MaxInboundMemory == 0 {
		o.MaxInboundMemory = d.MaxInboundMemory
	}
	if o.InboundStallTimeout == 0 {
		o.InboundStallTimeout = d.InboundStallTimeout
	}
	if o.ReservedFilters == nil {
		o.ReservedFilters = DefaultReservedFilters
	}
	return o
}
