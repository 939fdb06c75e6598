package client

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Defaults (RocketMQ 4.9 client values, protocol doc section 6).
const (
	DefaultRequestTimeout    = 3 * time.Second
	DefaultRouteRefresh      = 30 * time.Second
	DefaultHeartbeatInterval = 30 * time.Second
	DefaultRebalanceInterval = 20 * time.Second
	DefaultPersistInterval   = 5 * time.Second
	DefaultLockInterval      = 20 * time.Second
	DefaultPullSuspend       = 15 * time.Second
	DefaultPullBatchSize     = 32
	DefaultConsumeGoroutines = 20
	DefaultQueueMaxMessages  = 1000
	DefaultQueueMaxBytes     = 100 << 20
	DefaultMaxReconsumeTimes = 16
	DefaultSendRetries       = 2
	DefaultTopicQueueNums    = 4
	DefaultAutoBatchRequests = 8
	DefaultAutoBatchMaxBytes = 256 << 10
)

// ClientOptions are the settings every producer and consumer shares.
type ClientOptions struct {
	// Registries are the registry (name server) addresses, tried in turn.
	Registries []string
	// InstanceName distinguishes clients of one process; empty picks a
	// unique "<pid>#<nanotime>" so that every client gets its own id.
	InstanceName string
	// ClientIP is the IP in the client id (default: first non-loopback
	// IPv4 address, else 127.0.0.1).
	ClientIP string
	// RequestTimeout bounds a request when the caller's context has no
	// deadline. Default 3 s.
	RequestTimeout time.Duration
	// RouteRefresh is the period of topic route refreshes. Default 30 s.
	RouteRefresh time.Duration
	// HeartbeatInterval is the period of heartbeats to brokers. Default 30 s.
	HeartbeatInterval time.Duration
	// Logger receives events; nil discards.
	Logger *slog.Logger
}

