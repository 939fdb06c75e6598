package amqp

// offsetSet is a set of log offsets: a durable queue's live ones (stored
// and not gone). They are dense (consecutive appends, gone from the
// lowest mostly), so the set is a bit per offset from base on, not a map
// entry each: adding, testing and removing one touch one word. Its size
// is the span from the lowest member to the highest (a bit an offset: a
// message held unacknowledged while a million pass costs 125 KiB).
type offsetSet struct {
	base  uint64   // offset of words[0]'s bit 0, a multiple of 64
	words []uint64 // words[0] is never 0 (trimmed) unless the set is empty
}

func (s *offsetSet) add(o uint64) {
	w := o &^ 63
	switch {
	case len(s.words) == 0:
		s.base = w
	case w < s.base:
		k := int((s.base - w) / 64)
		grown := make([]uint64, k+len(s.words), k+cap(s.words))
		copy(grown[k:], s.words)
		s.words, s.base = grown, w
	}
	i := int((o - s.base) / 64)
	for len(s.words) <= i {
		s.words = append(s.words, 0)
	}
	s.words[i] |= 1 << (o & 63)
}

func (s *offsetSet) has(o uint64) bool {
	if o < s.base {
		return false
	}
	i := (o - s.base) / 64
	return i < uint64(len(s.words)) && s.words[i]&(1<<(o&63)) != 0
}

func (s *offsetSet) remove(o uint64) {
	if !s.has(o) {
		return
	}
	s.words[(o-s.base)/64] &^= 1 << (o & 63)
	for len(s.words) > 0 && s.words[0] == 0 {
		s.words = s.words[1:]
		s.base += 64
	}
	if len(s.words) == 0 {
		s.words = s.words[:0:0] // let go of the old array
	}
}
