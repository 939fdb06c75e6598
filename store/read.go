package store

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/smartgo/smartgo/store/record"
)

// GetStatus is the outcome of GetMessages (RocketMQ GetMessageStatus).
type GetStatus int

const (
	GetFound               GetStatus = iota // at least one message
	GetNoMatchedMessage                     // entries scanned, none matched the filter
	GetMessageWasRemoving                   // the records were deleted by retention
	GetOffsetFoundNull                      // the consume-queue file for the offset is gone
	GetOffsetOverflowBadly                  // offset > max offset
	GetOffsetOverflowOne                    // offset == max offset (long-poll candidate)
	GetOffsetTooSmall                       // offset < min offset
	GetNoMatchedLogicQueue                  // no such queue
	GetNoMessageInQueue                     // queue exists but is empty
)

var getStatusNames = [...]string{"FOUND", "NO_MATCHED_MESSAGE", "MESSAGE_WAS_REMOVING", "OFFSET_FOUND_NULL",
	"OFFSET_OVERFLOW_BADLY", "OFFSET_OVERFLOW_ONE", "OFFSET_TOO_SMALL", "NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE"}

// String returns the RocketMQ status name.
func (s GetStatus) String() string {
	if int(s) < len(getStatusNames) {
		return getStatusNames[s]
	}
	return fmt.Sprintf("GetStatus(%d)", int(s))
}

// Batch limits of one read (protocol section 2.4).
const (
	MaxMsgsInMemory    = 32
	MaxBytesInMemory   = 256 << 10
	MaxMsgsOnDisk      = 8
	MaxBytesOnDisk     = 64 << 10
	minScanBytes       = 16000
	maxResultsPerQuery = 64
)

// TagFilter decides from a consume-queue tagsCode whether a message may
// match a subscription. nil matches everything.
type TagFilter func(tagsCode int64) bool

// TagSet is a small set of tag hashes; its Match method is a TagFilter.
type TagSet []int64

// Match reports whether code is in the set (an empty set matches all).
func (t TagSet) Match(code int64) bool {
	if len(t) == 0 {
		return true
	}
	for _, c := range t {
		if c == code {
			return true
		}
	}
	return false
}

// RecordFilter decides from a stored record (the bytes a pull returns)
// whether it matches a subscription; it runs after the TagFilter let the
// entry through and must not keep rec. nil matches everything.
type RecordFilter func(rec []byte) bool

// GetResult holds records read from mapped segments, without copying.
// Buffers are slices of the mappings (one per record, in order) suitable for
// net.Buffers; they stay valid until Release, which must be called exactly
// once. Results are pooled: do not use one after Release.
type GetResult struct {
	Status          GetStatus
	NextBeginOffset int64
	MinOffset       int64
	MaxOffset       int64
	Buffers         [][]byte
	QueueOffsets    []int64 // logical offset of each buffer (GetMessages only)
	PhysicalOffsets []int64 // commitlog offset of each buffer
	TotalBytes      int
	SuggestSlave    bool // the data read was judged "on disk" (far behind the writer)

	// QueryByKey only: newest indexed store time and commitlog offset.
	IndexLastUpdateTimestamp int64
	IndexLastUpdatePhyOffset int64

	held []*mappedFile
	s    *Store
}

var resultPool = sync.Pool{New: func() any {
	return &GetResult{Buffers: make([][]byte, 0, MaxMsgsInMemory), QueueOffsets: make([]int64, 0, MaxMsgsInMemory),
		PhysicalOffsets: make([]int64, 0, MaxMsgsInMemory), held: make([]*mappedFile, 0, 4)}
}}

func (s *Store) newResult() *GetResult {
	r := resultPool.Get().(*GetResult)
	r.s = s
	return r
}

// MessageCount is the number of records in Buffers.
func (r *GetResult) MessageCount() int { return len(r.Buffers) }

// Release drops the segment references; the buffers become invalid.
func (r *GetResult) Release() {
	if r == nil {
		return
	}
	for _, m := range r.held {
		m.release()
	}
	clear(r.held)
	clear(r.Buffers)
	*r = GetResult{Buffers: r.Buffers[:0], QueueOffsets: r.QueueOffsets[:0],
		PhysicalOffsets: r.PhysicalOffsets[:0], held: r.held[:0]}
	resultPool.Put(r)
}

