package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/ha"
)

// Role is a broker's place in its group.
type Role int

const (
	// RoleAsyncMaster answers a send once the local store has it.
	RoleAsyncMaster Role = iota
	// RoleSyncMaster answers a send once a slave has it too.
	RoleSyncMaster
	// RoleSlave replicates its master and serves reads only.
	RoleSlave
)

// String returns RocketMQ's name of the role.
func (r Role) String() string {
	switch r {
	case RoleSyncMaster:
		return "SYNC_MASTER"
	case RoleSlave:
		return "SLAVE"
	default:
		return "ASYNC_MASTER"
	}
}

// ParseRole parses "async_master", "sync_master" or "slave".
func ParseRole(s string) (Role, error) {
	switch s {
	case "async_master", "ASYNC_MASTER", "":
		return RoleAsyncMaster, nil
	case "sync_master", "SYNC_MASTER":
		return RoleSyncMaster, nil
	case "slave", "SLAVE":
		return RoleSlave, nil
	}
	return 0, fmt.Errorf("%w: unknown role %q", ErrBadOptions, s)
}

// DefaultSyncLagMax is how long a slave may go without catching up
// before it leaves the sync state set (controller mode).
const DefaultSyncLagMax = 5 * time.Second

// ErrBadOptions is wrapped by Options.Validate errors.
var ErrBadOptions = errors.New("broker: bad options")

// DefaultDelayLevels are RocketMQ's 18 delay levels.
var DefaultDelayLevels = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// Defaults of Options (RocketMQ 4.9 BrokerConfig values where one exists).
const (
	DefaultBrokerName          = "broker-a"
	DefaultClusterName         = "DefaultCluster"
	DefaultListenAddr          = "0.0.0.0:10911"
	DefaultRegisterInterval    = 30 * time.Second
	DefaultTopicQueues         = 4
	DefaultShortPollingHold    = time.Second
	DefaultClientExpiry        = 120 * time.Second
	DefaultOffsetPersistPeriod = 5 * time.Second
	// DefaultMaxAutoCreatedGroups bounds the subscription groups a broker
	// creates on first use (a heartbeat, pull or send-back naming an
	// unknown group): each is kept and persisted for good, so clients
	// naming random groups would otherwise grow subscriptionGroup.json
	// (rewritten whole on each creation) without end.
	DefaultMaxAutoCreatedGroups = 10000
	DefaultSlaveSyncInterval    = 10 * time.Second
	// RocketMQ 4.9's transaction check-back: a half message is checked once
	// it is older than the timeout, every interval, at most max times.
	DefaultTransactionTimeout       = 6 * time.Second
	DefaultTransactionCheckInterval = 60 * time.Second
	DefaultTransactionCheckMax      = 15
)

// DefaultOptions returns the options of a broker whose store is rooted at
// root, with every default filled in (the embedded store's, remoting's
// and replication's too) and RocketMQ's switches on: topic and group
// auto-creation, long polling and SQL92 property filters.
func DefaultOptions(root string) Options {
	o := Options{AutoCreateTopic: true, AutoCreateGroup: true, LongPolling: true, EnablePropertyFilter: true,
		Store: store.DefaultOptions(root), Remoting: remoting.DefaultOptions(), HA: ha.DefaultOptions()}
	o.fill()
	o.Logger = nil
	o.Now = nil
	return o
}

