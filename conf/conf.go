// Package conf is SmartGo's configuration file: its TOML schema, every
// default (written once, in Default), loading with strict checks (an unknown
// key is an error, not ignored), validation that names the file, the key and
// the allowed range, and overrides by dotted key for command-line flags.
//
// One file may hold every section; each subcommand reads the sections it
// needs (`smartgo registry` reads [log] and [registry], `smartgo standalone`
// all of them). cmd/smartgo maps the sections onto each package's Options;
// no other package reads files.
package conf

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// ErrInvalid is wrapped by every validation and decoding error.
var ErrInvalid = errors.New("conf: invalid configuration")

// File is the whole configuration file.
type File struct {
	Log      Log      `toml:"log"`
	Registry Registry `toml:"registry"`
	Broker   Broker   `toml:"broker"`
	Store    Store    `toml:"store"`
	Bridge   Bridge   `toml:"bridge"`
	// StateStore configures the key-value state store: its shards on the
	// brokers (`smartgo broker`) and its front on the bridges.
	StateStore StateStore `toml:"statestore"`
	// Twin configures device and module twins: their shards on the
	// brokers and their change events.
	Twin Twin `toml:"twin"`
	// IoTHub configures the IoT Hub surface of the bridge nodes: devices
	// over MQTT (the Azure IoT device SDKs) and the back end's HTTPS API
	// (the service SDKs). See docs/iothub.md.
	IoTHub IoTHub `toml:"iothub"`
	// AMQP configures the AMQP 0-9-1 server of the bridge nodes, for
	// RabbitMQ's clients (docs/amqp.md).
	AMQP AMQP `toml:"amqp"`
	// Controller configures a controller replica (`smartgo controller`,
	// or inside `smartgo registry` with registry.controller = true).
	Controller Controller `toml:"controller"`
	Metrics    Metrics    `toml:"metrics"`
	Console    Console    `toml:"console"`
}

// Console configures the web console (`smartgo console`, and inside
// `smartgo standalone`).
type Console struct {
	Listen          string   `toml:"listen"` // "" = off
	Registries      []string `toml:"registries"`
	CredentialsFile string   `toml:"credentials_file"`
	AdminUsers      []string `toml:"admin_users"`
	SampleInterval  Duration `toml:"sample_interval"`
	SessionTTL      Duration `toml:"session_ttl"`
	RequestTimeout  Duration `toml:"request_timeout"`
}

// Metrics configures the process's monitoring endpoint: Prometheus
// metrics at /metrics, liveness at /healthz and readiness at /readyz, on
// one HTTP listener per process (every subcommand that runs a server).
type Metrics struct {
	Listen string `toml:"listen"` // "" = off
	// Pprof also serves the Go runtime's profiles (net/http/pprof) under
	// /debug/pprof/ on the same listener. Off by default: a profile shows
	// the process's internals and costs CPU while it is taken.
	Pprof bool `toml:"pprof"`
}

// Log configures the process logger.
type Log struct {
	Level  string `toml:"level"`  // debug, info, warn, error
	Format string `toml:"format"` // text, json
}

// Registry configures a registry (name server).
type Registry struct {
	Listen       string   `toml:"listen"`
	KVConfigPath string   `toml:"kv_config_path"`
	ScanInterval Duration `toml:"scan_interval"`
	BrokerExpiry Duration `toml:"broker_expiry"`
	IdleTimeout  Duration `toml:"idle_timeout"`
	MaxFrameSize Size     `toml:"max_frame_size"`
	// Controller runs a controller replica ([controller]) in the registry
	// process, serving on the registry's port.
	Controller bool `toml:"controller"`
}

// Controller configures a controller replica.
type Controller struct {
	Listen            string   `toml:"listen"`
	Advertise         string   `toml:"advertise"`
	RaftListen        string   `toml:"raft_listen"`
	RaftAdvertise     string   `toml:"raft_advertise"`
	Peers             []string `toml:"peers"` // "addr=raftAddr" per replica
	DataDir           string   `toml:"data_dir"`
	HeartbeatInterval Duration `toml:"heartbeat_interval"`
	HeartbeatTimeout  Duration `toml:"heartbeat_timeout"`
	ElectionTimeout   Duration `toml:"election_timeout"`
	UncleanElection   bool     `toml:"unclean_election"`
	SnapshotThreshold int      `toml:"snapshot_threshold"`
}

