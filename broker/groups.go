package broker

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// SubscriptionGroupConfig is a consumer group's configuration, as stored in
// subscriptionGroup.json and exchanged with slaves and admin tools.
type SubscriptionGroupConfig = protocol.SubscriptionGroupConfig

// DefaultSubscriptionGroup returns RocketMQ's defaults for a new group:
// consumption on, from-min on, broadcast allowed, 1 retry queue, 16
// retries, read from broker 0, slave 1 when consuming slowly.
func DefaultSubscriptionGroup(group string) SubscriptionGroupConfig {
	return SubscriptionGroupConfig{
		GroupName: group, ConsumeEnable: true, ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		RetryQueueNums: 1, RetryMaxTimes: 16, BrokerID: 0, WhichBrokerWhenConsumeSlowly: 1,
		NotifyConsumerIdsChangedEnable: true,
	}
}

// SubscriptionGroupWrapper is subscriptionGroup.json and the body of
// GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
type SubscriptionGroupWrapper = protocol.SubscriptionGroupWrapper

// GroupOptions configures the subscription group manager.
type GroupOptions struct {
	Dir        string
	AutoCreate bool
	// MaxAutoCreated: auto-creation stops once this many groups exist
	// (0: DefaultMaxAutoCreatedGroups); groups made by an admin are not
	// limited.
	MaxAutoCreated int
	Now            func() time.Time
	Logger         *slog.Logger
}

// GroupManager holds the subscription groups and persists them on change.
type GroupManager struct {
	opts       GroupOptions
	autoCreate atomic.Bool // opts.AutoCreate, changeable at run time
	path       string
	log        *slog.Logger
	version    dataVersion
	mu         sync.RWMutex
	groups     map[string]*SubscriptionGroupConfig // protected by mu; values replaced, never mutated
	persistMu  sync.Mutex
}

// OpenGroups loads subscriptionGroup.json, if any.
func OpenGroups(opts GroupOptions) (*GroupManager, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxAutoCreated <= 0 {
		opts.MaxAutoCreated = DefaultMaxAutoCreatedGroups
	}
	m := &GroupManager{opts: opts, path: filepath.Join(opts.Dir, SubscriptionGroupFile), log: opts.Logger, groups: map[string]*SubscriptionGroupConfig{}}
	m.autoCreate.Store(opts.AutoCreate)
	var w SubscriptionGroupWrapper
	if _, err := readConfig(m.path, &w); err != nil {
		return nil, err
	}
	for name, g := range w.SubscriptionGroupTable {
		if g == nil {
			continue
		}
		if g.GroupName == "" {
			g.GroupName = name
		}
		m.groups[name] = g
	}
	m.version.set(w.DataVersion)
	return m, nil
}

// MaxGroupLength is the longest consumer group name: its retry topic,
// %RETRY%<group>, must fit MaxTopicLength. A longer group used to be
// taken, and a message its consumer asked to have again was lost, as
// the retry topic could not be created.
const MaxGroupLength = MaxTopicLength - len(RetryGroupPrefix)

// ValidateGroupName applies the topic naming rules to a group name, at
// most MaxGroupLength characters long and not starting with a retry or
// dead-letter topic's prefix (a group %RETRY%x would have the retry topic
// %RETRY%%RETRY%x, read back as group %RETRY%x's or x's by tools that
// strip one prefix).
func ValidateGroupName(group string) error {
	if err := ValidateTopicName(group); err != nil {
		return fmt.Errorf("%w: %q: %v", ErrInvalidGroup, group, err)
	}
	if len(group) > MaxGroupLength {
		return fmt.Errorf("%w: %q is %d bytes, at most %d (its retry topic %s<group> has at most %d)",
			ErrInvalidGroup, group, len(group), MaxGroupLength, RetryGroupPrefix, MaxTopicLength)
	}
	if reservedGroup(group) {
		return fmt.Errorf("%w: %q starts with %s or %s, the prefixes of a group's retry and dead-letter topics",
			ErrInvalidGroup, group, RetryGroupPrefix, DLQGroupPrefix)
	}
	return nil
}

// reservedGroup reports whether group starts with a retry or dead-letter
// topic's prefix.
func reservedGroup(group string) bool {
	return strings.HasPrefix(group, RetryGroupPrefix) || strings.HasPrefix(group, DLQGroupPrefix)
}

// ValidateName is ValidateGroupName for a group this broker is asked to
// serve, except that a group it already keeps (subscriptionGroup.json)
// may be up to MaxTopicLength characters, as the topic rule alone
// allowed before MaxGroupLength: SmartGo up to the twelfth session took
// groups of 121-127 characters, and their consumers must keep working
// after an upgrade. Such a group has no retry topic (see LongGroup); a
// new one is refused with the limit and the reason. So is a group named
// with a retry or dead-letter prefix, kept from before that rule.
func (m *GroupManager) ValidateName(group string) error {
	err := ValidateGroupName(group)
	if err == nil || !(LongGroup(group) || reservedGroup(group)) || ValidateTopicName(group) != nil {
		return err
	}
	if _, ok := m.Get(group); ok {
		return nil
	}
	return err
}

// LongGroup reports whether group is longer than MaxGroupLength: a group
// kept from before the limit (GroupManager.ValidateName), whose retry
// topic %RETRY%<group> cannot exist. Its consumers get the messages they
// hand back again from their own client (processSendBack), not from a
// retry topic.
func LongGroup(group string) bool { return len(group) > MaxGroupLength }

