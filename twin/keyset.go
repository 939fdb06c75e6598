package twin

import "sort"

// keysetBlock is the most keys a block of a keyset holds before it splits.
const keysetBlock = 256

// keyset is an ordered set of strings: sorted blocks of at most
// keysetBlock keys, so an insert or delete moves at most one block's
// slots and iteration from any key is a binary search away. It keeps the
// twins of a shard in key order (paging, prefix scans) and the postings
// of the query index.
type keyset struct {
	blocks [][]string // non-empty, ascending across blocks
	n      int
}

func (s *keyset) len() int { return s.n }

// block returns the index of the block where k belongs: the first whose
// last key is >= k, or the last block.
func (s *keyset) block(k string) int {
	b := sort.Search(len(s.blocks), func(i int) bool {
		blk := s.blocks[i]
		return blk[len(blk)-1] >= k
	})
	if b == len(s.blocks) && b > 0 {
		b--
	}
	return b
}

// insert adds k and reports whether it was absent.
func (s *keyset) insert(k string) bool {
	if len(s.blocks) == 0 {
		s.blocks = [][]string{{k}}
		s.n = 1
		return true
	}
	b := s.block(k)
	blk := s.blocks[b]
	i := sort.SearchStrings(blk, k)
	if i < len(blk) && blk[i] == k {
		return false
	}
	blk = append(blk, "")
	copy(blk[i+1:], blk[i:])
	blk[i] = k
	s.n++
	if len(blk) <= keysetBlock {
		s.blocks[b] = blk
		return true
	}
	half := len(blk) / 2
	left := make([]string, half, keysetBlock)
	copy(left, blk[:half])
	right := make([]string, len(blk)-half, keysetBlock)
	copy(right, blk[half:])
	s.blocks = append(s.blocks, nil)
	copy(s.blocks[b+2:], s.blocks[b+1:])
	s.blocks[b], s.blocks[b+1] = left, right
	return true
}

// delete removes k and reports whether it was there.
func (s *keyset) delete(k string) bool {
	if len(s.blocks) == 0 {
		return false
	}
	b := s.block(k)
	blk := s.blocks[b]
	i := sort.SearchStrings(blk, k)
	if i == len(blk) || blk[i] != k {
		return false
	}
	copy(blk[i:], blk[i+1:])
	blk[len(blk)-1] = ""
	blk = blk[:len(blk)-1]
	s.n--
	if len(blk) == 0 {
		copy(s.blocks[b:], s.blocks[b+1:])
		s.blocks[len(s.blocks)-1] = nil
		s.blocks = s.blocks[:len(s.blocks)-1]
		return true
	}
	s.blocks[b] = blk
	return true
}

// ascend calls fn for every key greater than after (every key when after
// is ""), in order, until fn returns false.
func (s *keyset) ascend(after string, fn func(k string) bool) {
	if len(s.blocks) == 0 {
		return
	}
	b, i := 0, 0
	if after != "" {
		b = s.block(after)
		blk := s.blocks[b]
		i = sort.SearchStrings(blk, after)
		if i < len(blk) && blk[i] == after {
			i++
		}
	}
	for ; b < len(s.blocks); b++ {
		blk := s.blocks[b]
		for ; i < len(blk); i++ {
			if !fn(blk[i]) {
				return
			}
		}
		i = 0
	}
}

// from calls fn for every key >= start, in order, until fn returns false.
func (s *keyset) from(start string, fn func(k string) bool) {
	if len(s.blocks) == 0 {
		return
	}
	b := s.block(start)
	blk := s.blocks[b]
	i := sort.SearchStrings(blk, start)
	for ; b < len(s.blocks); b++ {
		blk = s.blocks[b]
		for ; i < len(blk); i++ {
			if !fn(blk[i]) {
				return
			}
		}
		i = 0
	}
}
