package statestore

import (
	"crypto/sha256"
	"hash/maphash"
	"os"
	"unsafe"
)

// dedupID names a cached reply: the first 16 bytes of the SHA-256 of the
// request's dedup key (DedupKey: its correlation data and response
// topic, about 120 bytes from the Azure client). Log entries, snapshots
// and the cache hold the id, not the key: a SET's record is a quarter
// smaller and the cache copies 16 bytes per entry into its ring instead
// of the key into chunks of fresh memory. A cryptographic hash, so that
// no client can make its request's id equal to another's (and so be
// answered another's reply, or have its own taken for a redelivery) any
// more than it can guess the other's correlation data; 128 bits, so that
// no two requests share one by chance.
type dedupID [16]byte

// An entry's DEDUP field and a snapshot's CACHE KEY hold an id as
// dedupFieldLen bytes: dedupIDMark, then the id. Entries and snapshots
// written before ids hold the dedup key itself, which starts with a zero
// byte (DedupKey's 4-byte length of the correlation data, at most
// 65,535); dedupIDOfField hashes those, so a reply cached by an older
// build still answers the request's redelivery.
const (
	dedupIDMark   = 0x01
	dedupFieldLen = 1 + len(dedupID{})
)

// dedupIDOf returns the id of a request's dedup key.
func dedupIDOf(key []byte) dedupID {
	sum := sha256.Sum256(key)
	return dedupID(sum[:len(dedupID{})])
}

// dedupIDOfField returns the id an entry's DEDUP field or a snapshot's
// CACHE KEY holds: the id itself, or a dedup key of an older build's.
func dedupIDOfField(f []byte) dedupID {
	if len(f) == dedupFieldLen && f[0] == dedupIDMark {
		return dedupID(f[1:])
	}
	return dedupIDOf(f)
}

// field returns the id as an entry's DEDUP field holds it.
func (id *dedupID) field() [dedupFieldLen]byte {
	var f [dedupFieldLen]byte
	f[0] = dedupIDMark
	copy(f[1:], id[:])
	return f
}

// dedupEntry is one cached reply.
type dedupEntry struct {
	id       dedupID
	reply    Reply
	expireAt int64  // Unix ms (store time) at which it stops answering
	tag      uint32 // the id's hash (dedupCache.tagOf)
	dead     bool   // replaced by a newer entry for the same id
}

// dedupCache answers redelivered requests with the reply they first got.
// It is replicated state: entries are added by Apply and leave, oldest
// first, when their store time is up or when there are more than max.
//
// A SET adds an entry without allocating: the entries sit by value in a
// ring in insertion order (the oldest at head, dead ones left in place
// until they reach it), and an index finds each live id's entry.
//
// The index is an open-addressing table (linear probing) of the live
// entries' 32-bit hashes (tags) and sequence numbers (the ring's oldest
// entry is number seq), at most half full, in 8-byte slots: the caches
// of a broker's shards hold tens of thousands of replies, and a lookup's
// cost is the cache miss on its slot, fewer the smaller the table. A
// lookup hashes the 16-byte id once, and a miss, what nearly every
// request meets, compares slots without reading any entry; only an equal
// tag reads the entry's id. Removing
// an entry (eviction) shifts its probe run back, so the table keeps no
// tombstones and never rebuilds itself while it turns over (a map of
// string keys hashed each key three times per SET, the deleted one's
// from cold memory, and rebuilt its tables as deletions piled up). The
// hash is seeded per cache (an id is the same on every replica, so a
// client could otherwise pick requests whose ids crowd one probe run):
// which slot holds which id differs between replicas, what the cache
// answers does not.
type dedupCache struct {
	idx  []dedupSlot  // len is 0 or a power of two, at most 1<<31
	live int          // live entries (used slots of idx)
	ring []dedupEntry // len is 0 or a power of two
	head int          // index in ring of the oldest entry
	n    int          // entries in the ring, dead ones included
	seq  uint64       // sequence number of the oldest entry
	max  int
	seed maphash.Seed
}

// dedupSlot is one slot of the index, 0 when free: a live entry's tag
// (never 0) in the high 32 bits, the low 32 bits of its sequence number
// in the low ones (the ring holds fewer than 1<<31 entries, so they tell
// its place). The slot's home, where its probe run starts, is the tag's
// bits above the lowest (homeOf).
type dedupSlot uint64

func (s dedupSlot) tag() uint32 { return uint32(s >> 32) }

// slotOf returns the slot of the entry with tag t and sequence number seq.
func slotOf(t uint32, seq uint64) dedupSlot { return dedupSlot(t)<<32 | dedupSlot(uint32(seq)) }

// homeOf returns the home slot of tag t in an index of mask+1 slots.
func homeOf(t uint32, mask int) int { return int(t>>1) & mask }

// pos returns the place in the ring (for at) of the entry s names.
func (c *dedupCache) pos(s dedupSlot) int { return int(uint32(s) - uint32(c.seq)) }

func newDedupCache(max int) dedupCache {
	return dedupCache{max: max, seed: maphash.MakeSeed()}
}

// len returns the number of live entries.
func (c *dedupCache) len() int { return c.live }

// at returns the i-th entry of the ring, oldest first.
func (c *dedupCache) at(i int) *dedupEntry { return &c.ring[(c.head+i)&(len(c.ring)-1)] }

