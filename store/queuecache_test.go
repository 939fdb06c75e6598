package store

import (
	"fmt"
	"testing"
)

// TestStoreQueueOffsetsAcrossTopics puts to topics and queues in turn, to
// queue ids past what the put's queue cache holds, and to a topic deleted
// right after its last put: every put gets its queue's next offset.
func TestStoreQueueOffsetsAcrossTopics(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	want := map[cqKey]int64{}
	put := func(topic string, qid int32) {
		t.Helper()
		r := mustPut(t, s, msgSpec{topic: topic, qid: qid, body: "x"})
		k := cqKey{topic, qid}
		if r.QueueOffset != want[k] {
			t.Fatalf("%s/%d: queue offset %d, want %d", topic, qid, r.QueueOffset, want[k])
		}
		want[k]++
	}
	for i := range 40 {
		put("A", int32(i%4))
		put("A", int32(i%4))
		put("B", int32(i%3))
		put("A", maxCachedQueueID+int32(i%2))
	}
	put("Gone", 1)
	put("Gone", 1)
	waitDispatched(t, s) // the dispatcher's last queue is Gone's too
	if err := s.DeleteTopic("Gone"); err != nil {
		t.Fatal(err)
	}
	delete(want, cqKey{"Gone", 1})
	put("Gone", 1)
	put("A", 1)
	if got := s.NextQueueOffset("A", 1); got != want[cqKey{"A", 1}] {
		t.Fatalf("NextQueueOffset A/1 = %d, want %d", got, want[cqKey{"A", 1}])
	}
	waitDispatched(t, s)
	for k, n := range want {
		if got := s.MaxOffset(k.topic, k.queueID); got != n {
			t.Fatalf("%s/%d: %d entries dispatched, want %d", k.topic, k.queueID, got, n)
		}
	}
	if got := readAll(t, s, "Gone", 1); len(got) != 1 || string(got[0].Body) != "x" {
		t.Fatalf("Gone/1 after its deletion: %d messages", len(got))
	}
}

// BenchmarkStoreQueueOffsetLookup is the put's lookup of a queue's next
// offset, for puts to one topic's 8 queues in turn.
func BenchmarkStoreQueueOffsetLookup(b *testing.B) {
	s := openTest(b, b.TempDir(), nil)
	topic := "BenchmarkTopicName"
	for q := range 8 {
		mustPut(b, s, msgSpec{topic: topic, qid: int32(q), body: "x"})
	}
	for q := range 32 {
		mustPut(b, s, msgSpec{topic: fmt.Sprintf("Other%d", q), body: "x"})
	}
	// The topic as a put sees it: bytes of a request, not the key's.
	buf := []byte(topic)
	s.putMu.Lock()
	defer s.putMu.Unlock()
	b.ResetTimer()
	var sum int64
	for i := range b.N {
		sum += s.queueOffsetLocked(cqKey{string(buf), int32(i & 7)})
	}
	if sum < 0 {
		b.Fatal(sum)
	}
}

// BenchmarkStoreCQForDispatch is the dispatcher's lookup of a record's
// consume queue, for records of one topic's 8 queues in turn.
func BenchmarkStoreCQForDispatch(b *testing.B) {
	s := openTest(b, b.TempDir(), nil)
	topic := []byte("BenchmarkTopicName")
	for q := range 8 {
		mustPut(b, s, msgSpec{topic: string(topic), qid: int32(q), body: "x"})
	}
	for q := range 32 {
		mustPut(b, s, msgSpec{topic: fmt.Sprintf("Other%d", q), body: "x"})
	}
	waitDispatched(b, s)
	s.dispMu.Lock()
	defer s.dispMu.Unlock()
	b.ResetTimer()
	for i := range b.N {
		if s.cqForDispatch(topic, int32(i&7)) == nil {
			b.Fatal("no queue")
		}
	}
}
