package registry

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// brokerLive is what the registry knows about one registered broker
// address.
type brokerLive struct {
	lastUpdate   time.Time
	dataVersion  protocol.DataVersion
	haServerAddr string
	conn         *remoting.Conn // connection the last registration came on
	gap          time.Duration  // between its last two registrations (or data version queries); 0: one so far
}

// registration is one REGISTER_BROKER call, decoded.
type registration struct {
	cluster, brokerName, brokerAddr, haServerAddr string
	brokerID                                      int64
	topics                                        *protocol.TopicConfigSerializeWrapper // nil: no topic data
	conn                                          *remoting.Conn
	now                                           time.Time
}

// routeTable holds the registry's in-memory tables. It does no I/O; every
// method takes the one lock.
type routeTable struct {
	mu          sync.RWMutex
	topicQueues map[string]map[string]*protocol.QueueData // topic -> broker name -> queues; protected by mu
	brokers     map[string]*protocol.BrokerData           // broker name -> cluster and addresses; protected by mu
	clusters    map[string]map[string]struct{}            // cluster -> broker names; protected by mu
	live        map[string]*brokerLive                    // broker address -> liveness; protected by mu
}

func newRouteTable() *routeTable {
	return &routeTable{
		topicQueues: make(map[string]map[string]*protocol.QueueData),
		brokers:     make(map[string]*protocol.BrokerData),
		clusters:    make(map[string]map[string]struct{}),
		live:        make(map[string]*brokerLive),
	}
}

// register applies a broker registration and returns, for a slave, the
// master's HA address and address. A registration handled after its
// connection closed applies nothing: the close removed the broker
// already (as for bridge nodes, bridgeTable.put).
func (t *routeTable) register(r registration) (haServerAddr, masterAddr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.conn != nil && r.conn.Err() != nil {
		return "", ""
	}
	names := t.clusters[r.cluster]
	if names == nil {
		names = make(map[string]struct{})
		t.clusters[r.cluster] = names
	}
	names[r.brokerName] = struct{}{}

	first := false
	bd := t.brokers[r.brokerName]
	if bd == nil {
		first = true
		bd = &protocol.BrokerData{Cluster: r.cluster, BrokerName: r.brokerName, BrokerAddrs: make(map[int64]string)}
		t.brokers[r.brokerName] = bd
	}
	// One address has one id: a slave promoted to master re-registers its
	// address under id 0, which replaces the old id.
	for id, addr := range bd.BrokerAddrs {
		if addr == r.brokerAddr && id != r.brokerID {
			delete(bd.BrokerAddrs, id)
		}
	}
	if _, ok := bd.BrokerAddrs[r.brokerID]; !ok {
		first = true
	}
	bd.BrokerAddrs[r.brokerID] = r.brokerAddr

	if r.topics != nil && r.brokerID == protocol.MasterID {
		prev := t.live[r.brokerAddr]
		if first || prev == nil || prev.dataVersion != r.topics.DataVersion {
			t.updateTopicsLocked(r.brokerName, r.topics.TopicConfigTable)
		}
	}
	lv := &brokerLive{lastUpdate: r.now, haServerAddr: r.haServerAddr, conn: r.conn}
	if prev := t.live[r.brokerAddr]; prev != nil {
		lv.gap = r.now.Sub(prev.lastUpdate)
	}
	if r.topics != nil {
		lv.dataVersion = r.topics.DataVersion
	}
	t.live[r.brokerAddr] = lv

	if r.brokerID != protocol.MasterID {
		if m := bd.BrokerAddrs[protocol.MasterID]; m != "" {
			if ml := t.live[m]; ml != nil {
				return ml.haServerAddr, m
			}
		}
	}
	return "", ""
}

