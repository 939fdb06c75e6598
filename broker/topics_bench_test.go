package broker

import (
	"fmt"
	"sync"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Every send looks its topic up (TopicManager.Get), on every reader at
// once; the lookup takes no lock, so readers on different CPUs do not
// bounce a lock's cache line between them.
func BenchmarkBrokerTopicGet(b *testing.B) {
	m := openTopics(&testing.T{}, b.TempDir(), true)
	for i := range 64 {
		if err := m.Update(protocol.TopicConfig{TopicName: fmt.Sprintf("T%d", i), ReadQueueNums: 4, WriteQueueNums: 4, Perm: PermRW}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := m.Get("T7"); !ok {
				b.Fatal("topic T7 missing")
			}
		}
	})
}

// Readers running while topics are created, updated and deleted see
// each topic either absent or whole, and every change made is read back
// once it returns.
func TestBrokerTopicsReadWhileChanged(t *testing.T) {
	m := openTopics(t, t.TempDir(), true)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range 8 {
					name := fmt.Sprintf("C%d", i)
					if tc, ok := m.Get(name); ok && (tc.TopicName != name || tc.WriteQueueNums != tc.ReadQueueNums) {
						t.Errorf("torn topic config %+v", tc)
						return
					}
				}
				_ = m.Names()
				_ = m.Snapshot()
			}
		}()
	}
	for round := range 20 {
		for i := range 8 {
			name := fmt.Sprintf("C%d", i)
			q := int32(round%8 + 1)
			if err := m.Update(protocol.TopicConfig{TopicName: name, ReadQueueNums: q, WriteQueueNums: q, Perm: PermRW}); err != nil {
				t.Fatal(err)
			}
			if tc, ok := m.Get(name); !ok || tc.WriteQueueNums != q {
				t.Fatalf("after update %s: %+v, %v", name, tc, ok)
			}
		}
		if _, err := m.CreateOnSend(fmt.Sprintf("Auto%d", round), AutoCreateTopicKey, 4, 0); err != nil {
			t.Fatal(err)
		}
		if round%2 == 1 {
			if ok, err := m.Delete("C0"); !ok || err != nil {
				t.Fatalf("delete C0: %v, %v", ok, err)
			}
			if _, ok := m.Get("C0"); ok {
				t.Fatal("C0 still read after delete")
			}
		}
	}
	close(stop)
	wg.Wait()
	if len(m.Names()) != len(m.Snapshot().TopicConfigTable) {
		t.Fatal("names and snapshot disagree")
	}
}
