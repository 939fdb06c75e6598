package broker

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Permission bits of a topic or a broker (RocketMQ PermName).
const (
	PermPriority int32 = 8
	PermRead     int32 = 4
	PermWrite    int32 = 2
	PermInherit  int32 = 1
	PermRW             = PermRead | PermWrite
)

// Reserved and system topic names.
const (
	// AutoCreateTopicKey is the template topic producers fall back to for a
	// topic with no route; its INHERIT bit allows auto-creation.
	AutoCreateTopicKey = "TBW102"
	// ScheduleTopic holds delayed messages, one queue per delay level.
	ScheduleTopic    = "SCHEDULE_TOPIC_XXXX"
	SelfTestTopic    = "SELF_TEST_TOPIC"
	OffsetMovedEvent = "OFFSET_MOVED_EVENT"
	TransHalfTopic   = "RMQ_SYS_TRANS_HALF_TOPIC"
	TransOpHalfTopic = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	TransCheckMax    = "TRANS_CHECK_MAX_TIME_TOPIC"
	// TraceTopic receives the message traces clients with tracing on send
	// (RocketMQ's default msgTraceTopicName).
	TraceTopic       = "RMQ_SYS_TRACE_TOPIC"
	RetryGroupPrefix = "%RETRY%"
	DLQGroupPrefix   = "%DLQ%"
	// MaxTopicLength is the longest topic name (the record stores its
	// length in one signed byte).
	MaxTopicLength = 127
)

// notAllowedSend lists system topics producers may not write to directly.
var notAllowedSend = map[string]bool{
	AutoCreateTopicKey: true, ScheduleTopic: true, TransHalfTopic: true,
	TransOpHalfTopic: true, TransCheckMax: true, OffsetMovedEvent: true,
}

// RetryTopic returns the retry topic of a consumer group.
func RetryTopic(group string) string { return RetryGroupPrefix + group }

// DLQTopic returns the dead-letter topic of a consumer group.
func DLQTopic(group string) string { return DLQGroupPrefix + group }

// ValidateTopicName checks RocketMQ's topic rules: 1 to 127 characters of
// [%|a-zA-Z0-9_-].
func ValidateTopicName(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty", ErrInvalidTopic)
	}
	if len(topic) > MaxTopicLength {
		return fmt.Errorf("%w: %q is %d bytes, at most %d", ErrInvalidTopic, topic, len(topic), MaxTopicLength)
	}
	for i := 0; i < len(topic); i++ {
		if !topicChar(topic[i]) {
			_, n := utf8.DecodeRuneInString(topic[i:]) // name the character, not its first byte
			return fmt.Errorf("%w: %q has %q at byte %d; allowed are [%%|a-zA-Z0-9_-]", ErrInvalidTopic, topic, topic[i:i+n], i)
		}
	}
	return nil
}

// ValidateSendTopic checks a topic a producer sends to: the name rules plus
// the system topics no producer may write.
func ValidateSendTopic(topic string) error {
	if err := ValidateTopicName(topic); err != nil {
		return err
	}
	if notAllowedSend[topic] {
		return fmt.Errorf("%w: %q is a reserved system topic", ErrInvalidTopic, topic)
	}
	return nil
}

func topicChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '%' || c == '|'
}

// TopicOptions configures the topic manager.
type TopicOptions struct {
	Dir              string // <store root>/config
	BrokerName       string
	ClusterName      string
	AutoCreateTopic  bool
	DefaultQueueNums int32 // queues of TBW102 and of topics created without a count
	DelayLevels      int32 // queues of SCHEDULE_TOPIC_XXXX
	Now              func() time.Time
	Logger           *slog.Logger
}

