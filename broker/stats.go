package broker

import (
	"context"
	"maps"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/smartgo/smartgo/internal/beat"
)

// StatKind names one family of broker statistics.
type StatKind int

// The statistics the broker keeps. Topic kinds are keyed by topic, group
// kinds by "topic@group".
const (
	TopicPutNums StatKind = iota // messages stored into a topic
	TopicPutSize                 // body bytes stored into a topic
	GroupGetNums                 // messages pulled by a group from a topic
	GroupGetSize                 // body bytes pulled by a group from a topic
	numStatKinds
)

var statKindNames = [numStatKinds]string{"TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE", "GROUP_GET_NUMS", "GROUP_GET_SIZE"}

func (k StatKind) String() string {
	if k < 0 || k >= numStatKinds {
		return "UNKNOWN"
	}
	return statKindNames[k]
}

// Statistics windows reported for every item.
var statWindows = []time.Duration{time.Minute, 10 * time.Minute, time.Hour}

// statSampleEvery is the sampling period: windows are measured as the
// difference of the running total against the sample one window ago.
const statSampleEvery = 10 * time.Second

// statItem is one counter: a running total (updated on the hot path with
// atomics) and a ring of sampled totals for the windows.
type statItem struct {
	total   atomic.Int64
	times   atomic.Int64 // number of Add calls, so TPS can count requests as well as messages
	mu      sync.Mutex
	samples []statSample // protected by mu; oldest first, at most ringSize
	hourly  []statSample // protected by mu; one an hour, oldest first, at most hourlyKeep
}

type statSample struct {
	at    time.Time
	total int64
	times int64
}

// hourlyKeep is how many hourly samples an item keeps: a day's window.
const hourlyKeep = 25

// WindowStat is a counter's movement over one window.
type WindowStat struct {
	Window time.Duration
	Sum    int64   // amount added during the window
	Times  int64   // Add calls during the window
	TPS    float64 // Sum per second over the window (over the time covered, if shorter)
}

// AvgPerAdd is the amount per Add call over the window (RocketMQ's avgpt).
func (w WindowStat) AvgPerAdd() float64 {
	if w.Times == 0 {
		return 0
	}
	return float64(w.Sum) / float64(w.Times)
}

// StatSnapshot is one item's totals and windows.
type StatSnapshot struct {
	Kind    StatKind
	Key     string
	Total   int64
	Windows []WindowStat
}

// Stats is the broker's statistics service (RocketMQ's BrokerStatsManager):
// per topic put counts and bytes, per group get counts and bytes, each with
// its movement over the last minute, 10 minutes and hour.
type Stats struct {
	now      func() time.Time
	ringSize int

	mu    sync.RWMutex
	items [numStatKinds]map[string]*statItem // protected by mu (the maps; items have their own sync)

	// puts and gets index the items AddPut and AddGet add to, so that the
	// hot paths find both counters of a key with one atomic load and one
	// map read, no lock and (for gets) no key to build. The maps are
	// never changed: a key's first add replaces its index by a copy with
	// the key (under mu), up to maxStatIndex keys; items past that are
	// found through items.
	puts atomic.Pointer[map[string]statPair]
	gets atomic.Pointer[map[groupTopic]statPair]
	// lastPut is a topic AddPut found in puts, with the index it was
	// found in: a run of one topic's puts counts without hashing it.
	lastPut atomic.Pointer[putHit]
	// maxIndex bounds the keys of puts and of gets: maxStatIndex, set by
	// NewStats (tests lower it to reach the bound without copying an
	// index thousands of times).
	maxIndex int
}

// putHit is a topic found in the index idx, and its pair there.
type putHit struct {
	idx   *map[string]statPair
	topic string // owned
	pair  statPair
}

// putHitReplace: a put that misses the remembered topic replaces it when
// its topic's count of adds reaches a multiple of putHitReplace (AddPuts).
const putHitReplace = 64

// statPair is a key's count and size items.
type statPair struct{ nums, size *statItem }

type groupTopic struct{ group, topic string }

// own returns k with its strings copied.
func (k groupTopic) own() groupTopic {
	return groupTopic{strings.Clone(k.group), strings.Clone(k.topic)}
}

// maxStatIndex bounds the keys of each index (each new key copies it).
const maxStatIndex = 4096