// Get returns the group's configuration.
func (m *GroupManager) Get(group string) (SubscriptionGroupConfig, bool) {
	m.mu.RLock()
	g, ok := m.groups[group]
	m.mu.RUnlock()
	if !ok {
		return SubscriptionGroupConfig{}, false
	}
	return *g, true
}

// FindOrCreate returns the group's configuration, creating it with the
// defaults when auto-creation is on.
func (m *GroupManager) FindOrCreate(group string) (SubscriptionGroupConfig, error) {
	if g, ok := m.Get(group); ok {
		return g, nil
	}
	if !m.autoCreate.Load() {
		return SubscriptionGroupConfig{}, fmt.Errorf("%w: %s (auto-create is off)", ErrGroupNotExist, group)
	}
	if err := ValidateGroupName(group); err != nil {
		return SubscriptionGroupConfig{}, err
	}
	group = strings.Clone(group) // kept: it may be a slice of a request's header (protocol.Command.Recycle)
	g := DefaultSubscriptionGroup(group)
	m.mu.Lock()
	if cur, ok := m.groups[group]; ok {
		m.mu.Unlock()
		return *cur, nil
	}
	if n := len(m.groups); n >= m.opts.MaxAutoCreated {
		m.mu.Unlock()
		return SubscriptionGroupConfig{}, fmt.Errorf("%w: %s (not created: %d groups exist, the auto-creation limit broker.max_auto_created_groups)",
			ErrGroupLimit, group, n)
	}
	m.groups[group] = &g
	m.mu.Unlock()
	m.version.bump(m.opts.Now())
	m.log.Info("subscription group created", "group", group)
	return g, m.persist()
}

// AutoCreate reports whether unknown groups are created on first use.
func (m *GroupManager) AutoCreate() bool { return m.autoCreate.Load() }

// SetAutoCreate turns the creation of unknown groups on or off.
func (m *GroupManager) SetAutoCreate(on bool) { m.autoCreate.Store(on) }

// Update creates or replaces a group's configuration.
func (m *GroupManager) Update(g SubscriptionGroupConfig) error {
	if err := m.ValidateName(g.GroupName); err != nil {
		return err
	}
	if g.RetryQueueNums < 0 || g.RetryQueueNums > 64 {
		return fmt.Errorf("%w: %s: retryQueueNums %d must be between 0 and 64", ErrInvalidGroup, g.GroupName, g.RetryQueueNums)
	}
	if g.RetryMaxTimes < -1 || g.RetryMaxTimes > 64 {
		return fmt.Errorf("%w: %s: retryMaxTimes %d must be between -1 and 64", ErrInvalidGroup, g.GroupName, g.RetryMaxTimes)
	}
	m.mu.Lock()
	m.groups[g.GroupName] = &g
	m.mu.Unlock()
	m.version.bump(m.opts.Now())
	m.log.Info("subscription group updated", "group", g.GroupName)
	return m.persist()
}

// Delete removes a group; it reports whether it existed.
func (m *GroupManager) Delete(group string) (bool, error) {
	m.mu.Lock()
	_, ok := m.groups[group]
	delete(m.groups, group)
	m.mu.Unlock()
	if !ok {
		return false, nil
	}
	m.version.bump(m.opts.Now())
	return true, m.persist()
}

// Names returns the group names, sorted.
func (m *GroupManager) Names() []string {
	m.mu.RLock()
	names := make([]string, 0, len(m.groups))
	for n := range m.groups {
		names = append(names, n)
	}
	m.mu.RUnlock()
	sort.Strings(names)
	return names
}

// Snapshot returns every group with the data version.
func (m *GroupManager) Snapshot() SubscriptionGroupWrapper {
	m.mu.RLock()
	defer m.mu.RUnlock()
	w := SubscriptionGroupWrapper{DataVersion: m.version.get(), SubscriptionGroupTable: make(map[string]*SubscriptionGroupConfig, len(m.groups))}
	for n, g := range m.groups {
		c := *g
		w.SubscriptionGroupTable[n] = &c
	}
	return w
}

// Replace installs a master's group table on a slave.
func (m *GroupManager) Replace(w SubscriptionGroupWrapper) error {
	groups := make(map[string]*SubscriptionGroupConfig, len(w.SubscriptionGroupTable))
	for n, g := range w.SubscriptionGroupTable {
		if g != nil {
			c := *g
			groups[n] = &c
		}
	}
	m.mu.Lock()
	m.groups = groups
	m.mu.Unlock()
	m.version.set(w.DataVersion)
	return m.persist()
}

// DataVersion returns the current data version.
func (m *GroupManager) DataVersion() protocol.DataVersion { return m.version.get() }

func (m *GroupManager) persist() error {
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	return writeConfig(m.path, m.Snapshot())
}

// sendBackOfLongGroup answers CONSUMER_SEND_MSG_BACK for a LongGroup: not
// at all. Its retry topic cannot exist, and an error answer loses the
// message with rocketmq-client-go, which takes any answer as done (it
// drops the message from its queue); without an answer its call times
// out (3 s), and it and the Java client consume the message again
// themselves, as after any failed send-back (no delay levels, no
// dead-letter queue: the group's offset stays before it until it is
// consumed).
func (b *Broker) sendBackOfLongGroup(group string) (*protocol.Command, error) {
	b.plog.Warn("send-back of a group longer than the limit: not answered, so that the client consumes the message again itself",
		"group", group, "length", len(group), "limit", MaxGroupLength)
	return nil, nil
}
