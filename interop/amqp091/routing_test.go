package amqp091

import (
	"fmt"
	"slices"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestHelloWorld: a message published to the default exchange with a
// queue's name as routing key reaches a consumer of that queue, body and
// content type intact.
func TestHelloWorld(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	q := s.declareQueue(t, ch, "hello", false, nil)
	ds, err := ch.Consume(q, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", q, false, false, text("Hello World!")); err != nil {
		t.Fatal(err)
	}
	d := next(t, ds, "hello")
	if string(d.Body) != "Hello World!" || d.ContentType != "text/plain" || d.Exchange != "" || d.RoutingKey != q || d.Redelivered {
		t.Fatalf("delivery: body %q type %q exchange %q key %q redelivered %v", d.Body, d.ContentType, d.Exchange, d.RoutingKey, d.Redelivered)
	}
}

// TestWorkQueues: with prefetch 1 and manual acks, a consumer holding an
// unacked message gets nothing more while another consumer of the queue
// takes the rest in order; when the first consumer's channel closes, its
// unacked message is delivered again, to the other consumer, with
// Redelivered set.
func TestWorkQueues(t *testing.T) {
	s := sharedServer(t)
	conn := s.dial(t)
	pub := channel(t, conn)
	q := s.declareQueue(t, pub, "tasks", false, nil)

	slow := channel(t, conn)
	if err := slow.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	slowDs, err := slow.Consume(q, "slow", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	publish := confirmed(t, pub)
	const n = 10
	for i := 1; i <= n; i++ {
		publish("", q, text(fmt.Sprintf("task %d", i)))
	}
	held := next(t, slowDs, "the slow consumer's first task")
	if string(held.Body) != "task 1" || held.Redelivered {
		t.Fatalf("slow consumer got %q (redelivered %v), want task 1", held.Body, held.Redelivered)
	}

	fast := channel(t, conn)
	if err := fast.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	fastDs, err := fast.Consume(q, "fast", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= n; i++ {
		d := next(t, fastDs, fmt.Sprintf("task %d", i))
		if want := fmt.Sprintf("task %d", i); string(d.Body) != want || d.Redelivered {
			t.Fatalf("fast consumer got %q (redelivered %v), want %s", d.Body, d.Redelivered, want)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	// The slow consumer, at its prefetch limit, got none of them.
	select {
	case d := <-slowDs:
		t.Fatalf("slow consumer with an unacked message and prefetch 1 got %q", d.Body)
	default:
	}

	if err := slow.Close(); err != nil {
		t.Fatal(err)
	}
	d := next(t, fastDs, "the slow consumer's task again")
	if string(d.Body) != "task 1" || !d.Redelivered {
		t.Fatalf("after the slow channel closed: %q redelivered %v, want task 1 redelivered", d.Body, d.Redelivered)
	}
	if err := d.Ack(false); err != nil {
		t.Fatal(err)
	}
	// The channel's close comes after its acks: nothing is left to requeue.
	if err := fast.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := pub.QueueDeclarePassive(q, false, false, false, false, nil); err != nil || got.Messages != 0 {
		t.Fatalf("queue after all acks: %+v, %v", got, err)
	}
}

// TestFanout: a fanout exchange copies each message to every bound queue,
// whatever the routing key.
func TestFanout(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	ex := s.declareExchange(t, ch, "logs", "fanout")
	var qs []string
	for i := range 3 {
		q := s.declareQueue(t, ch, fmt.Sprintf("q%d", i), false, nil)
		if err := ch.QueueBind(q, "", ex, false, nil); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}
	publish := confirmed(t, ch)
	publish(ex, "", text("one"))
	publish(ex, "ignored.key", text("two"))
	for _, q := range qs {
		if got := drain(t, ch, q); !slices.Equal(got, []string{"one", "two"}) {
			t.Errorf("%s got %q", q, got)
		}
	}
}

// TestDirectRouting: a direct exchange routes on the exact routing key; a
// queue bound with two keys gets both; an unbound key reaches nobody.
func TestDirectRouting(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	ex := s.declareExchange(t, ch, "direct_logs", "direct")
	errs := s.declareQueue(t, ch, "errors", false, nil)
	all := s.declareQueue(t, ch, "all", false, nil)
	for _, b := range []struct{ q, key string }{{errs, "error"}, {all, "info"}, {all, "warning"}, {all, "error"}} {
		if err := ch.QueueBind(b.q, b.key, ex, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	publish := confirmed(t, ch)
	for _, key := range []string{"info", "error", "debug", "warning", "Error"} {
		publish(ex, key, text(key))
	}
	if got := drain(t, ch, errs); !slices.Equal(got, []string{"error"}) {
		t.Errorf("errors queue got %q", got)
	}
	if got := drain(t, ch, all); !slices.Equal(got, []string{"info", "error", "warning"}) {
		t.Errorf("all queue got %q", got)
	}
}

// TestTopicRouting: * matches exactly one word, # zero or more, words
// split on dots (RabbitMQ's tutorial bindings and some edge cases).
func TestTopicRouting(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	ex := s.declareExchange(t, ch, "topic_logs", "topic")
	q1 := s.declareQueue(t, ch, "orange", false, nil)
	q2 := s.declareQueue(t, ch, "rabbit_lazy", false, nil)
	q3 := s.declareQueue(t, ch, "everything", false, nil)
	q4 := s.declareQueue(t, ch, "a_hash_z", false, nil)
	binds := []struct{ q, key string }{
		{q1, "*.orange.*"}, {q2, "*.*.rabbit"}, {q2, "lazy.#"}, {q3, "#"}, {q4, "a.#.z"},
	}
	for _, b := range binds {
		if err := ch.QueueBind(b.q, b.key, ex, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{"quick.orange.rabbit", "lazy.orange.elephant", "quick.orange.fox", "lazy.brown.fox",
		"lazy.pink.rabbit", "quick.brown.fox", "orange", "quick.orange.male.rabbit", "lazy.orange.male.rabbit",
		"lazy", "a.z", "a.b.c.z", "a.b", ""}
	publish := confirmed(t, ch)
	for _, k := range keys {
		publish(ex, k, text(k))
	}
	want := map[string][]string{
		q1: {"quick.orange.rabbit", "lazy.orange.elephant", "quick.orange.fox"},
		// lazy.pink.rabbit matches both of q2's bindings: one copy.
		q2: {"quick.orange.rabbit", "lazy.orange.elephant", "lazy.brown.fox", "lazy.pink.rabbit", "lazy.orange.male.rabbit", "lazy"},
		q3: keys,
		q4: {"a.z", "a.b.c.z"},
	}
	for q, w := range want {
		if got := drain(t, ch, q); !slices.Equal(got, w) {
			t.Errorf("%s got %q, want %q", q, got, w)
		}
	}
}

// TestHeadersExchange: x-match all needs every bound header, x-match any
// one of them; the x- arguments themselves are not matched.
func TestHeadersExchange(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	ex := s.declareExchange(t, ch, "headers", "headers")
	qAll := s.declareQueue(t, ch, "all", false, nil)
	qAny := s.declareQueue(t, ch, "any", false, nil)
	if err := ch.QueueBind(qAll, "", ex, false, amqp.Table{"x-match": "all", "format": "pdf", "type": "report"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(qAny, "", ex, false, amqp.Table{"x-match": "any", "format": "pdf", "type": "log"}); err != nil {
		t.Fatal(err)
	}
	msgs := []struct {
		body    string
		headers amqp.Table
	}{
		{"pdf-report", amqp.Table{"format": "pdf", "type": "report"}},
		{"pdf-report-extra", amqp.Table{"format": "pdf", "type": "report", "lang": "en"}},
		{"pdf-only", amqp.Table{"format": "pdf"}},
		{"zip-log", amqp.Table{"format": "zip", "type": "log"}},
		{"zip-report", amqp.Table{"format": "zip", "type": "report"}},
		{"none", nil},
	}
	publish := confirmed(t, ch)
	for _, m := range msgs {
		p := text(m.body)
		p.Headers = m.headers
		publish(ex, "any.key", p)
	}
	if got, want := drain(t, ch, qAll), []string{"pdf-report", "pdf-report-extra"}; !slices.Equal(got, want) {
		t.Errorf("x-match all got %q, want %q", got, want)
	}
	if got, want := drain(t, ch, qAny), []string{"pdf-report", "pdf-report-extra", "pdf-only", "zip-log"}; !slices.Equal(got, want) {
		t.Errorf("x-match any got %q, want %q", got, want)
	}
}

// TestExchangeToExchange: exchange.bind makes a direct exchange forward
// matching messages to a fanout exchange and its queues; exchange.unbind
// stops it.
func TestExchangeToExchange(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	src := s.declareExchange(t, ch, "src", "direct")
	dst := s.declareExchange(t, ch, "dst", "fanout")
	q := s.declareQueue(t, ch, "q", false, nil)
	direct := s.declareQueue(t, ch, "direct", false, nil)
	if err := ch.QueueBind(q, "", dst, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(direct, "k", src, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeBind(dst, "k", src, false, nil); err != nil {
		t.Fatal(err)
	}
	publish := confirmed(t, ch)
	publish(src, "k", text("via-binding"))
	publish(src, "other", text("unrouted"))
	publish(dst, "whatever", text("direct-to-dst"))
	if got := drain(t, ch, q); !slices.Equal(got, []string{"via-binding", "direct-to-dst"}) {
		t.Errorf("queue behind the destination exchange got %q", got)
	}
	if got := drain(t, ch, direct); !slices.Equal(got, []string{"via-binding"}) {
		t.Errorf("queue bound to the source got %q", got)
	}
	if err := ch.ExchangeUnbind(dst, "k", src, false, nil); err != nil {
		t.Fatal(err)
	}
	publish(src, "k", text("after-unbind"))
	if got := drain(t, ch, q); len(got) != 0 {
		t.Errorf("after exchange.unbind the queue got %q", got)
	}
	if got := drain(t, ch, direct); !slices.Equal(got, []string{"after-unbind"}) {
		t.Errorf("after exchange.unbind the source's own queue got %q", got)
	}
}
