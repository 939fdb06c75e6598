package client

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/smartgo/smartgo/store/record"
)

// batchProducer is a Producer with what prepareBatch uses, without
// connections.
func batchProducer() *Producer {
	opts := ProducerOptions{}
	opts.fill()
	return &Producer{opts: opts, ids: record.NewUniqueIDGenerator(netip.MustParseAddr("127.0.0.1"), 1)}
}

func batchMessages(n, size int) []*Message {
	msgs := make([]*Message, n)
	for i := range msgs {
		body := bytes.Repeat([]byte{byte('a' + i%26)}, size+i%7)
		msgs[i] = &Message{Topic: "T", Body: body, Tags: "t", Flag: int32(i)}
	}
	return msgs
}

// TestPrepareBatchBodyInOneBuffer: a batch's body holds every message's
// item (flag, body, properties with its unique ID) in order, in one
// buffer of exactly its size; a batch over the size limit is refused
// before it is built.
func TestPrepareBatchBodyInOneBuffer(t *testing.T) {
	p := batchProducer()
	msgs := batchMessages(150, 180)
	pm, _, err := p.prepareBatch(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(pm.body) != cap(pm.body) {
		t.Fatalf("body of %d bytes in a buffer of %d", len(pm.body), cap(pm.body))
	}
	i := 0
	err = record.ForEachBatchItem(pm.body, func(it record.BatchItem) error {
		m := msgs[i]
		if it.Flag != m.Flag || !bytes.Equal(it.Body, m.Body) {
			return fmt.Errorf("item %d: flag %d body %q, want %d %q", i, it.Flag, it.Body, m.Flag, m.Body)
		}
		props, err := record.ParseProperties(string(it.Properties))
		if err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
		tags, _ := props.Get(record.PropertyTags)
		if id, ok := props.Get(record.PropertyUniqueClientMessageIDKeyIndex); tags != "t" || !ok || id == "" {
			return fmt.Errorf("item %d: properties %q", i, it.Properties)
		}
		i++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if i != len(msgs) {
		t.Fatalf("%d items, want %d", i, len(msgs))
	}
	p.opts.MaxMessageSize = len(pm.body) - 1
	if _, _, err := p.prepareBatch(msgs); !errors.Is(err, ErrBadMessage) {
		t.Fatalf("a batch one byte over the limit: %v, want ErrBadMessage", err)
	}
}

// BenchmarkPrepareBatch encodes a batch as the AMQP bridge's durable
// queues send them: 150 messages of ~180 bytes.
func BenchmarkPrepareBatch(b *testing.B) {
	p := batchProducer()
	msgs := batchMessages(150, 180)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := p.prepareBatch(msgs); err != nil {
			b.Fatal(err)
		}
	}
}
