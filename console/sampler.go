package console

import (
	"context"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/beat"
)

// The charts' data: every SampleInterval the console reads the message
// totals of every master at once (GET_BROKER_RUNTIME_INFO:
// topicPutTotal.<topic>, groupGetTotal.<topic>@<group>), turns each
// broker's into rates and sums those, and reads the bridge nodes' heartbeats
// (connections, messages in and out), and keeps the rates for History in
// one ring per series. Series names:
//
//	topic:<topic>     messages stored per second
//	group:<group>     messages pulled per second (all its topics)
//	total:put         messages stored per second, all topics
//	total:get         messages pulled per second, all groups
//	mqtt:connections  MQTT connections, all bridge nodes
//	mqtt:in, mqtt:out MQTT PUBLISH packets per second received and sent
//
// The sampler keeps at most maxSeries series; it costs each broker one
// runtime info request per interval. The series of a topic or group goes
// once a master that counted it answers without it and no other counts it
// (it was deleted: the broker forgets its statistics; or the master
// restarted and it has been idle since), and any series goes after a
// whole history without a point.

const maxSeries = 2000

type point struct {
	T int64   `json:"t"` // Unix milliseconds
	V float64 `json:"v"`
}

type ring struct {
	pts []point // oldest first; at most the sampler's capacity
}

func (r *ring) add(p point, capacity int) {
	if len(r.pts) == capacity {
		copy(r.pts, r.pts[1:])
		r.pts = r.pts[:capacity-1]
	}
	r.pts = append(r.pts, p)
}

type counterPrev struct {
	total float64
	at    time.Time
}

type sampler struct {
	adm      *admin.Admin
	every    time.Duration
	capacity int
	now      func() time.Time
	log      *slog.Logger

	mu     sync.Mutex
	series map[string]*ring         // protected by mu
	prev   map[string]counterPrev   // protected by mu: each broker's last totals ("addr|series"), for rates
	nodes  map[string]*nodeCounters // protected by mu: bridge nodes' last counters
	full   bool                     // protected by mu: maxSeries reached (logged once)
	// brokerLast is when each broker (address) last answered a round
	// (protected by mu).
	brokerLast map[string]time.Time
}

// nodeCounters are a bridge node's message counters at its last
// heartbeat, the rates since the one before, and the time between them.
type nodeCounters struct {
	in, out         float64
	at              time.Time
	inRate, outRate float64
	every           time.Duration // between its last two heartbeats (their clock)
	seen            time.Time     // when at last moved (the console's clock)
}

// staleHeartbeats is how many of its heartbeat intervals a bridge node may
// stay silent before its last rates stop counting: a node that is hung or
// cut off, still listed until the registry expires it, moves nothing.
const staleHeartbeats = 3

func newSampler(adm *admin.Admin, every, history time.Duration, now func() time.Time, log *slog.Logger) *sampler {
	return &sampler{adm: adm, every: every, capacity: int(history/every) + 1, now: now, log: log,
		series: map[string]*ring{}, prev: map[string]counterPrev{}, nodes: map[string]*nodeCounters{}, brokerLast: map[string]time.Time{}}
}

