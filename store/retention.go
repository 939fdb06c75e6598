package store

import (
	"os"
	"time"
)

// cleanLoop runs retention every CleanInterval.
func (s *Store) cleanLoop() {
	tick := time.NewTicker(s.opts.CleanInterval)
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

// updateDiskUsage refreshes the disk-full flag and returns the usage.
func (s *Store) updateDiskUsage() float64 {
	usage, err := s.opts.DiskUsage(s.opts.Root)
	if err != nil {
		s.log.Warn("store: disk usage", "err", err)
		return 0
	}
	full := usage > s.opts.DiskFullRatio
	if s.diskFull.Swap(full) != full {
		if full {
			s.log.Error("store: disk full, refusing writes", "usage", usage)
			s.emit(Event{Kind: EventDiskFull})
		} else {
			s.log.Info("store: disk usage back below the full mark", "usage", usage)
			s.emit(Event{Kind: EventDiskOK})
		}
	}
	return usage
}

// clean deletes commitlog segments older than FileReservedTime when the
// hour is in DeleteWhen, usage is above DiskMaxUsedRatio or manual is set;
// above DiskForceCleanRatio the oldest segments go even if not expired.
// Consume-queue and index files that only point below the new commitlog
// minimum follow. The active segment is never deleted.
func (s *Store) clean(manual bool) int {
	s.cleanMu.Lock()
	defer s.cleanMu.Unlock()
	usage := s.updateDiskUsage()
	now := s.opts.Now()
	force := usage > s.opts.DiskForceCleanRatio
	if !manual && !force && !s.deleteHours[now.Hour()] && usage <= s.opts.DiskMaxUsedRatio {
		return 0
	}
	deleted := 0
	const maxPerRun = 10
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
		st, err := os.Stat(m.path)
		if err != nil {
			break
		}
		expired := now.Sub(st.ModTime()) > s.opts.FileReservedTime
		if !expired && !(force && deleted == 0) {
			break
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
		s.log.Info("store: commitlog segment deleted", "file", m.path, "forced", !expired)
		s.emit(Event{Kind: EventSegmentDeleted, File: m.path, Offset: m.base})
		deleted++
	}
	if deleted > 0 {
		s.cleanLogic()
		s.updateDiskUsage()
	}
	return deleted
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
