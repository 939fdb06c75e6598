package broker

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Channel identifies the connection a client heartbeats on; the broker
// passes its *remoting.Conn. The managers only compare and return it.
type Channel any

// ClientInfo is one client connection as the broker knows it.
type ClientInfo struct {
	ClientID   string
	Channel    Channel
	Addr       string // remote address of the connection
	Language   string
	Version    int32
	LastUpdate time.Time
	// MessageModel is a consumer's, from its last heartbeat (CLUSTERING
	// or BROADCASTING); "" for producers.
	MessageModel string
	// Fingerprint is a heartbeat v2 consumer's fingerprint of the
	// subscriptions the broker holds for it (from its last full
	// heartbeat; 0: none, or v1).
	Fingerprint int32
}

// ConsumerGroupInfo is a snapshot of one online consumer group.
type ConsumerGroupInfo struct {
	Group            string
	ConsumeType      string
	MessageModel     string
	ConsumeFromWhere string
	Clients          []ClientInfo                         // sorted by client id
	Subscriptions    map[string]protocol.SubscriptionData // by topic
	LastUpdate       time.Time
}

type consumerGroup struct {
	consumeType, messageModel, consumeFromWhere string
	clients                                     map[string]*ClientInfo                // by client id
	subs                                        map[string]*protocol.SubscriptionData // by topic: the group's, from clientSubs
	clientSubs                                  map[string]map[string]clientSub       // by client id, then topic
	lastUpdate                                  time.Time
}

// clientSub is one member's subscription to a topic, as its last
// heartbeat gave it; seq orders the changes of all members' subscriptions
// (the latest change has the highest).
type clientSub struct {
	sd  *protocol.SubscriptionData
	seq uint64
}

// newer reports whether a is preferred to b as the group's subscription:
// a higher subscription version, else the later change.
func (a clientSub) newer(b clientSub) bool {
	if a.sd.SubVersion != b.sd.SubVersion {
		return a.sd.SubVersion > b.sd.SubVersion
	}
	return a.seq > b.seq
}

// resolve sets the group's subscription to each of topics from its
// members' (the newest; none left: dropped) and reports whether one
// changed.
func (g *consumerGroup) resolve(topics map[string]bool) (changed bool) {
	for topic := range topics {
		var best clientSub
		for _, own := range g.clientSubs {
			if cs, ok := own[topic]; ok && (best.sd == nil || cs.newer(best)) {
				best = cs
			}
		}
		cur, ok := g.subs[topic]
		switch {
		case best.sd == nil:
			if ok {
				delete(g.subs, topic)
				changed = true
			}
		case cur != best.sd:
			g.subs[topic] = best.sd
			changed = true
		}
	}
	return changed
}

// dropClient removes a member's subscriptions and resolves its topics
// again.
func (g *consumerGroup) dropClient(id string) {
	own := g.clientSubs[id]
	delete(g.clientSubs, id)
	topics := make(map[string]bool, len(own))
	for t := range own {
		topics[t] = true
	}
	g.resolve(topics)
}

// ConsumerManager tracks the online members of every consumer group and
// their subscriptions, from HEART_BEAT, UNREGISTER_CLIENT, closed
// connections and expiry. Methods that change a group's membership report
// it so the broker can send NOTIFY_CONSUMER_IDS_CHANGED to the members.
type ConsumerManager struct {
	mu     sync.RWMutex
	groups map[string]*consumerGroup // protected by mu
	seq    uint64                    // protected by mu; see clientSub
}

// NewConsumerManager returns an empty manager.
func NewConsumerManager() *ConsumerManager {
	return &ConsumerManager{groups: map[string]*consumerGroup{}}
}