// Broker configures a broker.
type Broker struct {
	Name                       string   `toml:"name"`
	Cluster                    string   `toml:"cluster"` // 1-127 characters; at most 115 for request-reply (<cluster>_REPLY_TOPIC is a topic too)
	ID                         int64    `toml:"id"`
	Role                       string   `toml:"role"` // async_master, sync_master, slave
	Listen                     string   `toml:"listen"`
	AdvertiseIP                string   `toml:"advertise_ip"`
	HAListen                   string   `toml:"ha_listen"`
	HAMasterAddress            string   `toml:"ha_master_address"`
	Registries                 []string `toml:"registries"`
	RegisterInterval           Duration `toml:"register_interval"`
	AutoCreateTopic            bool     `toml:"auto_create_topic"`
	AutoCreateSubscriptionGrp  bool     `toml:"auto_create_subscription_group"`
	MaxAutoCreatedGroups       int      `toml:"max_auto_created_groups"` // auto-creation stops at this many groups
	DefaultTopicQueues         int      `toml:"default_topic_queues"`
	LongPolling                bool     `toml:"long_polling"`
	SlaveReadEnable            bool     `toml:"slave_read_enable"`
	InMemoryMaxRatio           int      `toml:"in_memory_max_ratio"`
	DelayLevels                string   `toml:"delay_levels"`
	ClientExpiry               Duration `toml:"client_expiry"`
	IdleTimeout                Duration `toml:"idle_timeout"`
	ReadCoalesce               Duration `toml:"read_coalesce"`
	ReadBuffer                 Size     `toml:"read_buffer"`
	MaxFrameSize               Size     `toml:"max_frame_size"`
	ConsumerOffsetPersistEvery Duration `toml:"consumer_offset_persist_interval"`
	ShortPollingHold           Duration `toml:"short_polling_hold"`
	SlaveAckTimeout            Duration `toml:"slave_ack_timeout"`
	SlaveSyncInterval          Duration `toml:"slave_sync_interval"`
	EnablePropertyFilter       bool     `toml:"enable_property_filter"`
	TransactionTimeout         Duration `toml:"transaction_timeout"`
	TransactionCheckInterval   Duration `toml:"transaction_check_interval"`
	TransactionCheckMax        int      `toml:"transaction_check_max"`

	// Connections and worker pools of the remoting server.
	WriteTimeout     Duration `toml:"write_timeout"`
	MaxWriteQueue    Size     `toml:"max_write_queue"`
	RequestTimeout   Duration `toml:"request_timeout"`
	SendWorkers      int      `toml:"send_workers"`
	SendQueue        int      `toml:"send_queue"`
	PullWorkers      int      `toml:"pull_workers"`
	PullQueue        int      `toml:"pull_queue"`
	AdminWorkers     int      `toml:"admin_workers"`
	AdminQueue       int      `toml:"admin_queue"`
	HeartbeatWorkers int      `toml:"heartbeat_workers"`
	HeartbeatQueue   int      `toml:"heartbeat_queue"`
	DefaultWorkers   int      `toml:"default_workers"`
	DefaultQueue     int      `toml:"default_queue"`

	// Master-slave replication (the HA stream).
	HAHeartbeatInterval Duration `toml:"ha_heartbeat_interval"`
	HAIdleTimeout       Duration `toml:"ha_idle_timeout"`
	HAFallBehindMax     Size     `toml:"ha_fall_behind_max"`
	HAReconnectMin      Duration `toml:"ha_reconnect_min"`
	HAReconnectMax      Duration `toml:"ha_reconnect_max"`
	// Controller mode: the controller elects the group's master.
	Controllers       []string `toml:"controllers"`
	MinInSyncReplicas int      `toml:"min_insync_replicas"`
	SyncLagMax        Duration `toml:"sync_lag_max"`
}

