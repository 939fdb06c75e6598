package amqp091

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestRPC: a server consumes a request queue and answers to each
// request's reply_to with its correlation id; the client's reply queue is
// exclusive and server-named (amq.gen-...).
func TestRPC(t *testing.T) {
	s := sharedServer(t)
	srvCh := channel(t, s.dial(t))
	rpcQ := s.declareQueue(t, srvCh, "rpc", false, nil)
	reqs, err := srvCh.Consume(rpcQ, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { // the RPC server: upper-cases the body
		for {
			select {
			case <-ctx.Done():
				served <- nil
				return
			case d, ok := <-reqs:
				if !ok {
					served <- fmt.Errorf("request deliveries closed")
					return
				}
				err := srvCh.PublishWithContext(ctx, "", d.ReplyTo, false, false, amqp.Publishing{
					CorrelationId: d.CorrelationId, Body: []byte(strings.ToUpper(string(d.Body))),
				})
				if err == nil {
					err = d.Ack(false)
				}
				if err != nil {
					served <- err
					return
				}
			}
		}
	}()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()

	cli := channel(t, s.dial(t))
	reply, err := cli.QueueDeclare("", false, false, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(reply.Name, "amq.gen-") {
		t.Errorf("server-named queue %q does not start with amq.gen-", reply.Name)
	}
	replies, err := cli.Consume(reply.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		id := fmt.Sprintf("corr-%d", i)
		body := fmt.Sprintf("request %d", i)
		if err := cli.Publish("", rpcQ, false, false, amqp.Publishing{CorrelationId: id, ReplyTo: reply.Name, Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
		d := next(t, replies, "reply "+id)
		if d.CorrelationId != id || string(d.Body) != strings.ToUpper(body) {
			t.Fatalf("reply %q with correlation id %q, want %q / %q", d.Body, d.CorrelationId, strings.ToUpper(body), id)
		}
	}
}

// TestPublisherConfirms: every one of many publishes in confirm mode is
// acked, and the confirmations carry the sequence numbers 1..n in order
// (amqp091-go splits multiple=true acks into single ones).
func TestPublisherConfirms(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	q := s.declareQueue(t, ch, "confirms", false, nil)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	confs := ch.NotifyPublish(make(chan amqp.Confirmation, n))
	for i := 1; i <= n; i++ {
		if seq := ch.GetNextPublishSeqNo(); seq != uint64(i) {
			t.Fatalf("next sequence number %d, want %d", seq, i)
		}
		if err := ch.Publish("", q, false, false, text(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= n; i++ {
		select {
		case c := <-confs:
			if c.DeliveryTag != uint64(i) || !c.Ack {
				t.Fatalf("confirmation %d: tag %d ack %v", i, c.DeliveryTag, c.Ack)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("confirmation %d of %d missing after 10 s", i, n)
		}
	}
	if got, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil || got.Messages != n {
		t.Fatalf("queue after %d confirmed publishes: %+v, %v", n, got, err)
	}
}

// TestMandatoryReturn: a mandatory publish nobody can route comes back as
// basic.return 312 NO_ROUTE with its body, and (in confirm mode) is acked
// after it; a routable mandatory publish is not returned.
func TestMandatoryReturn(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	q := s.declareQueue(t, ch, "routable", false, nil)
	returns := ch.NotifyReturn(make(chan amqp.Return, 2))
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confs := ch.NotifyPublish(make(chan amqp.Confirmation, 2))
	nowhere := uniq(t, "nowhere")
	if err := ch.Publish("", nowhere, true, false, text("lost")); err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", q, true, false, text("kept")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-returns:
		if r.ReplyCode != 312 || r.ReplyText != "NO_ROUTE" || r.RoutingKey != nowhere || string(r.Body) != "lost" {
			t.Fatalf("return: code %d %q key %q body %q", r.ReplyCode, r.ReplyText, r.RoutingKey, r.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no basic.return within 10 s")
	}
	for i := 1; i <= 2; i++ {
		select {
		case c := <-confs:
			if c.DeliveryTag != uint64(i) || !c.Ack {
				t.Fatalf("confirmation %d: %+v", i, c)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("confirmation %d missing", i)
		}
	}
	select {
	case r := <-returns:
		t.Fatalf("a second return: %q", r.Body)
	default:
	}
	if got := drain(t, ch, q); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("routable queue: %q", got)
	}
}

// TestBasicGet: get-ok carries the messages left behind it; an empty
// queue answers get-empty; a get without ack is delivered again after a
// reject with requeue.
func TestBasicGet(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	q := s.declareQueue(t, ch, "get", false, nil)
	publish := confirmed(t, ch)
	for i := 1; i <= 3; i++ {
		publish("", q, text(fmt.Sprint(i)))
	}
	for i := 1; i <= 3; i++ {
		d, ok, err := ch.Get(q, false)
		if err != nil || !ok {
			t.Fatalf("get %d: ok %v err %v", i, ok, err)
		}
		if string(d.Body) != fmt.Sprint(i) || d.MessageCount != uint32(3-i) {
			t.Fatalf("get %d: body %q message-count %d", i, d.Body, d.MessageCount)
		}
		if i == 1 {
			if err := d.Reject(true); err != nil {
				t.Fatal(err)
			}
			d, ok, err = ch.Get(q, false)
			if err != nil || !ok || string(d.Body) != "1" || !d.Redelivered {
				t.Fatalf("get after reject+requeue: ok %v err %v body %q redelivered %v", ok, err, d.Body, d.Redelivered)
			}
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := ch.Get(q, false); err != nil || ok {
		t.Fatalf("get on an empty queue: ok %v err %v", ok, err)
	}
}

// TestNackRejectRecover: reject and nack without requeue drop the message;
// nack with requeue (also multiple) puts messages back in order, marked
// redelivered; basic.recover redelivers a channel's unacked messages.
func TestNackRejectRecover(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	q := s.declareQueue(t, ch, "nack", false, nil)
	publish := confirmed(t, ch)
	for i := 1; i <= 4; i++ {
		publish("", q, text(fmt.Sprint(i)))
	}
	cons := channel(t, s.dial(t))
	ds, err := cons.Consume(q, "c", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []amqp.Delivery
	for i := 1; i <= 4; i++ {
		got = append(got, next(t, ds, fmt.Sprint("message ", i)))
	}
	for i, d := range got {
		if string(d.Body) != fmt.Sprint(i+1) || d.Redelivered {
			t.Fatalf("delivery %d: %q redelivered %v", i+1, d.Body, d.Redelivered)
		}
	}
	if err := got[0].Reject(false); err != nil { // 1: dropped
		t.Fatal(err)
	}
	if err := got[1].Nack(false, false); err != nil { // 2: dropped
		t.Fatal(err)
	}
	if err := got[3].Nack(true, true); err != nil { // 3 and 4: back
		t.Fatal(err)
	}
	for _, want := range []string{"3", "4"} {
		d := next(t, ds, "requeued "+want)
		if string(d.Body) != want || !d.Redelivered {
			t.Fatalf("after nack+requeue: %q redelivered %v, want %s redelivered", d.Body, d.Redelivered, want)
		}
	}
	// Neither is acked: recover puts both back once more. RabbitMQ
	// deprecates basic.recover but clients still send it: it is tested.
	//lint:ignore SA1019 basic.recover is what this part checks
	if err := cons.Recover(true); err != nil {
		t.Fatal(err)
	}
	var again []string
	for range 2 {
		d := next(t, ds, "recovered")
		if !d.Redelivered {
			t.Fatalf("recovered %q without Redelivered", d.Body)
		}
		again = append(again, string(d.Body))
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(again)
	if !slices.Equal(again, []string{"3", "4"}) {
		t.Fatalf("after recover: %q", again)
	}
	// The channel's close comes after its acks: nothing is left to requeue.
	if err := cons.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil || got.Messages != 0 {
		t.Fatalf("queue at the end: %+v, %v (rejected and nacked messages must be gone, the others acked)", got, err)
	}
}

// TestTransactions: in tx mode, publishes reach the queue only at
// tx.commit; tx.rollback discards them.
func TestTransactions(t *testing.T) {
	s := sharedServer(t)
	conn := s.dial(t)
	ch := channel(t, conn)
	q := s.declareQueue(t, ch, "tx", false, nil)
	if err := ch.Tx(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"rolled-back-1", "rolled-back-2"} {
		if err := ch.Publish("", q, false, false, text(b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.TxRollback(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"committed-1", "committed-2"} {
		if err := ch.Publish("", q, false, false, text(b)); err != nil {
			t.Fatal(err)
		}
	}
	// Before the commit another channel sees nothing.
	other := channel(t, conn)
	if got, err := other.QueueDeclarePassive(q, false, false, false, false, nil); err != nil || got.Messages != 0 {
		t.Fatalf("before tx.commit: %+v, %v", got, err)
	}
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, other, q); !slices.Equal(got, []string{"committed-1", "committed-2"}) {
		t.Fatalf("after tx.commit: %q", got)
	}
}