// Register records a consumer heartbeat for one group: the client (added
// or refreshed) and its subscriptions (topics it no longer lists are no
// longer its). It reports whether the set of client ids changed and
// whether the group's subscriptions changed.
//
// The group's subscription to a topic is the newest of its online
// members' (the highest subscription version, RocketMQ's rule; of equal
// versions the one that changed last): a member still running with an
// older subscription (a rolling change of a consumer's filter) does not
// take the group back to it at its next heartbeat, and when the member
// holding the group's subscription leaves, the newest of the others'
// takes over at once. A topic is subscribed while a member lists it.
//
// A heartbeat served after its connection closed registers nothing: the
// connection's clients were removed (or are about to be) by
// ChannelClosed, and a client registered then would stay a member until
// it expired (ClientExpiry), holding its share of the group's queues. A
// client that closes right after sending a heartbeat (and its unregister)
// has its heartbeat served that late when the heartbeat workers are busy.
func (m *ConsumerManager) Register(client ClientInfo, cd *protocol.ConsumerData) (membersChanged, subsChanged bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if channelClosed(client.Channel) {
		return false, false
	}
	g := m.heartbeatGroup(client, cd)
	// The same client id on a new connection is no membership change; the
	// entry is replaced so notifications go to the new connection.
	_, known := g.clients[client.ClientID]
	membersChanged = !known
	c := client
	c.MessageModel = cd.MessageModel
	g.clients[client.ClientID] = &c

	own := g.clientSubs[client.ClientID]
	next := make(map[string]clientSub, len(cd.SubscriptionDataSet))
	topics := make(map[string]bool, len(own)+len(cd.SubscriptionDataSet))
	for t := range own {
		topics[t] = true
	}
	for _, sd := range cd.SubscriptionDataSet {
		if sd == nil || sd.Topic == "" {
			continue
		}
		topics[sd.Topic] = true
		if cur, ok := own[sd.Topic]; ok && cur.sd.SubVersion == sd.SubVersion && cur.sd.SubString == sd.SubString &&
			cur.sd.ExpressionType == sd.ExpressionType {
			next[sd.Topic] = cur
			continue
		}
		s := *sd
		s.TagsSet = slices.Clone(sd.TagsSet)
		s.CodeSet = slices.Clone(sd.CodeSet)
		m.seq++
		next[sd.Topic] = clientSub{sd: &s, seq: m.seq}
	}
	g.clientSubs[client.ClientID] = next
	return membersChanged, g.resolve(topics)
}

// RegisterWithoutSub records a heartbeat v2 consumer heartbeat that
// carries no subscriptions (WithoutSub): the client is added or
// refreshed, its subscriptions stay as its last full heartbeat left
// them. It reports whether the set of client ids changed and whether the
// broker holds the subscriptions of client.Fingerprint for this client:
// when it does not (the broker restarted, the client expired, or its
// subscriptions changed without a full heartbeat here), the client is
// to send them again (IS_SUB_CHANGE).
func (m *ConsumerManager) RegisterWithoutSub(client ClientInfo, cd *protocol.ConsumerData) (membersChanged, current bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if channelClosed(client.Channel) {
		return false, false
	}
	g := m.heartbeatGroup(client, cd)
	prev := g.clients[client.ClientID]
	current = prev != nil && client.Fingerprint != 0 && prev.Fingerprint == client.Fingerprint
	c := client
	c.MessageModel = cd.MessageModel
	if !current {
		c.Fingerprint = 0 // until a full heartbeat says what it stands for
	}
	g.clients[client.ClientID] = &c
	return prev == nil, current
}

// heartbeatGroup returns cd's group, made if new, with the settings and
// time of client's heartbeat. m.mu is held.
func (m *ConsumerManager) heartbeatGroup(client ClientInfo, cd *protocol.ConsumerData) *consumerGroup {
	g := m.groups[cd.GroupName]
	if g == nil {
		g = &consumerGroup{clients: map[string]*ClientInfo{}, subs: map[string]*protocol.SubscriptionData{},
			clientSubs: map[string]map[string]clientSub{}}
		m.groups[cd.GroupName] = g
	}
	g.consumeType, g.messageModel, g.consumeFromWhere = cd.ConsumeType, cd.MessageModel, cd.ConsumeFromWhere
	g.lastUpdate = client.LastUpdate
	return g
}

