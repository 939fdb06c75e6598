package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/store/record"
)

// TestStoreModel runs random puts, gets, batch puts, clean restarts and
// crash-style restarts (no final flush, abort marker left) against the
// store and a trivial in-memory model, comparing every read.
func TestStoreModel(t *testing.T) {
	steps := 3000
	seed := uint64(time.Now().UnixNano())
	if os.Getenv("SMARTGO_LONG") != "" {
		steps = 15000
	}
	if v, err := strconv.ParseUint(os.Getenv("SMARTGO_SEED"), 10, 64); err == nil {
		seed = v
	}
	if v, err := strconv.Atoi(os.Getenv("SMARTGO_STEPS")); err == nil {
		steps = v
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 99))
	root := t.TempDir()
	opts := func(o *Options) {
		o.CQEntriesPerFile = 16
		o.SegmentSize = 32 << 10
		o.MaxMessageSize = 8 << 10
	}
	open := func() *Store {
		o := testOptions(root)
		opts(&o)
		s, err := Open(o)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s
	}
	s := open()
	defer func() { _ = s.Close() }()
	model := map[cqKey][]entry{}
	topics := []string{"A", "B", "%RETRY%g"}
	tags := []string{"", "x", "y"}
	for step := range steps {
		switch op := rng.IntN(100); {
		case op < 60:
			k := cqKey{topics[rng.IntN(3)], int32(rng.IntN(3))}
			e := entry{fmt.Sprintf("s%d-%s", step, strings.Repeat("m", rng.IntN(2000))), tags[rng.IntN(3)]}
			res := mustPut(t, s, msgSpec{topic: k.topic, qid: k.queueID, body: e.body, tags: e.tag})
			if res.QueueOffset != int64(len(model[k])) {
				t.Fatalf("step %d: queue offset %d, model %d", step, res.QueueOffset, len(model[k]))
			}
			model[k] = append(model[k], e)
		case op < 65:
			k := cqKey{topics[rng.IntN(3)], int32(rng.IntN(3))}
			tmpl := newMsg(msgSpec{topic: k.topic, qid: k.queueID})
			n := 1 + rng.IntN(5)
			var items []record.BatchItem
			var es []entry
			for i := range n {
				e := entry{fmt.Sprintf("b%d-%d", step, i), ""}
				es = append(es, e)
				items = append(items, record.BatchItem{Body: []byte(e.body)})
			}
			res, err := s.PutBatch(context.Background(), tmpl, items)
			if err != nil || res.QueueOffset != int64(len(model[k])) {
				t.Fatalf("step %d: batch %v %v", step, res, err)
			}
			model[k] = append(model[k], es...)
		case op < 95:
			k := cqKey{topics[rng.IntN(3)], int32(rng.IntN(3))}
			want := model[k]
			off := int64(rng.IntN(len(want) + 3))
			n := 1 + rng.IntN(40)
			var filter TagFilter
			tag := tags[rng.IntN(3)]
			if tag != "" {
				filter = TagSet{record.TagsHash(tag)}.Match
			}
			s.dispatchAvailable()
			r, err := s.GetMessages(k.topic, k.queueID, off, n, filter)
			if err != nil {
				t.Fatal(err)
			}
			checkModelRead(t, step, r, want, off, n, tag)
			r.Release()
		case op < 98:
			s.dispatchAvailable()
			for k, want := range model {
				if got := s.MaxOffset(k.topic, k.queueID); got != int64(len(want)) {
					t.Fatalf("step %d: before close %v max %d, model %d", step, k, got, len(want))
				}
			}
			if err := s.Close(); err != nil {
				t.Fatalf("step %d: close: %v", step, err)
			}
			s = open()
			if rep := s.RecoveryReport(); rep.Err() != nil || len(rep.Truncations) > 0 {
				t.Logf("step %d: clean restart report %+v", step, rep)
			}
			compareModel(t, step, s, model)
		default:
			if err := s.shutdown(false); err != nil {
				t.Fatalf("step %d: crash close: %v", step, err)
			}
			s.closeOnce.Do(func() {})
			s = open()
			if !s.RecoveryReport().Abnormal {
				t.Fatalf("step %d: crash restart not abnormal", step)
			}
			compareModel(t, step, s, model)
		}
	}
	compareModel(t, steps, s, model)
}

type entry struct {
	body string
	tag  string
}

func checkModelRead(t *testing.T, step int, r *GetResult, want []entry, off int64, n int, tag string) {
	t.Helper()
	max := int64(len(want))
	switch {
	case max == 0:
		if r.Status != GetNoMatchedLogicQueue && r.Status != GetNoMessageInQueue {
			t.Fatalf("step %d: empty queue status %v", step, r.Status)
		}
		return
	case off == max:
		if r.Status != GetOffsetOverflowOne || r.NextBeginOffset != off {
			t.Fatalf("step %d: at max: %v %d", step, r.Status, r.NextBeginOffset)
		}
		return
	case off > max:
		if r.Status != GetOffsetOverflowBadly || r.NextBeginOffset != max {
			t.Fatalf("step %d: beyond max: %v %d", step, r.Status, r.NextBeginOffset)
		}
		return
	}
	var exp []int64
	for i := off; i < r.NextBeginOffset; i++ {
		if tag == "" || want[i].tag == tag {
			exp = append(exp, i)
		}
	}
	if len(exp) != len(r.Buffers) || len(r.Buffers) > n {
		t.Fatalf("step %d: got %d messages for [%d,%d) tag %q, model says %d", step, len(r.Buffers), off, r.NextBeginOffset, tag, len(exp))
	}
	if len(exp) == 0 && r.Status != GetNoMatchedMessage {
		t.Fatalf("step %d: status %v with no match", step, r.Status)
	}
	for i, b := range r.Buffers {
		m, _, err := record.Decode(b, true)
		if err != nil || string(m.Body) != want[exp[i]].body || m.QueueOffset != exp[i] {
			t.Fatalf("step %d: message %d differs: %v", step, exp[i], err)
		}
	}
}

func compareModel(t *testing.T, step int, s *Store, model map[cqKey][]entry) {
	t.Helper()
	checkConsistency(t, s)
	for k, want := range model {
		got := readAll(t, s, k.topic, k.queueID)
		if len(got) != len(want) {
			t.Fatalf("step %d: %v has %d messages, model %d", step, k, len(got), len(want))
		}
		for i := range got {
			if string(got[i].Body) != want[i].body {
				t.Fatalf("step %d: %v[%d] differs", step, k, i)
			}
		}
	}
}