// tagOf returns id's tag, for find and add: 31 bits of its hash, and the
// lowest bit set so that no used slot is 0.
func (c *dedupCache) tagOf(id *dedupID) uint32 {
	return uint32(maphash.Bytes(c.seed, id[:])&dedupHashMask) | 1
}

// dedupHashMask keeps all of a hash; a test keeps few bits of it, so that
// many ids share a hash and probe runs grow long.
var dedupHashMask = ^uint64(0)

// slot returns the index of the slot holding the live entry of id (tag
// t), or of the free slot ending its probe run, and that entry or nil.
func (c *dedupCache) slot(id *dedupID, t uint32) (int, *dedupEntry) {
	mask := len(c.idx) - 1
	for i := homeOf(t, mask); ; i = (i + 1) & mask {
		s := c.idx[i]
		if s == 0 {
			return i, nil
		}
		if s.tag() == t {
			if d := c.at(c.pos(s)); d.id == *id {
				return i, d
			}
		}
	}
}

// find returns the entry id (tag t, tagOf) names, live or expired but not
// evicted yet, or nil.
func (c *dedupCache) find(id *dedupID, t uint32) *dedupEntry {
	if c.live == 0 {
		return nil
	}
	_, d := c.slot(id, t)
	return d
}

// lookup returns the reply cached for id, if it still answers at nowMs.
func (c *dedupCache) lookup(id *dedupID, nowMs int64) (Reply, bool) {
	if d := c.find(id, c.tagOf(id)); d != nil && d.expireAt > nowMs {
		return d.reply, true
	}
	return Reply{}, false
}

// add caches r for id (tag t) until expireAt. old is the id's entry when
// the caller found one (find; nothing may have changed the cache since),
// nil when it found none.
func (c *dedupCache) add(old *dedupEntry, id *dedupID, t uint32, r Reply, expireAt int64) {
	if old != nil {
		old.dead = true // before the ring may grow away from it
	}
	if c.n == len(c.ring) {
		grown := make([]dedupEntry, max(16, 2*len(c.ring)))
		for i := 0; i < c.n; i++ {
			grown[i] = *c.at(i)
		}
		c.ring, c.head = grown, 0
	}
	s := slotOf(t, c.seq+uint64(c.n))
	*c.at(c.n) = dedupEntry{id: *id, reply: r, expireAt: expireAt, tag: t}
	c.n++
	if old != nil {
		// The id's slot (still naming old) now names the new entry.
		i, _ := c.slot(id, t)
		c.idx[i] = s
		return
	}
	if 2*(c.live+1) > len(c.idx) {
		c.growIndex()
	}
	i, _ := c.slot(id, t)
	c.idx[i] = s
	c.live++
}

// growIndex doubles the index (16 slots at first) and puts every live
// entry of the ring back into it.
func (c *dedupCache) growIndex() {
	c.idx = make([]dedupSlot, max(16, 2*len(c.idx)))
	prefault(c.idx) // probed (read) below before it is written
	mask := len(c.idx) - 1
	for i := 0; i < c.n; i++ {
		d := c.at(i)
		if d.dead {
			continue
		}
		j := homeOf(d.tag, mask)
		for c.idx[j] != 0 {
			j = (j + 1) & mask
		}
		c.idx[j] = slotOf(d.tag, c.seq+uint64(i))
	}
}

// unindex removes the slot of the live entry with tag t and sequence
// number seq: the entries after it in its probe run that may move back
// (their home slot is not between the freed slot and theirs) fill the
// gap, so no probe run is broken.
func (c *dedupCache) unindex(t uint32, seq uint64) {
	mask := len(c.idx) - 1
	i := homeOf(t, mask)
	for want := slotOf(t, seq); c.idx[i] != want; {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; c.idx[j] != 0; j = (j + 1) & mask {
		home := homeOf(c.idx[j].tag(), mask)
		// The entry at j stays when its home lies cyclically in (i, j].
		if (j > i && home > i && home <= j) || (j < i && (home > i || home <= j)) {
			continue
		}
		c.idx[i] = c.idx[j]
		i = j
	}
	c.idx[i] = 0
	c.live--
}

// evict drops entries from the front of the insertion order while they
// are dead, expired, or beyond max.
func (c *dedupCache) evict(nowMs int64) {
	for c.n > 0 {
		d := c.at(0)
		if !d.dead && d.expireAt > nowMs && c.live <= c.max {
			return
		}
		if !d.dead {
			c.unindex(d.tag, c.seq)
		}
		*d = dedupEntry{}
		c.head = (c.head + 1) & (len(c.ring) - 1)
		c.n--
		c.seq++
	}
}

// pageSize is the size of the memory pages prefault touches.
var pageSize = os.Getpagesize()

// prefault writes the zero value into one element of s in every memory
// page s spans. A large slice is fresh memory, not yet mapped: a page the
// process reads first (a probe of the new index, the collector's scan of
// the new ring's empty tail) is mapped to the kernel's shared zero page,
// and the first write to it then takes a second fault, a copy-on-write,
// whose TLB flush interrupts the other CPU. Written first, each page
// takes one fault. Cheap where the memory was in use already: one store
// per page.
func prefault[T any](s []T) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if size == 0 {
		return // no memory to touch
	}
	step := max(1, pageSize/size)
	for i := 0; i < len(s); i += step {
		s[i] = zero
	}
}