// hold returns the commitlog segment for [phy, phy+size) with a reference
// owned by r (reusing the last one taken), or nil.
func (r *GetResult) hold(cl *commitLog, phy int64, size int32) []byte {
	var m *mappedFile
	if n := len(r.held); n > 0 {
		if h := r.held[n-1]; h.base <= phy && phy < h.base+h.size {
			m = h
		}
	}
	if m == nil {
		m = cl.acquireAt(phy)
		if m == nil {
			return nil
		}
		r.held = append(r.held, m)
	}
	rel := phy - m.base
	if size <= 0 || rel+int64(size) > m.size {
		return nil
	}
	return m.data[rel : rel+int64(size) : rel+int64(size)]
}

// GetMessages reads up to maxMsgs records of (topic, queueID) starting at
// logical offset offset, skipping entries whose tagsCode the filter
// rejects. It never returns nil; the caller must Release the result.
func (s *Store) GetMessages(topic string, queueID int32, offset int64, maxMsgs int, filter TagFilter) (*GetResult, error) {
	return s.GetMessagesFiltered(topic, queueID, offset, maxMsgs, filter, nil)
}

// GetMessagesFiltered is GetMessages with a second filter on the records
// the tag filter lets through (SQL92 subscriptions); a record it rejects
// is skipped like an entry the tag filter rejects.
func (s *Store) GetMessagesFiltered(topic string, queueID int32, offset int64, maxMsgs int, filter TagFilter, recFilter RecordFilter) (*GetResult, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	r := s.newResult()
	s.stats.getRequests.Add(1)
	cq := s.lookupCQ(topic, queueID)
	if cq == nil {
		r.Status = GetNoMatchedLogicQueue
		return r, nil
	}
	minOff, maxOff := cq.minOff.Load(), cq.maxOff.Load()
	r.MinOffset, r.MaxOffset = minOff, maxOff
	switch {
	case maxOff == 0:
		r.Status = GetNoMessageInQueue
		return r, nil
	case offset < minOff:
		r.Status, r.NextBeginOffset = GetOffsetTooSmall, minOff
		return r, nil
	case offset == maxOff:
		r.Status, r.NextBeginOffset = GetOffsetOverflowOne, offset
		return r, nil
	case offset > maxOff:
		r.Status, r.NextBeginOffset = GetOffsetOverflowBadly, maxOff
		return r, nil
	}
	if maxMsgs <= 0 {
		maxMsgs = 1
	}
	maxScan := max(int64(minScanBytes), int64(maxMsgs)*cqEntrySize) / cqEntrySize
	clMin := s.cl.minOffset()
	clMax := s.cl.committed.Load()
	removing := false
	repaired := int64(-1) // the offset last rebuilt (read again once)
	// stored: an entry of this scan pointed at its own record at or past
	// clMin; entries are in log order, so a later one below clMin is
	// damaged, not removed.
	stored := false
	lastPhy := int64(-1) // the newest entry's record this scan passed
	off := offset
	scanned := int64(0)
	r.Status = GetNoMatchedMessage
scan:
	for off < maxOff && scanned < maxScan {
		f, rel := cq.acquireFile(off)
		if f == nil {
			if len(r.Buffers) == 0 {
				r.Status = GetOffsetFoundNull
				r.NextBeginOffset = cq.nextFileOffset(off, maxOff)
				return r, nil
			}
			break
		}
		for ; rel+cqEntrySize <= f.size && off < maxOff && scanned < maxScan; rel += cqEntrySize {
			e := cq.entryIn(f, off, rel)
			if e.isHole() {
				off++
				scanned++
				continue
			}
			// A zeroed entry (size 0) is damage whatever its log offset
			// (a consumer deep in a zeroed run finds no stored entry just
			// before it): rebuilt below.
			if e.phy >= 0 && e.phy < clMin && e.size > 0 && !stored && !s.storedBefore(cq, off, clMin) {
				removing = true
				off++
				scanned++
				continue
			} // else below an entry of a stored record: damaged (below)
			inMem := clMax-e.phy <= s.opts.MemoryResidentBytes
			if len(r.Buffers) > 0 && s.batchFull(r, e.size, maxMsgs, inMem) {
				f.release()
				break scan
			}
			// The tag filter skips entries without reading their record:
			// one that shows damage by itself (no record, or not after the
			// entry before it, entries being in log order) is read and
			// rebuilt first, as below, then filtered.
			suspect := e.size <= 0 || e.phy < 0 || e.phy >= clMax || e.phy <= lastPhy
			if filter != nil && !suspect && !filter(e.tags) {
				lastPhy = e.phy
				off++
				scanned++
				continue
			}
			var buf []byte
			if e.size > 0 {
				buf = r.hold(s.cl, e.phy, e.size)
			}
			bad := ""
			switch {
			case buf == nil && e.size > 0 && e.phy >= clMin && e.phy < s.cl.minOffset():
				removing = true // retention removed it meanwhile
				off++
				scanned++
				continue
			case buf == nil:
				bad = "consume-queue entry does not point at a record"
			default:
				if size, magic, _ := record.PeekHeader(buf); magic != record.MagicMessage || size != e.size || size < record.MinRecordSize {
					bad = "consume-queue entry does not point at a record"
				} else if int32(be.Uint32(buf[record.OffsetQueueID:])) != queueID || int64(be.Uint64(buf[record.OffsetQueueOffset:])) != off {
					// A damaged entry pointing at another record (of another
					// queue, or another offset of this one).
					bad = "consume-queue entry points at another queue's or offset's record"
				}
			}
			if bad != "" {
				// Never serve it as this offset's message: rebuild the
				// damaged entries from the commitlog (cqrepair.go) and read
				// this one again, once.
				if off != repaired {
					switch s.repairCQWithin(cq, off, bad, maxRepairScan) {
					case repairDone:
						repaired = off
						rel -= cqEntrySize
						continue
					case repairLater:
						// A long rebuild goes on at the next pull, which
						// starts at this entry.
						f.release()
						break scan
					}
				}
				s.badRead("pull", cq.dir, off*cqEntrySize, bad, nil)
				off++
				scanned++
				continue
			}
			stored, lastPhy = true, e.phy
			if filter != nil && suspect && !filter(e.tags) {
				off++
				scanned++
				continue
			}
			if err := s.verifyRead(buf); err != nil {
				s.badRead("pull", s.cl.dir, e.phy, "record fails verification, not served", err)
				off++
				scanned++
				continue
			}
			if recFilter != nil && !recFilter(buf) {
				off++
				scanned++
				continue
			}
			if !inMem {
				r.SuggestSlave = true
			}
			r.Buffers = append(r.Buffers, buf)
			r.QueueOffsets = append(r.QueueOffsets, off)
			r.PhysicalOffsets = append(r.PhysicalOffsets, e.phy)
			r.TotalBytes += len(buf)
			off++
			scanned++
		}
		f.release()
	}
	r.NextBeginOffset = off
	switch {
	case len(r.Buffers) > 0:
		r.Status = GetFound
		s.stats.getMessages.Add(int64(len(r.Buffers)))
		s.stats.getBytes.Add(int64(r.TotalBytes))
	case removing:
		r.Status = GetMessageWasRemoving
	}
	return r, nil
}