// Unregister removes a client from a group; it reports whether it was
// there.
func (m *ConsumerManager) Unregister(group, clientID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[group]
	if g == nil || g.clients[clientID] == nil {
		return false
	}
	delete(g.clients, clientID)
	g.dropClient(clientID)
	if len(g.clients) == 0 {
		delete(m.groups, group)
	}
	return true
}

// channelClosed reports whether ch is a connection that has closed. A
// connection is marked closed (Done) before its close hooks run, and
// those call ChannelClosed, which takes the manager's lock: a client
// registered under the lock while its connection was open is removed
// by them.
func channelClosed(ch Channel) bool {
	d, ok := ch.(interface{ Done() <-chan struct{} })
	if !ok {
		return false
	}
	select {
	case <-d.Done():
		return true
	default:
		return false
	}
}

// ChannelClosed removes every client of a closed connection and returns
// the groups whose membership changed, sorted.
func (m *ConsumerManager) ChannelClosed(ch Channel) []string {
	return m.removeWhere(func(c *ClientInfo) bool { return c.Channel == ch })
}

// ScanExpired removes clients silent since before deadline and returns the
// groups whose membership changed, sorted.
func (m *ConsumerManager) ScanExpired(deadline time.Time) []string {
	return m.removeWhere(func(c *ClientInfo) bool { return c.LastUpdate.Before(deadline) })
}

func (m *ConsumerManager) removeWhere(drop func(*ClientInfo) bool) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var changed []string
	for name, g := range m.groups {
		n := len(g.clients)
		for id, c := range g.clients {
			if drop(c) {
				delete(g.clients, id)
				g.dropClient(id)
			}
		}
		if len(g.clients) != n {
			changed = append(changed, name)
		}
		if len(g.clients) == 0 {
			delete(m.groups, name)
		}
	}
	sort.Strings(changed)
	return changed
}

// ClientIDs returns the online client ids of a group, sorted (the body of
// GET_CONSUMER_LIST_BY_GROUP).
func (m *ConsumerManager) ClientIDs(group string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[group]
	if g == nil {
		return nil
	}
	ids := make([]string, 0, len(g.clients))
	for id := range g.clients {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Channels returns the connections of a group's members.
func (m *ConsumerManager) Channels(group string) []Channel {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[group]
	if g == nil {
		return nil
	}
	chans := make([]Channel, 0, len(g.clients))
	for _, c := range g.clients {
		chans = append(chans, c.Channel)
	}
	return chans
}

// Client returns one online member of a group.
func (m *ConsumerManager) Client(group, clientID string) (ClientInfo, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[group]
	if g == nil || g.clients[clientID] == nil {
		return ClientInfo{}, false
	}
	return *g.clients[clientID], true
}

// Subscription returns a group's subscription to a topic, as heartbeats
// registered it.
func (m *ConsumerManager) Subscription(group, topic string) (protocol.SubscriptionData, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[group]
	if g == nil {
		return protocol.SubscriptionData{}, false
	}
	s, ok := g.subs[topic]
	if !ok {
		return protocol.SubscriptionData{}, false
	}
	return *s, true
}

// MessageModel returns the message model of group's member connected on
// ch, else (a connection no member heartbeats on, such as a SmartGo
// consumer's extra pull connection) the group's, which is its last
// heartbeat's; "" when the group is not online.
func (m *ConsumerManager) MessageModel(group string, ch Channel) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[group]
	if g == nil {
		return ""
	}
	for _, c := range g.clients {
		if c.Channel == ch {
			return c.MessageModel
		}
	}
	return g.messageModel
}

// Group returns a snapshot of an online group.
func (m *ConsumerManager) Group(group string) (ConsumerGroupInfo, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.groups[group]
	if g == nil {
		return ConsumerGroupInfo{}, false
	}
	info := ConsumerGroupInfo{Group: group, ConsumeType: g.consumeType, MessageModel: g.messageModel,
		ConsumeFromWhere: g.consumeFromWhere, LastUpdate: g.lastUpdate, Subscriptions: make(map[string]protocol.SubscriptionData, len(g.subs))}
	for _, c := range g.clients {
		info.Clients = append(info.Clients, *c)
	}
	sort.Slice(info.Clients, func(i, j int) bool { return info.Clients[i].ClientID < info.Clients[j].ClientID })
	for t, s := range g.subs {
		info.Subscriptions[t] = *s
	}
	return info, true
}

// Groups returns the online group names, sorted.
func (m *ConsumerManager) Groups() []string {
	m.mu.RLock()
	names := make([]string, 0, len(m.groups))
	for n := range m.groups {
		names = append(names, n)
	}
	m.mu.RUnlock()
	sort.Strings(names)
	return names
}

// GroupsSubscribing returns the online groups subscribed to topic, sorted.
func (m *ConsumerManager) GroupsSubscribing(topic string) []string {
	m.mu.RLock()
	var names []string
	for n, g := range m.groups {
		if _, ok := g.subs[topic]; ok {
			names = append(names, n)
		}
	}
	m.mu.RUnlock()
	sort.Strings(names)
	return names
}

// All returns every online producer by group, each group's producers
// sorted by client id.
func (m *ProducerManager) All() map[string][]ClientInfo {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[string][]ClientInfo, len(m.groups))
	for name, g := range m.groups {
		list := make([]ClientInfo, 0, len(g))
		for _, c := range g {
			list = append(list, *c)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ClientID < list[j].ClientID })
		out[name] = list
	}
	return out
}

