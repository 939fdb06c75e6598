package amqp091

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestPropertiesRoundTrip: every basic property, and a headers table with
// every field type amqp091-go writes (nested tables and arrays among
// them), arrive at a consumer and through basic.get exactly as published.
func TestPropertiesRoundTrip(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	q := s.declareQueue(t, ch, "props", false, nil)
	ts := time.Date(2026, 11, 29, 12, 30, 45, 0, time.UTC)
	headers := amqp.Table{
		"bool":    true,
		"int8":    int8(-8),
		"uint8":   uint8(200),
		"int16":   int16(-1600),
		"uint16":  uint16(60000),
		"int32":   int32(-320000),
		"uint32":  uint32(4000000000),
		"int64":   int64(-1) << 40,
		"float32": float32(1.5),
		"float64": 2.25,
		"decimal": amqp.Decimal{Scale: 2, Value: 12345},
		"string":  "Grüße, 世界",
		"bytes":   []byte{0, 1, 2, 255},
		"time":    time.Unix(ts.Unix(), 0), // amqp091-go decodes timestamps in time.Local
		"void":    nil,
		"array":   []any{"a", int32(1), true, amqp.Table{"in": "array"}},
		"table":   amqp.Table{"nested": amqp.Table{"deep": int64(7)}, "list": []any{int64(1), int64(2)}},
	}
	msg := amqp.Publishing{
		Headers:         headers,
		ContentType:     "application/json",
		ContentEncoding: "gzip",
		DeliveryMode:    amqp.Persistent,
		Priority:        5,
		CorrelationId:   "corr-1",
		ReplyTo:         "reply.here",
		Expiration:      "600000",
		MessageId:       "msg-1",
		Timestamp:       ts,
		Type:            "order.created",
		UserId:          "guest", // RabbitMQ checks it against the login: the harness logs in as guest
		AppId:           "interop-test",
		Body:            []byte(`{"ok":true}`),
	}
	publish := confirmed(t, ch)
	publish("", q, msg)
	publish("", q, msg)
	check := func(how string, d amqp.Delivery) {
		t.Helper()
		if !reflect.DeepEqual(d.Headers, headers) {
			for k, v := range headers {
				if !reflect.DeepEqual(d.Headers[k], v) {
					t.Errorf("%s: header %q = %#v (%T), want %#v (%T)", how, k, d.Headers[k], d.Headers[k], v, v)
				}
			}
			if len(d.Headers) != len(headers) {
				t.Errorf("%s: %d headers, want %d: %#v", how, len(d.Headers), len(headers), d.Headers)
			}
		}
		got := []any{d.ContentType, d.ContentEncoding, d.DeliveryMode, d.Priority, d.CorrelationId, d.ReplyTo,
			d.Expiration, d.MessageId, d.Timestamp.UTC(), d.Type, d.UserId, d.AppId, string(d.Body)}
		want := []any{msg.ContentType, msg.ContentEncoding, msg.DeliveryMode, msg.Priority, msg.CorrelationId, msg.ReplyTo,
			msg.Expiration, msg.MessageId, msg.Timestamp, msg.Type, msg.UserId, msg.AppId, string(msg.Body)}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: properties\n got %v\nwant %v", how, got, want)
		}
	}
	d, ok, err := ch.Get(q, true)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	check("basic.get", d)
	ds, err := ch.Consume(q, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("basic.deliver", next(t, ds, "props"))
}

// TestBodySizes: a 1 MiB body (eight 128 KiB frames and more), a body of
// exactly one frame's payload and an empty body (no body frame) arrive
// byte for byte, in order.
func TestBodySizes(t *testing.T) {
	s := sharedServer(t)
	conn := s.dial(t)
	ch := channel(t, conn)
	q := s.declareQueue(t, ch, "sizes", false, nil)
	frameMax := conn.Config.FrameSize
	if frameMax <= 0 || frameMax >= 1<<20 {
		t.Fatalf("negotiated frame-max %d: the 1 MiB body would not span frames", frameMax)
	}
	bodies := [][]byte{
		patterned(1 << 20),
		patterned(frameMax - 8), // one body frame filled to the limit
		patterned(frameMax - 7), // one byte more: two frames
		{},
		patterned(3*(1<<20) + 17),
	}
	publish := confirmed(t, ch)
	for _, b := range bodies {
		publish("", q, amqp.Publishing{Body: b})
	}
	ds, err := ch.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range bodies {
		d := next(t, ds, fmt.Sprintf("body %d (%d bytes)", i, len(b)))
		if !bytes.Equal(d.Body, b) {
			t.Fatalf("body %d: got %d bytes, want %d (equal prefix %d)", i, len(d.Body), len(b), commonPrefix(d.Body, b))
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
}

func patterned(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestQueueCountsPurgeDelete: declare-ok counts messages and consumers,
// purge answers how many it removed, and deleting a queue with a consumer
// sends that consumer basic.cancel (NotifyCancel) and answers the count
// of messages deleted.
func TestQueueCountsPurgeDelete(t *testing.T) {
	s := sharedServer(t)
	ch := channel(t, s.dial(t))
	q := s.declareQueue(t, ch, "counts", false, nil)
	publish := confirmed(t, ch)
	for i := range 5 {
		publish("", q, text(fmt.Sprint(i)))
	}
	if got, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil || got.Messages != 5 || got.Consumers != 0 {
		t.Fatalf("declare-ok: %+v, %v; want 5 messages, 0 consumers", got, err)
	}
	if n, err := ch.QueuePurge(q, false); err != nil || n != 5 {
		t.Fatalf("purge: %d, %v; want 5", n, err)
	}
	if got, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil || got.Messages != 0 {
		t.Fatalf("after purge: %+v, %v", got, err)
	}

	cons := channel(t, s.dial(t))
	cancels := cons.NotifyCancel(make(chan string, 1))
	if err := cons.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := cons.Consume(q, "doomed", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		publish("", q, text(fmt.Sprint(i)))
	}
	next(t, ds, "first message") // held unacked; 2 stay ready
	if got, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil || got.Messages != 2 || got.Consumers != 1 {
		t.Fatalf("declare-ok with a consumer: %+v, %v; want 2 ready, 1 consumer", got, err)
	}
	n, err := ch.QueueDelete(q, false, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 { // RabbitMQ counts the ready messages, not the unacked one
		t.Errorf("delete-ok message count %d, want 2 (the ready ones)", n)
	}
	select {
	case tag := <-cancels:
		if tag != "doomed" {
			t.Fatalf("basic.cancel for %q, want doomed", tag)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no basic.cancel within 10 s of deleting the consumed queue")
	}
	// The delivery channel ends after the cancel.
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ds:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("deliveries of the cancelled consumer did not end")
		}
	}
}
