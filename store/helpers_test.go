package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
)

var bornHost = netip.MustParseAddrPort("10.0.0.5:50000")

// testOptions are small sizes so tests cross segment and file boundaries.
func testOptions(root string) Options {
	o := DefaultOptions(root)
	o.SegmentSize = 64 << 10
	o.CQEntriesPerFile = 64
	o.IndexSlots = 32
	o.IndexEntries = 200
	o.MaxMessageSize = 16 << 10
	o.FlushInterval = 20 * time.Millisecond
	o.LogicFlushInterval = 50 * time.Millisecond
	o.WarmSegments = false
	// The fewest descriptors: every test evicts and reopens files.
	o.MaxOpenFiles = minOpenFiles
	o.DiskUsage = func(string) (float64, error) { return 0.1, nil }
	return o
}

func openTest(t testing.TB, root string, mutate func(*Options)) *Store {
	t.Helper()
	o := testOptions(root)
	if mutate != nil {
		mutate(&o)
	}
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if !s.closed.Load() {
			checkConsistency(t, s)
		}
		_ = s.Close()
	})
	return s
}

// catchUpWait bounds the waits for the dispatcher and the indexer to
// catch up. They return as soon as they have; the bound only turns a
// stuck dispatcher into a failure. Generous: under -race on a loaded
// 2-core machine, dispatching 5,000 queues' first entries (each a file
// opened, TestStoreDescriptorsBounded) once took more than 5 s.
const catchUpWait = 60 * time.Second

func waitDispatched(t testing.TB, s *Store) {
	t.Helper()
	testutil.Eventually(t, catchUpWait, func() error {
		if d, c := s.dispatched.Load(), s.cl.committed.Load(); d != c {
			return fmt.Errorf("dispatched %d of %d", d, c)
		}
		return nil
	})
}

// waitIndexed waits until the dispatcher has caught up with the writer and
// the indexer with the dispatcher.
func waitIndexed(t testing.TB, s *Store) {
	t.Helper()
	waitDispatched(t, s)
	testutil.Eventually(t, catchUpWait, func() error {
		if i, d := s.indexed.Load(), s.dispatched.Load(); i != d {
			return fmt.Errorf("indexed %d of %d", i, d)
		}
		return nil
	})
}

type msgSpec struct {
	topic string
	qid   int32
	body  string
	tags  string
	keys  string
	uniq  string
}

func newMsg(sp msgSpec) *record.Message {
	var p record.Properties
	if sp.tags != "" {
		p.Set(record.PropertyTags, sp.tags)
	}
	if sp.keys != "" {
		p.Set(record.PropertyKeys, sp.keys)
	}
	if sp.uniq != "" {
		p.Set(record.PropertyUniqueClientMessageIDKeyIndex, sp.uniq)
	}
	return &record.Message{
		Topic:         sp.topic,
		QueueID:       sp.qid,
		BornTimestamp: 1_700_000_000_000,
		BornHost:      bornHost,
		Body:          []byte(sp.body),
		Properties:    p.String(),
	}
}

func mustPut(t testing.TB, s *Store, sp msgSpec) PutResult {
	t.Helper()
	r, err := s.Put(context.Background(), newMsg(sp))
	if err != nil {
		t.Fatalf("Put %+v: %v", sp, err)
	}
	if r.Status != PutOK {
		t.Fatalf("Put status %v", r.Status)
	}
	return r
}

// readAll reads a queue from its min offset to its max offset.
func readAll(t testing.TB, s *Store, topic string, qid int32) []*record.Message {
	t.Helper()
	var out []*record.Message
	off := s.MinOffset(topic, qid)
	for off < s.MaxOffset(topic, qid) {
		r, err := s.GetMessages(topic, qid, off, 32, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != GetFound {
			st := r.Status
			r.Release()
			t.Fatalf("GetMessages(%s,%d,%d): %v", topic, qid, off, st)
		}
		for i, b := range r.Buffers {
			m, n, err := record.Decode(b, true)
			if err != nil || n != len(b) {
				t.Fatalf("decode at %d: %v", r.QueueOffsets[i], err)
			}
			if m.QueueOffset != r.QueueOffsets[i] {
				t.Fatalf("queue offset %d in record, %d in queue", m.QueueOffset, r.QueueOffsets[i])
			}
			out = append(out, m)
		}
		off = r.NextBeginOffset
		r.Release()
	}
	return out
}

// checkConsistency verifies every consume-queue entry points at a valid
// record of that queue with matching offset (run at test cleanup).
func checkConsistency(t testing.TB, s *Store) {
	t.Helper()
	s.dispatchAvailable()
	clMin := s.cl.minOffset()
	for _, cq := range s.allCQs() {
		for off := cq.minOff.Load(); off < cq.maxOff.Load(); off++ {
			e, ok := cq.entry(off)
			if !ok {
				t.Errorf("consistency: %s/%d offset %d unreadable", cq.topic, cq.queueID, off)
				return
			}
			if e.isHole() || e.phy < clMin || damagedAt(s, e) {
				continue // damaged records are never served (readers verify)
			}
			if why := s.checkEntry(cq, off, e, clMin); why != "" {
				t.Errorf("consistency: %s/%d: %s", cq.topic, cq.queueID, why)
				return
			}
		}
	}
}

// damagedAt reports whether the record an entry points at fails
// verification (a test damaged it).
func damagedAt(s *Store, e cqEntry) bool {
	m := s.cl.acquireAt(e.phy)
	if m == nil {
		return false
	}
	defer m.release()
	rel := e.phy - m.base
	if e.size <= 0 || rel+int64(e.size) > m.size {
		return false
	}
	_, err := record.Verify(m.data[rel : rel+int64(e.size)])
	return err != nil
}

func segmentFiles(t testing.TB, root string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, "commitlog", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func isCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// sealedAs reports whether got is the properties string of a record
// stored with props: props, a separator unless empty or already ending with
// one, then a CRC trailer (its digits are checked by record.Verify on every
// read).
func sealedAs(got, props string) bool {
	if !record.IsSealed([]byte(got)) {
		return false
	}
	if props != "" && props[len(props)-1] != record.PropertySeparator {
		props += "\x02"
	}
	return got[:len(got)-record.TrailerSize] == props
}