// updateTopicsLocked makes brokerName's queue data match the master's
// topic table: new and changed topics are written, topics the master no
// longer has lose this broker's queues.
func (t *routeTable) updateTopicsLocked(brokerName string, table map[string]*protocol.TopicConfig) {
	for topic, tc := range table {
		if tc == nil {
			continue
		}
		if tc.TopicName != "" {
			topic = tc.TopicName
		}
		qs := t.topicQueues[topic]
		if qs == nil {
			qs = make(map[string]*protocol.QueueData)
			t.topicQueues[topic] = qs
		}
		qs[brokerName] = &protocol.QueueData{BrokerName: brokerName, ReadQueueNums: tc.ReadQueueNums,
			WriteQueueNums: tc.WriteQueueNums, Perm: tc.Perm, TopicSysFlag: tc.TopicSysFlag}
	}
	for topic, qs := range t.topicQueues {
		if _, ok := qs[brokerName]; !ok {
			continue
		}
		if tc, ok := table[topic]; ok && tc != nil {
			continue
		}
		if hasTopicName(table, topic) {
			continue
		}
		delete(qs, brokerName)
		if len(qs) == 0 {
			delete(t.topicQueues, topic)
		}
	}
}

func hasTopicName(table map[string]*protocol.TopicConfig, topic string) bool {
	for _, tc := range table {
		if tc != nil && tc.TopicName == topic {
			return true
		}
	}
	return false
}

// unregister removes one broker id of a broker name (UNREGISTER_BROKER).
func (t *routeTable) unregister(brokerName, brokerAddr string, brokerID int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.live, brokerAddr)
	bd := t.brokers[brokerName]
	if bd == nil {
		return
	}
	if bd.BrokerAddrs[brokerID] == brokerAddr {
		delete(bd.BrokerAddrs, brokerID)
	}
	if len(bd.BrokerAddrs) == 0 {
		t.dropBrokerNameLocked(brokerName, bd.Cluster)
	}
}

// removeAddrLocked removes every trace of a broker address.
func (t *routeTable) removeAddrLocked(addr string) {
	delete(t.live, addr)
	for name, bd := range t.brokers {
		for id, a := range bd.BrokerAddrs {
			if a == addr {
				delete(bd.BrokerAddrs, id)
			}
		}
		if len(bd.BrokerAddrs) == 0 {
			t.dropBrokerNameLocked(name, bd.Cluster)
		}
	}
}

// dropBrokerNameLocked removes a broker name that has no address left,
// with its queue data, topics left empty and a cluster left empty.
func (t *routeTable) dropBrokerNameLocked(name, cluster string) {
	delete(t.brokers, name)
	for c, names := range t.clusters {
		if cluster != "" && c != cluster {
			continue
		}
		delete(names, name)
		if len(names) == 0 {
			delete(t.clusters, c)
		}
	}
	for topic, qs := range t.topicQueues {
		delete(qs, name)
		if len(qs) == 0 {
			delete(t.topicQueues, topic)
		}
	}
}

// removeConn removes the brokers whose registration came on c; it returns
// their addresses.
func (t *routeTable) removeConn(c *remoting.Conn) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var gone []string
	for addr, lv := range t.live {
		if lv.conn == c {
			gone = append(gone, addr)
		}
	}
	for _, addr := range gone {
		t.removeAddrLocked(addr)
	}
	return gone
}

// expire removes brokers not heard from since before now-expiry and
// returns their connections (to be closed) and addresses.
func (t *routeTable) expire(now time.Time, expiry time.Duration) (addrs []string, conns []*remoting.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for addr, lv := range t.live {
		if now.Sub(lv.lastUpdate) > expiry {
			addrs = append(addrs, addr)
			if lv.conn != nil {
				conns = append(conns, lv.conn)
			}
		}
	}
	for _, addr := range addrs {
		t.removeAddrLocked(addr)
	}
	return addrs, conns
}

// dataVersionChanged compares a broker's data version with the stored one
// and, if unchanged, refreshes its heartbeat (QUERY_DATA_VERSION). It
// returns the stored version (nil if none).
func (t *routeTable) dataVersionChanged(addr string, dv protocol.DataVersion, now time.Time) (bool, *protocol.DataVersion) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lv := t.live[addr]
	if lv == nil {
		return true, nil
	}
	stored := lv.dataVersion
	if stored != dv {
		return true, &stored
	}
	lv.gap, lv.lastUpdate = now.Sub(lv.lastUpdate), now
	return false, &stored
}

