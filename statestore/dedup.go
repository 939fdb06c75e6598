package statestore

import (
	"hash/maphash"
	"unsafe"
)

// dedupEntry is one cached reply.
type dedupEntry struct {
	key      string // in one of the cache's key chunks
	reply    Reply
	expireAt int64  // Unix ms (store time) at which it stops answering
	hash     uint64 // the key's hash (dedupCache.hashOf)
	dead     bool   // replaced by a newer entry for the same key
}

// dedupCache answers redelivered requests with the reply they first got.
// It is replicated state: entries are added by Apply and leave, oldest
// first, when their store time is up or when there are more than max.
//
// A SET adds an entry without allocating: the entries sit by value in a
// ring in insertion order (the oldest at head, dead ones left in place
// until they reach it), an index finds each live key's entry, and the
// keys are copied into append-only chunks of dedupChunk bytes. A chunk's
// bytes are never written again once a key is in them, so a key string
// stays valid for as long as anything holds it (a frozen snapshot), and
// the chunk is freed by the collector once every key in it is gone; the
// ring evicts in insertion order, so the chunks held are about the ring's
// keys.
//
// The index is an open-addressing table (linear probing) of the live
// entries' hashes and sequence numbers (the ring's oldest entry is number
// seq), at most half full. A key (a 16-byte correlation id and the
// client's response topic, about 100 bytes) is hashed once per lookup,
// and a miss, what nearly every request meets, compares 16-byte slots
// without reading any key; only an equal hash reads the entry's key.
// Removing an entry (eviction) shifts its probe run back, so the table
// keeps no tombstones and never rebuilds itself while it turns over (a
// map of string keys hashed each key three times per SET, the deleted
// one's from cold memory, and rebuilt its tables as deletions piled up).
// The hash is seeded per cache: which slot holds which key differs
// between replicas, what the cache answers does not.
type dedupCache struct {
	idx   []dedupSlot  // len is 0 or a power of two
	live  int          // live entries (used slots of idx)
	ring  []dedupEntry // len is 0 or a power of two
	head  int          // index in ring of the oldest entry
	n     int          // entries in the ring, dead ones included
	seq   uint64       // sequence number of the oldest entry
	chunk []byte       // where the next key is copied
	max   int
	seed  maphash.Seed
}

// dedupSlot is one slot of the index: a live entry's hash and its
// sequence number plus one (0: the slot is free).
type dedupSlot struct {
	hash uint64
	seq1 uint64
}

// dedupChunk is the size of a key chunk; a key longer than an eighth of
// it gets an allocation of its own.
const dedupChunk = 32 << 10

func newDedupCache(max int) dedupCache {
	return dedupCache{max: max, seed: maphash.MakeSeed()}
}

// len returns the number of live entries.
func (c *dedupCache) len() int { return c.live }

// at returns the i-th entry of the ring, oldest first.
func (c *dedupCache) at(i int) *dedupEntry { return &c.ring[(c.head+i)&(len(c.ring)-1)] }

// hashOf returns key's hash, for find and add.
func (c *dedupCache) hashOf(key []byte) uint64 { return maphash.Bytes(c.seed, key) & dedupHashMask }

// dedupHashMask keeps all of a hash; a test keeps few bits of it, so that
// many keys share a hash and probe runs grow long.
var dedupHashMask = ^uint64(0)

// slot returns the index of the slot holding the live entry of key
// (hash h), or of the free slot ending its probe run, and that entry or
// nil.
func (c *dedupCache) slot(key []byte, h uint64) (int, *dedupEntry) {
	mask := len(c.idx) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := &c.idx[i]
		if s.seq1 == 0 {
			return i, nil
		}
		if s.hash == h {
			if d := c.at(int(s.seq1 - 1 - c.seq)); d.key == string(key) {
				return i, d
			}
		}
	}
}