// ProducerManager tracks online producer groups.
type ProducerManager struct {
	mu     sync.RWMutex
	groups map[string]map[string]*ClientInfo // protected by mu; group -> client id -> info
}

// NewProducerManager returns an empty manager.
func NewProducerManager() *ProducerManager {
	return &ProducerManager{groups: map[string]map[string]*ClientInfo{}}
}

// Register records a producer heartbeat.
func (m *ProducerManager) Register(group string, client ClientInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if channelClosed(client.Channel) {
		return // as ConsumerManager.Register
	}
	g := m.groups[group]
	if g == nil {
		g = map[string]*ClientInfo{}
		m.groups[group] = g
	}
	c := client
	g[client.ClientID] = &c
}

// RegisterRequester records the producer client of a request message
// (REPLY_TO_CLIENT), on the connection the request came on, unless the
// client is registered already in any group (a heartbeat's registration
// stands: it is dropped only with its connection or on expiry). The
// registration is a heartbeat's: it expires as one does (ScanExpired),
// goes with its connection (ChannelClosed), and a heartbeat replaces it.
// It reports whether it registered.
func (m *ProducerManager) RegisterRequester(group string, client ClientInfo) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range m.groups {
		if g[client.ClientID] != nil {
			return false
		}
	}
	g := m.groups[group]
	if g == nil {
		g = map[string]*ClientInfo{}
		m.groups[group] = g
	}
	c := client
	g[client.ClientID] = &c
	return true
}

// known reports whether the producer client id is registered in any group.
func (m *ProducerManager) known(clientID string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, g := range m.groups {
		if g[clientID] != nil {
			return true
		}
	}
	return false
}

// Unregister removes a producer client from a group.
func (m *ProducerManager) Unregister(group, clientID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.groups[group], clientID)
	if len(m.groups[group]) == 0 {
		delete(m.groups, group)
	}
}

// ChannelClosed removes every producer of a closed connection.
func (m *ProducerManager) ChannelClosed(ch Channel) {
	m.removeWhere(func(c *ClientInfo) bool { return c.Channel == ch })
}