// Options configures a Broker. Zero values take the documented defaults
// (booleans are off: DefaultOptions turns RocketMQ's on).
type Options struct {
	BrokerName  string // default "broker-a"
	ClusterName string // default "DefaultCluster"
	BrokerID    int64  // 0 = master
	Role        Role

	// ListenAddr is the remoting listen address (default "0.0.0.0:10911";
	// ":0" or "127.0.0.1:0" pick a free port).
	ListenAddr string
	// AdvertiseIP is the address published to registries and written as
	// the store host of every record (default: 127.0.0.1 when listening on
	// loopback, else the first non-loopback IPv4 address).
	AdvertiseIP string
	// Registries are the registry addresses to register with.
	Registries []string
	// RegisterInterval is the registration period (default 30 s; the first
	// registration happens at start).
	RegisterInterval time.Duration

	AutoCreateTopic bool
	AutoCreateGroup bool
	// MaxAutoCreatedGroups stops group auto-creation once this many
	// groups exist (default DefaultMaxAutoCreatedGroups); an admin's
	// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP is not limited.
	MaxAutoCreatedGroups int
	DefaultTopicQueues   int32         // default 4
	LongPolling          bool          // hold pulls until data arrives (otherwise 1 s short polling)
	ShortPollingHold     time.Duration // hold time when LongPolling is off (default 1 s)
	SlaveReadEnable      bool
	DelayLevels          []time.Duration // default DefaultDelayLevels
	ClientExpiry         time.Duration   // default 120 s
	OffsetPersistPeriod  time.Duration   // default 5 s
	// EnablePropertyFilter serves SQL92 subscriptions (property filters);
	// off, they are refused at subscribe time. DefaultOptions turns it on
	// (RocketMQ's enablePropertyFilter defaults to off).
	EnablePropertyFilter bool

	// TransactionTimeout is how old (by its born time) a transaction's half
	// message must be before the broker asks a producer of its group for
	// the outcome, unless its CHECK_IMMUNITY_TIME_IN_SECONDS property says
	// otherwise (default 6 s).
	TransactionTimeout time.Duration
	// TransactionCheckInterval is how often the check-back scan runs
	// (default 60 s).
	TransactionCheckInterval time.Duration
	// TransactionCheckMax is how many times a half message is checked
	// back before it is discarded to TRANS_CHECK_MAX_TIME_TOPIC with a
	// warning (default 15).
	TransactionCheckMax int

	// HAListen is a master's replication listen address (default: the
	// listen host with the listen port + 1, or port 0 when the listen port
	// is 0).
	HAListen string
	// HAMasterAddress is a slave's master HA address; "" learns it from
	// the registries' REGISTER_BROKER responses.
	HAMasterAddress string
	// SlaveAckTimeout bounds a sync master's wait for a slave's ack
	// (default Store.SyncFlushTimeout, else 5 s); past it a send answers
	// FLUSH_SLAVE_TIMEOUT.
	SlaveAckTimeout time.Duration
	// SlaveSyncInterval is how often a slave copies topics, groups,
	// consumer offsets and delay offsets from its master (default 10 s);
	// besides, the master's change notices make it copy topics and groups
	// at once and offsets within offsetNoticeInterval (metasync.go).
	SlaveSyncInterval time.Duration
	// HA tunes replication (heartbeat, idle timeout, fall-behind limit,
	// reconnect backoff); BrokerName and BrokerAddr are set by the broker.
	HA ha.Options

	// Controllers are the controller replicas' addresses. Set, the broker
	// is in controller mode: the controller elects its group's master and
	// the broker takes its role from it (Role then only says how a master
	// acknowledges: RoleSyncMaster once every member of the sync state set
	// has a message, RoleAsyncMaster at once; RoleSlave is refused), and
	// BrokerID is its controller id (0: the controller assigns one, kept
	// in the store directory).
	Controllers []string
	// ProtectedTopics are topics other components keep their state in
	// (the MQTT bridge's session and retained topics): DELETE_TOPIC_IN_BROKER
	// refuses them as it refuses the broker's own system topics.
	ProtectedTopics []string
	// Retained are the topics whose messages the store's retention keeps
	// although they are older than store.file_reserved_time or the disk
	// is short of space (the AMQP backend's durable queues and
	// definitions; see RetainRule and docs/durability.md).
	Retained []RetainRule
	// MinInSyncReplicas (controller mode, sync): the fewest members of the
	// sync state set, this master included, for a send to be acknowledged
	// (default 1: the master alone when every slave is out of the set).
	MinInSyncReplicas int
	// SyncLagMax (controller mode): a slave that has not had everything
	// the master had for this long leaves the sync state set (default 5 s).
	SyncLagMax time.Duration

	Remoting remoting.Options // Addr is taken from ListenAddr
	Store    store.Options    // Root is required

	Logger *slog.Logger
	Now    func() time.Time

	// scheduleStart, when not nil, holds the delay service's first look
	// until it is closed (tests: messages stored before it).
	scheduleStart <-chan struct{}
}

