package store

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/smartgo/smartgo/store/record"
)

// notesTagsCode is a TagsCode hook like the broker's schedule topic: the
// code depends on a property and the store time.
func notesTagsCode(topic, props []byte, ts int64) (int64, bool) {
	if string(topic) != "SCHED" {
		return 0, false
	}
	v, ok := record.LookupProperty(props, record.PropertyDelayLevel)
	if !ok {
		return 0, false
	}
	return ts + int64(len(v))*1000, true
}

// notesMsg is message i of TestStoreWroteNotesMatchReadBack: topics,
// queues, tags, keys (several, empty, spaced), unique keys, a delay level
// the hook reads, transaction states and a properties string that does
// not end with a separator.
func notesMsg(i int) (*record.Message, []string) {
	topic := []string{"A", "B", "SCHED"}[i%3]
	var props []string
	var keys []string
	if i%5 != 0 {
		props = append(props, record.PropertyTags+"\x01tag"+fmt.Sprint(i%7))
	}
	switch i % 4 {
	case 0:
		k := fmt.Sprintf("k%d x%d", i, i%3)
		props = append(props, record.PropertyKeys+"\x01"+k)
		keys = append(keys, strings.Fields(k)...)
	case 1:
		k := fmt.Sprintf("  s%d ", i)
		props = append(props, record.PropertyKeys+"\x01"+k)
		keys = append(keys, strings.Fields(k)...)
	case 2:
		props = append(props, record.PropertyKeys+"\x01") // no value: not a pair
	}
	if i%3 == 0 {
		u := fmt.Sprintf("U%08d", i)
		props = append(props, record.PropertyUniqueClientMessageIDKeyIndex+"\x01"+u)
		keys = append(keys, u)
	}
	if i%2 == 0 {
		props = append(props, record.PropertyDelayLevel+"\x01"+strings.Repeat("3", 1+i%4))
	}
	p := strings.Join(props, "\x02")
	if i%6 != 5 && p != "" {
		p += "\x02"
	}
	m := &record.Message{Topic: topic, QueueID: int32(i % 4), BornTimestamp: 1_700_000_000_000, BornHost: bornHost,
		Body: []byte(strings.Repeat("b", i%50)), Properties: p}
	switch i % 8 {
	case 1, 2, 3, 6:
		// The values at hand, as a broker's send brings them.
		m.Known = knownOf(p)
	case 4:
		// Wrong values of an equal string elsewhere: not the
		// message's, so the store looks its own up.
		m.Known = record.Know(strings.Clone(p), [3][2]int{{0, 1}, {0, 1}, {0, 1}})
	}
	switch i % 11 {
	case 1:
		m.SysFlag = record.TxPrepared
	case 2:
		m.SysFlag = record.TxCommit
	case 3:
		m.SysFlag = record.TxRollback
		keys = nil // not indexed
	}
	return m, keys
}

// knownOf is record.KnownProperties for props, by lookup.
func knownOf(props string) record.KnownProperties {
	var at [len(record.KnownKeys)][2]int
	for i, key := range record.KnownKeys {
		if v, ok := record.LookupPropertyString(props, key); ok {
			off := int(uintptr(unsafe.Pointer(unsafe.StringData(v))) - uintptr(unsafe.Pointer(unsafe.StringData(props))))
			at[i] = [2]int{off, off + len(v)}
		}
	}
	return record.Know(props, at)
}

