package amqp091

import (
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestChannelErrors: each soft error closes the channel (not the
// connection) with RabbitMQ's reply code, and a new channel on the same
// connection works afterwards; the hard ones (530, 540, 503) close the
// connection with their code.
func TestChannelErrors(t *testing.T) {
	s := sharedServer(t)
	conn := s.dial(t)
	setup := channel(t, conn)
	durableQ := s.declareQueue(t, setup, "durable", true, nil)

	other := s.dial(t)
	owner := channel(t, other)
	excl, err := owner.QueueDeclare(uniq(t, "exclusive"), false, false, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}

	consumed := s.declareQueue(t, setup, "consumed", false, nil)
	if _, err := setup.Consume(consumed, "", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	direct := s.declareExchange(t, setup, "direct", "direct")

	cases := []struct {
		name string
		code int
		do   func(ch *amqp.Channel) error
	}{
		{"passive declare of a missing queue", amqp.NotFound, func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclarePassive(uniq(t, "missing"), false, false, false, false, nil)
			return err
		}},
		{"exclusive queue of another connection", amqp.ResourceLocked, func(ch *amqp.Channel) error {
			_, err := ch.Consume(excl.Name, "", true, false, false, false, nil)
			return err
		}},
		{"redeclare with another durability", amqp.PreconditionFailed, func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclare(durableQ, false, false, false, false, nil)
			return err
		}},
		{"publish to a missing exchange", amqp.NotFound, func(ch *amqp.Channel) error {
			// basic.publish has no reply: the error is the channel's close.
			return ch.Publish(uniq(t, "no-exchange"), "k", false, false, text("x"))
		}},
		{"ack of an unknown delivery tag", amqp.PreconditionFailed, func(ch *amqp.Channel) error {
			return ch.Ack(999, false)
		}},
		{"bind to a missing exchange", amqp.NotFound, func(ch *amqp.Channel) error {
			return ch.QueueBind(durableQ, "k", uniq(t, "no-exchange"), false, nil)
		}},
		{"declare of an amq. exchange", amqp.AccessRefused, func(ch *amqp.Channel) error {
			return ch.ExchangeDeclare("amq.smartgo-test", "direct", false, false, false, false, nil)
		}},
		{"exclusive consume of a queue with a consumer", amqp.AccessRefused, func(ch *amqp.Channel) error {
			_, err := ch.Consume(consumed, "", false, true, false, false, nil)
			return err
		}},
		{"redeclare of an exchange with another type", amqp.PreconditionFailed, func(ch *amqp.Channel) error {
			return ch.ExchangeDeclare(direct, "fanout", false, false, false, false, nil)
		}},
		{"bind to the default exchange", amqp.AccessRefused, func(ch *amqp.Channel) error {
			return ch.QueueBind(durableQ, "k", "", false, nil)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch := channel(t, conn)
			closed := ch.NotifyClose(make(chan *amqp.Error, 1))
			err := c.do(ch)
			if err != nil && errCode(err) != c.code {
				t.Fatalf("error %v, want reply code %d", err, c.code)
			}
			if code := closeCode(t, closed, c.name); code != c.code {
				t.Fatalf("channel closed with %d, want %d", code, c.code)
			}
			if conn.IsClosed() {
				t.Fatal("a channel error closed the connection")
			}
			// The connection survives: a new channel works.
			ok := channel(t, conn)
			q := s.declareQueue(t, ok, "after", false, nil)
			publish := confirmed(t, ok)
			publish("", q, text("still here"))
			if got := drain(t, ok, q); !slices.Equal(got, []string{"still here"}) {
				t.Fatalf("after the channel error: %q", got)
			}
			_ = ok.Close()
		})
	}

	// The hard errors of the spec close the whole connection.
	hard := []struct {
		name string
		code int
		do   func(ch *amqp.Channel) error
	}{
		{"a consumer tag twice on a channel", amqp.NotAllowed, func(ch *amqp.Channel) error {
			if _, err := ch.Consume(durableQ, "twice", false, false, false, false, nil); err != nil {
				return err
			}
			_, err := ch.Consume(durableQ, "twice", false, false, false, false, nil)
			return err
		}},
		{"basic.recover without requeue", amqp.NotImplemented, func(ch *amqp.Channel) error {
			//lint:ignore SA1019 basic.recover is what this case checks
			return ch.Recover(false)
		}},
		{"an unknown exchange type", amqp.CommandInvalid, func(ch *amqp.Channel) error {
			return ch.ExchangeDeclare(uniq(t, "weird"), "no-such-type", false, false, false, false, nil)
		}},
	}
	for _, c := range hard {
		t.Run(c.name, func(t *testing.T) {
			victim := s.dial(t)
			closed := victim.NotifyClose(make(chan *amqp.Error, 1))
			err := c.do(channel(t, victim))
			if err != nil && errCode(err) != c.code {
				t.Fatalf("error %v, want reply code %d", err, c.code)
			}
			if code := closeCode(t, closed, c.name); code != c.code {
				t.Fatalf("connection closed with %d, want %d", code, c.code)
			}
		})
	}
}

// TestExclusiveQueueGoesWithItsConnection: an exclusive queue is deleted
// when the connection that declared it closes.
func TestExclusiveQueueGoesWithItsConnection(t *testing.T) {
	s := sharedServer(t)
	owner := s.dial(t)
	q, err := channel(t, owner).QueueDeclare(uniq(t, "exclusive"), false, false, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	// RabbitMQ deletes it once it notices the connection gone, not
	// before close-ok: wait for the 404.
	conn := s.dial(t)
	var err2 error
	testutil.WaitFor(t, 10*time.Second, "the exclusive queue to be gone", func() bool {
		ch := channel(t, conn)
		_, err2 = ch.QueueDeclarePassive(q.Name, false, false, true, false, nil)
		if err2 == nil {
			_ = ch.Close()
		}
		return err2 != nil
	})
	if errCode(err2) != amqp.NotFound {
		t.Fatalf("passive declare of the closed connection's exclusive queue: %v, want 404", err2)
	}
}

// TestHeaderLargerThanConsumerFrameMax: a message with 6000 bytes of
// headers, published on a connection with the default frame_max, is
// consumed on a connection that asked frame_max 4096. amqp091-go drops a
// connection that receives a frame over its frame_max (RabbitMQ 3.10
// writes the frame: "frame size exceeds negotiated frame_max", 501, and
// so skips this test); SmartGo never writes it: the consumer's channel
// closes with 406 PRECONDITION_FAILED, its connection stays up, and the
// message is delivered to a consumer whose frame_max fits it.
func TestHeaderLargerThanConsumerFrameMax(t *testing.T) {
	if externalURL != "" {
		t.Skip("RabbitMQ writes the oversized frame and the client closes its connection; SmartGo's answer is its own")
	}
	s := sharedServer(t)
	pubc := s.dial(t)
	pch := channel(t, pubc)
	big := strings.Repeat("h", 6000)
	plain := uniq(t, "bigheader")
	if _, err := pch.QueueDeclare(plain, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = channel(t, s.dial(t)).QueueDelete(plain, false, false, false) })
	if err := pch.Publish("", plain, false, false, amqp.Publishing{Headers: amqp.Table{"big": big}, Body: []byte("big-header")}); err != nil {
		t.Fatal(err)
	}

	small := s.dialConfig(t, amqp.Config{FrameSize: 4096})
	connClosed := small.NotifyClose(make(chan *amqp.Error, 1))
	sch := channel(t, small)
	chClosed := sch.NotifyClose(make(chan *amqp.Error, 1))
	if _, err := sch.Consume(plain, "", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-chClosed:
		if e == nil || e.Code != amqp.PreconditionFailed || !strings.Contains(e.Reason, "frame_max 4096") {
			t.Fatalf("consumer channel closed with %v, want 406 naming frame_max 4096", e)
		}
	case e := <-connClosed:
		t.Fatalf("the small-frame connection closed: %v", e)
	case <-time.After(10 * time.Second):
		t.Fatal("no channel.close for a message over the consumer's frame_max")
	}
	if small.IsClosed() {
		t.Fatal("the small-frame connection closed with its channel")
	}
	ch2 := channel(t, small)
	if n, err := ch2.QueueDeclarePassive(plain, false, false, false, false, nil); err != nil || n.Messages != 1 {
		t.Fatalf("passive declare on the small-frame connection: %+v, %v; want the message still there", n, err)
	}

	ds, err := pch.Consume(plain, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := next(t, ds, "the big-header message")
	if string(d.Body) != "big-header" || d.Headers["big"] != big {
		t.Fatalf("delivered %q, want the big-header message with its header", d.Body)
	}
}