// TopicManager holds the broker's topic configurations and persists them to
// topic.json on every change.
type TopicManager struct {
	opts       TopicOptions
	path       string
	log        *slog.Logger
	version    dataVersion
	autoCreate atomic.Bool // opts.AutoCreateTopic, changeable at run time
	// copied is the master's data version the last Replace installed (nil
	// until a slave's first copy since start); a slave's own later bumps
	// (a group's retry topic made by a heartbeat) do not move it.
	copied atomic.Pointer[protocol.DataVersion]

	// table is the topic table, read without a lock (every send looks its
	// topic up). It is copied on write: a writer holds mu, clones the
	// map, changes the clone and stores it; a stored map and its values
	// are never mutated. A change costs a copy of the table, no more than
	// the persist of the whole table that follows every change.
	mu    sync.Mutex
	table atomic.Pointer[map[string]*protocol.TopicConfig]
	// lastSend is the topic a send found last and the table it was found
	// in (sendable, getSendable): a run of sends to one topic skips the
	// name checks and the map. A new table (every change) invalidates it.
	lastSend atomic.Pointer[sendHit]
	// persistMu serialises writes of the file so an older snapshot never
	// replaces a newer one.
	persistMu sync.Mutex
}

// OpenTopics loads topic.json (if any) and adds the system topics.
func OpenTopics(opts TopicOptions) (*TopicManager, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.DefaultQueueNums <= 0 {
		opts.DefaultQueueNums = 4
	}
	if opts.DelayLevels <= 0 {
		opts.DelayLevels = 18
	}
	m := &TopicManager{opts: opts, path: filepath.Join(opts.Dir, TopicConfigFile), log: opts.Logger}
	topics := map[string]*protocol.TopicConfig{}
	m.autoCreate.Store(opts.AutoCreateTopic)
	var w protocol.TopicConfigSerializeWrapper
	if _, err := readConfig(m.path, &w); err != nil {
		return nil, err
	}
	for name, tc := range w.TopicConfigTable {
		if tc == nil {
			continue
		}
		if tc.TopicName == "" {
			tc.TopicName = name
		}
		topics[name] = tc
	}
	m.version.set(w.DataVersion)
	changed := false
	for _, tc := range m.systemTopics() {
		if _, ok := topics[tc.TopicName]; !ok {
			topics[tc.TopicName] = tc
			changed = true
		}
	}
	if !opts.AutoCreateTopic {
		if _, ok := topics[AutoCreateTopicKey]; ok {
			delete(topics, AutoCreateTopicKey)
			changed = true
		}
	}
	m.table.Store(&topics)
	if changed {
		m.version.bump(opts.Now())
		if err := m.persist(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *TopicManager) systemTopics() []*protocol.TopicConfig {
	mk := func(name string, queues, perm int32) *protocol.TopicConfig {
		return &protocol.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: perm, TopicFilterType: protocol.TopicFilterSingleTag}
	}
	ts := []*protocol.TopicConfig{
		mk(SelfTestTopic, 1, PermRW),
		mk(OffsetMovedEvent, 1, PermRW),
		mk(ScheduleTopic, m.opts.DelayLevels, PermRW),
	}
	if m.opts.AutoCreateTopic {
		ts = append(ts, m.autoCreateTemplate())
	}
	// The cluster and broker names are topics too, so that tools can
	// address one broker or one cluster (as RocketMQ does).
	if m.opts.ClusterName != "" && ValidateTopicName(m.opts.ClusterName) == nil {
		ts = append(ts, mk(m.opts.ClusterName, 16, PermRW|PermInherit))
	}
	if m.opts.BrokerName != "" && ValidateTopicName(m.opts.BrokerName) == nil {
		ts = append(ts, mk(m.opts.BrokerName, 1, PermRW|PermInherit))
	}
	// Clients with tracing on send their traces here. Java's clients
	// would auto-create it from TBW102, but rocketmq-client-go's trace
	// dispatcher sends only to a topic the registry already routes, and
	// drops its traces otherwise; so it exists from the start, as in a
	// RocketMQ broker with traceTopicEnable.
	ts = append(ts, mk(TraceTopic, 1, PermRW))
	// Replies of request-reply go to the cluster's reply topic (reply.go).
	if rt := protocol.ReplyTopic(m.opts.ClusterName); m.opts.ClusterName != "" {
		if err := ValidateTopicName(rt); err != nil {
			// conf refuses such a name; an embedder is told once here.
			m.log.Warn("no request-reply topic for this cluster name: replies cannot be sent", "cluster", m.opts.ClusterName, "err", err)
		} else {
			ts = append(ts, mk(rt, 1, PermRW))
		}
	}
	return ts
}

// autoCreateTemplate is TBW102's configuration: twice the default queue
// count, read, write and inherit.
func (m *TopicManager) autoCreateTemplate() *protocol.TopicConfig {
	return &protocol.TopicConfig{TopicName: AutoCreateTopicKey, ReadQueueNums: 2 * m.opts.DefaultQueueNums, WriteQueueNums: 2 * m.opts.DefaultQueueNums,
		Perm: PermRW | PermInherit, TopicFilterType: protocol.TopicFilterSingleTag}
}

// AutoCreate reports whether sends may create topics.
func (m *TopicManager) AutoCreate() bool { return m.autoCreate.Load() }

// SetAutoCreate turns topic auto-creation on or off at run time (until
// restart), as a broker started with that setting has it: the template
// topic TBW102 is added or removed (and persisted), so the registries stop
// or start offering producers its route. It reports whether the topic
// table changed (the broker then registers again).
func (m *TopicManager) SetAutoCreate(on bool) (bool, error) {
	m.mu.Lock()
	if m.autoCreate.Swap(on) == on {
		m.mu.Unlock()
		return false, nil
	}
	_, had := m.topics()[AutoCreateTopicKey]
	switch {
	case on && !had:
		m.setLocked(AutoCreateTopicKey, m.autoCreateTemplate())
	case !on && had:
		m.setLocked(AutoCreateTopicKey, nil)
	}
	m.mu.Unlock()
	if on == had {
		return false, nil
	}
	m.version.bump(m.opts.Now())
	m.log.Info("topic auto-creation switched", "on", on)
	return true, m.persist()
}

// topics returns the current topic table; the caller must not change it.
func (m *TopicManager) topics() map[string]*protocol.TopicConfig { return *m.table.Load() }

// Get returns a copy of the topic's configuration.
func (m *TopicManager) Get(topic string) (protocol.TopicConfig, bool) {
	tc, ok := m.topics()[topic]
	if !ok {
		return protocol.TopicConfig{}, false
	}
	return *tc, true
}

// sendHitReplace: a send that misses the remembered topic replaces it one
// time in sendHitReplace (getSendable).
const sendHitReplace = 16

// sendHit is a topic that passed a send's checks (ValidateSendTopic) and
// was found in table, the snapshot it is valid for.
type sendHit struct {
	table *map[string]*protocol.TopicConfig
	topic string // the key; owned
	tc    *protocol.TopicConfig
}

// sendable returns the configuration of the topic the last send found
// (getSendable), if it is topic and the table has not changed since:
// such a topic passed ValidateSendTopic, and the configuration is what
// Get would return. It neither locks nor writes.
func (m *TopicManager) sendable(topic string) (*protocol.TopicConfig, bool) {
	h := m.lastSend.Load()
	if h == nil || h.table != m.table.Load() || h.topic != topic {
		return nil, false
	}
	return h.tc, true
}

// getSendable is Get for a send whose topic passed ValidateSendTopic: a
// topic found is remembered for sendable when nothing valid is, else one
// time in sendHitReplace, so that sends to several topics in turn
// allocate and write the shared entry rarely, and a run of one topic's
// sends is soon remembered.
func (m *TopicManager) getSendable(topic string) (*protocol.TopicConfig, bool) {
	t := m.table.Load()
	tc, ok := (*t)[topic]
	if !ok {
		return nil, false
	}
	if h := m.lastSend.Load(); h == nil || h.table != t || h.tc != tc && rand.Uint32()%sendHitReplace == 0 {
		key := tc.TopicName
		if key != topic {
			key = strings.Clone(topic) // topic may alias a request's buffer
		}
		m.lastSend.Store(&sendHit{table: t, topic: key, tc: tc})
	}
	return tc, true // the table's: never written (copied on write)
}

// Update creates or replaces a topic's configuration and persists it.
func (m *TopicManager) Update(tc protocol.TopicConfig) error {
	if err := ValidateTopicName(tc.TopicName); err != nil {
		return err
	}
	if tc.ReadQueueNums <= 0 || tc.WriteQueueNums <= 0 || tc.ReadQueueNums > 65535 || tc.WriteQueueNums > 65535 {
		return fmt.Errorf("%w: %s: queue numbers must be between 1 and 65535 (read %d, write %d)", ErrInvalidTopic, tc.TopicName, tc.ReadQueueNums, tc.WriteQueueNums)
	}
	if tc.TopicFilterType == "" {
		tc.TopicFilterType = protocol.TopicFilterSingleTag
	}
	if err := m.change(tc.TopicName, &tc); err != nil {
		return err
	}
	m.log.Info("topic updated", "topic", tc.TopicName, "read", tc.ReadQueueNums, "write", tc.WriteQueueNums, "perm", tc.Perm)
	return nil
}

// change sets topic's configuration to tc (nil deletes it) and persists
// the table (see persistOrUndo).
func (m *TopicManager) change(topic string, tc *protocol.TopicConfig) error {
	m.mu.Lock()
	prev, had := m.setLocked(topic, tc)
	m.mu.Unlock()
	return m.persistOrUndo(topic, tc, prev, had)
}

// setLocked sets topic's entry to tc (nil deletes it) in a new copy of
// the table and returns the entry it replaced. The caller holds mu.
func (m *TopicManager) setLocked(topic string, tc *protocol.TopicConfig) (prev *protocol.TopicConfig, had bool) {
	topics := maps.Clone(m.topics())
	prev, had = topics[topic]
	if tc != nil {
		topics[topic] = tc
	} else {
		delete(topics, topic)
	}
	m.table.Store(&topics)
	return prev, had
}

// persistOrUndo persists the table after topic's entry became tc. When the
// file cannot be written (a full disk) the change is taken back, unless
// the topic changed again since, and the error returned: a refused change
// changes nothing, and no topic lives only in memory to vanish at the
// next restart.
func (m *TopicManager) persistOrUndo(topic string, tc, prev *protocol.TopicConfig, had bool) error {
	m.version.bump(m.opts.Now())
	err := m.persist()
	if err == nil {
		return nil
	}
	m.mu.Lock()
	if cur, ok := m.topics()[topic]; cur == tc && ok == (tc != nil) {
		m.setLocked(topic, prev)
	}
	m.mu.Unlock()
	m.version.bump(m.opts.Now())
	return err
}

// Delete removes a topic; it reports whether the topic existed.
func (m *TopicManager) Delete(topic string) (bool, error) {
	if _, ok := m.Get(topic); !ok {
		return false, nil
	}
	if err := m.change(topic, nil); err != nil {
		return true, err
	}
	m.log.Info("topic deleted", "topic", topic)
	return true, nil
}

// CreateOnSend returns the topic's configuration, creating it from the
// template topic when it does not exist: the template must exist and carry
// the INHERIT permission, auto-creation must be on, and the new topic gets
// min(queueNums, template write queues) queues (RocketMQ's rule; a
// queueNums of 0 or less gets the broker's default_topic_queues instead).
func (m *TopicManager) CreateOnSend(topic, template string, queueNums int32, sysFlag int32) (protocol.TopicConfig, error) {
	if tc, ok := m.Get(topic); ok {
		return tc, nil
	}
	if !m.autoCreate.Load() {
		return protocol.TopicConfig{}, fmt.Errorf("%w: %s (auto-create is off)", ErrTopicNotExist, topic)
	}
	tmpl, ok := m.Get(template)
	if !ok {
		return protocol.TopicConfig{}, fmt.Errorf("%w: %s (template topic %q does not exist)", ErrTopicNotExist, topic, template)
	}
	if tmpl.Perm&PermInherit == 0 {
		return protocol.TopicConfig{}, fmt.Errorf("%w: %s (template topic %q does not allow inheritance)", ErrTopicNotExist, topic, template)
	}
	// A count over the template's is capped at the template's, as the
	// clients cap the route they send on (client.buildRoute); none (0 or
	// less) takes the broker's default.
	if queueNums <= 0 {
		queueNums = min(m.opts.DefaultQueueNums, tmpl.WriteQueueNums)
	}
	queueNums = min(queueNums, tmpl.WriteQueueNums)
	tc := protocol.TopicConfig{
		TopicName: topic, ReadQueueNums: queueNums, WriteQueueNums: queueNums,
		Perm: tmpl.Perm &^ PermInherit, TopicSysFlag: sysFlag, TopicFilterType: protocol.TopicFilterSingleTag,
	}
	return m.createIfAbsent(tc)
}

// CreateSystemTopic returns the topic's configuration, creating it with the
// given queue count and permission when absent (retry and DLQ topics).
func (m *TopicManager) CreateSystemTopic(topic string, queueNums, perm int32) (protocol.TopicConfig, error) {
	if tc, ok := m.Get(topic); ok {
		return tc, nil
	}
	if err := ValidateTopicName(topic); err != nil {
		return protocol.TopicConfig{}, err
	}
	tc := protocol.TopicConfig{TopicName: topic, ReadQueueNums: queueNums, WriteQueueNums: queueNums, Perm: perm, TopicFilterType: protocol.TopicFilterSingleTag}
	return m.createIfAbsent(tc)
}

// createIfAbsent adds tc unless its topic exists and returns the
// configuration now held. The name is copied: it may be a slice of a
// request's header, valid only until the request is recycled
// (protocol.Command.Recycle), and the table keeps it.
func (m *TopicManager) createIfAbsent(tc protocol.TopicConfig) (protocol.TopicConfig, error) {
	m.mu.Lock()
	if cur, ok := m.topics()[tc.TopicName]; ok {
		m.mu.Unlock()
		return *cur, nil
	}
	tc.TopicName = strings.Clone(tc.TopicName)
	m.setLocked(tc.TopicName, &tc)
	m.mu.Unlock()
	if err := m.persistOrUndo(tc.TopicName, &tc, nil, false); err != nil {
		return tc, err
	}
	m.log.Info("topic created", "topic", tc.TopicName, "queues", tc.WriteQueueNums, "perm", tc.Perm)
	return tc, nil
}

// Names returns the topic names, sorted.
func (m *TopicManager) Names() []string {
	topics := m.topics()
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Snapshot returns every topic configuration with the data version they
// belong to: the body of GET_ALL_TOPIC_CONFIG and of the registration.
func (m *TopicManager) Snapshot() protocol.TopicConfigSerializeWrapper {
	topics := m.topics()
	w := protocol.TopicConfigSerializeWrapper{DataVersion: m.version.get(), TopicConfigTable: make(map[string]*protocol.TopicConfig, len(topics))}
	for n, tc := range topics {
		c := *tc
		w.TopicConfigTable[n] = &c
	}
	return w
}

// Replace installs a master's topic table on a slave, keeping the master's
// data version, and persists it.
func (m *TopicManager) Replace(w protocol.TopicConfigSerializeWrapper) error {
	topics := make(map[string]*protocol.TopicConfig, len(w.TopicConfigTable))
	for n, tc := range w.TopicConfigTable {
		if tc != nil {
			c := *tc
			topics[n] = &c
		}
	}
	m.mu.Lock()
	m.table.Store(&topics)
	m.mu.Unlock()
	m.version.set(w.DataVersion)
	v := w.DataVersion
	m.copied.Store(&v)
	return m.persist()
}

// CopiedVersion is the master's data version of the table a slave last
// copied (Replace), or the current version when it copied none since it
// started.
func (m *TopicManager) CopiedVersion() protocol.DataVersion {
	if v := m.copied.Load(); v != nil {
		return *v
	}
	return m.version.get()
}

// DataVersion returns the current data version.
func (m *TopicManager) DataVersion() protocol.DataVersion { return m.version.get() }

// IsOrder reports whether the topic is configured as ordered.
func (m *TopicManager) IsOrder(topic string) bool {
	tc, ok := m.Get(topic)
	return ok && tc.Order
}

func (m *TopicManager) persist() error {
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	return writeConfig(m.path, m.Snapshot())
}

// IsRetryTopic reports whether topic is a consumer group's retry topic.
func IsRetryTopic(topic string) bool { return strings.HasPrefix(topic, RetryGroupPrefix) }

// IsDLQTopic reports whether topic is a consumer group's dead-letter topic.
func IsDLQTopic(topic string) bool { return strings.HasPrefix(topic, DLQGroupPrefix) }
