package store

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"time"

	"github.com/smartgo/smartgo/store/record"
)

// RecoveryReport describes what Open found: which recovery ran, where the
// commitlog ends, what was re-dispatched and every cut made. Damage is
// never skipped silently: each cut of non-zero bytes is a *CorruptError.
type RecoveryReport struct {
	Abnormal        bool          // the abort marker was present (crash recovery)
	CheckpointValid bool          // the checkpoint was present and its checksum matched
	Checkpoint      checkpoint    // as read (zero if invalid)
	ScanFrom        int64         // commitlog offset where record validation started
	ScanBytes       int64         // bytes of commitlog validated (every record's integrity checked)
	ScanDuration    time.Duration // time the validation took
	CommitLogEnd    int64         // offset after the last good record
	DispatchFrom    int64         // offset re-dispatch started at
	Redispatched    int64         // records walked by the re-dispatch
	IndexFrom       int64         // offset the key index walk started at
	FullReplay      bool          // a queue gap forced a re-dispatch from the commitlog minimum
	Reindexed       bool          // damaged index files found: walked again at start or rebuilt once the store serves
	Corruptions     []*CorruptError
	// Skipped lists the ranges of the commitlog that held bytes that are
	// not records (damage, holes) and were skipped: the records after
	// them stay readable.
	Skipped     []SkippedRange
	Truncations []string // benign cuts (e.g. consume-queue entries beyond the commitlog end)
	Duration    time.Duration
}

// Err returns the corruptions found as one error (each errors.Is
// ErrCorrupt), or nil.
func (r RecoveryReport) Err() error {
	errs := make([]error, len(r.Corruptions))
	for i, c := range r.Corruptions {
		errs[i] = c
	}
	return errors.Join(errs...)
}

// SkippedRange is a range of the commitlog recovery (or the dispatcher)
// skipped because it holds no valid record: damaged records, zeros, a
// missing or short segment.
type SkippedRange struct {
	File     string // the segment holding From
	From, To int64  // commitlog offsets [From, To)
	Records  int    // consume-queue entries that point into it: stored records lost
	Err      error  // why the first bytes are not a record, if known
}

func (s *Store) corruption(c *CorruptError) {
	s.report.Corruptions = append(s.report.Corruptions, c)
	s.log.Error("store: corruption found", "file", c.File, "offset", c.Offset, "reason", c.Reason, "err", c.Err)
	s.emit(Event{Kind: EventCorruption, File: c.File, Offset: c.Offset, Err: c})
}

