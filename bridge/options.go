package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// Defaults of Options.
const (
	DefaultDefaultTopic  = "MQTT_INGRESS"
	DefaultEgressTopic   = "MQTT_EGRESS"
	DefaultSessionTopic  = "MQTT_SESSION"
	DefaultRetainedTopic = "MQTT_RETAINED"
	// DefaultMaxOfflineMessages bounds the messages replayed from the log
	// into one resumed session at once.
	DefaultMaxOfflineMessages = 1000
	// DefaultTopicQueues is the queue count of the topics the bridge
	// creates when they do not exist.
	DefaultTopicQueues = 8
	// DefaultHandoffTimeout bounds how long a connect waits for the node
	// that held the session to hand it over.
	DefaultHandoffTimeout = 2 * time.Second
	// DefaultSendTimeout bounds one produce.
	DefaultSendTimeout = 3 * time.Second
	// DefaultShareRefresh is how often a node reconciles its shared
	// subscription consumers with the server's shared subscriptions.
	DefaultShareRefresh = 500 * time.Millisecond
	// DefaultStartTimeout bounds topic creation and the replay of the
	// system topics at Start.
	DefaultStartTimeout = 30 * time.Second
	// DefaultHeartbeatInterval is how often a node registers with the
	// registries (with its connection counts).
	DefaultHeartbeatInterval = 10 * time.Second
	// DefaultCheckpointInterval is how often the resume points of
	// connected persistent sessions move on.
	DefaultCheckpointInterval = 30 * time.Second
	// DefaultWillClaimGrace is how long a node that claimed the will of a
	// client of another node (gone from the registries) waits for that
	// node to revoke the claim before it publishes the will: the claim's
	// write, the owner's read and its revoke's write, each bounded by
	// DefaultSendTimeout and usually done well within a second.
	DefaultWillClaimGrace = 3 * time.Second
	// DefaultRefreshAge is how old the newest copy of a live retained
	// message or session record may grow before a node writes it again
	// (compact.go): a third of the brokers' default retention
	// (store.file_reserved_time, 72 h).
	DefaultRefreshAge = 24 * time.Hour
)

// Route maps an MQTT topic filter to a broker topic.
type Route struct {
	Filter string // MQTT topic filter ('+', '#')
	Topic  string // broker topic
	// IngressOnly keeps the broker topic out of delivery: its messages are
	// for back-end consumers only (device telemetry), so no bridge node
	// consumes it and no MQTT subscriber receives them. A topic that
	// another route (or the default or egress topic) delivers is still
	// delivered.
	IngressOnly bool
}

