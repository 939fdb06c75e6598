package statestore

import "unsafe"

// dedupEntry is one cached reply.
type dedupEntry struct {
	key      string // in one of the cache's key chunks
	reply    Reply
	expireAt int64 // Unix ms (store time) at which it stops answering
	dead     bool  // replaced by a newer entry for the same key
}

// dedupCache answers redelivered requests with the reply they first got.
// It is replicated state: entries are added by Apply and leave, oldest
// first, when their store time is up or when there are more than max.
//
// A SET adds an entry without allocating: the entries sit by value in a
// ring in insertion order (the oldest at head, dead ones left in place
// until they reach it), the map holds each live key's sequence number
// (the ring's oldest entry is number seq), and the keys are copied into
// append-only chunks of dedupChunk bytes. A chunk's bytes are never
// written again once a key is in them, so a key string stays valid for as
// long as anything holds it (a frozen snapshot, the map), and the chunk
// is freed by the collector once every key in it is gone; the ring evicts
// in insertion order, so the chunks held are about the ring's keys.
type dedupCache struct {
	m     map[string]uint64 // live key -> sequence number of its entry
	ring  []dedupEntry      // len is 0 or a power of two
	head  int               // index in ring of the oldest entry
	n     int               // entries in the ring, dead ones included
	seq   uint64            // sequence number of the oldest entry
	chunk []byte            // where the next key is copied
	max   int
}

// dedupChunk is the size of a key chunk; a key longer than an eighth of
// it gets an allocation of its own.
const dedupChunk = 32 << 10

func newDedupCache(max int) dedupCache {
	return dedupCache{m: make(map[string]uint64), max: max}
}

// len returns the number of live entries.
func (c *dedupCache) len() int { return len(c.m) }

// at returns the i-th entry of the ring, oldest first.
func (c *dedupCache) at(i int) *dedupEntry { return &c.ring[(c.head+i)&(len(c.ring)-1)] }

// find returns the entry key names (live or expired, not evicted yet),
// or nil.
func (c *dedupCache) find(key []byte) *dedupEntry {
	s, ok := c.m[string(key)]
	if !ok {
		return nil
	}
	return c.at(int(s - c.seq))
}

// lookup returns the reply cached for key, if it still answers at nowMs.
func (c *dedupCache) lookup(key []byte, nowMs int64) (Reply, bool) {
	if d := c.find(key); d != nil && d.expireAt > nowMs {
		return d.reply, true
	}
	return Reply{}, false
}

// add caches r for key until expireAt. old is the key's entry when the
// caller found one (find; nothing may have changed the cache since), nil
// when it found none. The key is copied into the newest chunk even when
// old has a copy: a chunk is then held only by entries of the ring's
// span, never by a key added again long after its neighbours left (the
// map's assignment replaces its key string too).
func (c *dedupCache) add(old *dedupEntry, key []byte, r Reply, expireAt int64) {
	if old != nil {
		old.dead = true
	}
	k := c.intern(key)
	if c.n == len(c.ring) {
		grown := make([]dedupEntry, max(16, 2*len(c.ring)))
		for i := 0; i < c.n; i++ {
			grown[i] = *c.at(i)
		}
		c.ring, c.head = grown, 0
	}
	*c.at(c.n) = dedupEntry{key: k, reply: r, expireAt: expireAt}
	c.m[k] = c.seq + uint64(c.n)
	c.n++
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
		if !d.dead && d.expireAt > nowMs && len(c.m) <= c.max {
			return
		}
		if !d.dead {
			delete(c.m, d.key)
		}
		*d = dedupEntry{}
		c.head = (c.head + 1) & (len(c.ring) - 1)
		c.n--
		c.seq++
	}
}
