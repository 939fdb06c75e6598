package amqp

import (
	"strings"
	"testing"

	"github.com/smartgo/smartgo/amqp/wire"
)

func TestTopicMatch(t *testing.T) {
	for _, tc := range []struct {
		pat, key string
		want     bool
	}{
		{"a.b.c", "a.b.c", true}, {"a.*.c", "a.b.c", true}, {"a.*.c", "a.c", false},
		{"#", "", true}, {"#", "a.b", true}, {"a.#", "a", true}, {"a.#", "a.b.c", true},
		{"#.c", "c", true}, {"#.c", "a.b.c", true}, {"#.c", "a.b", false},
		{"a.#.c", "a.c", true}, {"a.#.c", "a.x.y.c", true}, {"*", "", true}, {"*", "a.b", false},
		{"*.#", "a", true}, {"#.#", "", true}, {"a.*.#", "a", false}, {"", "", true}, {"", "a", false},
	} {
		if got := topicMatch(strings.Split(tc.pat, "."), strings.Split(tc.key, ".")); got != tc.want {
			t.Errorf("topicMatch(%q, %q) = %v, want %v", tc.pat, tc.key, got, tc.want)
		}
	}
}

// routedTo publishes to exchange x with key (and headers) and returns the
// queues, of qs, that got it.
func routedTo(c *tclient, x, key string, headers wire.Table, qs ...string) []string {
	c.t.Helper()
	c.publishProps(1, x, key, wire.Properties{Headers: headers}, key, false)
	var got []string
	for _, q := range qs {
		if _, body, ok := c.get(1, q, true); ok {
			if body != key {
				c.t.Fatalf("queue %s: body %q, want %q", q, body, key)
			}
			got = append(got, q)
		}
	}
	return got
}

func TestExchangeRouting(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	for _, q := range []string{"q1", "q2", "q3"} {
		c.declareQueue(1, q, nil)
	}
	// direct
	c.bind(1, "q1", "amq.direct", "k1", nil)
	c.bind(1, "q2", "amq.direct", "k1", nil)
	c.bind(1, "q3", "amq.direct", "k3", nil)
	check := func(x, key string, h wire.Table, want ...string) {
		t.Helper()
		if got := routedTo(c, x, key, h, "q1", "q2", "q3"); !equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s %q %v: routed to %v, want %v", x, key, h, got, want)
		}
	}
	check("amq.direct", "k1", nil, "q1", "q2")
	check("amq.direct", "k3", nil, "q3")
	check("amq.direct", "none", nil)
	// default exchange
	check("", "q2", nil, "q2")
	// fanout
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "fan", Type: "fanout"})
	c.bind(1, "q1", "fan", "", nil)
	c.bind(1, "q3", "fan", "ignored", nil)
	check("fan", "anything", nil, "q1", "q3")
	// topic
	c.bind(1, "q1", "amq.topic", "stock.*.nyse", nil)
	c.bind(1, "q2", "amq.topic", "stock.#", nil)
	c.bind(1, "q3", "amq.topic", "#.nyse", nil)
	check("amq.topic", "stock.ibm.nyse", nil, "q1", "q2", "q3")
	check("amq.topic", "stock", nil, "q2")
	check("amq.topic", "bond.x.nyse", nil, "q3")
	check("amq.topic", "bond", nil)
	// headers
	c.bind(1, "q1", "amq.headers", "", wire.Table{"x-match": "all", "a": int32(1), "b": "two"})
	c.bind(1, "q2", "amq.headers", "", wire.Table{"x-match": "any", "a": int64(1), "c": "three"})
	c.bind(1, "q3", "amq.headers", "", wire.Table{"present": nil})
	check("amq.headers", "", wire.Table{"a": int8(1), "b": "two"}, "q1", "q2")
	check("amq.headers", "", wire.Table{"a": int8(1)}, "q2")
	check("amq.headers", "", wire.Table{"c": "three", "present": "yes"}, "q2", "q3")
	check("amq.headers", "", wire.Table{"b": "two"})
	// exchange-to-exchange, with a cycle
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "e1", Type: "direct"})
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "e2", Type: "fanout"})
	call[*wire.ExchangeBindOk](c, 1, &wire.ExchangeBind{Destination: "e2", Source: "e1", RoutingKey: "go"})
	call[*wire.ExchangeBindOk](c, 1, &wire.ExchangeBind{Destination: "e1", Source: "e2"})
	c.bind(1, "q2", "e2", "", nil)
	check("e1", "go", nil, "q2")
	check("e1", "stop", nil)
	call[*wire.ExchangeUnbindOk](c, 1, &wire.ExchangeUnbind{Destination: "e2", Source: "e1", RoutingKey: "go"})
	check("e1", "go", nil)
	// unbind
	call[*wire.QueueUnbindOk](c, 1, &wire.QueueUnbind{Queue: "q1", Exchange: "amq.direct", RoutingKey: "k1"})
	check("amq.direct", "k1", nil, "q2")
}

