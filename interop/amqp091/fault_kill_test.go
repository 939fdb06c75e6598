package amqp091

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/smartgo/smartgo/internal/testutil"
)

// confirmWindow is how many publishes a faultPublisher keeps unconfirmed.
const confirmWindow = 500

// faultPublisher publishes distinct bodies (prefix-seq) in confirm mode
// with up to confirmWindow unconfirmed, until its connection fails or
// stop is called, and notes each body the server acked and each it
// nacked. Even sequence numbers are persistent, odd ones transient.
type faultPublisher struct {
	mu     sync.Mutex
	acked  []string // protected by mu
	nacked []string // protected by mu
	err    error    // protected by mu; what ended it
	// unconfirmed is how many publishes had neither ack nor nack 60 s
	// after stop, with the connection open (a hang); protected by mu.
	unconfirmed int
	stopped     chan struct{}
	done        chan struct{}
}

func startFaultPublisher(t *testing.T, url, exchange, key, prefix string) *faultPublisher {
	t.Helper()
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		t.Fatalf("publisher %s: dial: %v", prefix, err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("publisher %s: channel: %v", prefix, err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("publisher %s: confirm.select: %v", prefix, err)
	}
	p := &faultPublisher{stopped: make(chan struct{}), done: make(chan struct{})}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, confirmWindow+1))
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	window := make(chan string, confirmWindow) // bodies in publish order, unconfirmed
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // confirms come in publish order (delivery tags 1, 2, ...)
		defer wg.Done()
		for c := range confirms {
			body := <-window
			p.mu.Lock()
			if c.Ack {
				p.acked = append(p.acked, body)
			} else {
				p.nacked = append(p.nacked, body)
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		defer close(p.done)
		defer wg.Wait()
		defer conn.Close()
		for seq := 0; ; seq++ {
			body := fmt.Sprintf("%s-%06d", prefix, seq)
			select {
			case window <- body:
			case <-p.stopped:
				p.end(errors.New("stopped"))
				// Wait for the confirms of what was published, unless the
				// connection fails first.
				deadline := time.After(60 * time.Second)
				for len(window) > 0 {
					select {
					case e := <-closed:
						p.end(e)
						return
					case <-deadline:
						p.mu.Lock()
						p.unconfirmed = len(window)
						p.mu.Unlock()
						return
					case <-time.After(10 * time.Millisecond): // the window has no wake-up: look again
					}
				}
				return
			case e := <-closed:
				p.end(e)
				return
			}
			mode := amqp.Transient
			if seq%2 == 0 {
				mode = amqp.Persistent
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := ch.PublishWithContext(ctx, exchange, key, false, false, amqp.Publishing{DeliveryMode: mode, Body: []byte(body)})
			cancel()
			if err != nil {
				p.end(err)
				return
			}
		}
	}()
	return p
}

func (p *faultPublisher) end(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
}

// stop ends the publisher (if its connection has not failed already)
// and waits until the confirms of what it published are in (at most 60
// s: see unconfirmed).
func (p *faultPublisher) stop() {
	select {
	case <-p.stopped:
	default:
		close(p.stopped)
	}
	<-p.done
}

func (p *faultPublisher) counts() (acked, nacked int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked), len(p.nacked)
}

// faultConsumer consumes a queue with manual acks, acking each delivery,
// and notes the bodies whose ack was written.
type faultConsumer struct {
	mu    sync.Mutex
	acked map[string]int // protected by mu
	done  chan struct{}
}