// Store configures the message store of a broker.
type Store struct {
	Root                string   `toml:"root"`
	SegmentSize         Size     `toml:"segment_size"`
	CQEntriesPerFile    int      `toml:"cq_entries_per_file"`
	IndexSlots          int      `toml:"index_slots"`
	IndexEntries        int      `toml:"index_entries"`
	MaxMessageSize      Size     `toml:"max_message_size"`
	Flush               string   `toml:"flush"` // async, sync
	FlushInterval       Duration `toml:"flush_interval"`
	AsyncWrites         string   `toml:"async_writes"` // hybrid, mapped, pwrite (flush = async)
	SyncFlushTimeout    Duration `toml:"sync_flush_timeout"`
	FileReservedTime    Duration `toml:"file_reserved_time"`
	DeleteWhen          string   `toml:"delete_when"` // "04" or "04;16": hours of the day
	DiskMaxUsedRatio    int      `toml:"disk_max_used_ratio"`
	DiskForceCleanRatio int      `toml:"disk_force_clean_ratio"`
	DiskFullRatio       int      `toml:"disk_full_ratio"`
	DiskForceClean      bool     `toml:"disk_force_clean"`
	Preallocate         Size     `toml:"preallocate"`
	CheckCRCOnRecover   bool     `toml:"check_crc_on_recover"`
	VerifyAllOnCrash    bool     `toml:"verify_all_on_crash"`
	LogicFlushInterval  Duration `toml:"logic_flush_interval"`
	IndexFlushInterval  Duration `toml:"index_flush_interval"`
	CleanInterval       Duration `toml:"clean_interval"`
	RecoverSegments     int      `toml:"recover_segments"`
	WarmSegments        bool     `toml:"warm_segments"`
	MaxOpenFiles        int      `toml:"max_open_files"`
}

// Bridge configures an MQTT bridge node.
type Bridge struct {
	Listen          string   `toml:"listen"`
	TLSListen       string   `toml:"tls_listen"`
	TLSCert         string   `toml:"tls_cert"`
	TLSKey          string   `toml:"tls_key"`
	Registries      []string `toml:"registries"`
	CredentialsFile string   `toml:"credentials_file"`
	ACLFile         string   `toml:"acl_file"`
	MaxPacketSize   Size     `toml:"max_packet_size"`
	ReceiveMaximum  int      `toml:"receive_maximum"`
	MaxKeepAlive    Duration `toml:"max_keep_alive"`
	SessionExpiry   Duration `toml:"max_session_expiry"`
	SysInterval     Duration `toml:"sys_interval"`
	HeartbeatEvery  Duration `toml:"heartbeat_interval"`
	DefaultTopic    string   `toml:"default_topic"`
	EgressTopic     string   `toml:"egress_topic"`
	Routes          []Route  `toml:"route"`

	TopicAliasMaximum int `toml:"topic_alias_maximum"`
	// MaxClientIDLen bounds a CONNECT's client identifier in bytes; 0
	// means the most a broker record can hold (bridge.MaxClientIDLen),
	// which is also the cap of any larger value.
	MaxClientIDLen int `toml:"max_client_id_len"`
	// MaxIdentityLen bounds a CONNECT's client identifier and user name
	// together in bytes; 0 means the most a broker record can hold
	// (bridge.MaxIdentityLen), which is also the cap of any larger value.
	MaxIdentityLen     int      `toml:"max_identity_len"`
	MaxQueuedMessages  int      `toml:"max_queued_messages"`
	MaxOutbound        Size     `toml:"max_outbound"`
	SlowReaderTimeout  Duration `toml:"slow_reader_timeout"`
	MaxInboundMemory   Size     `toml:"max_inbound_memory"`
	InboundStall       Duration `toml:"inbound_stall_timeout"`
	ConnectTimeout     Duration `toml:"connect_timeout"`
	SessionLoadTimeout Duration `toml:"session_load_timeout"`
	Workers            int      `toml:"workers"`
	Pollers            int      `toml:"pollers"`
	PollLinger         Duration `toml:"poll_linger"`
	AllowAnonymous     bool     `toml:"allow_anonymous"`
	SessionTopic       string   `toml:"session_topic"`
	RetainedTopic      string   `toml:"retained_topic"`
	NodeID             string   `toml:"node_id"`
	MaxOfflineMessages int      `toml:"max_offline_messages"`
	TopicQueues        int      `toml:"topic_queues"`
	StartTimeout       Duration `toml:"start_timeout"`
	SendTimeout        Duration `toml:"send_timeout"`
	HandoffTimeout     Duration `toml:"handoff_timeout"`
	ShareRefresh       Duration `toml:"share_refresh"`
	CheckpointInterval Duration `toml:"checkpoint_interval"`
	WillClaimGrace     Duration `toml:"will_claim_grace"`
	RefreshAge         Duration `toml:"refresh_age"`
}

