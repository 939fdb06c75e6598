package store

import (
	"fmt"
	"sync"
	"testing"

	"github.com/smartgo/smartgo/store/record"
)

// PutPair's two records are adjacent in the log whatever other writers do,
// get their queues' next offsets and are readable like any record.
func TestStorePutPairAdjacent(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.SegmentSize = 256 << 10 })
	const pairs, others = 200, 4
	var wg sync.WaitGroup
	for w := 0; w < others; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < pairs; i++ {
				mustPut(t, s, msgSpec{topic: "Noise", qid: int32(w), body: fmt.Sprintf("noise-%d-%d", w, i)})
			}
		}()
	}
	var res [][2]PutResult
	for i := 0; i < pairs; i++ {
		first := newMsg(msgSpec{topic: "First", qid: 1, body: fmt.Sprintf("first-%d", i), uniq: fmt.Sprint(i)})
		second := newMsg(msgSpec{topic: "Second", qid: 0, body: fmt.Sprint(i)})
		r, err := s.PutPair(first, second)
		if err != nil {
			t.Fatal(err)
		}
		if first.PhysicalOffset != r[0].PhysicalOffset || second.PhysicalOffset != r[1].PhysicalOffset {
			t.Fatalf("pair %d: messages not updated with their offsets", i)
		}
		res = append(res, r)
	}
	wg.Wait()
	waitDispatched(t, s)
	for i, r := range res {
		if r[0].QueueOffset != int64(i) || r[1].QueueOffset != int64(i) {
			t.Fatalf("pair %d: queue offsets %d and %d", i, r[0].QueueOffset, r[1].QueueOffset)
		}
		if r[1].PhysicalOffset != r[0].PhysicalOffset+int64(r[0].WroteBytes) {
			// A segment may end between them: then the second starts a new one.
			if r[1].PhysicalOffset%s.Options().SegmentSize != 0 {
				t.Fatalf("pair %d: second record at %d, first ends at %d", i, r[1].PhysicalOffset, r[0].PhysicalOffset+int64(r[0].WroteBytes))
			}
		}
		m, err := s.ReadMessage(r[1].PhysicalOffset)
		if err != nil || m.Topic != "Second" || string(m.Body) != fmt.Sprint(i) {
			t.Fatalf("pair %d second record: %+v %v", i, m, err)
		}
	}
	g, _ := s.GetMessages("First", 1, 0, 32, nil)
	defer g.Release()
	if len(g.Buffers) != 32 {
		t.Fatalf("First queue: %d records", len(g.Buffers))
	}
	v, _ := record.Parse(g.Buffers[3], true)
	if string(v.Body) != "first-3" {
		t.Fatalf("First offset 3: %q", v.Body)
	}
	if _, err := s.PutPair(newMsg(msgSpec{topic: "T", body: string(make([]byte, 2<<20))}), newMsg(msgSpec{topic: "T", body: "x"})); err == nil {
		t.Fatal("an oversized first record was stored")
	}
}