// find returns the entry key (hash h, hashOf) names, live or expired but
// not evicted yet, or nil.
func (c *dedupCache) find(key []byte, h uint64) *dedupEntry {
	if c.live == 0 {
		return nil
	}
	_, d := c.slot(key, h)
	return d
}

// lookup returns the reply cached for key, if it still answers at nowMs.
func (c *dedupCache) lookup(key []byte, nowMs int64) (Reply, bool) {
	if d := c.find(key, c.hashOf(key)); d != nil && d.expireAt > nowMs {
		return d.reply, true
	}
	return Reply{}, false
}

// add caches r for key (hash h) until expireAt. old is the key's entry
// when the caller found one (find; nothing may have changed the cache
// since), nil when it found none. The key is copied into the newest chunk
// even when old has a copy: a chunk is then held only by entries of the
// ring's span, never by a key added again long after its neighbours
// left.
func (c *dedupCache) add(old *dedupEntry, key []byte, h uint64, r Reply, expireAt int64) {
	if old != nil {
		old.dead = true // before the ring may grow away from it
	}
	k := c.intern(key)
	if c.n == len(c.ring) {
		grown := make([]dedupEntry, max(16, 2*len(c.ring)))
		for i := 0; i < c.n; i++ {
			grown[i] = *c.at(i)
		}
		c.ring, c.head = grown, 0
	}
	seq1 := c.seq + uint64(c.n) + 1
	*c.at(c.n) = dedupEntry{key: k, reply: r, expireAt: expireAt, hash: h}
	c.n++
	if old != nil {
		// The key's slot (still naming old) now names the new entry.
		i, _ := c.slot(key, h)
		c.idx[i].seq1 = seq1
		return
	}
	if 2*(c.live+1) > len(c.idx) {
		c.growIndex()
	}
	i, _ := c.slot(key, h)
	c.idx[i] = dedupSlot{hash: h, seq1: seq1}
	c.live++
}

// growIndex doubles the index (16 slots at first) and puts every live
// entry of the ring back into it.
func (c *dedupCache) growIndex() {
	c.idx = make([]dedupSlot, max(16, 2*len(c.idx)))
	mask := len(c.idx) - 1
	for i := 0; i < c.n; i++ {
		d := c.at(i)
		if d.dead {
			continue
		}
		j := int(d.hash) & mask
		for c.idx[j].seq1 != 0 {
			j = (j + 1) & mask
		}
		c.idx[j] = dedupSlot{hash: d.hash, seq1: c.seq + uint64(i) + 1}
	}
}

// unindex removes the slot of the live entry with sequence number seq
// and hash h: the entries after it in its probe run that may move back
// (their home slot is not between the freed slot and theirs) fill the
// gap, so no probe run is broken.
func (c *dedupCache) unindex(h, seq uint64) {
	mask := len(c.idx) - 1
	i := int(h) & mask
	for c.idx[i].seq1 != seq+1 {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; c.idx[j].seq1 != 0; j = (j + 1) & mask {
		home := int(c.idx[j].hash) & mask
		// The entry at j stays when its home lies cyclically in (i, j].
		if (j > i && home > i && home <= j) || (j < i && (home > i || home <= j)) {
			continue
		}
		c.idx[i] = c.idx[j]
		i = j
	}
	c.idx[i] = dedupSlot{}
	c.live--
}

// intern copies key into the current chunk (a new one when it is full)
// and returns the copy.
func (c *dedupCache) intern(key []byte) string {
	switch {
	case len(key) == 0:
		return ""
	case len(key) > dedupChunk/8:
		return string(key)
	case cap(c.chunk)-len(c.chunk) < len(key):
		c.chunk = make([]byte, 0, dedupChunk)
	}
	off := len(c.chunk)
	c.chunk = append(c.chunk, key...)
	return unsafe.String(&c.chunk[off], len(key))
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
			c.unindex(d.hash, c.seq)
		}
		*d = dedupEntry{}
		c.head = (c.head + 1) & (len(c.ring) - 1)
		c.n--
		c.seq++
	}
}