// AMQP configures the AMQP 0-9-1 server of every bridge node (`smartgo
// bridge`, `smartgo standalone`); its durable queues and definitions live
// in the brokers (bridge.AMQPBackend).
type AMQP struct {
	Listen          string   `toml:"listen"`           // "" = off
	CredentialsFile string   `toml:"credentials_file"` // the MQTT credentials file format; "" = anyone
	VHosts          []string `toml:"vhosts"`
	ChannelMax      int      `toml:"channel_max"`
	FrameMax        Size     `toml:"frame_max"`
	Heartbeat       Duration `toml:"heartbeat"` // "0s" = off
	MaxMessageSize  Size     `toml:"max_message_size"`
	MaxQueueBytes   Size     `toml:"max_queue_bytes"`
}

// StateStore configures the state store: the shards a broker hosts (the
// queues of its system topic) and the front a bridge serves it with.
type StateStore struct {
	Shards              int      `toml:"shards"` // FROZEN once keys exist
	Dir                 string   `toml:"dir"`    // "" = <store root>/statestore
	SnapshotInterval    Duration `toml:"snapshot_interval"`
	NodeID              string   `toml:"node_id"`
	MaxKeys             int      `toml:"max_keys"`
	MaxBytes            Size     `toml:"max_bytes"`
	MaxKeySize          Size     `toml:"max_key_size"`
	MaxValueSize        Size     `toml:"max_value_size"`
	MaxClockSkew        Duration `toml:"max_clock_skew"`
	HistoryLen          int      `toml:"history_len"`
	HistoryBytes        Size     `toml:"history_bytes"`
	DedupLen            int      `toml:"dedup_len"`
	MaxWatchesPerClient int      `toml:"max_watches_per_client"`
	// The bridge's front.
	RequestTimeout Duration `toml:"request_timeout"`
	RouteRefresh   Duration `toml:"route_refresh"`
	DropTimeout    Duration `toml:"drop_timeout"`
}

// Twin configures the device and module twins a broker hosts (the queues
// of the system topic %SYS_TWIN) and their change events.
type Twin struct {
	Shards              int      `toml:"shards"` // FROZEN once twins exist
	Dir                 string   `toml:"dir"`    // "" = <store root>/twin
	SnapshotInterval    Duration `toml:"snapshot_interval"`
	Events              bool     `toml:"events"`
	EventsTopic         string   `toml:"events_topic"`
	MaxModulesPerDevice int      `toml:"max_modules_per_device"`
	IndexPaths          []string `toml:"index_paths"`
	MaxPageSize         int      `toml:"max_page_size"`
}