// A put's record.KnownProperties are what the writer notes when they
// describe the very properties string put, and nothing when they are of
// another (equal) string: told that TAGS is "KEYS", the consume queue has
// that code only in the first case.
func TestStoreNotesTakeKnownProperties(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	props := "KEYS\x01k\x02TAGS\x01real"
	for _, of := range []string{props, strings.Clone(props)} {
		m := &record.Message{Topic: "K", BornHost: bornHost, Body: []byte("b"), Properties: props,
			Known: record.Know(of, [3][2]int{{0, 4}, {5, 6}})}
		if _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	waitIndexed(t, s)
	cq := s.cqForDispatch([]byte("K"), 0)
	var got [2]int64
	for off := range got {
		e, ok := cq.entry(int64(off))
		if !ok {
			t.Fatalf("no entry %d", off)
		}
		got[off] = e.tags
	}
	if want := [2]int64{record.TagsHash("KEYS"), record.TagsHash("real")}; got != want {
		t.Fatalf("tags codes %v, want %v", got, want)
	}
	// The first entry is the lie the test told: closed now, the store is
	// spared openTest's consistency check, which would catch it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// notesState is what a store's followers built: every consume-queue entry
// and what each key finds.
type notesState struct {
	cq  map[string][]cqEntry
	idx map[string][]int64
}

func notesSnapshot(t *testing.T, s *Store, keys map[string][]string) notesState {
	t.Helper()
	st := notesState{cq: map[string][]cqEntry{}, idx: map[string][]int64{}}
	for _, cq := range s.allCQs() {
		name := fmt.Sprintf("%s/%d", cq.topic, cq.queueID)
		for off := range cq.maxOff.Load() {
			e, ok := cq.entry(off)
			if !ok {
				t.Fatalf("%s: no entry %d", name, off)
			}
			st.cq[name] = append(st.cq[name], e)
		}
	}
	for topic, ks := range keys {
		for _, k := range ks {
			r, err := s.QueryByKey(topic, k, 64, 0, 1<<62)
			if err != nil {
				t.Fatalf("QueryByKey %s %s: %v", topic, k, err)
			}
			phys := slices.Clone(r.PhysicalOffsets)
			slices.Sort(phys)
			st.idx[topic+"#"+k] = phys
			r.Release()
		}
	}
	return st
}

// The dispatcher and the indexer build the same consume-queue entries and
// index keys from the writer's notes (wrote.go) as from reading every
// record back, which recovery does after the queues and the index are
// deleted; in every write mode, for single, async and batch puts.
func TestStoreWroteNotesMatchReadBack(t *testing.T) {
	modes := []struct {
		name string
		set  func(*Options)
	}{
		{"hybrid", func(*Options) {}},
		{"mapped", func(o *Options) { o.AsyncWrites = AsyncWriteMapped }},
		{"pwrite", func(o *Options) { o.AsyncWrites = AsyncWritePwrite }},
		{"sync", func(o *Options) { o.FlushMode = FlushSync }},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			root := t.TempDir()
			opts := func(o *Options) {
				o.TagsCode = notesTagsCode
				o.IndexEntries = 5000
				o.IndexSlots = 512
				mode.set(o)
			}
			s := openTest(t, root, opts)
			keys := map[string][]string{}
			done := make(chan error, 1000)
			async := 0
			for i := range 600 {
				m, ks := notesMsg(i)
				keys[m.Topic] = append(keys[m.Topic], ks...)
				switch {
				case i%3 == 1:
					_, pending, err := s.PutAsync(m, false, func(_ PutResult, err error) { done <- err })
					if err != nil {
						t.Fatalf("PutAsync %d: %v", i, err)
					}
					if pending {
						async++
					}
				case i%50 == 7:
					tmpl := *m
					items := []record.BatchItem{{Body: []byte("x"), Properties: []byte("KEYS\x01bk" + fmt.Sprint(i))}, {Body: []byte("y")}}
					keys[m.Topic] = append(keys[m.Topic], "bk"+fmt.Sprint(i))
					if _, err := s.PutBatch(t.Context(), &tmpl, items); err != nil {
						t.Fatalf("PutBatch %d: %v", i, err)
					}
				default:
					if _, err := s.Put(t.Context(), m); err != nil {
						t.Fatalf("Put %d: %v", i, err)
					}
				}
			}
			for range async {
				if err := <-done; err != nil {
					t.Fatalf("async put: %v", err)
				}
			}
			waitIndexed(t, s)
			s.dispMu.Lock()
			dNoted, dCount := s.disp.noted, s.disp.count
			s.dispMu.Unlock()
			s.ix.run.Lock()
			ixNoted, ixRead := s.ix.noted, s.ix.read
			s.ix.run.Unlock()
			if dNoted != dCount || ixRead != 0 || ixNoted == 0 {
				t.Fatalf("dispatched %d of %d records from notes, indexed %d from notes and read back %d: the notes are not used",
					dNoted, dCount, ixNoted, ixRead)
			}
			want := notesSnapshot(t, s, keys)
			if len(want.cq) < 12 {
				t.Fatalf("only %d queues", len(want.cq))
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for _, dir := range []string{"consumequeue", "index"} {
				if err := os.RemoveAll(filepath.Join(root, dir)); err != nil {
					t.Fatal(err)
				}
			}
			s2 := openTest(t, root, opts)
			waitIndexed(t, s2)
			s2.dispMu.Lock()
			noted := s2.disp.noted
			s2.dispMu.Unlock()
			if noted != 0 {
				t.Fatalf("recovery dispatched %d records from notes", noted)
			}
			got := notesSnapshot(t, s2, keys)
			for _, name := range slices.Sorted(maps.Keys(want.cq)) {
				if !slices.Equal(want.cq[name], got.cq[name]) {
					t.Errorf("queue %s from notes:\n%v\nread back:\n%v", name, want.cq[name], got.cq[name])
				}
			}
			if len(got.cq) != len(want.cq) {
				t.Errorf("%d queues from notes, %d read back", len(want.cq), len(got.cq))
			}
			for k, phys := range want.idx {
				if len(phys) == 0 {
					t.Errorf("key %s not found from notes", k)
				}
				if !slices.Equal(phys, got.idx[k]) {
					t.Errorf("key %s: %v from notes, %v read back", k, phys, got.idx[k])
				}
			}
		})
	}
}

// The note queues keep notes in order with their bytes through partial
// moves, compaction, take-backs and their bounds.
func TestWroteQueueMoves(t *testing.T) {
	var w, d, ix wroteQueue
	phy := int64(0)
	note := func(q *wroteQueue, i int) bool {
		e := dispEntry{topic: []byte(fmt.Sprintf("T%d", i%3)), keys: []byte(fmt.Sprintf("k%d", i)), qoff: int64(i)}
		if i%2 == 0 {
			e.uniq = []byte(fmt.Sprintf("u%d", i))
		}
		ok := q.note(&e, phy, 100)
		phy += 100
		return ok
	}
	check := func(q *wroteQueue, from, to int) {
		t.Helper()
		if q.len() != to-from {
			t.Fatalf("%d notes, want %d (%d..%d)", q.len(), to-from, from, to)
		}
		for i := from; i < to; i++ {
			r := &q.recs[q.head+i-from]
			e := q.entry(r)
			u := ""
			if i%2 == 0 {
				u = fmt.Sprintf("u%d", i)
			}
			if r.phy != int64(i)*100 || e.qoff != int64(i) || string(e.topic) != fmt.Sprintf("T%d", i%3) ||
				string(e.keys) != fmt.Sprintf("k%d", i) || string(e.uniq) != u {
				t.Fatalf("note %d: phy %d %+v", i, r.phy, e)
			}
		}
	}
	for i := range 10 {
		note(&w, i)
	}
	w.moveTo(&d, 500) // records 0-4 end at or below 500
	check(&w, 5, 10)
	check(&d, 0, 5)
	d.pop()
	d.pop()
	for i := 10; i < 14; i++ {
		note(&w, i)
	}
	w.dropFrom(1200) // 12 and 13 taken back
	check(&w, 5, 12)
	phy = 1200
	note(&w, 12)
	w.moveTo(&d, 1<<62) // d not empty: copied behind its notes (compacted)
	check(&d, 2, 13)
	if w.len() != 0 || d.head != 0 {
		t.Fatalf("w %d notes, d head %d", w.len(), d.head)
	}
	d.dropBelow(700)
	check(&d, 7, 13)
	ix.push(&d, d.first())
	d.pop()
	check(&ix, 7, 8)
	d.moveTo(&ix, 1<<62)
	check(&ix, 7, 13)
	ix.dropFrom(0)
	if ix.len() != 0 || len(ix.arena) != 0 {
		t.Fatalf("after dropping all: %d notes, %d bytes", ix.len(), len(ix.arena))
	}
	// Bounds: a full queue refuses notes; the follower reads those back.
	var full wroteQueue
	phy = 0
	for i := range maxWroteRecs {
		if !note(&full, i) {
			t.Fatalf("note %d refused", i)
		}
	}
	if note(&full, maxWroteRecs) {
		t.Fatalf("note beyond %d taken", maxWroteRecs)
	}
	big := dispEntry{topic: []byte("T"), keys: make([]byte, maxWroteBytes)}
	var q wroteQueue
	if q.note(&big, 0, 100) {
		t.Fatalf("note of %d bytes taken", len(big.keys))
	}
}

// A queue that is never emptied (the writer's: it goes on noting while the
// dispatcher takes the notes of written records) does not grow, whether
// the notes leave it by a swap (the dispatcher's queue empty) or by a
// copy (not empty), and they arrive in order with their bytes.
func TestWroteQueueKeepsNoDeadNotes(t *testing.T) {
	var w, d wroteQueue
	next, want := 0, 0 // next note to make, next note d should hold
	for round := range 3000 {
		for range 5 {
			e := dispEntry{topic: []byte("T"), keys: []byte(fmt.Sprintf("k%d", next)), qoff: int64(next)}
			if !w.note(&e, int64(next)*100, 100) {
				t.Fatalf("round %d: note %d refused", round, next)
			}
			next++
		}
		w.moveTo(&d, int64(next-2)*100) // the last two are not written yet
		keep := 0
		if round%2 == 1 {
			keep = 1 // d not emptied: the next move copies
		}
		for d.len() > keep {
			r := d.first()
			if e := d.entry(r); e.qoff != int64(want) || string(e.keys) != fmt.Sprintf("k%d", want) || r.phy != int64(want)*100 {
				t.Fatalf("round %d: note %+v, phy %d, want %d", round, e, r.phy, want)
			}
			want++
			d.pop()
		}
	}
	if w.len() != 2 || cap(w.recs) > 64 || cap(w.arena) > 1024 || cap(d.recs) > 64 || cap(d.arena) > 1024 {
		t.Fatalf("writer %d notes, capacities %d/%d, dispatcher %d/%d: the queues grow", w.len(), cap(w.recs), cap(w.arena), cap(d.recs), cap(d.arena))
	}
}

// When the followers lag so far that a note queue is full, the records
// without notes are read back: every queue entry and key is still there.
func TestStoreNotesFullQueueReadsBack(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.SegmentSize = 16 << 20
		o.CQEntriesPerFile = 4096
		o.IndexEntries = 50000
		o.IndexSlots = 4096
	})
	s.SetDispatchLimit(0) // hold the dispatcher back
	n := maxWroteRecs + 1000
	for i := range n {
		mustPut(t, s, msgSpec{topic: "F", qid: int32(i % 2), body: "b", keys: fmt.Sprintf("f%d", i)})
	}
	s.SetDispatchLimit(math.MaxInt64)
	waitIndexed(t, s)
	s.dispMu.Lock()
	noted, count := s.disp.noted, s.disp.count
	s.dispMu.Unlock()
	if noted == 0 || noted >= count || count != int64(n) {
		t.Fatalf("%d of %d records dispatched from notes, want some but not all of %d", noted, count, n)
	}
	for q := range int32(2) {
		if got := len(readAll(t, s, "F", q)); got != n/2 {
			t.Fatalf("queue %d: %d messages, want %d", q, got, n/2)
		}
	}
	for _, i := range []int{0, maxWroteRecs - 1, maxWroteRecs, n - 1} {
		r, err := s.QueryByKey("F", fmt.Sprintf("f%d", i), 4, 0, 1<<62)
		if err != nil || r.MessageCount() != 1 {
			t.Fatalf("key f%d: %d results, %v", i, r.MessageCount(), err)
		}
		r.Release()
	}
}

// BenchmarkStoreNoteWrote is the writer's note of one record (wrote.go)
// as a broker's send makes it: a 1 KiB message with a client message id
// and tags, its TAGS/KEYS/UNIQ_KEY values looked up in the record
// (lookup) or handed on with the message (known, record.KnownProperties).
func BenchmarkStoreNoteWrote(b *testing.B) {
	s := openTest(b, b.TempDir(), nil)
	m := cpuMsgs(1)[0]
	m.StoreHost = s.opts.StoreHost
	m.Properties += "\x02CLUSTER\x01DefaultCluster"
	rec := make([]byte, record.SealedSize(m))
	if _, err := record.EncodeSealedTo(rec, m); err != nil {
		b.Fatal(err)
	}
	for _, known := range []bool{false, true} {
		name, mm := "lookup", *m
		if known {
			name, mm.Known = "known", knownOf(m.Properties)
		}
		b.Run(name, func(b *testing.B) {
			s.putMu.Lock()
			defer s.putMu.Unlock()
			for i := 0; b.Loop(); i++ {
				s.noteWrote(rec, int64(i)*int64(len(rec)), &mm)
				if s.wq.len() == 1024 {
					s.wq.reset()
				}
			}
			s.wq.reset()
		})
	}
}
