package amqp091

import (
	"fmt"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestMaxLength: x-max-length drops the oldest messages by default
// (drop-head); with x-overflow reject-publish the newest are refused,
// nacked under confirms.
func TestMaxLength(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	head := s.declareQueue(t, ch, "drophead", false, amqp.Table{"x-max-length": int32(3)})
	reject := s.declareQueue(t, ch, "reject", false, amqp.Table{"x-max-length": int32(3), "x-overflow": "reject-publish"})
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var acks []bool
	for i := 1; i <= 5; i++ {
		for _, q := range []string{head, reject} {
			dc, err := ch.PublishWithDeferredConfirm("", q, false, false, text(fmt.Sprint(i)))
			if err != nil {
				t.Fatal(err)
			}
			ok, err := dc.WaitContext(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if q == reject {
				acks = append(acks, ok)
			}
		}
	}
	if got := drain(t, ch, head); !slices.Equal(got, []string{"3", "4", "5"}) {
		t.Errorf("drop-head queue: %q, want the newest three", got)
	}
	if got := drain(t, ch, reject); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Errorf("reject-publish queue: %q, want the oldest three", got)
	}
	if !slices.Equal(acks, []bool{true, true, true, false, false}) {
		t.Errorf("reject-publish confirms %v, want three acks then two nacks", acks)
	}
}

// TestDeadLettering: a message rejected without requeue, and one whose
// per-queue TTL runs out, go to the queue's dead-letter exchange with the
// dead-letter routing key and an x-death header naming the reason.
func TestDeadLettering(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	dlx := s.declareExchange(t, ch, "dlx", "direct")
	dead := s.declareQueue(t, ch, "dead", false, nil)
	if err := ch.QueueBind(dead, "dead-key", dlx, false, nil); err != nil {
		t.Fatal(err)
	}
	work := s.declareQueue(t, ch, "work", false, amqp.Table{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "dead-key"})
	short := s.declareQueue(t, ch, "short", false, amqp.Table{
		"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "dead-key", "x-message-ttl": int32(50)})
	publish := confirmed(t, ch)
	publish("", work, text("rejected"))
	publish("", short, text("expired"))

	d, ok, err := ch.Get(work, false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if err := d.Reject(false); err != nil {
		t.Fatal(err)
	}
	cons, err := ch.Consume(dead, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for range 2 {
		d := next(t, cons, "a dead letter")
		deaths, _ := d.Headers["x-death"].([]any)
		if len(deaths) != 1 {
			t.Fatalf("%q: x-death %#v", d.Body, d.Headers["x-death"])
		}
		death, _ := deaths[0].(amqp.Table)
		reasons[string(d.Body)] = fmt.Sprint(death["reason"])
		if d.RoutingKey != "dead-key" || d.Exchange != dlx {
			t.Errorf("%q dead-lettered via %q/%q", d.Body, d.Exchange, d.RoutingKey)
		}
	}
	if reasons["rejected"] != "rejected" || reasons["expired"] != "expired" {
		t.Fatalf("x-death reasons %v", reasons)
	}
}

// TestAlternateExchange: what an exchange cannot route goes to its
// alternate-exchange.
func TestAlternateExchange(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	ae := s.declareExchange(t, ch, "ae", "fanout")
	unrouted := s.declareQueue(t, ch, "unrouted", false, nil)
	if err := ch.QueueBind(unrouted, "", ae, false, nil); err != nil {
		t.Fatal(err)
	}
	name := uniq(t, "main")
	if err := ch.ExchangeDeclare(name, "direct", false, false, false, false, amqp.Table{"alternate-exchange": ae}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.tidy(func(ch *amqp.Channel) { _ = ch.ExchangeDelete(name, false, false) }) })
	routed := s.declareQueue(t, ch, "routed", false, nil)
	if err := ch.QueueBind(routed, "known", name, false, nil); err != nil {
		t.Fatal(err)
	}
	publish := confirmed(t, ch)
	publish(name, "known", text("a"))
	publish(name, "unknown", text("b"))
	if got := drain(t, ch, routed); !slices.Equal(got, []string{"a"}) {
		t.Errorf("routed: %q", got)
	}
	if got := drain(t, ch, unrouted); !slices.Equal(got, []string{"b"}) {
		t.Errorf("alternate exchange's queue: %q", got)
	}
}

// TestQueueExpires: a queue with x-expires and no consumers is deleted
// after that time unused. Publishing does not count as use (a declare,
// even passive, would): the test publishes mandatory messages to it until
// one comes back unroutable.
func TestQueueExpires(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	start := time.Now() // before the declare: the queue lives at least 300 ms after it
	q := s.declareQueue(t, ch, "expiring", false, amqp.Table{"x-expires": int32(300)})
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the unused queue to expire", func() bool {
		dc, err := ch.PublishWithDeferredConfirm("", q, true, false, text("probe"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dc.WaitContext(t.Context()); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-returns: // a return comes before its publish's ack
			if r.ReplyCode != amqp.NoRoute {
				t.Fatalf("return %d %s", r.ReplyCode, r.ReplyText)
			}
			return true
		default:
			return false
		}
	})
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("the queue was gone after %v, before its x-expires of 300 ms", waited)
	}
}

// TestPriorityQueue: with x-max-priority, higher priorities are delivered
// first, first in first out within a priority, and a priority above the
// maximum counts as the maximum.
func TestPriorityQueue(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	q := s.declareQueue(t, ch, "prio", false, amqp.Table{"x-max-priority": int32(5)})
	publish := confirmed(t, ch)
	for _, m := range []struct {
		body string
		prio uint8
	}{{"low", 1}, {"none", 0}, {"high-a", 5}, {"mid", 3}, {"capped", 9}, {"high-b", 5}} {
		p := text(m.body)
		p.Priority = m.prio
		publish("", q, p)
	}
	if got, want := drain(t, ch, q), []string{"high-a", "capped", "high-b", "mid", "low", "none"}; !slices.Equal(got, want) {
		t.Fatalf("priority order %q, want %q", got, want)
	}
}

// TestSingleActiveConsumer: with x-single-active-consumer, the first
// consumer gets every message while it stays; when it cancels, the next
// one takes over.
func TestSingleActiveConsumer(t *testing.T) {
	s := sharedServer(t)
	conn := s.dial(t)
	ch := channel(t, conn)
	q := s.declareQueue(t, ch, "sac", false, amqp.Table{"x-single-active-consumer": true})
	first, second := channel(t, conn), channel(t, conn)
	ds1, err := first.Consume(q, "first", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds2, err := second.Consume(q, "second", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	publish := confirmed(t, ch)
	for i := range 5 {
		publish("", q, text(fmt.Sprint("a", i)))
	}
	for i := range 5 {
		if d := next(t, ds1, "to the active consumer"); string(d.Body) != fmt.Sprint("a", i) {
			t.Fatalf("active consumer got %q, want a%d", d.Body, i)
		}
	}
	if err := first.Cancel("first", false); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		publish("", q, text(fmt.Sprint("b", i)))
	}
	for i := range 3 {
		if d := next(t, ds2, "to the consumer that took over"); string(d.Body) != fmt.Sprint("b", i) {
			t.Fatalf("second consumer got %q, want b%d", d.Body, i)
		}
	}
	// The second consumer got nothing while the first was active: what it
	// received is exactly b0..b2 above, in order (a stray a* would have
	// come first and failed the loop).
}