// IoTHub configures the IoT Hub surface of every bridge node (`smartgo
// bridge`, `smartgo standalone`).
type IoTHub struct {
	Enabled          bool     `toml:"enabled"`
	HostName         string   `toml:"hostname"`
	DeviceAuth       string   `toml:"device_auth"` // "registry" or "none" (development)
	HTTPSListen      string   `toml:"https_listen"`
	AMQPSListen      string   `toml:"amqps_listen"`
	TLSCert          string   `toml:"tls_cert"` // "" = bridge.tls_cert
	TLSKey           string   `toml:"tls_key"`  // "" = bridge.tls_key
	X509CAFile       string   `toml:"x509_ca_file"`
	EventsTopic      string   `toml:"events_topic"`
	RPCTopic         string   `toml:"rpc_topic"`
	FeedbackTopic    string   `toml:"feedback_topic"`
	FeedbackLock     Duration `toml:"feedback_lock_duration"`
	MethodAckTimeout Duration `toml:"method_ack_timeout"`
	MaxMethodTimeout Duration `toml:"max_method_timeout"`
	C2DTTL           Duration `toml:"c2d_ttl"`
	C2DMaxTTL        Duration `toml:"c2d_max_ttl"`
	C2DMaxSize       Size     `toml:"c2d_max_size"`
	C2DMaxQueueDepth int      `toml:"c2d_max_queue_depth"`
	TwinRate         int      `toml:"twin_rate"` // per device per second; 0 = unlimited
	RequestTimeout   Duration `toml:"request_timeout"`
	StartTimeout     Duration `toml:"start_timeout"`
	RouteRefresh     Duration `toml:"route_refresh"`
	WatchCheck       Duration `toml:"watch_check"`
	MaxBody          Size     `toml:"max_body"`
	// Policies are the shared access policies ([[iothub.policy]]).
	Policies []IoTHubPolicy `toml:"policy"`
}

// IoTHubPolicy is a shared access policy: back ends sign SAS tokens with
// its key and name it in skn.
type IoTHubPolicy struct {
	Name        string   `toml:"name"`
	Key         string   `toml:"key"` // base64, at least 16 bytes
	Permissions []string `toml:"permissions"`
}

// Route maps an MQTT topic filter to a broker topic; the first matching
// route wins, DefaultTopic takes the rest.
type Route struct {
	Filter string `toml:"filter"`
	Topic  string `toml:"topic"`
	// IngressOnly: the topic's messages are for back ends only; no bridge
	// node consumes it to deliver to MQTT subscribers.
	IngressOnly bool `toml:"ingress_only"`
}