// recover rebuilds the in-memory state from the files (before any
// goroutine runs, so it owns everything).
func (s *Store) recover(abnormal bool) error {
	start := time.Now()
	rep := &s.report
	rep.Abnormal = abnormal
	s.log.Info("store: recovering", "abnormal", abnormal, "root", s.opts.Root)
	cp, ok, err := readCheckpoint(s.opts.Root)
	var ce *CorruptError
	switch {
	case errors.As(err, &ce):
		s.corruption(ce)
	case err != nil:
		return err
	}
	rep.CheckpointValid, rep.Checkpoint = ok, cp
	s.cp = cp
	s.cl.flushedTs.Store(cp.Physic)

	damaged, err := s.cl.loadSegments()
	if err != nil {
		return err
	}
	for _, d := range damaged {
		s.corruption(d)
	}
	segs := s.cl.list()
	scanIdx := 0
	switch {
	case len(segs) == 0:
	case !abnormal:
		scanIdx = max(0, len(segs)-s.opts.RecoverSegments)
	case ok:
		limit := cp.min() - 3000
		for i := len(segs) - 1; i >= 0; i-- {
			if ts, ok := firstRecordTime(segs[i]); ok && ts <= limit {
				scanIdx = i
				break
			}
		}
	}
	// A segment that was short (extended with zeros) is validated too.
	for _, d := range damaged {
		for i, m := range segs {
			if m.path == d.File && i < scanIdx {
				scanIdx = i
			}
		}
	}
	end := int64(0)
	if len(segs) > 0 {
		from := scanIdx
		if abnormal && s.opts.VerifyAllOnCrash {
			from = 0 // every record is checked after a crash, not only the recent ones
		}
		rep.ScanFrom = segs[from].base
		scanStart := time.Now()
		var done bool
		if end, done = s.scanCommitLog(from); !done {
			return s.rstop.stopErr("the commitlog check")
		}
		rep.ScanBytes = end - rep.ScanFrom
		rep.ScanDuration = time.Since(scanStart)
	}
	rep.CommitLogEnd = end
	s.cl.committed.Store(end)
	s.cl.flushed.Store(end)
	s.cl.writePos = end
	s.cl.appended.Store(end)
	if m := findSeg(s.cl.list(), end, s.cl.segSize); m != nil {
		s.cl.setActive(m)
		m.wrote.Store(end - m.base)
		m.flushedTo.Store(end - m.base)
	}
	clMin := s.cl.minOffset()

	idxDamaged, reindex, err := s.idx.load()
	if err != nil {
		return err
	}
	for _, d := range idxDamaged {
		s.corruption(d)
	}
	s.stats.indexDamaged.Add(int64(len(idxDamaged)))
	rep.Reindexed = reindex || len(idxDamaged) > 0

	dispatchFrom, err := s.recoverConsumeQueues(end)
	if err != nil {
		return err
	}
	if !abnormal {
		dispatchFrom = min(dispatchFrom, s.checkQueueManifest(clMin))
	}
	if abnormal && len(segs) > 0 {
		dispatchFrom = min(dispatchFrom, segs[scanIdx].base)
	}
	dispatchFrom = max(min(dispatchFrom, end), clMin)
	rep.DispatchFrom = dispatchFrom

	s.dispMu.Lock()
	d := &s.disp
	d.pos = dispatchFrom
	d.fillGaps = false
	d.recovery = true // bytes from disk: check every record before it makes an entry
	d.stalled = false
	s.dispatchRangeLocked(end)
	if d.gapSeen && !s.rstop.check() {
		rep.FullReplay = true
		s.log.Warn("store: consume queue gap during recovery, re-dispatching from the commitlog start")
		d.pos = clMin
		d.fillGaps = true // what is still missing now is gone for good: pad with holes
		s.dispatchRangeLocked(end)
	}
	if s.rstop.check() {
		d.recovery = false
		d.releaseCur()
		s.dispMu.Unlock()
		return s.rstop.stopErr("the re-dispatch")
	}
	var undispatched map[cqKey]int64
	switch {
	case d.pos < end && d.stalled:
		// A consume-queue entry could not be written (a full disk): the
		// records from pos on stay, and the dispatcher goes on from there
		// once it can (the disk watcher wakes it). New records take queue
		// offsets after theirs.
		s.log.Warn("store: re-dispatch waits for disk space; later records reach their consume queues once an entry can be written",
			"from", d.pos, "to", end)
		undispatched = s.queueOffsetsIn(d.pos, end)
	case d.pos < end:
		s.corruption(&CorruptError{File: s.cl.dir, Offset: d.pos, Reason: "re-dispatch stopped before the commitlog end; later records are not in consume queues"})
		d.pos = end
	}
	d.stalled = false
	d.recovery = false
	s.addSkipped(d.skips...)
	d.skips = nil
	s.report.Corruptions = append(s.report.Corruptions, d.refused...)
	d.refused = nil
	d.fillGaps = true
	d.gapSeen = false
	d.touched = d.touched[:0]
	rep.Redispatched = d.count
	d.releaseCur()
	s.dispatched.Store(d.pos)
	if s.dispatchTs.Load() == 0 {
		s.dispatchTs.Store(cp.Logics)
	}
	if !s.recoverIndex(dispatchFrom, d.pos, reindex) {
		s.dispMu.Unlock()
		return s.rstop.stopErr("the index walk")
	}
	if s.indexTs.Load() == 0 {
		s.indexTs.Store(cp.Index)
	}
	s.dispMu.Unlock()

	for _, cq := range s.allCQs() {
		cq.correctMin(clMin)
		s.setQueueOffsetLocked(cqKey{cq.topic, cq.queueID}, cq.maxOff.Load())
	}
	for key, next := range undispatched {
		if s.queueOffsetLocked(key) < next {
			s.setQueueOffsetLocked(key, next)
		}
	}
	s.reportSkipped()
	rep.Duration = time.Since(start)
	s.log.Info("store: recovered", "abnormal", abnormal, "commitlogEnd", end, "dispatchFrom", dispatchFrom,
		"redispatched", rep.Redispatched, "corruptions", len(rep.Corruptions), "skippedRanges", len(rep.Skipped),
		"checked", rep.ScanBytes, "checkTook", rep.ScanDuration, "took", rep.Duration)
	return nil
}

