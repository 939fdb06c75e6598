package store

import (
	"sync"

	"github.com/smartgo/smartgo/store/record"
)

// Verified raw reads (replication).
//
// ReadRaw hands out commitlog bytes as they are, offsets kept, so a slave's
// log is the master's byte for byte. Every record that starts in a chunk
// is verified whole first (its bytes may run past the chunk: they are all
// below the commitlog end). A chunk ends at a record boundary, unless one
// record is larger than the chunk: then the chunk ends inside it, and a
// hint remembers where it ends so the next chunk, which starts inside it,
// is not taken for bad bytes.
//
// Bytes that are not a valid record (damage found on disk) are not
// shipped: the chunk carries zeros in their place, up to where valid
// records resume (nextValid). The slave's log keeps the master's offsets;
// its reads, dispatcher and recovery skip the zeros as they skip any hole.

// rawHint says where a chunk that ended inside a record (or inside bad
// bytes) resumes: bytes [at, until) are the rest of that record, or more
// bad bytes when bad.
type rawHint struct {
	at, until int64
	bad       bool
}

// rawHints remembers the last few hints (one per slave reading at a time).
type rawHints struct {
	mu   sync.Mutex // leaf lock
	ring [8]rawHint // protected by mu
	next int        // protected by mu
}

func (h *rawHints) put(x rawHint) {
	h.mu.Lock()
	h.ring[h.next] = x
	h.next = (h.next + 1) % len(h.ring)
	h.mu.Unlock()
}

func (h *rawHints) get(at int64) (rawHint, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range h.ring {
		if x.at == at && x.until > at {
			return x, true
		}
	}
	return rawHint{}, false
}

// rawChunk fills r with the verified bytes of m from rel: at most n bytes,
// none at or beyond endRel (the commitlog end, relative to m).
func (s *Store) rawChunk(r *GetResult, m *mappedFile, rel, n, endRel int64) {
	limit := min(m.size, endRel)
	to := rel + n
	out := rel // bytes [rel, out) are placed in r
	p, badUntil := s.rawStart(m, rel, limit)
	emit := func(upto int64, zeros bool) {
		for out < upto {
			k := upto - out
			if zeros {
				k = min(k, int64(len(zeroBuf)))
				r.Buffers = append(r.Buffers, zeroBuf[:k:k])
			} else {
				r.Buffers = append(r.Buffers, m.data[out:upto:upto])
			}
			r.PhysicalOffsets = append(r.PhysicalOffsets, m.base+out)
			out += k
		}
	}
	if badUntil > rel {
		s.badRead("replication", m.path, rel, "bytes that are not a valid record, zeros sent in their place", nil)
		emit(min(badUntil, to), true)
		if badUntil > to {
			s.raw.put(rawHint{at: m.base + to, until: m.base + badUntil, bad: true})
		}
		p = badUntil
	}
	for p < to {
		size, ok := validAt(m, p, limit)
		if ok {
			end := p + size
			if end > to && p > rel {
				to = p // end the chunk at this record's start
				break
			}
			if end > to {
				// One record larger than the chunk: send its first bytes.
				s.raw.put(rawHint{at: m.base + to, until: m.base + end})
			}
			p = end
			continue
		}
		if p+record.BlankHeaderSize > limit || arriving(m, p, limit) {
			break // nothing complete yet
		}
		q, found := nextValid(m, p+1, limit)
		if !found {
			q = limit
		}
		emit(p, false)
		s.badRead("replication", m.path, p, "bytes that are not a valid record, zeros sent in their place", nil)
		emit(min(q, to), true)
		if q > to {
			s.raw.put(rawHint{at: m.base + to, until: m.base + q, bad: true})
		}
		p = q
	}
	emit(min(max(p, out), to, limit), false)
	r.TotalBytes = int(out - rel)
	if r.TotalBytes > 0 {
		r.Status = GetFound
	}
}

// rawStart returns where the first record at or after rel starts, and,
// when rel lies in bad bytes, where they end (badUntil > rel).
func (s *Store) rawStart(m *mappedFile, rel, limit int64) (p, badUntil int64) {
	if rel == 0 {
		return 0, 0
	}
	if h, ok := s.raw.get(m.base + rel); ok {
		if h.bad {
			return h.until - m.base, h.until - m.base
		}
		return h.until - m.base, 0
	}
	if _, ok := validAt(m, rel, limit); ok {
		return rel, 0
	}
	// A reader we have no hint for (a restart in between) starts inside a
	// record: walk the segment's records from its start to find it.
	start, size, ok := recordAround(m, rel, limit)
	switch {
	case !ok:
		q, found := nextValid(m, rel, limit)
		if !found {
			q = limit
		}
		return q, q
	default:
		return start + size, 0
	}
}

// recordAround walks m's records from its start to the one holding rel:
// its start and size, ok=false when rel lies in bytes that are not a
// valid record.
func recordAround(m *mappedFile, rel, limit int64) (start, size int64, ok bool) {
	for p := int64(0); p <= rel; {
		n, valid := validAt(m, p, limit)
		if !valid {
			q, found := nextValid(m, p+1, limit)
			if !found || q > rel {
				return p, 0, false
			}
			p = q
			continue
		}
		if p+n > rel {
			return p, n, true
		}
		p += n
	}
	return 0, 0, false
}

// arriving reports whether the bytes at rel are the start of a record
// whose end is beyond limit (a slave's log ends inside one until the rest
// arrives).
func arriving(m *mappedFile, rel, limit int64) bool {
	n, magic, err := record.PeekHeader(m.data[rel:])
	if err != nil || magic != record.MagicMessage || n < record.MinRecordSize || rel+int64(n) <= limit || rel+int64(n) > m.size {
		return false
	}
	return rel+record.OffsetPhysicalOffset+8 > limit || int64(be.Uint64(m.data[rel+record.OffsetPhysicalOffset:])) == m.base+rel
}
