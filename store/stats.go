package store

import (
	"fmt"
	"sync/atomic"
	"time"
)

// EventKind classifies store events.
type EventKind int

const (
	EventSegmentRolled  EventKind = iota // the writer moved to a new commitlog segment
	EventSegmentDeleted                  // retention removed a commitlog segment
	EventCorruption                      // damaged bytes found (Err is a *CorruptError)
	EventSlowFlush                       // an fdatasync took longer than a second
	EventDiskFull                        // usage passed DiskFullRatio; puts are refused
	EventDiskOK                          // usage fell back below DiskFullRatio
	EventWriteFailed                     // a write or sync failed; the store is read-only
	EventQueueGap                        // a consume queue had to be padded with holes
	EventTruncated                       // TruncateTail removed the log's tail (Offset: the new end)
)

var eventNames = [...]string{"segment-rolled", "segment-deleted", "corruption", "slow-flush", "disk-full", "disk-ok", "write-failed", "queue-gap", "truncated"}

// String names the event kind.
func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is reported to Options.Listener.
type Event struct {
	Kind     EventKind
	File     string
	Offset   int64
	Duration time.Duration
	Err      error
}

// LatencyBuckets are the upper bounds of the put latency histogram; the
// last bucket of Stats.PutLatency counts everything slower.
var LatencyBuckets = [...]time.Duration{
	10 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 500 * time.Millisecond, time.Second,
}

type statCounters struct {
	putMessages            atomic.Int64
	putBytes               atomic.Int64
	putErrors              atomic.Int64
	getRequests            atomic.Int64
	getMessages            atomic.Int64
	getBytes               atomic.Int64
	flushes                atomic.Int64
	pendWrites             atomic.Int64
	flushNanos             atomic.Int64
	badRecords             atomic.Int64
	forceDeletedUnconsumed atomic.Int64
	retainHeld             atomic.Int64
	indexDamaged           atomic.Int64
	indexRebuilt           atomic.Int64
	cqRebuilt              atomic.Int64
	cqLost                 atomic.Int64
	latency                [len(LatencyBuckets) + 1]atomic.Int64
	flushLat               [len(LatencyBuckets) + 1]atomic.Int64
}

// monoBase is the origin of monoNow.
var monoBase = time.Now()

// monoNow reads the monotonic clock only (time.Now reads the wall clock
// too): the start of a put's latency (Stats.PutLatency).
func monoNow() time.Duration { return time.Since(monoBase) }

// monoAt is monoNow at t, a reading of the clock taken earlier (t's
// monotonic part: no clock is read); a zero t reads the clock.
func monoAt(t time.Time) time.Duration {
	if t.IsZero() {
		return monoNow()
	}
	return t.Sub(monoBase)
}

// latencyBucket returns the index in LatencyBuckets (len for the rest)
// of a duration.
func latencyBucket(d time.Duration) int {
	i := 0
	for i < len(LatencyBuckets) && d > LatencyBuckets[i] {
		i++
	}
	return i
}

func (c *statCounters) recordFlush(d time.Duration) {
	c.flushes.Add(1)
	c.flushNanos.Add(int64(d))
	c.flushLat[latencyBucket(d)].Add(1)
}

func (c *statCounters) recordPut(n, bytes int, d time.Duration) {
	c.putMessages.Add(int64(n))
	c.putBytes.Add(int64(bytes))
	c.latency[latencyBucket(d)].Add(1)
}

// putTally is recordPut's counts of several puts, summed by one
// goroutine and added to the counters at once (recordTally).
type putTally struct {
	msgs, bytes int64
	latency     [len(LatencyBuckets) + 1]int64
}

func (t *putTally) add(n, bytes int, d time.Duration) {
	t.msgs += int64(n)
	t.bytes += int64(bytes)
	t.latency[latencyBucket(d)]++
}

// recordTally adds t's counts, one atomic add per counter that moved.
func (c *statCounters) recordTally(t *putTally) {
	if t.msgs == 0 {
		return
	}
	c.putMessages.Add(t.msgs)
	c.putBytes.Add(t.bytes)
	for i, n := range t.latency {
		if n != 0 {
			c.latency[i].Add(n)
		}
	}
}