func (o *Options) fill() {
	if o.BrokerName == "" {
		o.BrokerName = DefaultBrokerName
	}
	if o.ClusterName == "" {
		o.ClusterName = DefaultClusterName
	}
	if o.ListenAddr == "" {
		o.ListenAddr = DefaultListenAddr
	}
	if o.RegisterInterval == 0 {
		o.RegisterInterval = DefaultRegisterInterval
	}
	if o.DefaultTopicQueues == 0 {
		o.DefaultTopicQueues = DefaultTopicQueues
	}
	if o.ShortPollingHold == 0 {
		o.ShortPollingHold = DefaultShortPollingHold
	}
	if len(o.DelayLevels) == 0 {
		o.DelayLevels = DefaultDelayLevels
	}
	if o.ClientExpiry == 0 {
		o.ClientExpiry = DefaultClientExpiry
	}
	if o.MaxAutoCreatedGroups == 0 {
		o.MaxAutoCreatedGroups = DefaultMaxAutoCreatedGroups
	}
	if o.OffsetPersistPeriod == 0 {
		o.OffsetPersistPeriod = DefaultOffsetPersistPeriod
	}
	if o.SlaveAckTimeout == 0 {
		o.SlaveAckTimeout = o.Store.SyncFlushTimeout
		if o.SlaveAckTimeout <= 0 {
			o.SlaveAckTimeout = store.DefaultSyncFlushTimeout
		}
	}
	if o.SlaveSyncInterval == 0 {
		o.SlaveSyncInterval = DefaultSlaveSyncInterval
	}
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = DefaultTransactionTimeout
	}
	if o.TransactionCheckInterval == 0 {
		o.TransactionCheckInterval = DefaultTransactionCheckInterval
	}
	if o.TransactionCheckMax == 0 {
		o.TransactionCheckMax = DefaultTransactionCheckMax
	}
	if o.MinInSyncReplicas == 0 {
		o.MinInSyncReplicas = 1
	}
	if o.SyncLagMax == 0 {
		o.SyncLagMax = DefaultSyncLagMax
	}
	if hb := min(time.Second, o.SyncLagMax/4); len(o.Controllers) > 0 && (o.HA.HeartbeatInterval == 0 || o.HA.HeartbeatInterval > hb) {
		// Controller mode: idle slaves report this often, often enough to
		// stay in the sync state set.
		o.HA.HeartbeatInterval = hb
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate checks the options.
func (o *Options) Validate() error {
	if err := ValidateTopicName(o.BrokerName); o.BrokerName != "" && err != nil {
		return fmt.Errorf("%w: BrokerName %q: %v", ErrBadOptions, o.BrokerName, err)
	}
	switch {
	case len(o.Controllers) > 0:
		if o.Role == RoleSlave {
			return fmt.Errorf("%w: with controllers the controller picks the role; Role slave is not allowed (use sync_master or async_master for how a master acknowledges)", ErrBadOptions)
		}
		if o.BrokerID < 0 {
			return fmt.Errorf("%w: BrokerID %d: must be 0 (assigned by the controller) or positive", ErrBadOptions, o.BrokerID)
		}
		for _, a := range o.Controllers {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("%w: controller address %q: %v", ErrBadOptions, a, err)
			}
		}
		if o.MinInSyncReplicas < 0 || o.MinInSyncReplicas > 16 {
			return fmt.Errorf("%w: MinInSyncReplicas %d not in 1..16", ErrBadOptions, o.MinInSyncReplicas)
		}
		if o.SyncLagMax < 0 || (o.SyncLagMax > 0 && o.SyncLagMax < 100*time.Millisecond) {
			return fmt.Errorf("%w: SyncLagMax %v below 100ms", ErrBadOptions, o.SyncLagMax)
		}
	case o.Role == RoleSlave && o.BrokerID <= 0:
		return fmt.Errorf("%w: a slave needs BrokerID > 0", ErrBadOptions)
	case o.Role != RoleSlave && o.BrokerID != 0:
		return fmt.Errorf("%w: a master needs BrokerID 0, got %d", ErrBadOptions, o.BrokerID)
	}
	if o.ListenAddr != "" {
		if _, _, err := net.SplitHostPort(o.ListenAddr); err != nil {
			return fmt.Errorf("%w: ListenAddr %q: %v", ErrBadOptions, o.ListenAddr, err)
		}
	}
	if o.AdvertiseIP != "" && net.ParseIP(o.AdvertiseIP) == nil {
		return fmt.Errorf("%w: AdvertiseIP %q is not an IP address", ErrBadOptions, o.AdvertiseIP)
	}
	if o.Store.Root == "" {
		return fmt.Errorf("%w: Store.Root is required", ErrBadOptions)
	}
	for i, d := range o.DelayLevels {
		if d <= 0 {
			return fmt.Errorf("%w: DelayLevels[%d] = %v must be positive", ErrBadOptions, i, d)
		}
	}
	for name, a := range map[string]string{"HAListen": o.HAListen, "HAMasterAddress": o.HAMasterAddress} {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%w: %s %q: %v", ErrBadOptions, name, a, err)
		}
	}
	if o.SlaveAckTimeout < 0 || o.SlaveSyncInterval < 0 {
		return fmt.Errorf("%w: negative SlaveAckTimeout or SlaveSyncInterval", ErrBadOptions)
	}
	if o.TransactionTimeout < 0 || o.TransactionCheckInterval < 0 || o.TransactionCheckMax < 0 {
		return fmt.Errorf("%w: negative transaction timeout, check interval or check max", ErrBadOptions)
	}
	if o.RegisterInterval < 0 || o.ClientExpiry < 0 || o.OffsetPersistPeriod < 0 {
		return fmt.Errorf("%w: negative interval", ErrBadOptions)
	}
	if o.MaxAutoCreatedGroups < 0 {
		return fmt.Errorf("%w: negative MaxAutoCreatedGroups %d", ErrBadOptions, o.MaxAutoCreatedGroups)
	}
	return nil
}