// storedBefore reports whether the nearest entry before off (holes
// skipped, at most 64 looked at) points at or past clMin: entries are in
// log order, so an entry at off below clMin is then damaged, not removed.
func (s *Store) storedBefore(cq *consumeQueue, off, clMin int64) bool {
	for o := off - 1; o >= cq.minOff.Load() && off-o <= 64; o-- {
		e, ok := cq.entry(o)
		if !ok {
			return false
		}
		if !e.isHole() {
			return e.phy >= clMin && e.size > 0 && s.checkEntry(cq, o, e, clMin) == ""
		}
	}
	return false
}

func (s *Store) batchFull(r *GetResult, next int32, maxMsgs int, inMem bool) bool {
	n := len(r.Buffers)
	if n >= maxMsgs {
		return true
	}
	if inMem {
		return n >= MaxMsgsInMemory || r.TotalBytes+int(next) > MaxBytesInMemory
	}
	return n >= MaxMsgsOnDisk || r.TotalBytes+int(next) > MaxBytesOnDisk
}

// MinOffset is the first logical offset of the queue still readable (0 for
// an unknown queue).
func (s *Store) MinOffset(topic string, queueID int32) int64 {
	if cq := s.lookupCQ(topic, queueID); cq != nil {
		return cq.minOff.Load()
	}
	return 0
}