// indexed returns the pair of k in idx, adding it (made with mk, under
// s.mu) when it is missing and idx has room. A key added is own(k): the
// callers' keys may be slices of a request's header, valid only until the
// request is recycled (protocol.Command.Recycle).
func indexed[K comparable](s *Stats, idx *atomic.Pointer[map[K]statPair], k K, own func(K) K, mk func() statPair) statPair {
	if m := idx.Load(); m != nil {
		if p, ok := (*m)[k]; ok {
			return p
		}
	}
	p := mk()
	s.mu.Lock()
	defer s.mu.Unlock()
	old := idx.Load()
	if old != nil && len(*old) >= s.maxIndex {
		return p
	}
	var m map[K]statPair
	if old == nil {
		m = make(map[K]statPair, 1)
	} else {
		m = make(map[K]statPair, len(*old)+1)
		maps.Copy(m, *old)
	}
	m[own(k)] = p
	idx.Store(&m)
	return p
}

// NewStats returns an empty statistics service; now may be nil.
func NewStats(now func() time.Time) *Stats {
	if now == nil {
		now = time.Now
	}
	s := &Stats{now: now, ringSize: int(time.Hour/statSampleEvery) + 2, maxIndex: maxStatIndex}
	for i := range s.items {
		s.items[i] = map[string]*statItem{}
	}
	return s
}

func (s *Stats) item(kind StatKind, key string) *statItem {
	s.mu.RLock()
	it := s.items[kind][key]
	s.mu.RUnlock()
	if it != nil {
		return it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if it = s.items[kind][key]; it == nil {
		it = &statItem{}
		// A first sample at zero lets windows count from creation.
		it.samples = append(it.samples, statSample{at: s.now()})
		it.hourly = append(it.hourly, statSample{at: s.now()})
		s.items[kind][strings.Clone(key)] = it // kept: see indexed
	}
	return it
}

// Add adds n to the counter kind/key.
func (s *Stats) Add(kind StatKind, key string, n int64) {
	if kind < 0 || kind >= numStatKinds {
		return
	}
	it := s.item(kind, key)
	it.total.Add(n)
	it.times.Add(1)
}

// AddPut records messages stored into a topic by one send request.
func (s *Stats) AddPut(topic string, msgs, bytes int64) { s.AddPuts(topic, 1, msgs, bytes) }

// AddPuts records messages stored into a topic by sends requests at once
// (msgs messages of bytes bytes in all): each request is one add to the
// counters' times, as if AddPut were called for each (RocketMQ's avgpt
// of TOPIC_PUT_NUMS is messages per send request).
//
// A put to the topic the last one found (lastPut) in an index that has not
// changed since takes its pair with a pointer and a string compare: the
// index is never changed once stored, so a topic added or forgotten is a
// new index and the remembered one is not used again.
func (s *Stats) AddPuts(topic string, sends, msgs, bytes int64) {
	idx := s.puts.Load()
	if idx != nil {
		h := s.lastPut.Load()
		if h != nil && h.idx == idx && h.topic == topic {
			h.pair.add(sends, msgs, bytes)
			return
		}
		if p, ok := (*idx)[topic]; ok {
			// Remembered when nothing valid is, else when its count
			// of adds passes a multiple of putHitReplace: puts to
			// several topics in turn rarely allocate and write the
			// shared entry.
			if n := p.add(sends, msgs, bytes); h == nil || h.idx != idx || n%putHitReplace < sends {
				s.lastPut.Store(&putHit{idx: idx, topic: strings.Clone(topic), pair: p})
			}
			return
		}
	}
	p := indexed(s, &s.puts, topic, strings.Clone, func() statPair {
		return statPair{s.item(TopicPutNums, topic), s.item(TopicPutSize, topic)}
	})
	p.add(sends, msgs, bytes)
}

// AddGet records messages pulled by a group.
func (s *Stats) AddGet(group, topic string, msgs, bytes int64) {
	p := indexed(s, &s.gets, groupTopic{group, topic}, groupTopic.own, func() statPair {
		key := topic + "@" + group
		return statPair{s.item(GroupGetNums, key), s.item(GroupGetSize, key)}
	})
	p.add(1, msgs, bytes)
}

// add counts msgs messages of bytes bytes, from times requests, and
// returns the count of adds (requests).
func (p statPair) add(times, msgs, bytes int64) int64 {
	p.nums.total.Add(msgs)
	n := p.nums.times.Add(times)
	p.size.total.Add(bytes)
	p.size.times.Add(times)
	return n
}

// ForgetTopic drops every counter of topic: its puts and every group's
// gets from it (the topic was deleted). A put or pull racing with it may
// still count into the dropped counters; a later one starts new ones.
func (s *Stats) ForgetTopic(topic string) {
	s.forget(func(kind StatKind, key string) bool {
		if kind == TopicPutNums || kind == TopicPutSize {
			return key == topic
		}
		t, _ := splitTopicGroup(key)
		return t == topic
	}, func(t string) bool { return t == topic }, func(k groupTopic) bool { return k.topic == topic })
}

// ForgetGroup drops every counter of group's gets, from any topic (the
// group was deleted).
func (s *Stats) ForgetGroup(group string) {
	s.forget(func(kind StatKind, key string) bool {
		if kind == TopicPutNums || kind == TopicPutSize {
			return false
		}
		_, g := splitTopicGroup(key)
		return g == group
	}, func(string) bool { return false }, func(k groupTopic) bool { return k.group == group })
}

// forget drops the items drop selects and the index entries of the keys
// putKey and getKey select (the indexes are copied without them).
func (s *Stats) forget(drop func(StatKind, string) bool, putKey func(string) bool, getKey func(groupTopic) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.items {
		for key := range s.items[k] {
			if drop(StatKind(k), key) {
				delete(s.items[k], key)
			}
		}
	}
	withoutKeys(&s.puts, putKey)
	withoutKeys(&s.gets, getKey)
}

// withoutKeys replaces idx by a copy without the keys gone selects, if it
// has any. Caller holds Stats.mu.
func withoutKeys[K comparable](idx *atomic.Pointer[map[K]statPair], gone func(K) bool) {
	old := idx.Load()
	if old == nil {
		return
	}
	m := make(map[K]statPair, len(*old))
	for k, p := range *old {
		if !gone(k) {
			m[k] = p
		}
	}
	if len(m) < len(*old) {
		idx.Store(&m)
	}
}

// Sample records every counter's total; Run calls it every 10 s.
func (s *Stats) Sample() {
	now := s.now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k := range s.items {
		for _, it := range s.items[k] {
			it.mu.Lock()
			smp := statSample{at: now, total: it.total.Load(), times: it.times.Load()}
			it.samples = append(it.samples, smp)
			if len(it.samples) > s.ringSize {
				it.samples = append(it.samples[:0], it.samples[len(it.samples)-s.ringSize:]...)
			}
			if now.Sub(it.hourly[len(it.hourly)-1].at) >= time.Hour {
				it.hourly = append(it.hourly, smp)
				if len(it.hourly) > hourlyKeep {
					it.hourly = append(it.hourly[:0], it.hourly[len(it.hourly)-hourlyKeep:]...)
				}
			}
			it.mu.Unlock()
		}
	}
}

// Run samples every 10 s until ctx is done.
func (s *Stats) Run(ctx context.Context) {
	t := beat.NewTicker(statSampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sample()
		}
	}
}

