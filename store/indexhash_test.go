package store

import (
	"fmt"
	"testing"
)

// TestStoreIndexKeysAcrossTopics: keys of records of alternating topics,
// runs of one topic and a topic that is another's prefix are each found
// under their own topic only (the index hashes a run's topic once).
func TestStoreIndexKeysAcrossTopics(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	topics := []string{"A", "AB", "A", "A", "AB", "B", "B", "A"}
	for i, topic := range topics {
		mustPut(t, s, msgSpec{topic: topic, body: "x", keys: fmt.Sprintf("k%d", i), uniq: fmt.Sprintf("U%d", i)})
	}
	waitIndexed(t, s)
	for i, topic := range topics {
		for _, key := range []string{fmt.Sprintf("k%d", i), fmt.Sprintf("U%d", i)} {
			for _, other := range []string{"A", "AB", "B"} {
				r, err := s.QueryByKey(other, key, 16, 0, 1<<62)
				if err != nil {
					t.Fatal(err)
				}
				n := len(r.Buffers)
				r.Release()
				if want := map[bool]int{true: 1, false: 0}[other == topic]; n != want {
					t.Fatalf("key %s of %s: %d found under %s, want %d", key, topic, n, other, want)
				}
			}
		}
	}
}

// BenchmarkStoreIndexKeyHash is the indexer's hash of one send's
// UNIQ_KEY with its topic (a run of one topic's records).
func BenchmarkStoreIndexKeyHash(b *testing.B) {
	s := openTest(b, b.TempDir(), nil)
	topic := []byte("BenchmarkTopicName")
	keys := make([][]byte, 64)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "7F0000010001%020X", i)
	}
	var sum int32
	b.ResetTimer()
	for i := range b.N {
		sum += s.idx.keyHash(topic, keys[i%len(keys)])
	}
	if sum == 1 {
		b.Log(sum)
	}
}