func (s *sampler) run(ctx context.Context) {
	t := beat.NewTicker(s.every)
	defer t.Stop()
	for {
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample takes one round.
func (s *sampler) sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.every)
	defer cancel()
	now := s.now()
	perBroker := s.brokerTotals(ctx)
	bridges, berr := s.adm.Bridges(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Rates are taken per broker and per counter (a topic's puts, a
	// group's gets from one topic), then summed into the series: a
	// broker that misses a round (hung, slow, cut off) leaves its part
	// out of that round's points, and its next answer is measured against
	// its own last one, never read as all its messages arriving at once.
	// A counter that went back (the broker restarted) counts from zero; a
	// counter that is gone (its topic or group was deleted) takes nothing
	// from the sums.
	rates := map[string]float64{}
	present := map[string]bool{} // topic: and group: series some broker still counts
	for addr, totals := range perBroker {
		last, seen := s.brokerLast[addr]
		if seen { // an idle broker counts as 0
			rates["total:put"] += 0
			rates["total:get"] += 0
		}
		for key, total := range totals {
			name, sum := seriesOf(key)
			present[name] = true
			pk := addr + "|" + key
			p, ok := s.prev[pk]
			if !ok && seen {
				// New since this broker's last round (a new topic or
				// group): it counted from zero.
				p, ok = counterPrev{at: last}, true
			}
			if ok && now.After(p.at) {
				delta := total - p.total
				if delta < 0 {
					delta = total
				}
				r := delta / now.Sub(p.at).Seconds()
				rates[name] += r
				rates[sum] += r
			}
			s.prev[pk] = counterPrev{total: total, at: now}
		}
		s.brokerLast[addr] = now
	}
	for name, v := range rates {
		s.addLocked(name, point{T: now.UnixMilli(), V: v})
	}
	gone := time.Duration(s.capacity) * s.every // silent for a whole history
	dropped := map[string]bool{}
	for key, p := range s.prev {
		addr, counter, _ := strings.Cut(key, "|")
		switch {
		case perBroker[addr] != nil && !p.at.Equal(now):
			// The broker answered without it: it forgot the counter
			// (the topic or group was deleted, or it restarted).
			name, _ := seriesOf(counter)
			dropped[name] = true
		case now.Sub(p.at) <= gone:
			continue
		}
		delete(s.prev, key)
	}
	for addr, at := range s.brokerLast {
		if now.Sub(at) > gone {
			delete(s.brokerLast, addr)
		}
	}
	s.pruneLocked(now, gone, dropped, present)
	if berr != nil {
		return
	}
	var conns, in, out float64
	seen := map[string]bool{}
	for _, b := range bridges {
		conns += float64(b.Connections)
		// Per node incarnation, so that a restarted node does not read
		// as a drop. A node's counters move with its heartbeats: between
		// two, its last rates stand, for up to staleHeartbeats intervals.
		id := b.Node + "/" + strconv.FormatInt(b.StartedAt, 10)
		seen[id] = true
		at := time.UnixMilli(b.LastUpdate)
		n := s.nodes[id]
		switch {
		case n == nil:
			s.nodes[id] = &nodeCounters{in: float64(b.Received), out: float64(b.Sent), at: at, seen: now}
			continue
		case at.After(n.at):
			dt := at.Sub(n.at).Seconds()
			n.inRate = max(0, float64(b.Received)-n.in) / dt
			n.outRate = max(0, float64(b.Sent)-n.out) / dt
			n.every = at.Sub(n.at)
			n.in, n.out, n.at, n.seen = float64(b.Received), float64(b.Sent), at, now
		}
		if n.every > 0 && now.Sub(n.seen) > staleHeartbeats*n.every {
			continue // silent too long: its last rates no longer stand
		}
		in += n.inRate
		out += n.outRate
	}
	for id := range s.nodes {
		if !seen[id] {
			delete(s.nodes, id)
		}
	}
	t := now.UnixMilli()
	s.addLocked("mqtt:connections", point{T: t, V: conns})
	s.addLocked("mqtt:in", point{T: t, V: in})
	s.addLocked("mqtt:out", point{T: t, V: out})
}

// brokerTotals reads every master's message totals at once and returns
// them by broker address, as counter -> total (seriesOf names the
// counters); a master that does not answer within ctx is left out.
func (s *sampler) brokerTotals(ctx context.Context) map[string]map[string]float64 {
	masters, err := s.adm.Masters(ctx, "")
	if err != nil {
		s.log.Debug("console: sample brokers", "err", err)
		return nil
	}
	infos := make([]map[string]string, len(masters))
	var wg sync.WaitGroup
	for i, m := range masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := s.adm.BrokerRuntimeInfo(ctx, m.Addr)
			if err != nil {
				s.log.Debug("console: sample broker", "broker", m.Addr, "err", err)
				return
			}
			infos[i] = info
		}()
	}
	wg.Wait()
	out := make(map[string]map[string]float64, len(masters))
	for i, m := range masters {
		if infos[i] == nil {
			continue
		}
		totals := map[string]float64{}
		for k, v := range infos[i] {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				continue
			}
			switch {
			case strings.HasPrefix(k, "topicPutTotal."):
				totals["topic:"+k[len("topicPutTotal."):]] = n
			case strings.HasPrefix(k, "groupGetTotal."):
				if key := k[len("groupGetTotal."):]; strings.LastIndexByte(key, '@') >= 0 {
					totals["get:"+key] = n
				}
			}
		}
		out[m.Addr] = totals
	}
	return out
}