func TestExchangeDeclareErrors(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "x", Type: "direct", Durable: true})
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "x", Type: "direct", Durable: true})
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "x", Passive: true})
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "amq.topic", Passive: true})
	for i, tc := range []struct {
		m    wire.Method
		code uint16
	}{
		{&wire.ExchangeDeclare{Exchange: "x", Type: "fanout", Durable: true}, wire.PreconditionFailed},
		{&wire.ExchangeDeclare{Exchange: "x", Type: "direct"}, wire.PreconditionFailed},
		{&wire.ExchangeDeclare{Exchange: "amq.mine", Type: "direct"}, wire.AccessRefused},
		{&wire.ExchangeDeclare{Exchange: "", Type: "direct"}, wire.AccessRefused},
		{&wire.ExchangeDeclare{Exchange: "missing", Passive: true}, wire.NotFound},
		{&wire.ExchangeDelete{Exchange: "amq.direct"}, wire.AccessRefused},
		{&wire.ExchangeDelete{Exchange: ""}, wire.AccessRefused},
		{&wire.QueueBind{Queue: "nope", Exchange: "x"}, wire.NotFound},
		{&wire.BasicPublish{Exchange: "missing", RoutingKey: "k"}, wire.NotFound},
	} {
		ch := uint16(i + 2)
		c.openChannel(ch)
		if p, ok := tc.m.(*wire.BasicPublish); ok {
			c.publish(ch, p.Exchange, p.RoutingKey, "x")
		} else {
			c.send(ch, tc.m)
		}
		c.expectChannelClose(ch, tc.code)
	}
	c.declareQueue(1, "q", nil)
	c.bind(1, "q", "x", "k", nil)
	c.send(1, &wire.ExchangeDelete{Exchange: "x", IfUnused: true})
	c.expectChannelClose(1, wire.PreconditionFailed)
	c.openChannel(1)
	call[*wire.ExchangeDeleteOk](c, 1, &wire.ExchangeDelete{Exchange: "x"})
	call[*wire.ExchangeDeleteOk](c, 1, &wire.ExchangeDelete{Exchange: "x"}) // idempotent
	// An unknown type is a connection error.
	c.send(1, &wire.ExchangeDeclare{Exchange: "y", Type: "nosuch"})
	c.expectConnClose(wire.CommandInvalid)
}

func TestAutoDeleteExchangeAndInternal(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "ad", Type: "fanout", AutoDelete: true})
	c.declareQueue(1, "q", nil)
	c.bind(1, "q", "ad", "", nil)
	call[*wire.QueueUnbindOk](c, 1, &wire.QueueUnbind{Queue: "q", Exchange: "ad"})
	c.send(1, &wire.ExchangeDeclare{Exchange: "ad", Passive: true})
	c.expectChannelClose(1, wire.NotFound)
	c.openChannel(1)
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "in", Type: "fanout", Internal: true})
	c.publish(1, "in", "", "x")
	c.expectChannelClose(1, wire.AccessRefused)
}

func TestMandatoryReturn(t *testing.T) {
	s, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	c.publishProps(1, "amq.direct", "nobody", wire.Properties{MessageID: "m1"}, "lost", true)
	r, m := expectMsg[*wire.BasicReturn](c)
	if r.ReplyCode != wire.NoRoute || r.Exchange != "amq.direct" || r.RoutingKey != "nobody" || string(m.body) != "lost" || m.props.MessageID != "m1" {
		t.Fatalf("return %+v %q %+v", r, m.body, m.props)
	}
	if st := s.Stats(); st.Returned != 1 {
		t.Fatalf("Returned %d", st.Returned)
	}
}
