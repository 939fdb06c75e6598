package amqp

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/smartgo/smartgo/amqp/wire"
)

// TestInspectListsWhatClientsDeclared: queues, exchanges, bindings,
// connections and consumers as clients made them, with their counts.
func TestInspectListsWhatClientsDeclared(t *testing.T) {
	s, addr := startServer(t, Options{VirtualHosts: []string{"/", "other"}})
	c := dial(t, addr)
	c.openChannel(1)
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "events", Type: "topic", Durable: true})
	c.declareQueue(1, "work", wire.Table{"x-max-length": int32(100), "x-dead-letter-exchange": []byte("dlx")})
	c.bind(1, "work", "events", "a.#", nil)
	for i := range 5 {
		c.publish(1, "events", "a.b", fmt.Sprint("m", i))
	}
	c.publish(1, "events", "z", "unrouted")
	c.send(1, &wire.BasicQos{PrefetchCount: 2})
	expect[*wire.BasicQosOk](c)
	tag := c.consume(1, "work", "ctag", false)
	c.deliver()
	c.deliver()
	c.send(1, &wire.BasicAck{DeliveryTag: 1})
	c.deliver() // prefetch 2: the third once the first is acked
	waitFor(t, "one ack", func() bool { return s.Stats().Acked == 1 })

	qs, err := s.Queues("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 {
		t.Fatalf("queues %+v, want work alone", qs)
	}
	q := qs[0]
	want := QueueInfo{VHost: "/", Name: "work", Arguments: map[string]any{"x-max-length": int32(100), "x-dead-letter-exchange": "dlx"},
		Ready: 2, Unacked: 2, ReadyBytes: 4, Consumers: 1, Published: 5, Delivered: 3, Acked: 1}
	if !equal(q, want) {
		t.Fatalf("queue\n got %+v\nwant %+v", q, want)
	}
	xs, err := s.Exchanges("/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range xs {
		names = append(names, x.Name)
		if x.Name == "events" && (x.Type != "topic" || !x.Durable || x.Bindings != 1) {
			t.Fatalf("exchange %+v", x)
		}
	}
	if got := strings.Join(names, ","); got != ",amq.direct,amq.fanout,amq.headers,amq.match,amq.topic,events" {
		t.Fatalf("exchanges %s", got)
	}
	bs, err := s.Bindings("")
	if err != nil {
		t.Fatal(err)
	}
	if !equal(bs, []BindingInfo{{VHost: "/", Source: "events", Destination: "work", DestinationKind: "queue", RoutingKey: "a.#"}}) {
		t.Fatalf("bindings %+v", bs)
	}
	conns := s.Connections()
	if len(conns) != 1 || conns[0].Name != c.nc.LocalAddr().String() || conns[0].User != "guest" || conns[0].VHost != "/" ||
		conns[0].Channels != 1 || conns[0].Client != "test" || conns[0].ConnectedAt == 0 || conns[0].State != StateRunning {
		t.Fatalf("connections %+v (client at %s)", conns, c.nc.LocalAddr())
	}
	cs, err := s.Consumers("")
	if err != nil {
		t.Fatal(err)
	}
	if !equal(cs, []ConsumerInfo{{VHost: "/", Queue: "work", Tag: tag, Connection: conns[0].Name, Channel: 1,
		AckRequired: true, Prefetch: 2, Unacked: 2}}) {
		t.Fatalf("consumers %+v", cs)
	}
	if qs, err := s.Queues("other"); err != nil || len(qs) != 0 {
		t.Fatalf("vhost other: %+v %v", qs, err)
	}
	if _, err := s.Queues("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown vhost: %v", err)
	}
}

// TestPurgeQueueAndCloseConnection: an operator's purge drops the ready
// messages and leaves the unacked ones; closing a connection sends 320
// with the reason and requeues what it had not acked.
func TestPurgeQueueAndCloseConnection(t *testing.T) {
	s, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	c.declareQueue(1, "q", nil)
	for i := range 4 {
		c.publish(1, "", "q", fmt.Sprint("m", i))
	}
	if _, _, ok := c.get(1, "q", false); !ok {
		t.Fatal("get-empty")
	}
	if n, err := s.PurgeQueue("/", "q"); err != nil || n != 3 {
		t.Fatalf("purge: %d %v, want 3", n, err)
	}
	if _, err := s.PurgeQueue("/", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("purge of a missing queue: %v", err)
	}
	if _, err := s.PurgeQueue("nope", "q"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("purge in a missing vhost: %v", err)
	}
	if err := s.CloseConnection("127.0.0.1:1", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("close of a missing connection: %v", err)
	}
	if err := s.CloseConnection(c.nc.LocalAddr().String(), "maintenance"); err != nil {
		t.Fatal(err)
	}
	cl := c.expectConnClose(wire.ConnectionForced)
	if cl.ReplyText != "CONNECTION_FORCED - maintenance" {
		t.Fatalf("reply text %q", cl.ReplyText)
	}
	waitFor(t, "the connection gone and its delivery requeued", func() bool {
		qs, _ := s.Queues("/")
		return len(s.Connections()) == 0 && len(qs) == 1 && qs[0].Ready == 1 && qs[0].Unacked == 0
	})
}

// TestInspectBesideTraffic calls every view while clients publish,
// consume and come and go (run with -race).
func TestInspectBesideTraffic(t *testing.T) {
	s, addr := startServer(t, Options{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 3 {
		c := dial(t, addr)
		c.openChannel(1)
		name := fmt.Sprint("q", w)
		c.declareQueue(1, name, nil)
		c.consume(1, name, "", true)
		wg.Add(2)
		go func() {
			defer wg.Done()
			io.Copy(io.Discard, c.nc) // the deliveries, until the test closes the socket
		}()
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.nc.Write(publishFrames(1, "", name, wire.Properties{}, []byte("x"), false)); err != nil {
					return
				}
				if i%50 == 0 {
					s.PurgeQueue("/", name)
				}
			}
		}()
		t.Cleanup(func() { c.nc.Close() })
	}
	deliveredBefore := s.Stats().Delivered
	for range 200 {
		if _, err := s.Queues(""); err != nil {
			t.Fatal(err)
		}
		s.Exchanges("")
		s.Bindings("")
		s.Consumers("")
		s.Connections()
	}
	waitFor(t, "traffic beside the views", func() bool { return s.Stats().Delivered > deliveredBefore+100 })
	close(stop)
	s.Close() // closes the sockets: the readers end
	wg.Wait()
}