func startFaultConsumer(t *testing.T, url, queue string) *faultConsumer {
	t.Helper()
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		t.Fatalf("consumer: dial: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("consumer: channel: %v", err)
	}
	if err := ch.Qos(100, 0, false); err != nil {
		t.Fatalf("consumer: qos: %v", err)
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("consumer: consume: %v", err)
	}
	c := &faultConsumer{acked: map[string]int{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer conn.Close()
		for d := range ds { // ends when the connection fails
			if d.Ack(false) != nil {
				return
			}
			c.mu.Lock()
			c.acked[string(d.Body)]++
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *faultConsumer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.acked)
}

// TestFaultKill9UnderLoad: three amqp091-go publishers in confirm mode
// (window 500, persistent and transient messages) publish through a
// durable topic exchange into two durable queues (one consumed by an
// acking consumer, one not) while a consumer acks; the standalone is
// killed with SIGKILL at a random point and started again on its data.
// Every message the server confirmed must be there after the restart
// (in the unconsumed queue), or there or acked before the kill (in the
// consumed one): duplicates allowed and counted, losses never. The
// durable exchange, queues and bindings are back; the non-durable
// exchange and queue are gone.
func TestFaultKill9UnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a process under load")
	}
	s := ownServer(t)
	conn := s.dial(t)
	ch := channel(t, conn)
	x, xt := uniq(t, "dx"), uniq(t, "tx")
	qc, qk, qt := uniq(t, "consumed"), uniq(t, "kept"), uniq(t, "transient")
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("declare the durable exchange", ch.ExchangeDeclare(x, "topic", true, false, false, false, nil))
	must("declare the transient exchange", ch.ExchangeDeclare(xt, "fanout", false, false, false, false, nil))
	for _, q := range []string{qc, qk} {
		_, err := ch.QueueDeclare(q, true, false, false, false, nil)
		must("declare durable queue "+q, err)
		must("bind "+q, ch.QueueBind(q, "load.#", x, false, nil))
	}
	_, err := ch.QueueDeclare(qt, false, false, false, false, nil)
	must("declare the non-durable queue", err)
	must("bind the non-durable queue", ch.QueueBind(qt, "load.#", x, false, nil))
	must("exchange-to-exchange binding", ch.ExchangeBind(xt, "", x, false, nil))
	_ = conn.Close()

	url := s.url
	cons := startFaultConsumer(t, url, qc)
	var pubs []*faultPublisher
	for i := range 3 {
		pubs = append(pubs, startFaultPublisher(t, url, x, "load.k", fmt.Sprintf("p%d", i)))
	}
	// Kill at a random point once the load runs: after 1000 to 10000
	// confirms.
	killAt := 1000 + rand.IntN(9000)
	confirmedTotal := func() int {
		n := 0
		for _, p := range pubs {
			a, _ := p.counts()
			n += a
		}
		return n
	}
	testutil.WaitFor(t, 120*time.Second, fmt.Sprintf("%d confirms", killAt), func() bool { return confirmedTotal() >= killAt })
	if cons.count() == 0 {
		testutil.WaitFor(t, 30*time.Second, "a consumed message", func() bool { return cons.count() > 0 })
	}
	s.proc.kill9()
	for _, p := range pubs {
		p.stop()
	}
	<-cons.done

	confirmedBodies := map[string]bool{}
	nacked := 0
	for _, p := range pubs {
		p.mu.Lock()
		for _, b := range p.acked {
			confirmedBodies[b] = true
		}
		nacked += len(p.nacked)
		p.mu.Unlock()
	}
	cons.mu.Lock()
	ackedBefore := cons.acked
	cons.mu.Unlock()

	if err := s.proc.start(); err != nil {
		t.Fatal(err)
	}
	conn = s.dial(t)
	ch = channel(t, conn)
	// Definitions: the durable ones back, the others gone.
	if err := ch.ExchangeDeclarePassive(x, "topic", true, false, false, false, nil); err != nil {
		t.Fatalf("durable exchange after the restart: %v", err)
	}
	for _, q := range []string{qc, qk} {
		if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil {
			t.Fatalf("durable queue %s after the restart: %v", q, err)
		}
	}
	if err := ch.ExchangeDeclarePassive(xt, "fanout", false, false, false, false, nil); errCode(err) != amqp.NotFound {
		t.Fatalf("non-durable exchange after the restart: %v, want 404", err)
	}
	ch = channel(t, conn)
	if _, err := ch.QueueDeclarePassive(qt, false, false, false, false, nil); errCode(err) != amqp.NotFound {
		t.Fatalf("non-durable queue after the restart: %v, want 404", err)
	}

	kept := consumeAllAck(t, s, qk)
	consumed := consumeAllAck(t, s, qc)
	dupKept, dupConsumed := 0, 0
	var lostKept, lostConsumed []string
	for b := range confirmedBodies {
		switch n := kept[b]; {
		case n == 0:
			lostKept = append(lostKept, b)
		case n > 1:
			dupKept += n - 1
		}
		n := consumed[b] + ackedBefore[b]
		switch {
		case n == 0:
			lostConsumed = append(lostConsumed, b)
		case n > 1:
			dupConsumed += n - 1
		}
	}
	t.Logf("killed after %d confirms (%d nacked); after the restart: kept queue %d messages (%d duplicates), consumed queue %d acked before the kill + %d after (%d duplicates)",
		len(confirmedBodies), nacked, len(kept), dupKept, len(ackedBefore), len(consumed), dupConsumed)
	if len(lostKept) > 0 || len(lostConsumed) > 0 {
		t.Fatalf("confirmed messages lost: %d from the unconsumed queue (e.g. %q), %d from the consumed one (e.g. %q)",
			len(lostKept), first(lostKept), len(lostConsumed), first(lostConsumed))
	}

	// The bindings are back: a confirmed publish reaches both durable
	// queues, and the durable exchange still serves.
	ch = channel(t, conn)
	publish := confirmed(t, ch)
	publish(x, "load.after", amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("after")})
	for _, q := range []string{qc, qk} {
		if got := drain(t, ch, q); len(got) != 1 || got[0] != "after" {
			t.Fatalf("queue %s after a publish through the recovered binding: %q", q, got)
		}
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// consumeAllAck takes every message in queue (the count its passive
// declare answers) with a consumer that acks them, and counts each body.
func consumeAllAck(t *testing.T, s *server, queue string) map[string]int {
	t.Helper()
	conn := s.dial(t)
	defer conn.Close()
	ch := channel(t, conn)
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(500, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for range q.Messages {
		d := next(t, ds, "message of "+queue)
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
		out[string(d.Body)]++
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}