// heartbeatGap is the longest time between two registrations of a live
// broker (its heartbeat interval, as seen here), at most limit; limit
// when no broker registered twice yet.
func (t *routeTable) heartbeatGap(limit time.Duration) time.Duration {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g := time.Duration(0)
	for _, lv := range t.live {
		g = max(g, lv.gap)
	}
	if g <= 0 {
		return limit
	}
	return min(g, limit)
}

// topicRoute returns the route of topic, or nil if no live broker hosts it.
func (t *routeTable) topicRoute(topic string) *protocol.TopicRouteData {
	t.mu.RLock()
	defer t.mu.RUnlock()
	qs := t.topicQueues[topic]
	if len(qs) == 0 {
		return nil
	}
	rd := &protocol.TopicRouteData{FilterServerTable: map[string][]string{}}
	for _, name := range sortedKeys(qs) {
		q := *qs[name]
		rd.QueueDatas = append(rd.QueueDatas, &q)
		if bd := t.brokers[name]; bd != nil {
			rd.BrokerDatas = append(rd.BrokerDatas, bd.Clone())
		}
	}
	if len(rd.BrokerDatas) == 0 {
		return nil
	}
	return rd
}

func (t *routeTable) clusterInfo() *protocol.ClusterInfo {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ci := &protocol.ClusterInfo{
		BrokerAddrTable:  make(map[string]*protocol.BrokerData, len(t.brokers)),
		ClusterAddrTable: make(map[string][]string, len(t.clusters)),
	}
	for name, bd := range t.brokers {
		ci.BrokerAddrTable[name] = bd.Clone()
	}
	for c, names := range t.clusters {
		ci.ClusterAddrTable[c] = sortedKeys(names)
	}
	return ci
}

func (t *routeTable) topics() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return sortedKeys(t.topicQueues)
}

// systemTopics returns the cluster and broker names, sorted, and the
// address of one broker (the master of the first broker name, if any).
func (t *routeTable) systemTopics() ([]string, string) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	seen := map[string]struct{}{}
	for c, names := range t.clusters {
		seen[c] = struct{}{}
		for n := range names {
			seen[n] = struct{}{}
		}
	}
	addr := ""
	for _, name := range sortedKeys(t.brokers) {
		bd := t.brokers[name]
		if a := bd.MasterAddr(); a != "" {
			addr = a
			break
		}
		ids := make([]int64, 0, len(bd.BrokerAddrs))
		for id := range bd.BrokerAddrs {
			ids = append(ids, id)
		}
		if len(ids) > 0 {
			addr = bd.BrokerAddrs[slices.Min(ids)]
			break
		}
	}
	return sortedKeys(seen), addr
}

// topicsWhere returns the topics, sorted, whose queue data (of any one
// broker name) has a sys flag match accepts.
func (t *routeTable) topicsWhere(match func(sysFlag int32) bool) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []string
	for topic, qs := range t.topicQueues {
		for _, qd := range qs {
			if match(qd.TopicSysFlag) {
				out = append(out, topic)
			}
			break
		}
	}
	sort.Strings(out)
	return out
}

func (t *routeTable) topicsByCluster(cluster string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	names := t.clusters[cluster]
	var out []string
	for topic, qs := range t.topicQueues {
		for name := range qs {
			if _, ok := names[name]; ok {
				out = append(out, topic)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// deleteTopic removes a topic, or only its queues on the brokers of
// cluster when cluster is set.
func (t *routeTable) deleteTopic(topic, cluster string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cluster == "" {
		delete(t.topicQueues, topic)
		return
	}
	qs := t.topicQueues[topic]
	for name := range t.clusters[cluster] {
		delete(qs, name)
	}
	if len(qs) == 0 {
		delete(t.topicQueues, topic)
	}
}

// setWritePerm clears (wipe) or sets the WRITE bit of every queue data of
// brokerName and returns how many topics it changed.
func (t *routeTable) setWritePerm(brokerName string, writable bool) int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int32
	for _, qs := range t.topicQueues {
		q := qs[brokerName]
		if q == nil {
			continue
		}
		if writable {
			q.Perm |= protocol.PermWrite
		} else {
			q.Perm &^= protocol.PermWrite
		}
		n++
	}
	return n
}

// liveAddrs returns the registered broker addresses (for tests and stats).
func (t *routeTable) liveAddrs() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return sortedKeys(t.live)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
