// Package shardroute finds the shards of an engine hosted on a system
// topic (the state store's, the twins'): the global shard list is every
// (broker name, queue) of the topic sorted by broker name then queue, each
// with the address of its broker's master, looked up in the registries
// (or given as a fixed table) and refreshed periodically.
package shardroute

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// ErrNoRoute means the registries know no queue of the topic.
var ErrNoRoute = errors.New("shardroute: no route")

// Ref is one global shard: a queue of the topic on a broker.
type Ref struct {
	Broker string
	Addr   string // the broker master's address; "" when it has none
	Queue  int32
	// Slaves are the broker's slaves' addresses, lowest id first: they
	// hold replicas a client may read while the master is down.
	Slaves []string
}

// Table is the shard list of one topic.
type Table struct {
	topic      string
	registries []string
	refresh    time.Duration
	rc         *remoting.Client
	fixed      bool

	// cur is the last route loaded and when: read without a lock by
	// every request (Cached), replaced whole by a lookup (Get).
	cur atomic.Pointer[loaded]
}

// loaded is a route and the time it was loaded; never modified once
// stored.
type loaded struct {
	refs  []Ref
	fetch time.Time
}

// New returns the table of topic, looked up through rc in the registries
// and reused for refresh.
func New(rc *remoting.Client, topic string, registries []string, refresh time.Duration) *Table {
	return &Table{topic: topic, registries: registries, refresh: refresh, rc: rc}
}

// Fixed returns a table of brokers (name -> address) with shards queues
// each, never looked up.
func Fixed(topic string, brokers map[string]string, shards int) *Table {
	names := make([]string, 0, len(brokers))
	for n := range brokers {
		names = append(names, n)
	}
	sort.Strings(names)
	t := &Table{topic: topic, fixed: true}
	var refs []Ref
	for _, n := range names {
		for q := 0; q < shards; q++ {
			refs = append(refs, Ref{Broker: n, Addr: brokers[n], Queue: int32(q)})
		}
	}
	t.cur.Store(&loaded{refs: refs})
	return t
}

// Get returns the shard list, looking it up when it is older than the
// refresh period or force is set. When a lookup fails the old list is
// kept (and returned) if there is one.
// Cached returns the route Get(ctx, false) would return without a
// lookup, and false when Get would look it up (none loaded yet, or due
// for its refresh).
func (t *Table) Cached() ([]Ref, bool) { return t.CachedAt(time.Time{}) }

// CachedAt is Cached with the caller's reading of the clock (zero: read
// it), so that a caller that has one (a poller round's) spares a clock
// read per request. It takes no lock: the route is one atomic load.
func (t *Table) CachedAt(now time.Time) ([]Ref, bool) {
	l := t.cur.Load()
	if l == nil || len(l.refs) == 0 {
		return nil, false
	}
	if t.fixed {
		return l.refs, true
	}
	if now.IsZero() {
		now = time.Now()
	}
	if now.Sub(l.fetch) < t.refresh {
		return l.refs, true
	}
	return nil, false
}

func (t *Table) Get(ctx context.Context, force bool) ([]Ref, error) {
	var refs []Ref
	if l := t.cur.Load(); l != nil {
		refs = l.refs
		if t.fixed || (len(refs) > 0 && !force && time.Since(l.fetch) < t.refresh) {
			return refs, nil
		}
	}
	rd, err := t.lookup(ctx)
	if err != nil {
		if len(refs) > 0 {
			return refs, nil // keep serving on the old route
		}
		return nil, err
	}
	masters, slaves := map[string]string{}, map[string][]string{}
	for _, bd := range rd.BrokerDatas {
		masters[bd.BrokerName] = bd.MasterAddr()
		slaves[bd.BrokerName] = slaveAddrs(bd)
	}
	qds := append([]*protocol.QueueData(nil), rd.QueueDatas...)
	sort.Slice(qds, func(i, j int) bool { return qds[i].BrokerName < qds[j].BrokerName })
	var next []Ref
	for _, qd := range qds {
		for q := int32(0); q < qd.WriteQueueNums; q++ {
			next = append(next, Ref{Broker: qd.BrokerName, Addr: masters[qd.BrokerName], Queue: q, Slaves: slaves[qd.BrokerName]})
		}
	}
	if len(next) == 0 {
		return nil, fmt.Errorf("%w: %s has no queues", ErrNoRoute, t.topic)
	}
	t.cur.Store(&loaded{refs: next, fetch: time.Now()})
	return next, nil
}

// slaveAddrs returns the addresses of bd's slaves, lowest id first.
func slaveAddrs(bd *protocol.BrokerData) []string {
	ids := make([]int64, 0, len(bd.BrokerAddrs))
	for id, a := range bd.BrokerAddrs {
		if id != protocol.MasterID && a != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = bd.BrokerAddrs[id]
	}
	return out
}

func (t *Table) lookup(ctx context.Context) (*protocol.TopicRouteData, error) {
	var errs []error
	for _, reg := range t.registries {
		req := protocol.NewRequest(protocol.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: t.topic, AcceptStandardJSONOnly: true}, nil)
		resp, err := t.rc.Invoke(ctx, reg, req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if resp.Code != protocol.Success {
			errs = append(errs, fmt.Errorf("registry %s: code %d %s", reg, resp.Code, resp.Remark))
			continue
		}
		var rd protocol.TopicRouteData
		if err := protocol.DecodeJSON(resp.Body, &rd); err != nil {
			errs = append(errs, err)
			continue
		}
		return &rd, nil
	}
	return nil, fmt.Errorf("%w: %s: %w", ErrNoRoute, t.topic, errors.Join(errs...))
}
