package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/smartgo/smartgo/store/record"
)

// readQueue reads a queue from its first offset to its end (readAll)
// and checks that every offset is served once, in order, with its own
// record (its queue offset, topic and queue id): no offset is skipped,
// none served twice. It returns the bodies in queue order.
func readQueue(t *testing.T, s *Store, topic string, qid int32) []string {
	t.Helper()
	var out []string
	for i, m := range readAll(t, s, topic, qid) {
		if m.QueueOffset != int64(i) || m.Topic != topic || m.QueueID != qid {
			t.Fatalf("%s/%d: offset %d served the record of %s/%d offset %d", topic, qid, i, m.Topic, m.QueueID, m.QueueOffset)
		}
		out = append(out, string(m.Body))
	}
	return out
}

// corpusBodies is what each queue of a corpus holds, in queue order.
func corpusBodies(corpus []corpusMsg) map[string][]string {
	out := map[string][]string{}
	for _, c := range corpus {
		k := fmt.Sprintf("%s/%d", c.spec.topic, c.spec.qid)
		out[k] = append(out[k], c.spec.body)
	}
	return out
}

// Consume-queue entries damaged in place, or lost to a file cut short, in
// an old file of their queue (one a clean start does not re-check): the
// read that meets them rebuilds them from the commitlog, so every message
// is served through its queue once, at its own offset, and the rebuilt
// queue is found whole at the next start. They used to be refused (or,
// for zeroed entries, skipped silently): their messages could no longer
// be consumed.
func TestStoreCQDamageRebuilt(t *testing.T) {
	base := t.TempDir()
	corpus := buildCorpusN(t, base, 2000) // 6 queues of about 333 entries: 6 files of 64 each
	want := corpusBodies(corpus)
	file0 := filepath.Join("consumequeue", "T0", "0", fileNameFor(0))
	entryAt := func(b []byte, off int64) []byte { return b[off*cqEntrySize : (off+1)*cqEntrySize] }
	recordOf := func(topic string, qid int32, off int64) *corpusMsg {
		for i := range corpus {
			if c := &corpus[i]; c.spec.topic == topic && c.spec.qid == qid && c.pr.QueueOffset == off {
				return c
			}
		}
		t.Fatalf("no record %s/%d/%d", topic, qid, off)
		return nil
	}
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, path string)
		rebuilt int64 // at least
	}{
		{"entry points at another queue's record of its size", func(t *testing.T, path string) {
			victim := recordOf("T0", 0, 10)
			for _, o := range corpus {
				if o.pr.WroteBytes == victim.pr.WroteBytes && (o.spec.topic != "T0" || o.spec.qid != 0) {
					b := readFile(t, path)
					be.PutUint64(entryAt(b, 10), uint64(o.pr.PhysicalOffset))
					writeFile(t, path, b)
					return
				}
			}
			t.Fatal("no record of the same size in another queue")
		}, 1},
		{"entry's log offset bit flipped", func(t *testing.T, path string) {
			b := readFile(t, path)
			entryAt(b, 20)[5] ^= 0x10
			writeFile(t, path, b)
		}, 1},
		{"entry's size bit flipped", func(t *testing.T, path string) {
			b := readFile(t, path)
			entryAt(b, 30)[11] ^= 0x04
			writeFile(t, path, b)
		}, 1},
		{"entries zeroed", func(t *testing.T, path string) {
			b := readFile(t, path)
			clear(b[5*cqEntrySize : 45*cqEntrySize])
			writeFile(t, path, b)
		}, 40},
		{"entries overwritten with garbage", func(t *testing.T, path string) {
			b := readFile(t, path)
			for i := 3 * cqEntrySize; i < 9*cqEntrySize; i++ {
				b[i] = byte(i*7 + 1)
			}
			writeFile(t, path, b)
		}, 6},
		{"file cut mid-entry", func(t *testing.T, path string) {
			if err := os.Truncate(path, 25*cqEntrySize+7); err != nil {
				t.Fatal(err)
			}
		}, 64 - 25},
		{"next file deleted", func(t *testing.T, path string) {
			if err := os.Remove(filepath.Join(filepath.Dir(path), fileNameFor(64*cqEntrySize))); err != nil {
				t.Fatal(err)
			}
		}, 64},
		{"one of the last files deleted (re-dispatched at start)", func(t *testing.T, path string) {
			if err := os.Remove(filepath.Join(filepath.Dir(path), fileNameFor(4*64*cqEntrySize))); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"file cut to nothing", func(t *testing.T, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			copyTree(t, base, root)
			tc.damage(t, filepath.Join(root, file0))
			s := openTest(t, root, nil)
			for k, bodies := range want {
				var topic string
				var qid int32
				if _, err := fmt.Sscanf(k, "T%1s/%d", &topic, &qid); err != nil {
					t.Fatal(err)
				}
				got := readQueue(t, s, "T"+topic, qid)
				if len(got) != len(bodies) {
					t.Fatalf("%s: %d messages served, want %d", k, len(got), len(bodies))
				}
				for i := range got {
					if got[i] != bodies[i] {
						t.Fatalf("%s offset %d: %q, want %q", k, i, got[i], bodies[i])
					}
				}
			}
			st := s.Stats()
			if st.CQEntriesRebuilt < tc.rebuilt || st.CQEntriesLost != 0 || st.BadRecords != 0 {
				t.Fatalf("rebuilt %d (want at least %d), lost %d, bad records %d", st.CQEntriesRebuilt, tc.rebuilt, st.CQEntriesLost, st.BadRecords)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// The rebuilt entries were written to the file: the next start
			// serves them without rebuilding anything (openTest's cleanup
			// also checks every entry).
			s = openTest(t, root, nil)
			if got := readQueue(t, s, "T0", 0); len(got) != len(want["T0/0"]) || s.Stats().CQEntriesRebuilt != 0 {
				t.Fatalf("after a restart: %d messages, %d entries rebuilt again", len(got), s.Stats().CQEntriesRebuilt)
			}
		})
	}
}

// A damaged entry whose record is damaged in the commitlog too cannot be
// rebuilt: it becomes a hole (counted as lost, never served, not looked
// at again) and the rest of the queue is served.
func TestStoreCQDamageRecordGoneToo(t *testing.T) {
	root := t.TempDir()
	corpus := buildCorpusN(t, root, 2000)
	var victim *corpusMsg
	for i := range corpus {
		if c := &corpus[i]; c.spec.topic == "T0" && c.spec.qid == 0 && c.pr.QueueOffset == 12 {
			victim = c
		}
	}
	path := filepath.Join(root, "consumequeue", "T0", "0", fileNameFor(0))
	b := readFile(t, path)
	clear(b[12*cqEntrySize : 13*cqEntrySize])
	writeFile(t, path, b)
	// The record's magic code: it is no record any more.
	seg := filepath.Join(root, "commitlog", fileNameFor(victim.pr.PhysicalOffset-victim.pr.PhysicalOffset%(64<<10)))
	writeFileAt(t, seg, victim.pr.PhysicalOffset%(64<<10)+4, []byte{0xde, 0xad})

	s := openTest(t, root, nil)
	n := 0
	for off := int64(0); off < s.MaxOffset("T0", 0); {
		r, err := s.GetMessages("T0", 0, off, 32, nil)
		if err != nil || r.Status != GetFound {
			t.Fatalf("from %d: %v %v", off, err, r.Status)
		}
		for _, qo := range r.QueueOffsets {
			if qo == 12 {
				t.Fatal("the damaged record was served")
			}
		}
		n += len(r.Buffers)
		off = r.NextBeginOffset
		r.Release()
	}
	if want := len(corpusBodies(corpus)["T0/0"]) - 1; n != want {
		t.Fatalf("%d messages served, want %d", n, want)
	}
	if st := s.Stats(); st.CQEntriesLost != 1 {
		t.Fatalf("lost %d, want 1", st.CQEntriesLost)
	}
	if e, _ := s.lookupCQ("T0", 0).entry(12); !e.isHole() {
		t.Fatalf("entry 12 is %+v, want a hole", e)
	}
}

// Several pulls meet the same damaged run at once while the dispatcher
// appends to the queue: the run is rebuilt once, every pull serves every
// offset once with its own record, and the new messages follow.
func TestStoreCQDamageConcurrentPulls(t *testing.T) {
	root := t.TempDir()
	corpus := buildCorpusN(t, root, 2000)
	want := corpusBodies(corpus)["T0/0"]
	path := filepath.Join(root, "consumequeue", "T0", "0", fileNameFor(0))
	b := readFile(t, path)
	clear(b[2*cqEntrySize : 60*cqEntrySize])
	writeFile(t, path, b)
	s := openTest(t, root, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			if _, err := s.Put(context.Background(), newMsg(msgSpec{topic: "T0", qid: 0, body: fmt.Sprint("new-", i)})); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			off := int64(0)
			for off < int64(len(want)) {
				r, err := s.GetMessages("T0", 0, off, 16, nil)
				if err != nil || r.Status != GetFound {
					errs <- fmt.Errorf("from %d: %v %v", off, err, r.Status)
					return
				}
				for i, buf := range r.Buffers {
					m, _, err := record.Decode(buf, true)
					if err != nil || r.QueueOffsets[i] != off+int64(i) || m.QueueOffset != off+int64(i) ||
						(m.QueueOffset < int64(len(want)) && string(m.Body) != want[m.QueueOffset]) {
						errs <- fmt.Errorf("offset %d: served %d %v", off+int64(i), r.QueueOffsets[i], err)
						r.Release()
						return
					}
				}
				off = r.NextBeginOffset
				r.Release()
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	<-done
	waitDispatched(t, s)
	if got := readQueue(t, s, "T0", 0); len(got) != len(want)+200 || got[len(want)] != "new-0" {
		t.Fatalf("%d messages, want %d", len(got), len(want)+200)
	}
	if st := s.Stats(); st.CQEntriesRebuilt != 58 || st.CQEntriesLost != 0 {
		t.Fatalf("rebuilt %d, lost %d; want 58 rebuilt once", st.CQEntriesRebuilt, st.CQEntriesLost)
	}
}

// Retention removed the oldest segments; an entry of a still stored
// record damaged so that it points below the commitlog's start: a pull
// rebuilds it rather than taking it for a removed record (it used to skip
// it without a word), also when it is the first entry the pull reads.
func TestStoreCQDamageBelowLogStart(t *testing.T) {
	root := t.TempDir()
	corpus := buildCorpusN(t, root, 2000) // ten 64 KiB segments
	for _, base := range []int64{0, 64 << 10} {
		if err := os.Remove(filepath.Join(root, "commitlog", fileNameFor(base))); err != nil {
			t.Fatal(err)
		}
	}
	var victim *corpusMsg
	for i := range corpus {
		if c := &corpus[i]; c.spec.topic == "T0" && c.spec.qid == 0 && c.pr.QueueOffset == 150 {
			victim = c
		}
	}
	if victim.pr.PhysicalOffset < 3*64<<10 || 150 >= 3*64 {
		t.Fatalf("record %d at %d: not in a stored segment, or its entry not in an old file", 150, victim.pr.PhysicalOffset)
	}
	path := filepath.Join(root, "consumequeue", "T0", "0", fileNameFor(128*cqEntrySize))
	b := readFile(t, path)
	be.PutUint64(b[(150-128)*cqEntrySize:], 4096) // removed with segment 0
	writeFile(t, path, b)

	s := openTest(t, root, nil)
	minOff, maxOff := s.MinOffset("T0", 0), s.MaxOffset("T0", 0)
	if minOff == 0 || minOff > 150 {
		t.Fatalf("queue starts at %d", minOff)
	}
	check := func(from int64) {
		t.Helper()
		off := from
		for off < maxOff {
			r, err := s.GetMessages("T0", 0, off, 32, nil)
			if err != nil || r.Status != GetFound {
				t.Fatalf("from %d: %v %v", off, err, r.Status)
			}
			for i, q := range r.QueueOffsets {
				if q != off+int64(i) {
					t.Fatalf("from %d: offset %d served where %d was due", from, q, off+int64(i))
				}
			}
			off = r.NextBeginOffset
			r.Release()
		}
	}
	check(150) // the damaged entry first
	check(minOff)
	if st := s.Stats(); st.CQEntriesRebuilt != 1 {
		t.Fatalf("rebuilt %d, want 1", st.CQEntriesRebuilt)
	}
}

// A pull with a tag filter skips entries whose tags code does not match
// without reading their records: damaged entries (zeroed, garbage) are
// checked and rebuilt first, so a tag subscriber gets every message of
// its tag. Zeroed entries (tags code 0) used to be filtered out unread.
func TestStoreCQDamageTagFilter(t *testing.T) {
	root := t.TempDir()
	corpus := buildCorpusN(t, root, 2000)
	var want []string
	for _, c := range corpus {
		if c.spec.topic == "T0" && c.spec.qid == 0 && c.spec.tags == "tag1" {
			want = append(want, c.spec.body)
		}
	}
	path := filepath.Join(root, "consumequeue", "T0", "0", fileNameFor(0))
	b := readFile(t, path)
	clear(b[4*cqEntrySize : 30*cqEntrySize])
	for i := 40 * cqEntrySize; i < 44*cqEntrySize; i++ {
		b[i] = byte(i*7 + 3)
	}
	writeFile(t, path, b)
	s := openTest(t, root, nil)
	tag1 := record.TagsHashBytes([]byte("tag1"))
	var got []string
	for off := int64(0); off < s.MaxOffset("T0", 0); {
		r, err := s.GetMessages("T0", 0, off, 32, func(code int64) bool { return code == tag1 })
		if err != nil {
			t.Fatal(err)
		}
		for _, buf := range r.Buffers {
			m, _, err := record.Decode(buf, true)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(m.Body))
		}
		off = r.NextBeginOffset
		r.Release()
	}
	if len(got) != len(want) {
		t.Fatalf("%d messages of tag1 served, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("message %d: %q, want %q", i, got[i], want[i])
		}
	}
}

// Zeroed entries in a store whose oldest commitlog segment retention
// removed: their log offset 0 lies below the commitlog's first offset,
// which is also what an entry of a removed record looks like, and a
// consumer whose offset lies deep in a zeroed run (a file cut short and
// extended with zeros) finds no stored entry just before it either. A
// zeroed entry (size 0) is damage all the same and is rebuilt. Those
// messages used to be skipped as removed.
func TestStoreCQDamageZeroedAfterRetention(t *testing.T) {
	root := t.TempDir()
	corpus := buildCorpusN(t, root, 2000)
	if err := os.Remove(segPath(root, 0)); err != nil {
		t.Fatal(err)
	}
	bodies := map[int64]string{} // T0/0's messages the commitlog still holds
	for _, c := range corpus {
		if c.spec.topic == "T0" && c.spec.qid == 0 && c.pr.PhysicalOffset >= segSz {
			bodies[c.pr.QueueOffset] = c.spec.body
		}
	}
	if _, ok := bodies[64]; !ok {
		t.Fatal("offset 64's record is in the removed segment")
	}
	for _, base := range []int64{64, 128} { // offsets 64..191 zeroed
		path := filepath.Join(root, "consumequeue", "T0", "0", fileNameFor(base*cqEntrySize))
		b := readFile(t, path)
		clear(b)
		writeFile(t, path, b)
	}
	s := openTest(t, root, nil)
	read := func(from int64) (served []int64) {
		t.Helper()
		for off := from; off < s.MaxOffset("T0", 0); {
			r, err := s.GetMessages("T0", 0, off, 16, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, buf := range r.Buffers {
				m, _, err := record.Decode(buf, true)
				if err != nil || m.QueueOffset != r.QueueOffsets[i] || string(m.Body) != bodies[m.QueueOffset] {
					t.Fatalf("offset %d: %v, record of offset %d", r.QueueOffsets[i], err, m.QueueOffset)
				}
				served = append(served, m.QueueOffset)
			}
			if r.NextBeginOffset <= off {
				t.Fatalf("from %d: %v, next %d", off, r.Status, r.NextBeginOffset)
			}
			off = r.NextBeginOffset
			r.Release()
		}
		return served
	}
	// A consumer at offset 150, deep in the zeroed run, first.
	if got := read(150); len(got) == 0 || got[0] != 150 {
		t.Fatalf("from 150: first served %v", got[:min(len(got), 3)])
	}
	if got := read(s.MinOffset("T0", 0)); len(got) != len(bodies) {
		t.Fatalf("%d messages served, want %d", len(got), len(bodies))
	}
	if st := s.Stats(); st.CQEntriesRebuilt < 128 || st.CQEntriesLost != 0 {
		t.Fatalf("rebuilt %d, lost %d; want 128 rebuilt", st.CQEntriesRebuilt, st.CQEntriesLost)
	}
}

// A search by time (SEARCH_OFFSET_BY_TIMESTAMP, an offset reset by
// time) that meets damaged entries rebuilds them and answers the exact
// offset. It took them for "before everything" and answered the first
// offset after them: the messages between were skipped.
func TestStoreCQDamageOffsetByTime(t *testing.T) {
	root := t.TempDir()
	clock := &fakeClock{now: time.Now()}
	s := openTest(t, root, func(o *Options) { o.Now = clock.Now })
	var times []int64
	for i := range 300 {
		clock.Add(10 * time.Millisecond)
		times = append(times, mustPut(t, s, msgSpec{topic: "T", qid: 0, body: fmt.Sprint(i)}).StoreTimestamp)
	}
	waitDispatched(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "consumequeue", "T", "0", fileNameFor(0))
	b := readFile(t, path)
	clear(b[10*cqEntrySize : 41*cqEntrySize])
	writeFile(t, path, b)
	s = openTest(t, root, nil)
	for _, k := range []int64{10, 25, 40, 50} {
		if got := s.OffsetByTime("T", 0, times[k]); got != k {
			t.Fatalf("offset of time %d: %d, want %d", times[k], got, k)
		}
	}
}

// Retention removed the oldest segments; an entry of a still stored
// record damaged so that it points below the commitlog's start: a search
// by time (OffsetByTime) rebuilds it, as a pull does, rather than taking
// it for a removed record, "before everything", which moved the search
// past it (it answered the next offset).
func TestStoreCQDamageBelowLogStartOffsetByTime(t *testing.T) {
	root := t.TempDir()
	clock := &fakeClock{now: time.Now()}
	s := openTest(t, root, func(o *Options) { o.Now = clock.Now })
	var res []PutResult
	for i := range 1500 {
		clock.Add(10 * time.Millisecond)
		res = append(res, mustPut(t, s, msgSpec{topic: "T", qid: 0, body: fmt.Sprintf("%d:%0100d", i, 0)}))
	}
	waitDispatched(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, base := range []int64{0, segSz} {
		if err := os.Remove(segPath(root, base)); err != nil {
			t.Fatal(err)
		}
	}
	k := -1 // an entry a few records into the oldest stored segment
	for i, r := range res {
		if r.PhysicalOffset >= 2*segSz {
			k = i + 5
			break
		}
	}
	if k < 0 || res[k].PhysicalOffset >= 3*segSz {
		t.Fatalf("no record just past the removed segments (k %d)", k)
	}
	const perFile = 64 // testOptions' CQEntriesPerFile
	path := filepath.Join(root, "consumequeue", "T", "0", fileNameFor(int64(k/perFile*perFile)*cqEntrySize))
	b := readFile(t, path)
	be.PutUint64(b[(k%perFile)*cqEntrySize:], 4096) // removed with segment 0
	writeFile(t, path, b)

	s = openTest(t, root, nil)
	for _, q := range []int{k, k + 1, k + 20} {
		if got := s.OffsetByTime("T", 0, res[q].StoreTimestamp); got != int64(q) {
			t.Fatalf("offset of the time of %d: %d", q, got)
		}
	}
	if st := s.Stats(); st.CQEntriesRebuilt != 1 {
		t.Fatalf("rebuilt %d, want 1", st.CQEntriesRebuilt)
	}
}

// longRebuildLog is sparseQueueLog in a temp dir with rebuild walks cut
// to 16 KiB a pull (maxRepairScan, restored at cleanup), for the tests of
// rebuilds longer than one pull: it returns the store's root, the path
// and bytes of T/0's first queue file, and T/0's bodies.
func longRebuildLog(t *testing.T) (root, path string, b []byte, bodies []string) {
	t.Helper()
	old := maxRepairScan
	maxRepairScan = 16 << 10
	t.Cleanup(func() { maxRepairScan = old })
	root = t.TempDir()
	bodies = sparseQueueLog(t, root)
	path = filepath.Join(root, "consumequeue", "T", "0", fileNameFor(0))
	return root, path, readFile(t, path), bodies
}

// sparseQueueLog writes, to a store at root that it closes, 12,800
// messages of which every 20th (body "t<i>") goes to T/0 and the others
// (300 bytes each) to B/0: T/0's records are about 7 KiB of log apart,
// and its 640 entries fill ten queue files (a start re-checks only the
// last). It returns T/0's bodies in order.
func sparseQueueLog(t *testing.T, root string) []string {
	t.Helper()
	s := openTest(t, root, nil)
	var bodies []string
	for i := range 12800 {
		if i%20 == 0 {
			bodies = append(bodies, fmt.Sprint("t", i))
			mustPut(t, s, msgSpec{topic: "T", qid: 0, body: bodies[len(bodies)-1]})
			continue
		}
		mustPut(t, s, msgSpec{topic: "B", qid: 0, body: fmt.Sprintf("%0300d", i)})
	}
	waitDispatched(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return bodies
}

// A rebuild whose commitlog range is long is walked over several pulls,
// at most maxRepairScan bytes each: a pull that meets the run returns
// what it has before it (or nothing) with the run's first offset as the
// next one, and the pull that finishes the walk serves the rebuilt
// entries; every message is served once at its own offset. The whole
// walk used to run inside the one pull that met the run.
func TestStoreCQDamageLongRebuildOverPulls(t *testing.T) {
	root, path, b, bodies := longRebuildLog(t)
	clear(b[10*cqEntrySize : 40*cqEntrySize]) // about 210 KiB of log to walk
	writeFile(t, path, b)

	s := openTest(t, root, nil)
	later := 0
	var got []string
	for off := int64(0); off < s.MaxOffset("T", 0); {
		r, err := s.GetMessages("T", 0, off, 32, nil)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Status == GetFound:
			for i, buf := range r.Buffers {
				m, _, err := record.Decode(buf, true)
				if err != nil || m.QueueOffset != r.QueueOffsets[i] || r.QueueOffsets[i] != off+int64(i) {
					t.Fatalf("from %d: message %d at offset %d: %v", off, i, r.QueueOffsets[i], err)
				}
				got = append(got, string(m.Body))
			}
		case r.Status == GetNoMatchedMessage && r.NextBeginOffset == 10 && off == 10:
			later++
		default:
			t.Fatalf("from %d: %v, next %d", off, r.Status, r.NextBeginOffset)
		}
		off = r.NextBeginOffset
		r.Release()
	}
	if len(got) != len(bodies) || fmt.Sprint(got) != fmt.Sprint(bodies) {
		t.Fatalf("%d messages served, want %d in order", len(got), len(bodies))
	}
	if later < 5 {
		t.Fatalf("%d pulls left the walk to the next one; want the ~210 KiB walked 16 KiB a pull", later)
	}
	if st := s.Stats(); st.CQEntriesRebuilt != 30 {
		t.Fatalf("rebuilt %d, want 30", st.CQEntriesRebuilt)
	}
}

// Two long rebuilds in one queue, met by pulls that alternate between
// them (two groups at different offsets), each go on where they got to:
// both finish and serve their messages. When a queue kept one walk, each
// pull at one run threw the other's walk away and started its own again:
// neither ever finished, and both consumers got nothing for ever.
func TestStoreCQDamageTwoLongRebuildsAlternate(t *testing.T) {
	root, path, b, _ := longRebuildLog(t)
	clear(b[5*cqEntrySize : 25*cqEntrySize])  // ~140 KiB of log to walk
	clear(b[40*cqEntrySize : 60*cqEntrySize]) // another, intact entries between
	writeFile(t, path, b)

	s := openTest(t, root, nil)
	done := map[int64]bool{}
	for i := 0; i < 200 && len(done) < 2; i++ {
		off := []int64{5, 40}[i%2]
		if done[off] {
			continue
		}
		r, err := s.GetMessages("T", 0, off, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Status == GetFound:
			m, _, err := record.Decode(r.Buffers[0], true)
			if err != nil || r.QueueOffsets[0] != off || string(m.Body) != fmt.Sprint("t", off*20) {
				t.Fatalf("at %d: offset %d body %q: %v", off, r.QueueOffsets[0], m.Body, err)
			}
			done[off] = true
		case r.Status == GetNoMatchedMessage && r.NextBeginOffset == off:
		default:
			t.Fatalf("at %d: %v, next %d", off, r.Status, r.NextBeginOffset)
		}
		r.Release()
	}
	if len(done) != 2 {
		t.Fatalf("rebuilds finished: %v after 200 alternating pulls; want both", done)
	}
	if st := s.Stats(); st.CQEntriesRebuilt != 40 {
		t.Fatalf("rebuilt %d, want 40", st.CQEntriesRebuilt)
	}
}

// A long rebuild left to the next pull is dropped when its topic is
// deleted: the deleted queue is never pulled again, and its walk (with
// its entries found so far, up to maxRepairRun of them) stayed in the
// store for good. The topic made again under the same name serves its
// own messages.
func TestStoreCQDamageRebuildDroppedWithTopic(t *testing.T) {
	root, path, b, _ := longRebuildLog(t)
	clear(b[10*cqEntrySize : 40*cqEntrySize])
	writeFile(t, path, b)

	s := openTest(t, root, nil)
	scans := func() int {
		s.cqRepairMu.Lock()
		defer s.cqRepairMu.Unlock()
		return len(s.cqRepairScans)
	}
	r, err := s.GetMessages("T", 0, 10, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != GetNoMatchedMessage || r.NextBeginOffset != 10 {
		t.Fatalf("pull at the damaged run: %v, next %d; want its walk left to the next pull", r.Status, r.NextBeginOffset)
	}
	r.Release()
	if n := scans(); n != 1 {
		t.Fatalf("%d queues with a walk under way, want 1", n)
	}
	if err := s.DeleteTopic("T"); err != nil {
		t.Fatal(err)
	}
	if n := scans(); n != 0 {
		t.Fatalf("%d queues of a deleted topic still have a walk under way", n)
	}
	mustPut(t, s, msgSpec{topic: "T", qid: 0, body: "again"})
	waitDispatched(t, s)
	r, err = s.GetMessages("T", 0, 0, 32, nil)
	if err != nil || r.Status != GetFound || len(r.Buffers) != 1 {
		t.Fatalf("the topic made again: %v %v", r.Status, err)
	}
	r.Release()
}
