package store

import (
	"path/filepath"
	"testing"
)

// A consume-queue entry damaged in an old file of its queue (one the
// start does not re-check) whose log offset now points at another
// queue's record of the same size: a pull never serves that record as
// this queue's message (it used to: a message of another topic, under
// this queue's offset); it is refused and reported, and the rest of the
// queue is served.
func TestStoreCQEntryPointingAtAnotherRecord(t *testing.T) {
	root := t.TempDir()
	corpus := buildCorpusN(t, root, 2000) // 6 queues of about 333 entries: 6 files each
	var victim, other *corpusMsg
	for i := range corpus {
		c := &corpus[i]
		if c.spec.topic != "T0" || c.spec.qid != 0 || c.pr.QueueOffset != 10 {
			continue
		}
		victim = c
		for j := range corpus {
			o := &corpus[j]
			if o.pr.WroteBytes == c.pr.WroteBytes && (o.spec.topic != c.spec.topic || o.spec.qid != c.spec.qid) {
				other = o
				break
			}
		}
	}
	if victim == nil || other == nil {
		t.Fatal("no record of the same size in another queue")
	}
	path := filepath.Join(root, "consumequeue", "T0", "0", fileNameFor(0))
	b := readFile(t, path)
	at := victim.pr.QueueOffset * cqEntrySize
	if got := int64(be.Uint64(b[at:])); got != victim.pr.PhysicalOffset {
		t.Fatalf("entry %d holds %d, record at %d", victim.pr.QueueOffset, got, victim.pr.PhysicalOffset)
	}
	be.PutUint64(b[at:], uint64(other.pr.PhysicalOffset))
	writeFile(t, path, b)

	s := openTest(t, root, nil)
	bad := s.Stats().BadRecords
	r, err := s.GetMessages("T0", 0, 0, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != GetFound || len(r.Buffers) != 32 || r.QueueOffsets[31] != 32 {
		t.Fatalf("status %v, %d records", r.Status, len(r.Buffers))
	}
	for i, off := range r.QueueOffsets {
		if off == victim.pr.QueueOffset || r.PhysicalOffsets[i] == other.pr.PhysicalOffset {
			t.Fatalf("queue offset %d served the record at %d (of %s/%d)", off, r.PhysicalOffsets[i], other.spec.topic, other.spec.qid)
		}
	}
	if s.Stats().BadRecords != bad+1 {
		t.Fatalf("bad records %d, was %d", s.Stats().BadRecords, bad)
	}
	r.Release()
	// The entry is still damaged (it is refused, not repaired): the
	// consistency check of openTest's cleanup would say so.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
