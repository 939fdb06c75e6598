package store

import (
	"fmt"
	"math/bits"
)

// Index file checking. The index layout is frozen (RocketMQ's), so the
// check uses only what the layout itself implies, in two linear passes
// (the slot table, then the entries) with two bitmaps of one bit per entry
// and a few sums:
//
//   - every slot is 0 or names an entry below count, and no entry heads
//     two slots;
//   - every entry's hash is not negative, its prev link points below
//     itself, its log offset lies in the header's [beginPhy, endPhy] and
//     never goes below the previous entry's (the indexer adds them in log
//     order), and its time delta is not negative and within the header's
//     [beginTs, endTs]; the first entry is the header's begin (beginPhy,
//     time delta 0);
//   - every entry is referenced exactly once: by a slot (the newest entry
//     of its chain) or by the prev link of a later entry of its chain; the
//     chains are as many as the header's usedSlots;
//   - the links agree with the hashes: each entry sits in the chain of its
//     hash's slot. Checked without random reads by comparing two sums of a
//     64-bit mix of (slot, entry): over the slots' heads and the links as
//     written, and over the entries themselves; an entry moved to another
//     chain, or a hash changed to one of another slot, makes them differ
//     (a false match needs a 64-bit collision).
//
// What it catches: flipped or zeroed slots (a zeroed page of the slot
// table loses chain heads: entries no longer referenced), flipped prev
// links, a flipped hash (with the default 5,000,000 slots, any one flipped
// bit moves a hash to another slot), log offsets or times out of range or
// order, zeroed or garbage entries, and the torn slot table a process
// killed in the middle of an index sync leaves. What it cannot: a flip in
// a log offset's low bits that keeps it between its neighbours', or in a
// hash's bits above the slot count's power of two when the slot count is
// one; a query then misses that one record (queries check every record
// they return against its key, so they never return a wrong one).

// mixSlotEntry hashes a (slot, entry) pair for the link sums (splitmix64's
// finaliser).
func mixSlotEntry(slot int64, n int32) uint64 {
	z := uint64(slot)<<32 | uint64(uint32(n))
	z += 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// verifyLocked checks the file's slots and entries against each other and
// its header (already checked by checkHeader); "" when they agree. Caller
// holds mu (a read lock is enough) or owns the file.
func (f *indexFile) verifyLocked() string {
	count := f.count
	words := (int(count) + 63) / 64
	heads := make([]uint64, words) // entries a slot points at
	refs := make([]uint64, words)  // entries a later entry's prev points at
	var headSum, slotHeadSum, linkSum, linkedSum uint64
	nheads := 0
	for s := range int64(f.slots) {
		v := f.slotLocked(indexHeaderSize + s*indexSlotSize)
		if v == 0 {
			continue
		}
		if v < 0 || v >= count {
			return fmt.Sprintf("slot %d points at entry %d, the file has %d", s, v, count-1)
		}
		if heads[v/64]&(1<<(v%64)) != 0 {
			return fmt.Sprintf("entry %d heads two slots", v)
		}
		heads[v/64] |= 1 << (v % 64)
		nheads++
		slotHeadSum += mixSlotEntry(s, v)
	}
	prevPhy := f.beginPhy
	tails := 0
	for n := int32(1); n < count; n++ {
		e := f.entryLocked(n)
		h := int32(be.Uint32(e[0:]))
		phy := int64(be.Uint64(e[4:]))
		diff := int32(be.Uint32(e[12:]))
		prev := int32(be.Uint32(e[16:]))
		switch {
		case h < 0:
			return fmt.Sprintf("entry %d: negative key hash %d", n, h)
		case prev < 0 || prev >= n:
			return fmt.Sprintf("entry %d: link to entry %d", n, prev)
		case phy < prevPhy || phy > f.endPhy:
			return fmt.Sprintf("entry %d: log offset %d outside [%d, %d]", n, phy, prevPhy, f.endPhy)
		case diff < 0:
			return fmt.Sprintf("entry %d: negative time delta %d", n, diff)
		case n == 1 && (phy != f.beginPhy || diff != 0):
			// The header's begin is its first entry's record.
			return fmt.Sprintf("entry 1 (log offset %d, %d s in) is not the header's begin (log offset %d)", phy, diff, f.beginPhy)
		case int64(diff)*1000 > f.endTs-f.beginTs:
			return fmt.Sprintf("entry %d: stored %d s after the file's begin, past its end time %d", n, diff, f.endTs)
		}
		prevPhy = phy
		slot := int64(int(h) % f.slots)
		if heads[n/64]&(1<<(n%64)) != 0 {
			headSum += mixSlotEntry(slot, n)
		} else {
			linkedSum += mixSlotEntry(slot, n)
		}
		if prev == 0 {
			tails++
			continue
		}
		if refs[prev/64]&(1<<(prev%64)) != 0 {
			return fmt.Sprintf("entry %d: linked from two entries", prev)
		}
		refs[prev/64] |= 1 << (prev % 64)
		linkSum += mixSlotEntry(slot, prev)
	}
	nrefs := 0
	for i := range refs {
		if heads[i]&refs[i] != 0 {
			return "an entry is both a chain head and linked from a later entry"
		}
		nrefs += bits.OnesCount64(refs[i])
	}
	switch {
	case nheads+nrefs != int(count)-1:
		return fmt.Sprintf("%d of %d entries reachable from the slots", nheads+nrefs, count-1)
	case nheads != tails || int32(nheads) != f.usedSlots:
		return fmt.Sprintf("%d chain heads, %d chain ends, header counts %d", nheads, tails, f.usedSlots)
	case headSum != slotHeadSum || linkSum != linkedSum:
		return "entries sit in chains of other slots than their key hashes'"
	}
	return ""
}

// checkBegin compares the header's begin time with the store time of the
// record at its begin offset (the first entry's record, whose time the
// indexer copied there): a begin time moved earlier or later shifts the
// time of every entry, and a query by key within a time range then
// misses them. "" when they agree or the record is no longer in the log.
func (x *indexService) checkBegin(f *indexFile) string {
	if f.count <= 1 {
		return ""
	}
	ts, ok := x.s.cl.storeTimeAt(f.beginPhy)
	if !ok || ts == f.beginTs {
		return ""
	}
	return fmt.Sprintf("header begin time %d, its first record was stored at %d", f.beginTs, ts)
}
