package store

import (
	"log/slog"

	"github.com/smartgo/smartgo/internal/beat"
)

// cleanLoop runs retention every CleanInterval.
func (s *Store) cleanLoop() {
	tick := beat.NewTicker(s.opts.CleanInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
			s.clean(false)
		}
	}
}

// CleanExpired runs retention now as a manual trigger (expired segments
// are deleted whatever the hour) and returns the number of commitlog
// segments removed.
func (s *Store) CleanExpired() int {
	if s.closed.Load() {
		return 0
	}
	return s.clean(true)
}

// clean deletes commitlog segments older than FileReservedTime when the
// hour is in DeleteWhen, usage is above DiskMaxUsedRatio or manual is set.
// Above DiskForceCleanRatio the oldest segment may go although it is not
// expired: when every consumer group has consumed it (Options.Consumed),
// or, with DiskForceClean, whatever it holds (logged at WARN with the
// number of unconsumed messages lost, counted in
// Stats.ForceDeletedUnconsumed). Consume-queue and index files that only
// point below the new commitlog minimum follow. The active segment is
// never deleted. Nor is a segment holding a record Options.Retain
// protects, whatever its age or the disk usage (retainfloor.go): the
// commitlog is deleted from its head, so the segments after it stay too.
func (s *Store) clean(manual bool) int {
	s.cleanMu.Lock()
	defer s.cleanMu.Unlock()
	usage := s.checkSpace()
	now := s.opts.Now()
	pressure := usage > s.opts.DiskForceCleanRatio
	if !manual && !pressure && !s.deleteHours[now.Hour()] && usage <= s.opts.DiskMaxUsedRatio {
		return 0
	}
	deleted := 0
	const maxPerRun = 10
	floor := s.retentionFloor()
	held := false
	defer func() {
		if !held {
			s.stats.retainHeld.Store(0)
		}
	}()
	for deleted < maxPerRun {
		l := s.cl.list()
		if len(l) < 2 {
			break
		}
		m := l[0]
		// Never delete what the dispatcher, indexer or flusher still needs.
		if end := m.base + m.size; end > s.dispatched.Load() || end > s.indexed.Load() || end > s.cl.flushed.Load() {
			break
		}
		st, err := s.fs.Stat(m.path)
		if err != nil {
			break
		}
		expired := now.Sub(st.ModTime()) > s.opts.FileReservedTime
		if floor.protects(m) && (expired || pressure && deleted == 0) {
			held = true
			s.heldBy(floor, l, pressure, usage)
			break
		}
		unconsumed := int64(0)
		if !expired {
			if !pressure || deleted > 0 { // one unexpired segment per run
				break
			}
			unconsumed = s.unconsumedIn(m)
			if unconsumed > 0 && !s.opts.DiskForceClean {
				s.rlog.Log(s.log, slog.LevelWarn, "force clean refused",
					"store: disk above the force-clean mark, but the oldest segment holds unconsumed messages; not deleted (disk_force_clean is off)",
					"file", m.path, "unconsumed", unconsumed, "usage", usage)
				break
			}
		}
		s.cl.listMu.Lock()
		cur := s.cl.list()
		if len(cur) < 2 || cur[0] != m {
			s.cl.listMu.Unlock()
			break
		}
		s.cl.setList(append([]*mappedFile(nil), cur[1:]...))
		s.cl.listMu.Unlock()
		if err := m.destroy(true); err != nil {
			s.log.Warn("store: delete segment", "err", err)
		}
		switch {
		case expired:
			s.log.Info("store: expired commitlog segment deleted", "file", m.path)
		case unconsumed > 0:
			s.stats.forceDeletedUnconsumed.Add(unconsumed)
			s.log.Warn("store: unexpired segment deleted to free disk space; its unconsumed messages are lost",
				"file", m.path, "unconsumed", unconsumed, "usage", usage)
		default:
			s.log.Info("store: unexpired segment deleted to free disk space; every consumer group had consumed it", "file", m.path, "usage", usage)
		}
		s.emit(Event{Kind: EventSegmentDeleted, File: m.path, Offset: m.base})
		deleted++
	}
	if deleted > 0 {
		s.cleanLogic()
		s.checkSpace()
	}
	return deleted
}

// unconsumedIn counts the messages of segment m that some queue's
// consumers have not consumed yet (every message of a queue no group has
// committed an offset for).
func (s *Store) unconsumedIn(m *mappedFile) int64 {
	n := int64(0)
	for _, cq := range s.allCQs() {
		lo, hi := cq.minOff.Load(), cq.maxOff.Load()
		first := cq.firstAtOrAfter(lo, hi, m.base)
		last := cq.firstAtOrAfter(first, hi, m.base+m.size)
		if first == last {
			continue
		}
		if s.opts.Consumed != nil {
			if off, ok := s.opts.Consumed(cq.topic, cq.queueID); ok {
				first = max(first, off)
			}
		}
		n += max(0, last-first)
	}
	return n
}

// cleanLogic removes consume-queue and index files below the commitlog
// minimum and moves queue minimum offsets.
func (s *Store) cleanLogic() {
	clMin := s.cl.minOffset()
	for _, cq := range s.allCQs() {
		cq.deleteBelow(clMin)
	}
	s.idx.deleteBelow(clMin)
}