// queueOffsetsIn returns, for each queue with records in the commitlog's
// [from, end), the queue offset after its last one there.
func (s *Store) queueOffsetsIn(from, end int64) map[cqKey]int64 {
	next := map[cqKey]int64{}
	var c segCursor
	pos := from
	c.walk(s.cl, &pos, end, func(v *record.View, _ int64, _ int32) bool {
		e := s.dispEntryOf(v)
		if !e.queued() {
			return true
		}
		key := cqKey{string(e.topic), e.queueID}
		if next[key] < e.qoff+1 {
			next[key] = e.qoff + 1
		}
		return true
	}, nil)
	c.releaseCur()
	return next
}

// firstRecordTime returns the store timestamp of a segment's first record.
func firstRecordTime(m *mappedFile) (int64, bool) {
	size, magic, err := record.PeekHeader(m.data)
	if err != nil || magic != record.MagicMessage {
		return 0, false
	}
	return storeTimeIn(m, m.base, size)
}

// recoverConsumeQueues loads every queue, cuts damaged or dangling entries
// and returns the commitlog offset re-dispatch must start from.
func (s *Store) recoverConsumeQueues(clEnd int64) (int64, error) {
	root := filepath.Join(s.opts.Root, "consumequeue")
	if err := s.fs.MkdirAll(root, 0o755); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrBadRoot, err)
	}
	topics, err := s.fs.ReadDir(root)
	if err != nil {
		return 0, fmt.Errorf("store: read %s: %w", root, err)
	}
	clMin := s.cl.minOffset()
	from := int64(-1) // max over queues of the end of their last entry
	lowest := clEnd   // lowered where a queue lost entries
	for _, t := range topics {
		if !t.IsDir() {
			continue
		}
		qdirs, err := s.fs.ReadDir(filepath.Join(root, t.Name()))
		if err != nil {
			return 0, fmt.Errorf("store: read %s: %w", t.Name(), err)
		}
		for _, q := range qdirs {
			if s.rstop.check() {
				return 0, s.rstop.stopErr("the consume-queue check")
			}
			id, err := strconv.ParseInt(q.Name(), 10, 32)
			if err != nil || !q.IsDir() {
				continue
			}
			cq := newConsumeQueue(s.fs, s.opts.Root, t.Name(), int32(id), s.opts.CQEntriesPerFile)
			damaged, err := cq.loadFiles()
			if err != nil {
				cq.closeAll(false)
				return 0, err
			}
			for _, d := range damaged {
				s.corruption(d)
			}
			if len(cq.list()) == 0 {
				continue
			}
			cut, beyond := cq.recoverEntries(s.opts.RecoverSegments, clEnd, func(off int64, e cqEntry) string {
				return s.checkEntry(cq, off, e, clMin)
			})
			last := cq.lastPhyEnd()
			if cut != nil {
				s.corruption(cut)
			}
			if cut != nil || beyond || len(damaged) > 0 {
				if last < 0 {
					lowest = clMin
				} else {
					lowest = min(lowest, last)
				}
			}
			if beyond {
				s.report.Truncations = append(s.report.Truncations,
					fmt.Sprintf("%s: entries beyond the commitlog end %d dropped from offset %d", cq.dir, clEnd, cq.maxOff.Load()))
			}
			from = max(from, last)
			s.cqMu.Lock()
			qs := s.cqs[cq.topic]
			if qs == nil {
				qs = make(map[int32]*consumeQueue)
				s.cqs[cq.topic] = qs
			}
			qs[cq.queueID] = cq
			s.cqMu.Unlock()
		}
	}
	if from < 0 {
		from = clMin
	}
	return min(from, lowest), nil
}

