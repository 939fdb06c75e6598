package mqtt

import (
	"strings"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// Reserved topics (Options.ReservedFilters) belong to internal handlers:
// clients may neither publish to them nor name them in a subscription,
// unless Options.Reserved allows it. A filter that merely overlaps a
// reserved filter through a wildcard ("#", "+/+", "clients/#" against
// "clients/statestore/#") is granted like any other; the reserved topics
// are kept out of it at delivery instead, the way MQTT 5 §4.7.2 keeps
// topics starting with '$' out of filters starting with a wildcard.
//
// The rule, for a topic T and a subscription filter F that matches it:
// at every level where a reserved filter matching T has a literal name,
// F must have that literal name too (not '+', and no '#' at or before
// that level). Topics starting with '$' get the same rule for their first
// level, whatever the reserved filters. A subscription that passes it for
// a reserved filter "names" that filter and needs Options.Reserved's
// consent when it is made.

// maxReservedLevels bounds the depth of a reserved filter's literal
// levels: one bit each in a uint64 mask.
const maxReservedLevels = 64

// reservedRule is one reserved filter with the levels where it has a
// literal name (bit i: level i).
type reservedRule struct {
	filter  string
	literal uint64
}

// reservedSet is Options.ReservedFilters parsed once; it is read-only
// after NewServer.
type reservedSet struct {
	rules []reservedRule
	// first holds the first level of every rule that starts with a
	// literal name; anyFirst is set when some rule starts with a
	// wildcard. Together they let most topics skip the rules at once.
	first    map[string]bool
	anyFirst bool
}

func newReservedSet(filters []string) *reservedSet {
	rs := &reservedSet{first: map[string]bool{}}
	for _, f := range filters {
		r := reservedRule{filter: f, literal: literalLevels(f)}
		rs.rules = append(rs.rules, r)
		lvl, _, _ := strings.Cut(f, "/")
		if lvl == "+" || lvl == "#" {
			rs.anyFirst = true
		} else {
			rs.first[lvl] = true
		}
	}
	return rs
}

// literalLevels returns the mask of the levels of filter that are literal
// names.
func literalLevels(filter string) uint64 {
	var m uint64
	i := 0
	for lvl := range strings.SplitSeq(filter, "/") {
		if lvl != "+" && lvl != "#" && i < maxReservedLevels {
			m |= 1 << i
		}
		i++
	}
	return m
}

// literalMask is the mask of the levels of topic a subscription must name
// literally to receive it: bit 0 for a topic starting with '$', and the
// literal levels of every reserved filter matching topic.
func (rs *reservedSet) literalMask(topic string) uint64 {
	var m uint64
	if len(topic) > 0 && topic[0] == '$' {
		m = 1
	}
	if !rs.candidate(topic) {
		return m
	}
	for _, r := range rs.rules {
		if packets.Match(r.filter, topic) {
			m |= r.literal
		}
	}
	return m
}

// candidate reports whether topic's first level lets it match a rule at
// all (one map lookup for most topics).
func (rs *reservedSet) candidate(topic string) bool {
	if len(rs.rules) == 0 {
		return false
	}
	if rs.anyFirst {
		return true
	}
	lvl, _, _ := strings.Cut(topic, "/")
	return rs.first[lvl]
}

// anyMatch reports whether topic falls under a reserved filter.
func (rs *reservedSet) anyMatch(topic string) bool {
	if !rs.candidate(topic) {
		return false
	}
	for _, r := range rs.rules {
		if packets.Match(r.filter, topic) {
			return true
		}
	}
	return false
}

// names reports whether the subscription filter (its inner filter, for a
// shared subscription) names a reserved filter: it can receive topics of
// that reserved filter under the delivery rule above.
func (rs *reservedSet) names(filter string) bool {
	for _, r := range rs.rules {
		if overlaps(r.filter, filter) && literalCovered(filter, r.literal) {
			return true
		}
	}
	return false
}

// visible reports whether a message on topic may go to a subscription
// with filter (which matches topic): filter is literal at every level the
// topic's mask requires.
func (rs *reservedSet) visible(filter, topic string) bool {
	m := rs.literalMask(topic)
	return m == 0 || literalCovered(filter, m)
}

// literalCovered reports whether filter is literal at every level of mask
// (a '#' covers its own level and every deeper one with a wildcard).
func literalCovered(filter string, mask uint64) bool {
	i := 0
	for lvl := range strings.SplitSeq(filter, "/") {
		switch lvl {
		case "#":
			return mask>>i == 0
		case "+":
			if mask&(1<<i) != 0 {
				return false
			}
		}
		i++
	}
	return true
}

// overlaps reports whether some topic matches both filters (ignoring the
// $-rule, which the literal masks apply).
func overlaps(a, b string) bool {
	for {
		al, arest, amore := cut(a)
		bl, brest, bmore := cut(b)
		if al == "#" || bl == "#" {
			return true
		}
		if al != "+" && bl != "+" && al != bl {
			return false
		}
		if !amore || !bmore {
			return !amore && !bmore || amore && arest == "#" || bmore && brest == "#"
		}
		a, b = arest, brest
	}
}

// sysTopic reports whether topic is in the server's read-only $SYS tree.
func sysTopic(topic string) bool {
	return topic == "$SYS" || strings.HasPrefix(topic, "$SYS/")
}

// mayPublish decides whether a client (or its will) may publish to topic
// when no Handler claims it: never into $SYS, never to a topic starting
// with "$share/" (that is how a shared subscription's filter starts, and
// no subscription can receive it: 0x90 topic name invalid, as MQTT 5
// §4.7.2 lets a server keep clients from exchanging messages on topics
// starting with '$'), into a reserved topic only with Options.Reserved's
// consent, and otherwise as the ACL says. code is 0 when it may, else the
// reason for a v5 PUBACK/PUBREC; the detail is for the log and the v5
// reason string.
func (s *Server) mayPublish(info ClientInfo, topic string) (code packets.ReasonCode, detail string) {
	switch {
	case sysTopic(topic):
		return packets.ReasonNotAuthorized, "$SYS topics are read-only"
	case packets.IsShared(topic):
		return packets.ReasonTopicNameInvalid, "a topic starting with $share/ is a shared subscription's filter"
	case s.res.anyMatch(topic) && (s.opts.Reserved == nil || !s.opts.Reserved(info, topic, false)):
		return packets.ReasonNotAuthorized, "topic is reserved"
	case s.acl != nil && !s.acl.Allowed(info.ClientID, info.Username, topic, false):
		return packets.ReasonNotAuthorized, "publish not authorized"
	}
	if s.opts.Authorize != nil {
		if err := s.opts.Authorize(info, topic, false); err != nil {
			return packets.ReasonNotAuthorized, err.Error()
		}
	}
	return 0, ""
}
