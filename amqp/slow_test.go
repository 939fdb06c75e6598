package amqp

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/smartgo/smartgo/amqp/wire"
)

// TestSlowConsumerDoesNotStall: a no-ack consumer that stops reading
// holds up neither the other consumer of its queue, nor another queue's
// consumer, nor the publisher: its deliveries stop at its connection's
// outbound limit and the queue gives the rest to the other consumer.
func TestSlowConsumerDoesNotStall(t *testing.T) {
	const n, size = 1500, 16 << 10
	s, addr := startServer(t, Options{})
	setup := dial(t, addr)
	setup.openChannel(1)
	setup.declareQueue(1, "q1", nil)
	setup.declareQueue(1, "q2", nil)

	slow := dialRaw(t, addr)
	slow.nc.(interface{ SetReadBuffer(int) error }).SetReadBuffer(4096)
	if err := slow.handshake("guest", "guest", "/", 0); err != nil {
		t.Fatal(err)
	}
	slow.openChannel(1)
	slow.consume(1, "q1", "slow", true) // and never reads again

	counter := func(q string) (*tclient, chan int) {
		c := dial(t, addr)
		c.openChannel(1)
		c.consume(1, q, "fast", true)
		got := make(chan int, 1)
		go func() {
			k := 0
			for k < n {
				m, err := c.read()
				if err != nil {
					break
				}
				if _, ok := m.m.(*wire.BasicDeliver); ok {
					k++
				}
				if k == n/2 {
					got <- k // half way: the test checks the rest
				}
			}
			got <- k
		}()
		return c, got
	}
	fast1, got1 := counter("q1")
	_, got2 := counter("q2")

	pub := dial(t, addr)
	pub.openChannel(1)
	body := bytes.Repeat([]byte("x"), size)
	var frames []byte
	for i := range n {
		frames = append(frames[:0], publishFrames(1, "", "q1", wire.Properties{MessageID: fmt.Sprint(i)}, body, false)...)
		frames = append(frames, publishFrames(1, "", "q2", wire.Properties{}, body, false)...)
		pub.write(frames)
	}
	// The publisher got through all of it: a round trip answers.
	call[*wire.QueueDeclareOk](pub, 1, &wire.QueueDeclare{Queue: "q1", Passive: true})
	if k := <-got2; k != n/2 {
		t.Fatalf("q2 consumer: %d", k)
	}
	if k := <-got2; k != n {
		t.Fatalf("q2's consumer got %d of %d", k, n)
	}
	<-got1
	// q1's fast consumer gets everything the slow one could not take:
	// the slow one holds at most its socket buffers plus the outbound
	// limit.
	waitFor(t, "q1 drained", func() bool { return s.Stats().MessagesReady == 0 })
	st := s.Stats()
	if st.Delivered < 2*n {
		t.Fatalf("delivered %d, want %d", st.Delivered, 2*n)
	}
	fast1.nc.Close()
	k := <-got1
	if n-k >= n/3 || k == n {
		t.Fatalf("q1's fast consumer got %d of %d (the slow one should hold a few, not most)", k, n)
	}
	t.Logf("slow consumer took %d of %d", n-k, n)
}