// Options configure a Backend. Zero values take the documented defaults.
type Options struct {
	// Registries are the registry addresses (required).
	Registries []string
	// Routes map MQTT topics to broker topics; the first route whose
	// filter matches wins.
	Routes []Route
	// DefaultTopic takes MQTT topics that no route matches. Default
	// MQTT_INGRESS.
	DefaultTopic string
	// EgressTopic is where back ends send messages for devices (the MQTT
	// topic in the MQTT_TOPIC property). Default MQTT_EGRESS.
	EgressTopic string
	// SessionTopic and RetainedTopic are the system topics holding session
	// and retained-message records. Defaults MQTT_SESSION, MQTT_RETAINED.
	SessionTopic  string
	RetainedTopic string
	// NodeID names this bridge node in session records (default: the
	// producer's client id, unique per process).
	NodeID string
	// MaxOfflineMessages bounds the messages replayed into a resumed
	// session from the log at once; the excess is read back as the
	// session drains (overflow), not dropped. Default 1000.
	MaxOfflineMessages int
	// TopicQueues is the queue count of topics the bridge creates.
	// Default 8.
	TopicQueues int32
	// StartTimeout bounds Start (topic creation, waiting for a topic's
	// route that is missing for a moment, system topic replay).
	// Default 30 s.
	StartTimeout time.Duration
	// SendTimeout bounds one produce. Default 3 s.
	SendTimeout time.Duration
	// HandoffTimeout bounds how long a connect waits for the node holding
	// the session (connected there) to hand it over; past it the session
	// resumes from that node's last record. Default 2 s.
	HandoffTimeout time.Duration
	// ShareRefresh is how often the node reconciles its consumer groups
	// for shared subscriptions with the local members (a walk of the
	// server's subscription tree). Default 500 ms.
	ShareRefresh time.Duration
	// HeartbeatInterval is how often the node registers with every
	// registry, with its connection counts, so that admin tools list it
	// and reach it. Default 10 s.
	HeartbeatInterval time.Duration
	// CheckpointInterval is how often the node writes, for each connected
	// session that outlives its connection and received messages since
	// its last record, a record with its resume points as of now and its
	// unacknowledged messages: what the session gets again if this node
	// crashes is what came after (at least once). Default 30 s.
	CheckpointInterval time.Duration
	// WillClaimGrace is how long a claim on the will of another node's
	// client waits for that node to revoke it (the node is alive though
	// the registries do not list it) before the will is published. It
	// delays every will of a crashed node by as much. Default 3 s.
	WillClaimGrace time.Duration
	// RefreshAge is how old the newest copy of a live retained message or
	// session record may grow before the nodes write it again, so that it
	// outlives the brokers' retention (store.file_reserved_time): keep it
	// well below that (half of it at most). Default 24 h.
	RefreshAge time.Duration
	// Version is the SmartGo version the node reports in its heartbeat.
	Version string
	// IngressProps, when set, is asked for extra broker message properties
	// of every message a client publishes (a property bag decoded from
	// the topic, say); they are stored beside the MQTT_* properties, which
	// they may not replace. An error fails the publish. Names and values
	// may not be empty or hold the bytes 0x01 and 0x02 (ErrUnencodable).
	IngressProps func(*mqtt.Message) (map[string]string, error)
	// WrapBackend, when set, wraps the Backend that Bridge hands to the
	// MQTT server (hooks such as the state store's session hook); the
	// wrapper must forward every call. Unused by NewBackend.
	WrapBackend func(mqtt.Backend) mqtt.Backend
	// PrepareC2D, when set (by an IoT hub), answers the admin call that
	// gives a device a session for its cloud-to-device messages.
	PrepareC2D func(ctx context.Context, deviceID string) error
	// Logger receives events; nil discards.
	Logger *slog.Logger
}

// DefaultOptions returns options with every default filled in.
func DefaultOptions(registries ...string) Options {
	o := Options{Registries: registries}
	o.fill()
	return o
}

func (o *Options) fill() {
	if o.DefaultTopic == "" {
		o.DefaultTopic = DefaultDefaultTopic
	}
	if o.EgressTopic == "" {
		o.EgressTopic = DefaultEgressTopic
	}
	if o.SessionTopic == "" {
		o.SessionTopic = DefaultSessionTopic
	}
	if o.RetainedTopic == "" {
		o.RetainedTopic = DefaultRetainedTopic
	}
	if o.MaxOfflineMessages == 0 {
		o.MaxOfflineMessages = DefaultMaxOfflineMessages
	}
	if o.TopicQueues == 0 {
		o.TopicQueues = DefaultTopicQueues
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	if o.HandoffTimeout == 0 {
		o.HandoffTimeout = DefaultHandoffTimeout
	}
	if o.ShareRefresh == 0 {
		o.ShareRefresh = DefaultShareRefresh
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.WillClaimGrace == 0 {
		o.WillClaimGrace = DefaultWillClaimGrace
	}
	if o.RefreshAge == 0 {
		o.RefreshAge = DefaultRefreshAge
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

var topicRE = regexp.MustCompile(`^[%|a-zA-Z0-9_-]{1,127}$`)

// Validate reports the first invalid setting.
func (o Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if len(o.Registries) == 0 {
		return bad("no registry address")
	}
	for i, r := range o.Routes {
		if !packets.ValidTopicFilter(r.Filter) || packets.IsShared(r.Filter) {
			return bad("route %d: filter %q is not a topic filter", i, r.Filter)
		}
		if !topicRE.MatchString(r.Topic) {
			return bad("route %d: broker topic %q is not a topic name", i, r.Topic)
		}
	}
	for _, t := range []string{o.DefaultTopic, o.EgressTopic, o.SessionTopic, o.RetainedTopic} {
		if t != "" && !topicRE.MatchString(t) {
			return bad("broker topic %q is not a topic name", t)
		}
	}
	if o.MaxOfflineMessages < 0 || o.TopicQueues < 0 || o.StartTimeout < 0 || o.SendTimeout < 0 ||
		o.HandoffTimeout < 0 || o.ShareRefresh < 0 || o.HeartbeatInterval < 0 || o.CheckpointInterval < 0 || o.RefreshAge < 0 {
		return bad("negative limit")
	}
	return nil
}