// Get returns one item's snapshot.
func (s *Stats) Get(kind StatKind, key string) (StatSnapshot, bool) {
	if kind < 0 || kind >= numStatKinds {
		return StatSnapshot{}, false
	}
	s.mu.RLock()
	it := s.items[kind][key]
	s.mu.RUnlock()
	if it == nil {
		return StatSnapshot{}, false
	}
	return s.snapshot(kind, key, it), true
}

func (s *Stats) snapshot(kind StatKind, key string, it *statItem) StatSnapshot {
	snap := StatSnapshot{Kind: kind, Key: key, Total: it.total.Load()}
	for _, w := range statWindows {
		snap.Windows = append(snap.Windows, s.window(it, w))
	}
	return snap
}

// window measures an item over the last d: from the newest sample at or
// before now-d (hourly samples for windows over an hour), else from the
// oldest it has.
func (s *Stats) window(it *statItem, d time.Duration) WindowStat {
	now := s.now()
	total, times := it.total.Load(), it.times.Load()
	it.mu.Lock()
	ring := it.samples
	if d > time.Hour {
		ring = it.hourly
	}
	base := ring[0]
	for i := len(ring) - 1; i >= 0; i-- {
		if !ring[i].at.After(now.Add(-d)) {
			base = ring[i]
			break
		}
	}
	it.mu.Unlock()
	ws := WindowStat{Window: d, Sum: total - base.total, Times: times - base.times}
	if span := now.Sub(base.at); span > 0 {
		ws.TPS = float64(ws.Sum) / span.Seconds()
	}
	return ws
}

// MinuteHourDay returns an item's movement over the last minute, hour and
// day (VIEW_BROKER_STATS_DATA), and whether the item exists.
func (s *Stats) MinuteHourDay(kind StatKind, key string) (minute, hour, day WindowStat, ok bool) {
	if kind < 0 || kind >= numStatKinds {
		return minute, hour, day, false
	}
	s.mu.RLock()
	it := s.items[kind][key]
	s.mu.RUnlock()
	if it == nil {
		return minute, hour, day, false
	}
	return s.window(it, time.Minute), s.window(it, time.Hour), s.window(it, 24*time.Hour), true
}

