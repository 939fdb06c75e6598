package store

import "golang.org/x/sys/unix"

// Readahead at the write frontier.
//
// The dispatcher, and consumers at the tail, read records through the
// mapping right behind the writer. A page fault there asks the kernel for
// readahead, and its window (read_ahead_kb, 8 MiB on some machines) runs
// past the write position into blocks that are fallocated but unwritten:
// the kernel fills that whole window with freshly zeroed pages in one go.
// Measured at 40k 1 KiB puts/s written with pwrite, that was a 20-30 ms
// fault on the dispatcher every ~180 ms (one window of records), so
// consumers stalled for as long, and a goroutine stuck in a fault also
// holds up every GC stop-the-world.
//
// So while puts are written with pwrite, the mapping of the active segment
// is MADV_RANDOM (no readahead) from a little behind the writer to the
// segment's end. Pages there were just written and are in the page cache;
// faults on them only map them. The rest of the segment, and every older
// segment, keeps normal readahead, which a consumer catching up on cold
// records needs. The random part starts between raStep and 2*raStep behind
// the writer, further behind it than any readahead window reaches, and is
// moved up once per raStep of records (one madvise).
//
// Puts written through the mapping keep normal readahead: the prefaulter
// populates the pages ahead of the writer (so readers find them cached),
// and with random advice every one of those pages would be faulted in and
// zero-filled alone (single 128 B puts measured 1.7x slower).
const raStep = 32 << 20

// moveReadaheadEdgeLocked applies the advice above after an append;
// random says the put was written with pwrite. On a new active segment
// the old one gets normal readahead back whole. Failures only cost
// readahead behaviour and are ignored. Caller holds Store.putMu (or owns
// the store).
func (cl *commitLog) moveReadaheadEdgeLocked(random bool) {
	cl.raWant = random
	seg := cl.active
	if seg == nil {
		return
	}
	rel := cl.writePos - seg.base
	if seg != cl.raSeg {
		if old := cl.raSeg; old != nil && cl.raRandom && old.acquire() {
			_ = unix.Madvise(old.data[cl.raEdge:], unix.MADV_NORMAL)
			old.release()
		}
		cl.raSeg, cl.raRandom = seg, false // a new mapping reads ahead normally
	}
	if random != cl.raRandom {
		edge := max(0, rel-raStep) &^ (raStep - 1)
		if random {
			if edge < seg.size {
				_ = unix.Madvise(seg.data[edge:], unix.MADV_RANDOM)
			}
		} else {
			_ = unix.Madvise(seg.data[cl.raEdge:], unix.MADV_NORMAL)
		}
		cl.raEdge, cl.raRandom = edge, random
		return
	}
	if !random || rel-cl.raEdge < 2*raStep {
		return
	}
	edge := (rel - raStep) &^ (raStep - 1)
	_ = unix.Madvise(seg.data[cl.raEdge:edge], unix.MADV_NORMAL)
	cl.raEdge = edge
}

// adviseRandom turns readahead off for a whole mapping: consume-queue and
// index files. Both are sparse and written through the mapping, and a
// write fault on a page that is not cached reads ahead like a read fault
// does: the first entry of a new consume-queue file zero-filled the whole
// file (6 MB) in one fault on the dispatcher, and index slots are written
// and read at random anyway. A consumer reading a cold consume queue pays
// one fault per page, 204 entries. Consume-queue files are advised when
// created: the files found at Open keep readahead for recovery's scan.
func (m *mappedFile) adviseRandom() {
	_ = unix.Madvise(m.data, unix.MADV_RANDOM)
}