func (o *ClientOptions) fill() {
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.RouteRefresh == 0 {
		o.RouteRefresh = DefaultRouteRefresh
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports the first invalid setting.
func (o *ClientOptions) Validate() error {
	if len(o.Registries) == 0 {
		return fmt.Errorf("%w: no registry address", ErrBadOptions)
	}
	for _, r := range o.Registries {
		if strings.TrimSpace(r) == "" || !strings.Contains(r, ":") {
			return fmt.Errorf("%w: registry address %q is not host:port", ErrBadOptions, r)
		}
	}
	if o.RequestTimeout < 0 || o.RouteRefresh < 0 || o.HeartbeatInterval < 0 {
		return fmt.Errorf("%w: negative interval", ErrBadOptions)
	}
	return nil
}

// ProducerOptions configure a Producer. Zero values take the defaults.
type ProducerOptions struct {
	ClientOptions
	// Group is the producer group. Default "DEFAULT_PRODUCER".
	Group string
	// SendTimeout bounds one send attempt. Default 3 s.
	SendTimeout time.Duration
	// Retries is how many more brokers a failed send tries (retryable codes
	// 17, 14, 1, 16, 204, 205 and broken connections). Default 2; negative
	// means none.
	Retries int
	// CompressThreshold: bodies larger than this are zlib-compressed
	// (level CompressLevel) and sent so when that made them smaller.
	// Default 4096; negative disables compression.
	CompressThreshold int
	// CompressLevel is the zlib level. Default 5.
	CompressLevel int
	// DefaultTopicQueueNums is the queue count of auto-created topics.
	// Default 4.
	DefaultTopicQueueNums int32
	// FaultTolerance avoids, for a while, brokers that just failed or were
	// slow (RocketMQ's latency fault strategy). Default on; set
	// DisableFaultTolerance to turn it off.
	DisableFaultTolerance bool
	// MaxMessageSize is the largest body accepted. Default 4 MiB.
	MaxMessageSize int
	// AutoBatchRequests is how many send requests of one topic SendAsync
	// keeps in flight; async sends beyond them wait and leave together,
	// as one batch request, when a request completes (see autobatch.go).
	// Default 8; negative turns auto-batching off (every async send is
	// its own request).
	AutoBatchRequests int
	// AutoBatchMaxBytes bounds the body of an auto-batch request. Default
	// 256 KiB (at most MaxMessageSize). A broker whose limit is lower
	// refuses the first batch over it, naming its limit: the producer's
	// batches keep within it from then on (autobatch.go).
	AutoBatchMaxBytes int
}

// DefaultProducerOptions returns producer options with the defaults filled
// in and the given registries.
func DefaultProducerOptions(registries ...string) ProducerOptions {
	o := ProducerOptions{ClientOptions: ClientOptions{Registries: registries}}
	o.fill()
	return o
}

func (o *ProducerOptions) fill() {
	o.ClientOptions.fill()
	if o.Group == "" {
		o.Group = "DEFAULT_PRODUCER"
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = 3 * time.Second
	}
	if o.Retries == 0 {
		o.Retries = DefaultSendRetries
	} else if o.Retries < 0 {
		o.Retries = 0
	}
	if o.CompressThreshold == 0 {
		o.CompressThreshold = record.CompressThreshold
	}
	if o.CompressLevel == 0 {
		o.CompressLevel = record.CompressLevel
	}
	if o.DefaultTopicQueueNums == 0 {
		o.DefaultTopicQueueNums = DefaultTopicQueueNums
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = 4 << 20
	}
	if o.AutoBatchRequests == 0 {
		o.AutoBatchRequests = DefaultAutoBatchRequests
	} else if o.AutoBatchRequests < 0 {
		o.AutoBatchRequests = 0
	}
	if o.AutoBatchMaxBytes == 0 {
		o.AutoBatchMaxBytes = DefaultAutoBatchMaxBytes
	}
	o.AutoBatchMaxBytes = min(o.AutoBatchMaxBytes, o.MaxMessageSize)
}

// Validate reports the first invalid setting.
func (o *ProducerOptions) Validate() error {
	if err := o.ClientOptions.Validate(); err != nil {
		return err
	}
	if o.SendTimeout < 0 {
		return fmt.Errorf("%w: negative SendTimeout", ErrBadOptions)
	}
	if o.AutoBatchMaxBytes < 0 {
		return fmt.Errorf("%w: negative AutoBatchMaxBytes", ErrBadOptions)
	}
	if o.CompressLevel < -1 || o.CompressLevel > 9 {
		return fmt.Errorf("%w: CompressLevel %d outside -1..9", ErrBadOptions, o.CompressLevel)
	}
	return nil
}

// MessageModel is clustering (each message to one member of the group) or
// broadcasting (each message to every member).
type MessageModel int

const (
	Clustering MessageModel = iota
	Broadcasting
)

func (m MessageModel) String() string {
	if m == Broadcasting {
		return protocol.MessageModelBroadcasting
	}
	return protocol.MessageModelClustering
}

// ConsumeFrom is where a group with no committed offset starts.
type ConsumeFrom int

const (
	ConsumeFromLast ConsumeFrom = iota
	ConsumeFromFirst
	ConsumeFromTimestamp
)

func (c ConsumeFrom) String() string {
	switch c {
	case ConsumeFromFirst:
		return protocol.ConsumeFromFirstOffset
	case ConsumeFromTimestamp:
		return protocol.ConsumeFromTimestamp
	}
	return protocol.ConsumeFromLastOffset
}

// ConsumerOptions configure a PushConsumer (and, for the shared fields, a
// PullConsumer). Zero values take the defaults.
type ConsumerOptions struct {
	ClientOptions
	// Group is the consumer group (required).
	Group string
	Model MessageModel
	// From applies when the group has no committed offset on a queue.
	From ConsumeFrom
	// ConsumeTimestamp is the start for ConsumeFromTimestamp. Default
	// 30 minutes ago at start.
	ConsumeTimestamp time.Time
	// Strategy allocates queues among the group's members. Default
	// AllocateAveragely.
	Strategy AllocateStrategy
	// Orderly consumes each queue in order, one batch at a time, holding
	// the queue's lock on its broker (clustering).
	Orderly bool
	// ConsumeGoroutines is the concurrency of concurrent consumption.
	// Default 20.
	ConsumeGoroutines int
	// ConsumeBatchSize is the most messages passed to one handler call.
	// Default 1.
	ConsumeBatchSize int
	// PullBatchSize is maxMsgNums of a pull. Default 32.
	PullBatchSize int32
	// PullSuspend is the long-polling hold of a pull. Default 15 s.
	PullSuspend time.Duration
	// PullConnections is the number of connections to each broker that
	// carry pulls, the queues spread over them by queue id. A broker
	// answers the requests of one connection one after another, so a
	// consumer holding many busy queues reads faster over several.
	// Default 1: pulls share the connection of heartbeats and commits.
	PullConnections int
	// QueueMaxMessages and QueueMaxBytes bound the messages cached per
	// queue before pulling pauses. Defaults 1000 and 100 MiB.
	QueueMaxMessages int
	QueueMaxBytes    int64
	// MaxReconsumeTimes: a message failing this many times goes to the
	// group's dead-letter queue. Default 16.
	MaxReconsumeTimes int32
	// SuspendOrderly is the pause after an orderly handler asks to
	// suspend. Default 1 s.
	SuspendOrderly time.Duration
	// RebalanceInterval, PersistInterval, LockInterval: periods of
	// rebalancing (20 s), offset commits (5 s) and queue locks (20 s).
	RebalanceInterval time.Duration
	PersistInterval   time.Duration
	LockInterval      time.Duration
	// OffsetDir holds broadcasting offsets (<dir>/<group>/offsets.json);
	// a damaged file stops the consumer with ErrOffsetFile.
	// Default $HOME/.smartgo_offsets.
	OffsetDir string
}

func (o *ConsumerOptions) fill() {
	o.ClientOptions.fill()
	if o.ConsumeTimestamp.IsZero() {
		o.ConsumeTimestamp = time.Now().Add(-30 * time.Minute)
	}
	if o.Strategy == nil {
		o.Strategy = AllocateAveragely{}
	}
	if o.ConsumeGoroutines == 0 {
		o.ConsumeGoroutines = DefaultConsumeGoroutines
	}
	if o.ConsumeBatchSize == 0 {
		o.ConsumeBatchSize = 1
	}
	if o.PullBatchSize == 0 {
		o.PullBatchSize = DefaultPullBatchSize
	}
	if o.PullSuspend == 0 {
		o.PullSuspend = DefaultPullSuspend
	}
	if o.PullConnections == 0 {
		o.PullConnections = 1
	}
	if o.QueueMaxMessages == 0 {
		o.QueueMaxMessages = DefaultQueueMaxMessages
	}
	if o.QueueMaxBytes == 0 {
		o.QueueMaxBytes = DefaultQueueMaxBytes
	}
	if o.MaxReconsumeTimes == 0 {
		o.MaxReconsumeTimes = DefaultMaxReconsumeTimes
	}
	if o.SuspendOrderly == 0 {
		o.SuspendOrderly = time.Second
	}
	if o.RebalanceInterval == 0 {
		o.RebalanceInterval = DefaultRebalanceInterval
	}
	if o.PersistInterval == 0 {
		o.PersistInterval = DefaultPersistInterval
	}
	if o.LockInterval == 0 {
		o.LockInterval = DefaultLockInterval
	}
	if o.OffsetDir == "" {
		o.OffsetDir = defaultOffsetDir()
	}
}

// Validate reports the first invalid setting.
func (o *ConsumerOptions) Validate() error {
	if err := o.ClientOptions.Validate(); err != nil {
		return err
	}
	if o.Group == "" {
		return fmt.Errorf("%w: Group is required", ErrBadOptions)
	}
	if err := ValidateGroup(o.Group); err != nil {
		return err
	}
	if o.ConsumeGoroutines < 0 || o.ConsumeBatchSize < 0 || o.PullBatchSize < 0 || o.QueueMaxMessages < 0 || o.QueueMaxBytes < 0 ||
		o.PullConnections < 0 {
		return fmt.Errorf("%w: negative size", ErrBadOptions)
	}
	if o.PullSuspend < 0 || o.RebalanceInterval < 0 || o.PersistInterval < 0 || o.LockInterval < 0 {
		return fmt.Errorf("%w: negative interval", ErrBadOptions)
	}
	if o.Model != Clustering && o.Model != Broadcasting {
		return fmt.Errorf("%w: unknown message model %d", ErrBadOptions, o.Model)
	}
	return nil
}
