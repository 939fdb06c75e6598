package broker

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// The read queues a promotion raises (importStoreTopics): a queue past
// the topic's read count that holds a message stored at or after the
// copied table's version was added after that copy, and is raised to;
// one holding only older messages was hidden by the admin in that table,
// and stays hidden.
func TestBrokerPromotionRaisesOnlyQueuesWrittenAfterTheCopy(t *testing.T) {
	var ms atomic.Int64
	ms.Store(1_700_000_000_000)
	clock := func() time.Time { return time.UnixMilli(ms.Load()) }
	b := testBroker(t, t.TempDir(), func(o *Options) { o.Now = clock })
	const topic = "ImportT"
	if err := b.topics.Update(protocol.TopicConfig{TopicName: topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: PermRW,
		TopicFilterType: protocol.TopicFilterSingleTag}); err != nil {
		t.Fatal(err)
	}
	c := newTestClient(t, b.Addr())
	for q := int32(0); q < 4; q++ {
		c.mustSend(topic, q, "m", "")
		waitDispatched(t, b, topic, q, 1)
	}
	ms.Add(10_000) // the admin shrinks the topic 10 s later
	if err := b.topics.Update(protocol.TopicConfig{TopicName: topic, ReadQueueNums: 2, WriteQueueNums: 2, Perm: PermRW,
		TopicFilterType: protocol.TopicFilterSingleTag}); err != nil {
		t.Fatal(err)
	}
	b.importStoreTopics(b.topics.DataVersion())
	if tc, _ := b.topics.Get(topic); tc.ReadQueueNums != 2 {
		t.Fatalf("read queues the admin shrank after the messages were raised: %+v", tc)
	}
	// A table copied before the messages: queues 2 and 3 were added since.
	b.importStoreTopics(protocol.DataVersion{Timestamp: ms.Load() - 20_000})
	if tc, _ := b.topics.Get(topic); tc.ReadQueueNums != 4 || tc.WriteQueueNums != 2 {
		t.Fatalf("queues written after the copied table: %+v, want 4 read and 2 write queues", tc)
	}
}

// A slave's own change after its last copy (a heartbeat's retry topic)
// bumps its table's version with its own clock; the promotion's import
// must still measure "written after the copy" from the master's version.
func TestBrokerCopiedVersionIgnoresLocalBumps(t *testing.T) {
	var ms atomic.Int64
	ms.Store(1_700_000_000_000)
	b := testBroker(t, t.TempDir(), func(o *Options) { o.Now = func() time.Time { return time.UnixMilli(ms.Load()) } })
	w := b.topics.Snapshot()
	w.DataVersion = protocol.DataVersion{Timestamp: 1_600_000_000_000, Counter: 7}
	if err := b.topics.Replace(w); err != nil {
		t.Fatal(err)
	}
	ms.Add(10_000)
	if err := b.topics.Update(protocol.TopicConfig{TopicName: "%RETRY%g", ReadQueueNums: 1, WriteQueueNums: 1, Perm: PermRW,
		TopicFilterType: protocol.TopicFilterSingleTag}); err != nil {
		t.Fatal(err)
	}
	if got := b.topics.DataVersion(); got == w.DataVersion {
		t.Fatalf("a local change did not bump the version: %+v", got)
	}
	if got := b.topics.CopiedVersion(); got != w.DataVersion {
		t.Fatalf("copied version %+v after a local change, want the master's %+v", got, w.DataVersion)
	}
}