// seriesOf returns the series a broker counter adds to and the total
// series it adds to as well: "topic:<topic>" (a topic's puts) to itself
// and total:put; "get:<topic>@<group>" (a group's gets from a topic) to
// group:<group> and total:get.
func seriesOf(key string) (name, sum string) {
	if tg, ok := strings.CutPrefix(key, "get:"); ok {
		return "group:" + tg[strings.LastIndexByte(tg, '@')+1:], "total:get"
	}
	return key, "total:put"
}

// pruneLocked drops the series of deleted topics and groups, those a
// broker stopped counting this round (dropped) and no broker counts
// (present), and any series that got no point for a whole history
// (gone): its chart is empty.
func (s *sampler) pruneLocked(now time.Time, gone time.Duration, dropped, present map[string]bool) {
	for name, r := range s.series {
		if !(dropped[name] && !present[name]) && len(r.pts) > 0 && now.Sub(time.UnixMilli(r.pts[len(r.pts)-1].T)) <= gone {
			continue
		}
		delete(s.series, name)
	}
	if s.full && len(s.series) < maxSeries {
		s.full = false
	}
}

func (s *sampler) addLocked(name string, p point) {
	r := s.series[name]
	if r == nil {
		if len(s.series) >= maxSeries {
			if !s.full {
				s.full = true
				s.log.Warn("console: chart series limit reached; new topics and groups are not charted", "limit", maxSeries)
			}
			return
		}
		r = &ring{}
		s.series[name] = r
	}
	r.add(p, s.capacity)
}

// latest returns the last value of every series with the prefix.
func (s *sampler) latest(prefix string) map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]float64{}
	for name, r := range s.series {
		if strings.HasPrefix(name, prefix) && len(r.pts) > 0 {
			out[strings.TrimPrefix(name, prefix)] = r.pts[len(r.pts)-1].V
		}
	}
	return out
}

// query returns the named series, and the top series of the prefix by
// their latest value, with points after since (Unix ms).
func (s *sampler) query(names []string, prefix string, top int, since int64) map[string][]point {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	if prefix != "" && top > 0 {
		type cand struct {
			name string
			v    float64
		}
		var cs []cand
		// Busiest by its peak over the points asked for (since): a
		// topic that had a burst a few rounds ago is on the chart of
		// that span, not only while its last round was busy.
		for name, r := range s.series {
			if !strings.HasPrefix(name, prefix) {
				continue
			}
			peak, has := 0.0, false
			for i := len(r.pts) - 1; i >= 0 && r.pts[i].T > since; i-- {
				peak, has = max(peak, r.pts[i].V), true
			}
			if has {
				cs = append(cs, cand{name, peak})
			}
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].v > cs[j].v || cs[i].v == cs[j].v && cs[i].name < cs[j].name })
		for i := 0; i < len(cs) && i < top; i++ {
			want[cs[i].name] = true
		}
	}
	out := map[string][]point{}
	for n := range want {
		r := s.series[n]
		pts := []point{}
		if r != nil {
			i := sort.Search(len(r.pts), func(i int) bool { return r.pts[i].T > since })
			pts = append(pts, r.pts[i:]...)
		}
		out[n] = pts
	}
	return out
}
