package mqtt

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// subIndex is the topic tree of local subscriptions: one node per filter
// level, "+" and "#" as ordinary child names. Shared subscriptions hang off
// the node of their inner filter, grouped by share name.
type subIndex struct {
	mu   sync.RWMutex
	root node // protected by mu
	// res keeps reserved and '$' topics out of wildcard subscriptions
	// (reserved.go); set once by NewServer.
	res *reservedSet
	// count is the number of subscriptions in the index (Stats).
	count *atomic.Int64
}

type node struct {
	children map[string]*node
	subs     map[*session]*Subscription
	shared   map[string]*shareGroup
}

// shareGroup is one $share/<group>/<filter>: every message goes to one
// member, round robin, preferring connected members.
type shareGroup struct {
	members []shareMember
	next    atomic.Uint32
}

type shareMember struct {
	s   *session
	sub *Subscription
}

// target is one session a message goes to, with the subscriptions that
// matched it merged: the highest QoS, every subscription identifier.
type target struct {
	s      *session
	qos    byte
	rap    bool // retain as published
	subIDs []uint32
}

func splitFilter(filter string) (group, inner string) {
	if g, f, ok := packets.ParseShared(filter); ok {
		return g, f
	}
	return "", filter
}

// add inserts (or replaces) s's subscription; it reports whether the
// filter was new for s.
func (x *subIndex) add(s *session, sub *Subscription) bool {
	group, inner := splitFilter(sub.Filter)
	x.mu.Lock()
	defer x.mu.Unlock()
	n := &x.root
	for lvl := range strings.SplitSeq(inner, "/") {
		c := n.children[lvl]
		if c == nil {
			c = &node{}
			if n.children == nil {
				n.children = map[string]*node{}
			}
			n.children[lvl] = c
		}
		n = c
	}
	if group == "" {
		_, had := n.subs[s]
		if n.subs == nil {
			n.subs = map[*session]*Subscription{}
		}
		n.subs[s] = sub
		if !had {
			x.count.Add(1)
		}
		return !had
	}
	if n.shared == nil {
		n.shared = map[string]*shareGroup{}
	}
	g := n.shared[group]
	if g == nil {
		g = &shareGroup{}
		n.shared[group] = g
	}
	for i := range g.members {
		if g.members[i].s == s {
			g.members[i].sub = sub
			return false
		}
	}
	g.members = append(g.members, shareMember{s, sub})
	x.count.Add(1)
	return true
}

// remove deletes s's subscription to filter; it reports whether it existed.
func (x *subIndex) remove(s *session, filter string) bool {
	group, inner := splitFilter(filter)
	x.mu.Lock()
	defer x.mu.Unlock()
	path := []*node{&x.root}
	n := &x.root
	levels := strings.Split(inner, "/")
	for _, lvl := range levels {
		if n = n.children[lvl]; n == nil {
			return false
		}
		path = append(path, n)
	}
	found := false
	if group == "" {
		_, found = n.subs[s]
		delete(n.subs, s)
	} else if g := n.shared[group]; g != nil {
		for i := range g.members {
			if g.members[i].s == s {
				g.members = slices.Delete(g.members, i, i+1)
				found = true
				break
			}
		}
		if len(g.members) == 0 {
			delete(n.shared, group)
		}
	}
	if found {
		x.count.Add(-1)
	}
	// Prune empty nodes bottom up.
	for i := len(path) - 1; i > 0; i-- {
		c := path[i]
		if len(c.children) > 0 || len(c.subs) > 0 || len(c.shared) > 0 {
			break
		}
		delete(path[i-1].children, levels[i-1])
	}
	return found
}

// mergeTargets orders matches by session and merges the matches of one
// session into one target: the highest QoS, retain-as-published if any
// asked for it, and every subscription identifier once (AddSubID).
func mergeTargets(out []target) []target {
	if len(out) < 2 {
		return out
	}
	slices.SortFunc(out, func(a, b target) int {
		switch {
		case a.s.seq < b.s.seq:
			return -1
		case a.s.seq > b.s.seq:
			return 1
		}
		return 0
	})
	w := 0
	for i := 1; i < len(out); i++ {
		if out[i].s == out[w].s {
			t := &out[w]
			t.qos = max(t.qos, out[i].qos)
			t.rap = t.rap || out[i].rap
			for _, id := range out[i].subIDs {
				t.subIDs = AddSubID(t.subIDs, id)
			}
			continue
		}
		w++
		out[w] = out[i]
	}
	return out[:w+1]
}

// AddSubID appends the subscription identifier id to ids unless ids holds
// it already: a message matching several subscriptions carries each
// identifier once. One SUBSCRIBE with several filters gives them all the
// same identifier; a PUBLISH repeating it says nothing more, and
// libmosquitto 2.0 drops the connection on a PUBLISH with more than one
// identifier. Every path that gathers a delivery's identifiers (live
// matching, overflow reads, a session's replay from the log) uses it.
func AddSubID(ids []uint32, id uint32) []uint32 {
	if id == 0 || slices.Contains(ids, id) {
		return ids
	}
	return append(ids, id)
}

// match returns the sessions topic goes to, one target per session, with
// no-local subscriptions of publisher skipped.
func (x *subIndex) match(topic, publisher string) []target {
	return x.matchWith(topic, publisher, true)
}

// matchWith is match; shared groups pick a member only when withShared.
func (x *subIndex) matchWith(topic, publisher string, withShared bool) []target {
	w := matchWalk{publisher: publisher, literal: x.res.literalMask(topic), shared: withShared}
	x.mu.RLock()
	w.node(&x.root, topic, 0)
	x.mu.RUnlock()
	return mergeTargets(w.out)
}

// matchWalk is one walk of the tree for a topic (under the index's read
// lock).
type matchWalk struct {
	publisher string
	// literal has bit i set when level i of the topic must be matched by
	// name, not by a wildcard (a '$' topic's first level, a reserved
	// filter's literal levels: see reserved.go).
	literal uint64
	shared  bool // pick a member of each matching shared group
	out     []target
}

func (w *matchWalk) node(n *node, rest string, depth int) {
	lvl, more, hasMore := strings.Cut(rest, "/")
	if w.literal>>depth == 0 {
		if c := n.children["#"]; c != nil {
			w.collect(c)
		}
	}
	if w.literal&(1<<depth) == 0 {
		if c := n.children["+"]; c != nil {
			w.step(c, more, hasMore, depth)
		}
	}
	if c := n.children[lvl]; c != nil {
		w.step(c, more, hasMore, depth)
	}
}

func (w *matchWalk) step(c *node, more string, hasMore bool, depth int) {
	if hasMore {
		w.node(c, more, depth+1)
		return
	}
	w.collect(c)
	if h := c.children["#"]; h != nil { // "a/#" matches "a"
		w.collect(h)
	}
}

func (w *matchWalk) collect(n *node) {
	for s, sub := range n.subs {
		if sub.NoLocal && s.id == w.publisher {
			continue
		}
		t := target{s: s, qos: sub.QoS, rap: sub.RetainAsPublished}
		if sub.Identifier != 0 {
			t.subIDs = []uint32{sub.Identifier}
		}
		w.out = append(w.out, t)
	}
	if !w.shared {
		return
	}
	for _, g := range n.shared {
		if len(g.members) > 0 {
			w.out = append(w.out, pickShared(g))
		}
	}
}