// MaxOffset is the next logical offset of the queue (its entry count; 0 for
// an unknown queue).
func (s *Store) MaxOffset(topic string, queueID int32) int64 {
	if cq := s.lookupCQ(topic, queueID); cq != nil {
		return cq.maxOff.Load()
	}
	return 0
}

// storeTimeAt reads the store timestamp of the record at phy, or ok=false.
func (s *Store) storeTimeAt(phy int64, size int32) (int64, bool) {
	m := s.cl.acquireAt(phy)
	if m == nil {
		return 0, false
	}
	defer m.release()
	return storeTimeIn(m, phy, size)
}

// OffsetByTime returns the smallest logical offset of the queue whose
// record was stored at or after ts (ms); MaxOffset if none, 0 for an
// unknown queue. Binary search over the consume queue.
func (s *Store) OffsetByTime(topic string, queueID int32, ts int64) int64 {
	return s.searchQueue(topic, queueID, func(e cqEntry) bool {
		t, ok := s.storeTimeAt(e.phy, e.size)
		return !ok || t < ts
	})
}

// OffsetByPhysical returns the smallest logical offset of the queue whose
// record starts at or after the commitlog offset phy; MaxOffset if none,
// 0 for an unknown queue. Entries are in log order: a binary search over
// the consume queue, which reads no record. Unlike a store time, a log
// offset is this node's own: a bound such as "stored since this broker
// became master" holds whatever the old master's clock said.
func (s *Store) OffsetByPhysical(topic string, queueID int32, phy int64) int64 {
	return s.searchQueue(topic, queueID, func(e cqEntry) bool { return e.phy < phy })
}