// ParseStatKind maps RocketMQ's statistic names (TOPIC_PUT_NUMS, ...) to a
// kind.
func ParseStatKind(name string) (StatKind, bool) {
	for i, n := range statKindNames {
		if n == name {
			return StatKind(i), true
		}
	}
	return 0, false
}

// All returns snapshots of every item of a kind, sorted by key.
func (s *Stats) All(kind StatKind) []StatSnapshot {
	if kind < 0 || kind >= numStatKinds {
		return nil
	}
	s.mu.RLock()
	keys := make([]string, 0, len(s.items[kind]))
	items := make(map[string]*statItem, len(s.items[kind]))
	for k, it := range s.items[kind] {
		keys = append(keys, k)
		items[k] = it
	}
	s.mu.RUnlock()
	sort.Strings(keys)
	out := make([]StatSnapshot, 0, len(keys))
	for _, k := range keys {
		out = append(out, s.snapshot(kind, k, items[k]))
	}
	return out
}

// Totals returns the sum of all items of a kind (e.g. all messages put).
func (s *Stats) Totals(kind StatKind) int64 {
	if kind < 0 || kind >= numStatKinds {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var sum int64
	for _, it := range s.items[kind] {
		sum += it.total.Load()
	}
	return sum
}

// Collector exposes the statistics to Prometheus. Counters are read at
// scrape time, so the hot path pays nothing for the export.
func (s *Stats) Collector() prometheus.Collector { return statsCollector{s} }

type statsCollector struct{ s *Stats }

var (
	descPutMsgs = prometheus.NewDesc("smartgo_topic_put_messages_total", "Messages stored into a topic.", []string{"topic"}, nil)
	descPutSize = prometheus.NewDesc("smartgo_topic_put_bytes_total", "Body bytes stored into a topic.", []string{"topic"}, nil)
	descGetMsgs = prometheus.NewDesc("smartgo_group_get_messages_total", "Messages pulled by a consumer group from a topic.", []string{"topic", "group"}, nil)
	descGetSize = prometheus.NewDesc("smartgo_group_get_bytes_total", "Body bytes pulled by a consumer group from a topic.", []string{"topic", "group"}, nil)
	descPutTPS  = prometheus.NewDesc("smartgo_topic_put_tps", "Messages per second stored into a topic over a window.", []string{"topic", "window"}, nil)
	descGetTPS  = prometheus.NewDesc("smartgo_group_get_tps", "Messages per second pulled by a group over a window.", []string{"topic", "group", "window"}, nil)
)

func (c statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPutMsgs, descPutSize, descGetMsgs, descGetSize, descPutTPS, descGetTPS} {
		ch <- d
	}
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, snap := range c.s.All(TopicPutNums) {
		ch <- prometheus.MustNewConstMetric(descPutMsgs, prometheus.CounterValue, float64(snap.Total), snap.Key)
		for _, w := range snap.Windows {
			ch <- prometheus.MustNewConstMetric(descPutTPS, prometheus.GaugeValue, w.TPS, snap.Key, w.Window.String())
		}
	}
	for _, snap := range c.s.All(TopicPutSize) {
		ch <- prometheus.MustNewConstMetric(descPutSize, prometheus.CounterValue, float64(snap.Total), snap.Key)
	}
	for _, snap := range c.s.All(GroupGetNums) {
		topic, group := splitTopicGroup(snap.Key)
		ch <- prometheus.MustNewConstMetric(descGetMsgs, prometheus.CounterValue, float64(snap.Total), topic, group)
		for _, w := range snap.Windows {
			ch <- prometheus.MustNewConstMetric(descGetTPS, prometheus.GaugeValue, w.TPS, topic, group, w.Window.String())
		}
	}
	for _, snap := range c.s.All(GroupGetSize) {
		topic, group := splitTopicGroup(snap.Key)
		ch <- prometheus.MustNewConstMetric(descGetSize, prometheus.CounterValue, float64(snap.Total), topic, group)
	}
}

// splitTopicGroup splits "topic@group" at the last '@' (topics cannot
// contain '@').
func splitTopicGroup(key string) (topic, group string) {
	i := strings.LastIndexByte(key, '@')
	if i < 0 {
		return key, ""
	}
	return key[:i], key[i+1:]
}
