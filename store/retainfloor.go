package store

import (
	"log/slog"
	"math"
)

// retainFloor is the lowest commitlog offset a record that Options.Retain
// protects starts at, and the queue that holds it.
type retainFloor struct {
	phy     int64 // math.MaxInt64: nothing protected
	topic   string
	queueID int32
	from    int64 // the queue's first protected logical offset
}

// protects reports whether the floor keeps segment m: m holds a record at
// or after the floor.
func (f retainFloor) protects(m *mappedFile) bool { return m.base+m.size > f.phy }

// retentionFloor asks Options.Retain about every queue, once per cleaning
// round: for each protected queue it reads the entry of the first
// protected offset still stored (skipping holes) and keeps the lowest
// commitlog offset among them. A queue's entries point at increasing
// commitlog offsets, so the first protected entry is its lowest.
func (s *Store) retentionFloor() retainFloor {
	f := retainFloor{phy: math.MaxInt64}
	if s.opts.Retain == nil {
		return f
	}
	for _, cq := range s.allCQs() {
		hi := cq.maxOff.Load()
		from, ok := s.opts.Retain(cq.topic, cq.queueID, hi)
		if !ok {
			continue
		}
		for off := max(from, cq.minOff.Load()); off < hi; off++ {
			e, ok := cq.entry(off)
			if !ok {
				break
			}
			if e.isHole() {
				continue
			}
			if e.phy < f.phy {
				f = retainFloor{phy: e.phy, topic: cq.topic, queueID: cq.queueID, from: from}
			}
			break
		}
	}
	return f
}

// heldBy records and logs (rate limited) that the floor keeps segment l[0]
// although retention would delete it (expired, or the oldest under disk
// pressure): Stats.RetainHeldBytes counts it and the later expired
// segments it keeps behind it (the commitlog is deleted from its head).
func (s *Store) heldBy(f retainFloor, l []*mappedFile, pressure bool, usage float64) {
	held := l[0].size
	for _, m := range l[1 : len(l)-1] {
		st, err := s.fs.Stat(m.path)
		if err != nil || s.opts.Now().Sub(st.ModTime()) <= s.opts.FileReservedTime {
			break
		}
		held += m.size
	}
	s.stats.retainHeld.Store(held)
	level, msg := slog.LevelInfo, "store: retention keeps segments a protected queue still needs"
	if pressure {
		level, msg = slog.LevelWarn, "store: disk above the force-clean mark, but the oldest segment holds messages a protected queue still needs; not deleted (writes are refused at the full mark until it consumes them or space is freed)"
	}
	s.rlog.Log(s.log, level, "retention floor", msg,
		"file", l[0].path, "topic", f.topic, "queue", f.queueID, "from_offset", f.from,
		"floor", f.phy, "held_bytes", held, "usage", usage)
}