// Default returns the configuration used when no file is given. Every
// default value of SmartGo's configuration is written here and nowhere else.
func Default() File {
	return File{
		Log: Log{Level: "info", Format: "text"},
		Registry: Registry{
			Listen:       "0.0.0.0:9876",
			KVConfigPath: "data/registry/kvConfig.json",
			ScanInterval: Duration{10 * time.Second},
			BrokerExpiry: Duration{120 * time.Second},
			IdleTimeout:  Duration{120 * time.Second},
			MaxFrameSize: 16 << 20,
		},
		Broker: Broker{
			Name:                       "broker-a",
			Cluster:                    "DefaultCluster",
			ID:                         0,
			Role:                       "async_master",
			Listen:                     "0.0.0.0:10911",
			Registries:                 []string{"127.0.0.1:9876"},
			RegisterInterval:           Duration{30 * time.Second},
			AutoCreateTopic:            true,
			AutoCreateSubscriptionGrp:  true,
			MaxAutoCreatedGroups:       10000,
			DefaultTopicQueues:         4,
			LongPolling:                true,
			InMemoryMaxRatio:           40,
			DelayLevels:                "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
			ClientExpiry:               Duration{120 * time.Second},
			IdleTimeout:                Duration{120 * time.Second},
			ReadCoalesce:               Duration{time.Millisecond},
			ReadBuffer:                 1 << 20,
			MaxFrameSize:               16 << 20,
			ConsumerOffsetPersistEvery: Duration{5 * time.Second},
			ShortPollingHold:           Duration{time.Second},
			SlaveAckTimeout:            Duration{5 * time.Second},
			SlaveSyncInterval:          Duration{10 * time.Second},
			EnablePropertyFilter:       true,
			TransactionTimeout:         Duration{6 * time.Second},
			TransactionCheckInterval:   Duration{60 * time.Second},
			TransactionCheckMax:        15,
			WriteTimeout:               Duration{30 * time.Second},
			MaxWriteQueue:              4 << 20,
			RequestTimeout:             Duration{3 * time.Second},
			SendWorkers:                16,
			SendQueue:                  10000,
			PullWorkers:                8,
			PullQueue:                  100000,
			AdminWorkers:               2,
			AdminQueue:                 1000,
			HeartbeatWorkers:           2,
			HeartbeatQueue:             50000,
			DefaultWorkers:             4,
			DefaultQueue:               10000,
			HAHeartbeatInterval:        Duration{5 * time.Second},
			HAIdleTimeout:              Duration{20 * time.Second},
			HAFallBehindMax:            256 << 20,
			HAReconnectMin:             Duration{200 * time.Millisecond},
			HAReconnectMax:             Duration{5 * time.Second},
			Controllers:                []string{},
			MinInSyncReplicas:          1,
			SyncLagMax:                 Duration{5 * time.Second},
		},
		Store: Store{
			Root:                "data/store",
			SegmentSize:         1 << 30,
			CQEntriesPerFile:    300_000,
			IndexSlots:          5_000_000,
			IndexEntries:        20_000_000,
			MaxMessageSize:      4 << 20,
			Flush:               "async",
			AsyncWrites:         "hybrid",
			FlushInterval:       Duration{500 * time.Millisecond},
			SyncFlushTimeout:    Duration{5 * time.Second},
			FileReservedTime:    Duration{72 * time.Hour},
			DeleteWhen:          "04",
			DiskMaxUsedRatio:    75,
			DiskForceCleanRatio: 85,
			DiskFullRatio:       90,
			DiskForceClean:      false,
			Preallocate:         64 << 20,
			CheckCRCOnRecover:   true,
			VerifyAllOnCrash:    true,
			LogicFlushInterval:  Duration{time.Second},
			IndexFlushInterval:  Duration{10 * time.Second},
			CleanInterval:       Duration{10 * time.Second},
			RecoverSegments:     3,
			WarmSegments:        true,
			MaxOpenFiles:        1000,
		},
		Console: Console{
			Listen:         "127.0.0.1:8080",
			Registries:     []string{"127.0.0.1:9876"},
			AdminUsers:     []string{},
			SampleInterval: Duration{5 * time.Second},
			SessionTTL:     Duration{12 * time.Hour},
			RequestTimeout: Duration{10 * time.Second},
		},
		Controller: Controller{
			Listen:            "0.0.0.0:9878",
			RaftListen:        "0.0.0.0:9880",
			Peers:             []string{},
			DataDir:           "data/controller",
			HeartbeatInterval: Duration{500 * time.Millisecond},
			HeartbeatTimeout:  Duration{3 * time.Second},
			ElectionTimeout:   Duration{time.Second},
			SnapshotThreshold: 256,
		},
		Bridge: Bridge{
			Listen:         "0.0.0.0:1883",
			Registries:     []string{"127.0.0.1:9876"},
			MaxPacketSize:  4 << 20,
			ReceiveMaximum: 1024,
			MaxKeepAlive:   Duration{20 * time.Minute},
			SessionExpiry:  Duration{24 * time.Hour},
			SysInterval:    Duration{10 * time.Second},
			HeartbeatEvery: Duration{10 * time.Second},
			DefaultTopic:   "MQTT_INGRESS",
			EgressTopic:    "MQTT_EGRESS",

			TopicAliasMaximum:  64,
			MaxQueuedMessages:  1000,
			MaxOutbound:        4 << 20,
			SlowReaderTimeout:  Duration{10 * time.Second},
			MaxInboundMemory:   128 << 20,
			InboundStall:       Duration{10 * time.Second},
			ConnectTimeout:     Duration{10 * time.Second},
			SessionLoadTimeout: Duration{30 * time.Second},
			Workers:            256,
			PollLinger:         Duration{time.Millisecond},
			SessionTopic:       "MQTT_SESSION",
			RetainedTopic:      "MQTT_RETAINED",
			MaxOfflineMessages: 1000,
			TopicQueues:        8,
			StartTimeout:       Duration{30 * time.Second},
			SendTimeout:        Duration{3 * time.Second},
			HandoffTimeout:     Duration{2 * time.Second},
			ShareRefresh:       Duration{500 * time.Millisecond},
			CheckpointInterval: Duration{30 * time.Second},
			WillClaimGrace:     Duration{3 * time.Second},
			RefreshAge:         Duration{24 * time.Hour},
		},
		AMQP: AMQP{
			Listen:         "0.0.0.0:5672",
			VHosts:         []string{"/"},
			ChannelMax:     2047,
			FrameMax:       131072,
			Heartbeat:      Duration{60 * time.Second},
			MaxMessageSize: 16 << 20,
			MaxQueueBytes:  256 << 20,
		},
		StateStore: StateStore{
			Shards:              8,
			SnapshotInterval:    Duration{time.Minute},
			NodeID:              "StateStore",
			MaxKeys:             1_000_000,
			MaxBytes:            1 << 30,
			MaxKeySize:          64 << 10,
			MaxValueSize:        3 << 20,
			MaxClockSkew:        Duration{time.Minute},
			HistoryLen:          1000,
			HistoryBytes:        16 << 20,
			DedupLen:            10_000,
			MaxWatchesPerClient: 10_000,
			RequestTimeout:      Duration{10 * time.Second},
			RouteRefresh:        Duration{30 * time.Second},
			DropTimeout:         Duration{2 * time.Second},
		},
		IoTHub: IoTHub{
			DeviceAuth:       "registry",
			EventsTopic:      "IOTHUB_EVENTS",
			RPCTopic:         "IOTHUB_RPC",
			FeedbackTopic:    "IOTHUB_FEEDBACK",
			FeedbackLock:     Duration{time.Minute},
			MethodAckTimeout: Duration{3 * time.Second},
			MaxMethodTimeout: Duration{300 * time.Second},
			C2DTTL:           Duration{time.Hour},
			C2DMaxTTL:        Duration{48 * time.Hour},
			C2DMaxSize:       64 << 10,
			C2DMaxQueueDepth: 50,
			TwinRate:         100,
			RequestTimeout:   Duration{10 * time.Second},
			StartTimeout:     Duration{30 * time.Second},
			RouteRefresh:     Duration{30 * time.Second},
			WatchCheck:       Duration{2 * time.Second},
			MaxBody:          256 << 10,
			Policies:         []IoTHubPolicy{},
		},
		Twin: Twin{
			Shards:              8,
			SnapshotInterval:    Duration{time.Minute},
			Events:              true,
			EventsTopic:         "twin-events",
			MaxModulesPerDevice: 50,
			IndexPaths:          []string{},
			MaxPageSize:         1000,
		},
	}
}