// checkQueueManifest compares the consume queues just loaded with the
// manifest the last clean shutdown wrote (queues.go) and returns where
// re-dispatch must start so that the queues that lost entries since (files
// deleted or lost while the broker was down) get them back from the
// commitlog: math.MaxInt64 when none did or there is no manifest.
func (s *Store) checkQueueManifest(clMin int64) int64 {
	qs, ok, err := readQueueManifest(s.opts.Root)
	if err != nil {
		// Without it, no queue can be trusted to be whole.
		var ce *CorruptError
		if !errors.As(err, &ce) {
			ce = &CorruptError{File: filepath.Join(s.opts.Root, queueManifestName), Reason: "queue manifest unreadable", Err: err}
		}
		s.corruption(ce)
		return clMin
	}
	from := int64(math.MaxInt64)
	if !ok {
		return from
	}
	for _, q := range qs {
		s.cqMu.RLock()
		cq := s.cqs[q.topic][q.id]
		s.cqMu.RUnlock()
		switch {
		case cq == nil:
			s.corruption(&CorruptError{File: filepath.Join(s.opts.Root, "consumequeue", q.topic, strconv.Itoa(int(q.id))),
				Reason: fmt.Sprintf("consume queue missing; it had %d entries at the last clean shutdown: rebuilt from the commitlog", q.maxOff)})
			from = clMin
		case cq.maxOff.Load() < q.maxOff:
			s.corruption(&CorruptError{File: cq.dir, Offset: cq.maxOff.Load() * cqEntrySize,
				Reason: fmt.Sprintf("consume queue ends at entry %d, it had %d at the last clean shutdown: rebuilt from the commitlog",
					cq.maxOff.Load(), q.maxOff)})
			if last := cq.lastPhyEnd(); last >= 0 {
				from = min(from, last)
			} else {
				from = clMin
			}
		}
	}
	return from
}

// checkEntry verifies that a consume-queue entry points at the record it
// claims (only for records still stored).
func (s *Store) checkEntry(cq *consumeQueue, off int64, e cqEntry, clMin int64) string {
	if e.phy < clMin {
		return ""
	}
	m := findSeg(s.cl.list(), e.phy, s.cl.segSize)
	if m == nil {
		return fmt.Sprintf("entry phy=%d outside the commitlog", e.phy)
	}
	rel := e.phy - m.base
	if rel+int64(e.size) > m.size {
		return fmt.Sprintf("entry phy=%d size=%d crosses a segment end", e.phy, e.size)
	}
	v, err := record.Parse(m.data[rel:rel+int64(e.size)], false)
	switch {
	case err != nil:
		return fmt.Sprintf("entry phy=%d does not point at a record: %v", e.phy, err)
	case int64(v.TotalSize) != int64(e.size):
		return fmt.Sprintf("entry size %d, record size %d", e.size, v.TotalSize)
	case v.QueueOffset != off || v.QueueID != cq.queueID || string(v.Topic) != cq.topic:
		return fmt.Sprintf("entry %d points at record of %s/%d offset %d", off, v.Topic, v.QueueID, v.QueueOffset)
	}
	if s.opts.TagsCode != nil {
		// The hook's code follows its owner's configuration (the broker's
		// delay levels), which may have changed since the entry was
		// written: a different code there is not damage.
		if _, ok := s.opts.TagsCode(v.Topic, v.Properties, v.StoreTimestamp); ok {
			return ""
		}
	}
	if tags := s.dispEntryOf(&v).tags; tags != e.tags {
		return fmt.Sprintf("entry %d tagsCode %d, record's is %d", off, e.tags, tags)
	}
	return ""
}
