package broker

import (
	"sync"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// shareStartGrace is how long a start of a group (START_SHARE_GROUP) counts
// as relied on when no member of the group joins after it (its node
// crashed, or its member left before the consumer started).
const shareStartGrace = 30 * time.Second

// shareStarts are the starts of groups (START_SHARE_GROUP) whose consumer
// has not joined yet: group -> starter -> when. Its lock also makes each
// start's decision one step against the others.
type shareStarts struct {
	mu      sync.Mutex
	pending map[string]map[string]time.Time // protected by mu
	// sweepAt is the number of pending groups at which note drops every
	// expired start: a group started once whose member never joined (its
	// MQTT client left before its node's consumer started) is otherwise
	// kept for ever, and peers can start any number of groups.
	sweepAt int // protected by mu
}

// shareSweepMin is the least number of pending groups that makes note
// sweep.
const shareSweepMin = 64

// joined forgets the pending starts of group: a member of it joined, and
// members are what starts rely on from then on.
func (s *shareStarts) joined(group string) {
	s.mu.Lock()
	delete(s.pending, group)
	s.mu.Unlock()
}

// othersPending reports whether a starter other than starter started group
// within the grace before now; it drops the older ones.
func (s *shareStarts) othersPending(group, starter string, now time.Time) bool {
	other := false
	for id, at := range s.pending[group] {
		switch {
		case now.Sub(at) > shareStartGrace:
			delete(s.pending[group], id)
		case id != starter:
			other = true
		}
	}
	if len(s.pending[group]) == 0 {
		delete(s.pending, group)
	}
	return other
}

// note records starter's start of group at now.
func (s *shareStarts) note(group, starter string, now time.Time) {
	if s.pending == nil {
		s.pending = map[string]map[string]time.Time{}
	}
	if s.pending[group] == nil {
		if len(s.pending) >= max(s.sweepAt, shareSweepMin) {
			for g := range s.pending {
				s.othersPending(g, "", now) // drops g's expired starts
			}
			s.sweepAt = 2 * len(s.pending) // amortized: O(1) a start
		}
		s.pending[group] = map[string]time.Time{}
	}
	s.pending[group][starter] = now
}

// processStartShareGroup serves START_SHARE_GROUP (protocol/sharestart.go
// has the rule): the group's offsets of one topic's queues decided in one
// step, so two nodes starting the same group at once never move it past
// the start the other made (the later restart keeps the earlier one's).
func (b *Broker) processStartShareGroup(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var r protocol.StartShareGroupRequest
	if err := protocol.DecodeJSON(req.Body, &r); err != nil {
		return errResp(protocol.SystemError, "bad start share group body: %v", err), nil
	}
	if err := b.groups.ValidateName(r.Group); err != nil {
		return errResp(protocol.SystemError, "%v", err), nil
	}
	if r.Starter == "" {
		return errResp(protocol.SystemError, "start share group needs a starter"), nil
	}
	if b.isSlave() {
		return errResp(protocol.SlaveNotAvailable, "start share group: broker %s is a slave", b.opts.BrokerName), nil
	}
	tc, ok := b.topics.Get(r.Topic)
	if !ok {
		return errResp(protocol.TopicNotExist, "topic[%s] not exist", r.Topic), nil
	}
	s := &b.shareStarts
	s.mu.Lock()
	defer s.mu.Unlock()
	_, members := b.consumers.Group(r.Group)
	relied := members || s.othersPending(r.Group, r.Starter, time.Now())
	out := protocol.StartShareGroupResponse{Offsets: make(map[int32]int64, tc.WriteQueueNums)}
	for q := int32(0); q < tc.WriteQueueNums; q++ {
		off, stored := b.offsets.Query(r.Group, r.Topic, q)
		if !stored || r.Restart && !relied {
			off = b.store.MaxOffset(r.Topic, q)
			b.offsets.Commit(r.Group, r.Topic, q, off)
		}
		out.Offsets[q] = off
	}
	s.note(r.Group, r.Starter, time.Now())
	return jsonResponse(out)
}