// searchQueue returns the smallest logical offset of the queue whose
// entry (the next past holes, entryAtLogical) is not before the one
// sought, by before; entries before are all first (a binary search).
// MaxOffset if none, 0 for an unknown queue.
func (s *Store) searchQueue(topic string, queueID int32, before func(cqEntry) bool) int64 {
	cq := s.lookupCQ(topic, queueID)
	if cq == nil {
		return 0
	}
	lo, hi := cq.minOff.Load(), cq.maxOff.Load()
	clMin := s.cl.minOffset()
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, ok := s.entryAtLogical(cq, mid, clMin)
		if !ok || before(e) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// timeAtLogical returns the store time of the entry at off, looking forward
// past holes; ok=false means "treat as before everything" (entryAtLogical).
func (s *Store) timeAtLogical(cq *consumeQueue, off, clMin int64) (int64, bool) {
	e, ok := s.entryAtLogical(cq, off, clMin)
	if !ok {
		return 0, false
	}
	return s.storeTimeAt(e.phy, e.size)
}

// entryAtLogical returns the entry at off, or the first after it past
// holes; ok=false means "treat as before everything". A damaged
// entry is rebuilt from the commitlog first (cqrepair.go), else passed
// over like a hole: taken for "before everything", it would move a
// search past the offsets it sits among. An entry below the commitlog's
// start is a removed record only when no entry of a stored record comes
// before it (entries are in log order), as a pull decides (storedBefore):
// otherwise it is damage, rebuilt the same way.
func (s *Store) entryAtLogical(cq *consumeQueue, off, clMin int64) (cqEntry, bool) {
	maxOff := cq.maxOff.Load()
	repaired := int64(-1)
	for ; off < maxOff; off++ {
		e, ok := cq.entry(off)
		if !ok {
			return cqEntry{}, false
		}
		if e.isHole() {
			continue
		}
		why := ""
		if e.phy >= 0 && e.phy < clMin && e.size > 0 {
			if !s.storedBefore(cq, off, clMin) {
				return cqEntry{}, false // removed (a zeroed entry is damage: below)
			}
			why = fmt.Sprintf("entry phy=%d below the commitlog's start %d after an entry of a stored record", e.phy, clMin)
		} else {
			why = s.checkEntry(cq, off, e, clMin)
		}
		if why != "" {
			if off != repaired && s.repairCQ(cq, off, why) {
				repaired = off
				off-- // read it again
			}
			continue
		}
		return e, true
	}
	return cqEntry{}, false
}

// EarliestStoreTime returns the store timestamp of the queue's first
// readable message, or ok=false.
func (s *Store) EarliestStoreTime(topic string, queueID int32) (int64, bool) {
	cq := s.lookupCQ(topic, queueID)
	if cq == nil {
		return 0, false
	}
	return s.timeAtLogical(cq, cq.minOff.Load(), s.cl.minOffset())
}

// EarliestMessageTime returns the store timestamp of the first record in
// the commitlog, or ok=false when it is empty.
func (s *Store) EarliestMessageTime() (int64, bool) {
	return s.cl.storeTimeAt(s.cl.minOffset())
}

// storeTimeAt is the store time of the record starting at phy, if the
// log holds one there.
func (cl *commitLog) storeTimeAt(phy int64) (int64, bool) {
	if phy < cl.minOffset() || phy >= cl.committed.Load() {
		return 0, false
	}
	m := cl.acquireAt(phy)
	if m == nil {
		return 0, false
	}
	defer m.release()
	size, magic, err := record.PeekHeader(m.data[phy-m.base:])
	if err != nil || magic != record.MagicMessage {
		return 0, false
	}
	return storeTimeIn(m, phy, size)
}

// storeTimeIn reads STORETIMESTAMP of the record at phy inside m.
func storeTimeIn(m *mappedFile, phy int64, size int32) (int64, bool) {
	rel := phy - m.base
	if size < record.MinRecordSize || rel+int64(size) > m.size {
		return 0, false
	}
	b := m.data[rel:]
	sys := int32(be.Uint32(b[record.OffsetSysFlag:]))
	off := record.OffsetBornHost + 8
	if sys&record.FlagBornHostV6 != 0 {
		off = record.OffsetBornHost + 20
	}
	return int64(be.Uint64(b[off:])), true
}

// MessageAt returns the record starting at physical offset phy as a
// one-buffer result (Release it). ErrNotFound if there is none.
func (s *Store) MessageAt(phy int64) (*GetResult, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if phy < s.cl.minOffset() || phy >= s.cl.committed.Load() {
		return nil, fmt.Errorf("%w: %d outside [%d, %d)", ErrNotFound, phy, s.cl.minOffset(), s.cl.committed.Load())
	}
	r := s.newResult()
	m := s.cl.acquireAt(phy)
	if m == nil {
		r.Release()
		return nil, fmt.Errorf("%w: %d (segment gone)", ErrNotFound, phy)
	}
	r.held = append(r.held, m)
	rel := phy - m.base
	size, magic, err := record.PeekHeader(m.data[rel:])
	if err != nil || magic != record.MagicMessage || size < record.MinRecordSize || rel+int64(size) > m.size || phy+int64(size) > s.cl.committed.Load() {
		r.Release()
		return nil, fmt.Errorf("%w: %d is not the start of a record", ErrNotFound, phy)
	}
	buf := m.data[rel : rel+int64(size) : rel+int64(size)]
	if err := s.verifyRead(buf); err != nil {
		r.Release()
		s.badRead("lookup", s.cl.dir, phy, "record fails verification, not served", err)
		return nil, &CorruptError{File: m.path, Offset: rel, Reason: "record fails verification", Err: err}
	}
	r.Status = GetFound
	r.Buffers = append(r.Buffers, buf)
	r.PhysicalOffsets = append(r.PhysicalOffsets, phy)
	r.TotalBytes = len(buf)
	return r, nil
}

// ReadMessage decodes (copies) the record at phy.
func (s *Store) ReadMessage(phy int64) (*record.Message, error) {
	r, err := s.MessageAt(phy)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	m, _, err := record.Decode(r.Buffers[0], false)
	if err != nil {
		return nil, &CorruptError{File: "commitlog", Offset: phy, Reason: "record does not decode", Err: err}
	}
	return m, nil
}

// QueryByKey returns up to maxMsgs records of topic whose KEYS contain key
// or whose UNIQ_KEY equals key, stored within [begin, end] (ms), newest
// first, found through the index. The result must be Released.
func (s *Store) QueryByKey(topic, key string, maxMsgs int, begin, end int64) (*GetResult, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if maxMsgs <= 0 || maxMsgs > maxResultsPerQuery {
		maxMsgs = maxResultsPerQuery
	}
	// Whatever a consumer could already read is found by key too: wait
	// (briefly) for the indexer to catch up with the dispatcher.
	s.waitIndexed(s.dispatched.Load(), indexCatchUpWait)
	r := s.newResult()
	r.IndexLastUpdateTimestamp, r.IndexLastUpdatePhyOffset = s.idx.lastUpdate()
	clMin, clMax := s.cl.minOffset(), s.cl.committed.Load()
	s.idx.query(topic, key, begin, end, func(phy int64) bool {
		if phy < clMin || phy >= clMax {
			return true
		}
		for _, p := range r.PhysicalOffsets {
			if p == phy {
				return true
			}
		}
		m := s.cl.acquireAt(phy)
		if m == nil {
			return true
		}
		rel := phy - m.base
		size, magic, err := record.PeekHeader(m.data[rel:])
		if err != nil || magic != record.MagicMessage || rel+int64(size) > m.size || size < record.MinRecordSize {
			m.release()
			return true
		}
		buf := m.data[rel : rel+int64(size) : rel+int64(size)]
		v, err := record.Parse(buf, !s.noVerify)
		if err != nil {
			m.release()
			s.badRead("query", s.cl.dir, phy, "record fails verification, not served", err)
			return true
		}
		if string(v.Topic) != topic || v.StoreTimestamp < begin || v.StoreTimestamp > end || !hasKey(v.Properties, key) {
			m.release()
			return true
		}
		r.held = append(r.held, m)
		r.Buffers = append(r.Buffers, buf)
		r.PhysicalOffsets = append(r.PhysicalOffsets, phy)
		r.TotalBytes += len(buf)
		return len(r.Buffers) < maxMsgs
	})
	if len(r.Buffers) > 0 {
		r.Status = GetFound
	} else {
		r.Status = GetNoMatchedMessage
	}
	return r, nil
}

func hasKey(props []byte, key string) bool {
	if u, ok := record.LookupProperty(props, record.PropertyUniqueClientMessageIDKeyIndex); ok && string(u) == key {
		return true
	}
	keys, ok := record.LookupProperty(props, record.PropertyKeys)
	if !ok {
		return false
	}
	found := false
	record.ForEachKey(keys, func(k []byte) {
		if string(k) == key {
			found = true
		}
	})
	return found
}

// verifyRead checks a record about to leave the process (pull, lookup,
// query, replication): its whole-record CRC when sealed, its BODYCRC and
// structure when legacy (record.Verify).
func (s *Store) verifyRead(rec []byte) error {
	if s.noVerify {
		return nil
	}
	_, err := record.Verify(rec)
	return err
}

// badRead counts and reports a record refused on a read path: an error
// line (at most one per path and reason every ratelog.DefaultInterval,
// with the count of those suppressed) and a corruption event. The record
// is not served.
func (s *Store) badRead(path, file string, off int64, reason string, err error) {
	s.stats.badRecords.Add(1)
	ce := &CorruptError{File: file, Offset: off, Reason: path + ": " + reason, Err: err}
	s.rlog.Log(s.log, slog.LevelError, path+" "+reason, "store: bad record not served", "path", path, "file", file, "offset", off, "reason", reason, "err", err)
	s.emit(Event{Kind: EventCorruption, File: file, Offset: off, Err: ce})
}