// Stats is a snapshot of store counters.
type Stats struct {
	PutMessages int64 // records stored
	PutBytes    int64
	PutErrors   int64 // puts refused
	GetRequests int64
	GetMessages int64 // records returned by GetMessages
	GetBytes    int64
	Flushes     int64         // commitlog fdatasync rounds
	FlushTime   time.Duration // total time spent in them
	// BehindWrites counts the writes (one pwrite each) of the
	// write-behind buffer: the records of the puts written behind
	// since the previous one (writebehind.go).
	BehindWrites int64
	// BadRecords counts records refused on a read path (pull, lookup by
	// offset, query by key, replication) because they failed verification:
	// damaged on disk, never served.
	BadRecords int64
	// ForceDeletedUnconsumed counts messages retention deleted before every
	// consumer group had consumed them (only with Options.DiskForceClean).
	ForceDeletedUnconsumed int64
	// RetainHeldBytes is the size of the commitlog segments the last
	// retention run kept only because they hold records Options.Retain
	// protects (expired ones, or the oldest above DiskForceCleanRatio);
	// 0 when the floor held nothing back.
	RetainHeldBytes int64
	// IndexFilesDamaged counts key index files found damaged (at start,
	// or by the check of older files that follows it); IndexFilesRebuilt
	// those rebuilt from the commitlog since (index_repair.go).
	IndexFilesDamaged, IndexFilesRebuilt int64
	// CQEntriesRebuilt counts damaged consume-queue entries a read rebuilt
	// from the commitlog; CQEntriesLost those whose record the commitlog
	// no longer holds, made holes (cqrepair.go).
	CQEntriesRebuilt, CQEntriesLost int64
	// OpenFiles is the number of descriptors the store holds of its
	// mapped files now (at most Options.MaxOpenFiles but for the calls
	// using one at the moment); FileReopens counts the descriptors it
	// opened again after closing them (fdcache.go).
	OpenFiles   int
	FileReopens int64
	// PutLatency[i] counts puts that took <= LatencyBuckets[i] (and more
	// than the previous bound); the last element counts the rest.
	PutLatency [len(LatencyBuckets) + 1]int64
	// FlushLatency counts commitlog fdatasync rounds by duration, in the
	// buckets of PutLatency.
	FlushLatency [len(LatencyBuckets) + 1]int64

	DispatchLagBytes int64 // commitlog bytes written but not yet dispatched
	IndexLagBytes    int64 // commitlog bytes dispatched but not yet indexed
	FlushLagBytes    int64 // commitlog bytes written but not yet fdatasynced
	MinPhysical      int64
	MaxPhysical      int64
	Segments         int
	Queues           int
	DiskFull         bool
	WriteFailed      bool
}

// Stats returns a snapshot of the counters.
func (s *Store) Stats() Stats {
	c := &s.stats
	st := Stats{
		PutMessages:            c.putMessages.Load(),
		PutBytes:               c.putBytes.Load(),
		PutErrors:              c.putErrors.Load(),
		BehindWrites:           c.pendWrites.Load(),
		GetRequests:            c.getRequests.Load(),
		GetMessages:            c.getMessages.Load(),
		GetBytes:               c.getBytes.Load(),
		Flushes:                c.flushes.Load(),
		FlushTime:              time.Duration(c.flushNanos.Load()),
		BadRecords:             c.badRecords.Load(),
		ForceDeletedUnconsumed: c.forceDeletedUnconsumed.Load(),
		RetainHeldBytes:        c.retainHeld.Load(),
		IndexFilesDamaged:      c.indexDamaged.Load(),
		IndexFilesRebuilt:      c.indexRebuilt.Load(),
		CQEntriesRebuilt:       c.cqRebuilt.Load(),
		CQEntriesLost:          c.cqLost.Load(),
		OpenFiles:              int(s.fs.fds.open.Load()),
		FileReopens:            s.fs.fds.reop.Load(),
		MinPhysical:            s.cl.minOffset(),
		MaxPhysical:            s.cl.committed.Load(),
		Segments:               len(s.cl.list()),
		Queues:                 len(s.allCQs()),
		DiskFull:               s.diskFull.Load(),
		WriteFailed:            s.werr.Load() != nil,
	}
	for i := range c.latency {
		st.PutLatency[i] = c.latency[i].Load()
		st.FlushLatency[i] = c.flushLat[i].Load()
	}
	disp := s.dispatched.Load()
	st.DispatchLagBytes = max(0, st.MaxPhysical-disp)
	st.IndexLagBytes = max(0, disp-s.indexed.Load())
	st.FlushLagBytes = max(0, st.MaxPhysical-s.cl.flushed.Load())
	return st
}