// ScanExpired removes producers silent since before deadline.
func (m *ProducerManager) ScanExpired(deadline time.Time) {
	m.removeWhere(func(c *ClientInfo) bool { return c.LastUpdate.Before(deadline) })
}

func (m *ProducerManager) removeWhere(drop func(*ClientInfo) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, g := range m.groups {
		for id, c := range g {
			if drop(c) {
				delete(g, id)
			}
		}
		if len(g) == 0 {
			delete(m.groups, name)
		}
	}
}

// Clients returns the producers of a group, sorted by client id.
func (m *ProducerManager) Clients(group string) []ClientInfo {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]ClientInfo, 0, len(m.groups[group]))
	for _, c := range m.groups[group] {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClientID < out[j].ClientID })
	return out
}

// Find returns the newest registration of the producer client id in any
// group (request-reply pushes a reply to the connection it names).
func (m *ProducerManager) Find(clientID string) (ClientInfo, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var found *ClientInfo
	for _, g := range m.groups {
		if c := g[clientID]; c != nil && (found == nil || c.LastUpdate.After(found.LastUpdate)) {
			found = c
		}
	}
	if found == nil {
		return ClientInfo{}, false
	}
	return *found, true
}

// Groups returns the online producer group names, sorted.
func (m *ProducerManager) Groups() []string {
	m.mu.RLock()
	names := make([]string, 0, len(m.groups))
	for n := range m.groups {
		names = append(names, n)
	}
	m.mu.RUnlock()
	sort.Strings(names)
	return names
}

// QueueLockExpiry is how long a queue lock of an orderly consumer lasts
// without renewal (clients renew every 20 s).
const QueueLockExpiry = 60 * time.Second

type lockEntry struct {
	clientID   string
	lastUpdate time.Time
}

// LockManager holds the queue locks of orderly consumers (LOCK_BATCH_MQ):
// a queue belongs to at most one client of a group at a time; a lock not
// renewed within QueueLockExpiry may be taken by another client.
type LockManager struct {
	expiry time.Duration
	mu     sync.Mutex
	locks  map[string]map[protocol.MessageQueue]*lockEntry // protected by mu
}

// NewLockManager returns a lock manager with the given expiry (0 means
// QueueLockExpiry).
func NewLockManager(expiry time.Duration) *LockManager {
	if expiry <= 0 {
		expiry = QueueLockExpiry
	}
	return &LockManager{expiry: expiry, locks: map[string]map[protocol.MessageQueue]*lockEntry{}}
}

// TryLock locks as many of mqs as possible for clientID and returns the
// ones it now holds (including renewed ones).
func (m *LockManager) TryLock(group, clientID string, mqs []protocol.MessageQueue, now time.Time) []protocol.MessageQueue {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.locks[group]
	if g == nil {
		g = map[protocol.MessageQueue]*lockEntry{}
		m.locks[group] = g
	}
	var ok []protocol.MessageQueue
	for _, mq := range mqs {
		e := g[mq]
		switch {
		case e == nil, e.clientID == clientID, now.Sub(e.lastUpdate) > m.expiry:
			g[mq] = &lockEntry{clientID: clientID, lastUpdate: now}
			ok = append(ok, mq)
		}
	}
	return ok
}

// Unlock releases the locks clientID holds on mqs.
func (m *LockManager) Unlock(group, clientID string, mqs []protocol.MessageQueue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.locks[group]
	for _, mq := range mqs {
		if e := g[mq]; e != nil && e.clientID == clientID {
			delete(g, mq)
		}
	}
	if len(g) == 0 {
		delete(m.locks, group)
	}
}

// IsLocked reports whether clientID holds a live lock on mq.
func (m *LockManager) IsLocked(group, clientID string, mq protocol.MessageQueue, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.locks[group][mq]
	return e != nil && e.clientID == clientID && now.Sub(e.lastUpdate) <= m.expiry
}