// Load reads path over the defaults and validates the result. An empty path
// returns the validated defaults.
func Load(path string) (File, error) {
	f := Default()
	if path == "" {
		return f, f.Validate()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("conf: read %s: %w", path, err)
	}
	if err := decode(&f, path, string(data)); err != nil {
		return f, err
	}
	if err := f.Validate(); err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Parse decodes TOML text over the defaults and validates it; name is used
// in error messages in place of a file path.
func Parse(name, text string) (File, error) {
	f := Default()
	if err := decode(&f, name, text); err != nil {
		return f, err
	}
	if err := f.Validate(); err != nil {
		return f, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

func decode(f *File, name, text string) error {
	// Lists replace the defaults rather than merge with them.
	f.Broker.Registries, f.Bridge.Registries, f.Console.Registries = nil, nil, nil
	md, err := toml.Decode(text, f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			if pe.LastKey != "" {
				return fmt.Errorf("%w: %s: line %d: key %s: %s", ErrInvalid, name, pe.Position.Line, pe.LastKey, pe.Message)
			}
			return fmt.Errorf("%w: %s: line %d: %s", ErrInvalid, name, pe.Position.Line, pe.Message)
		}
		return fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return fmt.Errorf("%w: %s: unknown key %q (%s)", ErrInvalid, name, strings.Join(keys, ", "), knownKeysHint(und[0]))
	}
	d := Default()
	if !md.IsDefined("broker", "registries") {
		f.Broker.Registries = d.Broker.Registries
	}
	if !md.IsDefined("bridge", "registries") {
		f.Bridge.Registries = d.Bridge.Registries
	}
	if !md.IsDefined("console", "registries") {
		f.Console.Registries = d.Console.Registries
	}
	return nil
}
