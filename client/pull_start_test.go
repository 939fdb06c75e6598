package client

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
)

// takesNothing allocates its member no queue.
type takesNothing struct{}

func (takesNothing) Name() string { return "NONE" }

func (takesNothing) Allocate(string, []MessageQueue, []string) []MessageQueue { return nil }

// StartOffsets replace the group's stored offsets before the consumer
// takes a queue: a queue it is assigned only later (here once another
// member, which held back part of the queues, left) starts there too, not
// at the group's older offsets or at ConsumeFrom's position.
func TestClientPullConsumerStartOffsets(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "TopicSO", 2)
	p := newTestProducer(t, c, nil)
	sent := sendN(t, p, "TopicSO", "so", 10)
	opts := func(mod func(*PullConsumerOptions)) PullConsumerOptions {
		o := PullConsumerOptions{ConsumerOptions: ConsumerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()},
			Group: "gSO", From: ConsumeFromFirst, PullSuspend: time.Second, RebalanceInterval: time.Second}}
		mod(&o)
		return o
	}

	// The group's old offsets: 1 on each queue.
	old, err := NewPullConsumer(opts(func(o *PullConsumerOptions) { o.ManualOffsets = true }))
	if err != nil {
		t.Fatal(err)
	}
	qs, err := old.Queues(testCtx(t, 5*time.Second), "TopicSO")
	if err != nil || len(qs) != 2 {
		t.Fatalf("queues %v %v", qs, err)
	}
	if err := old.Assign(qs); err != nil {
		t.Fatal(err)
	}
	if err := old.Start(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, mq := range qs {
		old.MarkConsumed(mq, 1)
	}
	if err := old.Commit(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	old.Close()

	// A member that holds back part of the queues while it is there.
	other, err := NewPullConsumer(opts(func(o *PullConsumerOptions) { o.Strategy = takesNothing{} }))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Subscribe("TopicSO", "*"); err != nil {
		t.Fatal(err)
	}
	if err := other.Start(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	start := map[MessageQueue]int64{qs[0]: 2, qs[1]: 3}
	pc, err := NewPullConsumer(opts(func(o *PullConsumerOptions) { o.StartOffsets = start }))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := pc.Subscribe("TopicSO", "*"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for mq, want := range start {
		if off, err := pc.Committed(testCtx(t, 5*time.Second), mq); err != nil || off != want {
			t.Fatalf("%v: stored offset %d %v after Start, want %d", mq, off, err, want)
		}
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}

	want := map[string]bool{}
	for i, r := range sent {
		if r.QueueOffset >= start[r.Queue] {
			want[fmt.Sprintf("so-%d", i)] = true
		}
	}
	got := map[string]bool{}
	ctx := testCtx(t, 30*time.Second)
	for len(got) < len(want) {
		msgs, err := pc.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v (got %d of %d)", err, len(got), len(want))
		}
		for _, m := range msgs {
			if m.QueueOffset < start[m.Queue] {
				t.Fatalf("%v: message at offset %d, before its start %d", m.Queue, m.QueueOffset, start[m.Queue])
			}
			got[string(m.Body)] = true
		}
	}
}

// Bad StartOffsets are refused: a negative offset by NewPullConsumer, a
// queue of a topic the consumer does not consume by Start.
func TestClientPullConsumerStartOffsetsBad(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "TopicSB", 1)
	base := PullConsumerOptions{ConsumerOptions: ConsumerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}, Group: "gSB"}}
	mq := MessageQueue{Topic: "TopicSB", BrokerName: "broker-a", QueueID: 0}

	neg := base
	neg.StartOffsets = map[MessageQueue]int64{mq: -1}
	if _, err := NewPullConsumer(neg); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("negative start offset: %v", err)
	}

	other := base
	other.StartOffsets = map[MessageQueue]int64{{Topic: "TopicOther", BrokerName: "broker-a", QueueID: 0}: 0}
	pc, err := NewPullConsumer(other)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := pc.Subscribe("TopicSB", "*"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(testCtx(t, 10*time.Second)); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("start offset of a topic not consumed: %v", err)
	}
}
