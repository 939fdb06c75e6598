package amqp

import (
	"strings"

	"github.com/smartgo/smartgo/amqp/wire"
)

// Exchange types the engine implements.
const (
	typeDirect  = "direct"
	typeFanout  = "fanout"
	typeTopic   = "topic"
	typeHeaders = "headers"
)

func knownExchangeType(t string) bool {
	switch t {
	case typeDirect, typeFanout, typeTopic, typeHeaders:
		return true
	}
	return false
}

// exchange is one exchange of a virtual host. Guarded by Server.mu.
type exchange struct {
	vh                            *vhost
	name, typ                     string
	durable, autoDelete, internal bool
	args                          wire.Table
	argsRaw                       []byte
	bindings                      []*binding // this exchange is the source
	deleted                       bool
}

// binding routes from src to a queue (dstQ) or an exchange (dstX).
type binding struct {
	src     *exchange
	dstQ    *queue
	dstX    *exchange
	key     string
	args    wire.Table
	argsRaw []byte
	topic   []string // key split on '.', for topic exchanges
}

func (b *binding) same(o *binding) bool {
	return b.src == o.src && b.dstQ == o.dstQ && b.dstX == o.dstX && b.key == o.key && tablesEqual(b.args, o.args)
}

// routeCtx carries what routing needs of one message.
type routeCtx struct {
	key     string
	md      *msgData
	hdr     wire.Table // md's headers, decoded when a headers exchange asks
	hdrDone bool
	queues  []*queue
	seenX   map[*exchange]bool
}

// headers decodes the message's headers once.
func (r *routeCtx) headers() wire.Table {
	if !r.hdrDone {
		r.hdrDone = true
		if propFlags(r.md.props)&wire.FlagHeaders != 0 {
			if p, err := wire.DecodeProperties(r.md.props); err == nil {
				r.hdr = p.Headers
			}
		}
	}
	return r.hdr
}

func (r *routeCtx) addQueue(q *queue) {
	for _, o := range r.queues {
		if o == q {
			return
		}
	}
	r.queues = append(r.queues, q)
}

// route adds to r.queues every queue x routes the message to, following
// exchange-to-exchange bindings; each exchange is visited once, so cycles
// of bindings end.
func (x *exchange) route(r *routeCtx) {
	if x.name == "" {
		if q := x.vh.queues[r.key]; q != nil {
			r.addQueue(q)
		}
		return
	}
	if r.seenX[x] {
		return
	}
	if r.seenX == nil {
		r.seenX = map[*exchange]bool{}
	}
	r.seenX[x] = true
	var words []string
	for _, b := range x.bindings {
		match := false
		switch x.typ {
		case typeFanout:
			match = true
		case typeDirect:
			match = b.key == r.key
		case typeTopic:
			if words == nil {
				words = strings.Split(r.key, ".")
			}
			match = topicMatch(b.topic, words)
		case typeHeaders:
			match = headersMatch(b.args, r.headers())
		}
		if !match {
			continue
		}
		if b.dstQ != nil {
			r.addQueue(b.dstQ)
		} else {
			b.dstX.route(r)
		}
	}
}

// topicMatch reports whether the words of a routing key match a binding
// pattern's words: "*" matches exactly one word, "#" zero or more.
func topicMatch(pat, words []string) bool {
	// ok[j] reports whether pat[:i] matches words[:j], row by row.
	ok := make([]bool, len(words)+1)
	next := make([]bool, len(words)+1)
	ok[0] = true
	for _, p := range pat {
		switch p {
		case "#":
			reach := false
			for j := range ok {
				reach = reach || ok[j]
				next[j] = reach
			}
		default:
			next[0] = false
			for j := 1; j <= len(words); j++ {
				next[j] = ok[j-1] && (p == "*" || p == words[j-1])
			}
		}
		ok, next = next, ok
	}
	return ok[len(words)]
}

// headersMatch applies a headers-exchange binding's arguments to a
// message's headers: x-match "all" (the default) or "any"; "all-with-x"
// and "any-with-x" also compare arguments starting "x-". An argument of
// type void matches the header's presence alone.
func headersMatch(args, headers wire.Table) bool {
	mode, _ := args["x-match"].(string)
	any := mode == "any" || mode == "any-with-x"
	withX := strings.HasSuffix(mode, "-with-x")
	for k, want := range args {
		if strings.HasPrefix(k, "x-") && (!withX || k == "x-match") {
			continue
		}
		got, present := headers[k]
		ok := present && (want == nil || valuesEqual(want, got))
		if any && ok {
			return true
		}
		if !any && !ok {
			return false
		}
	}
	return !any
}

// valuesEqual compares two field values; integers compare by value
// whatever their width, as clients pick widths differently.
func valuesEqual(a, b any) bool {
	if ia, ok := wire.AsInt64(a); ok {
		ib, ok := wire.AsInt64(b)
		return ok && ia == ib
	}
	switch av := a.(type) {
	case wire.Table:
		bv, ok := b.(wire.Table)
		return ok && tablesEqual(av, bv)
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !valuesEqual(av[i], bv[i]) {
				return false
			}
		}
		return true
	case []byte:
		bv, ok := b.([]byte)
		if !ok {
			if s, ok := b.(string); ok {
				return string(av) == s
			}
			return false
		}
		return string(av) == string(bv)
	case string:
		if bv, ok := b.([]byte); ok {
			return av == string(bv)
		}
	case float64:
		if bv, ok := b.(float32); ok {
			return av == float64(bv)
		}
	case float32:
		if bv, ok := b.(float64); ok {
			return float64(av) == bv
		}
	}
	defer func() { _ = recover() }() // uncomparable dynamic types are unequal
	return a == b
}

func tablesEqual(a, b wire.Table) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !valuesEqual(v, w) {
			return false
		}
	}
	return true
}
