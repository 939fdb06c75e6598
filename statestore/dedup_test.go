package statestore

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"testing"
)

// refDedup is the response cache as a plain map of copied keys plus an
// insertion-order list: the behaviour dedupCache must keep.
type refDedup struct {
	m     map[string]*refEntry
	order []*refEntry
	max   int
}

type refEntry struct {
	key      string
	payload  string
	expireAt int64
	dead     bool
}

func (c *refDedup) lookup(key []byte, nowMs int64) (string, bool) {
	d := c.m[string(key)]
	if d == nil || d.expireAt <= nowMs {
		return "", false
	}
	return d.payload, true
}

func (c *refDedup) add(key []byte, payload string, expireAt int64) {
	if old := c.m[string(key)]; old != nil {
		old.dead = true
	}
	d := &refEntry{key: string(key), payload: payload, expireAt: expireAt}
	c.m[d.key] = d
	c.order = append(c.order, d)
}

func (c *refDedup) evict(nowMs int64) {
	for len(c.order) > 0 {
		d := c.order[0]
		if !d.dead && d.expireAt > nowMs && len(c.m) <= c.max {
			return
		}
		if !d.dead {
			delete(c.m, d.key)
		}
		c.order = c.order[1:]
	}
}

// TestDedupCacheModel drives the cache and the reference with the same
// random adds (the way Apply does: find, then add), lookups and
// evictions, over the ids of keys of many sizes, and checks that they
// answer alike, that every live entry is the one its id maps to, and
// that the index names each live entry once.
func TestDedupCacheModel(t *testing.T) {
	t.Run("hash", func(t *testing.T) { testDedupCacheModel(t, 0) })
	// Sequence numbers past 1<<32, where a slot's low 32 bits wrap.
	t.Run("seq-wrap", func(t *testing.T) { testDedupCacheModel(t, 1<<32-30000) })
	// Four bits of hash: most ids share theirs with others, probe runs
	// are long and wrap around the index, and eviction moves entries
	// back across them.
	t.Run("weak-hash", func(t *testing.T) {
		defer func(m uint64) { dedupHashMask = m }(dedupHashMask)
		dedupHashMask = 0xF
		testDedupCacheModel(t, 1<<32-30000)
	})
}

func testDedupCacheModel(t *testing.T, seq uint64) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := newDedupCache(300)
	c.seq = seq // the ring is empty: its oldest entry will have this number
	ref := &refDedup{m: map[string]*refEntry{}, max: 300}
	idOf := func(i int) dedupID {
		k := bytes.Repeat([]byte{byte('a' + i%26)}, 8+i%97)
		return dedupIDOf(append(k, fmt.Sprintf("#%d", i)...))
	}
	now := int64(1000)
	for step := 0; step < 60000; step++ {
		now += int64(rng.IntN(3))
		id := idOf(rng.IntN(2000))
		k := id[:]
		switch op := rng.IntN(10); {
		case op < 6:
			payload := fmt.Sprintf("+reply %d\r\n", step)
			exp := now + int64(1+rng.IntN(400))
			c.evict(now)
			ref.evict(now)
			h := c.tagOf(&id)
			d := c.find(&id, h)
			if d != nil && d.expireAt > now {
				break // Apply answers from the cache
			}
			if _, ok := ref.lookup(k, now); ok {
				t.Fatalf("step %d: reference has %x live, cache not", step, k)
			}
			c.add(d, &id, h, Reply{Payload: []byte(payload)}, exp)
			ref.add(k, payload, exp)
			c.evict(now)
			ref.evict(now)
		default:
			got, ok := c.lookup(&id, now)
			want, wok := ref.lookup(k, now)
			if ok != wok || string(got.Payload) != want {
				t.Fatalf("step %d: lookup %x = %q %v, want %q %v", step, k, got.Payload, ok, want, wok)
			}
		}
		if c.len() != len(ref.m) {
			t.Fatalf("step %d: %d live entries, want %d", step, c.len(), len(ref.m))
		}
	}
	live := 0
	for i := 0; i < c.n; i++ {
		d := c.at(i)
		if d.dead {
			continue
		}
		live++
		if c.find(&d.id, c.tagOf(&d.id)) != d {
			t.Fatalf("live entry %x is not the one its id maps to", d.id)
		}
		if r := ref.m[string(d.id[:])]; r == nil || r.payload != string(d.reply.Payload) {
			t.Fatalf("live entry %x does not match the reference", d.id)
		}
	}
	if live != len(ref.m) {
		t.Fatalf("%d live entries in the ring, want %d", live, len(ref.m))
	}
	// The index names each live entry once, under its own tag.
	used := 0
	for _, s := range c.idx {
		if s == 0 {
			continue
		}
		used++
		if p := c.pos(s); p >= c.n {
			t.Fatalf("index slot %x names place %d of a ring of %d", s, p, c.n)
		}
		if d := c.at(c.pos(s)); d.dead || d.tag != s.tag() {
			t.Fatalf("index slot %x names entry %x (dead %v, tag %x)", s, d.id, d.dead, d.tag)
		}
	}
	if used != live || 2*used > len(c.idx) {
		t.Fatalf("%d index slots used of %d, want %d live entries, at most half", used, len(c.idx), live)
	}
}

// TestDedupIDOfField: an id's field reads back as the id; anything else
// (the dedup key an older build wrote into its entries and snapshots,
// which starts with a zero byte) is the key's id, so that a request's
// redelivery finds the reply cached for it either way.
func TestDedupIDOfField(t *testing.T) {
	key := DedupKey([]byte("0123456789abcdef"), "clients/c1/response")
	id := dedupIDOf(key)
	f := id.field()
	if got := dedupIDOfField(f[:]); got != id {
		t.Errorf("id of its own field = %x, want %x", got, id)
	}
	if got := dedupIDOfField(key); got != id {
		t.Errorf("id of the key's field = %x, want %x", got, id)
	}
	// A key of the field's length is a key all the same (its first byte
	// is the length's, zero).
	short := DedupKey([]byte("abcd"), "topic")
	if len(short) != dedupFieldLen || short[0] != 0 {
		t.Fatalf("short key of %d bytes", len(short))
	}
	if got := dedupIDOfField(short); got != dedupIDOf(short) {
		t.Errorf("id of a %d-byte key's field = %x, want its hash", len(short), got)
	}
	sum := sha256.Sum256(key)
	if !bytes.Equal(id[:], sum[:16]) {
		t.Errorf("id %x is not the first 16 bytes of SHA-256 %x", id, sum)
	}
}

// TestItemKeyInline checks that a key stored in its item's own memory
// stays intact after the item leaves the table, as long as something
// (here the history, as a snapshot or a notification would) holds it.
func TestItemKeyInline(t *testing.T) {
	e := mustEngine(t, Options{HistoryLen: 5000})
	var keys []string
	for i := 0; i < 2000; i++ {
		k := fmt.Sprintf("%0*d", 1+i%150, i) // 1..150 bytes: every item size and a separate string
		keys = append(keys, k)
		r := &Request{ClientID: "c", Payload: cmd("SET", k, "v")}
		r.SetUserProperty(PropTimestamp, "1696374425000:0:n")
		entry, _, ok := e.Prepare(r, t0)
		if !ok {
			t.Fatal("SET not logged")
		}
		apply(t, e, entry, t0)
		del := &Request{ClientID: "c", Payload: cmd("DEL", k)}
		entry, _, ok = e.Prepare(del, t0)
		if !ok {
			t.Fatal("DEL not logged")
		}
		apply(t, e, entry, t0)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.st.hist.len() != 4000 {
		t.Fatalf("history holds %d events, want 4000", e.st.hist.len())
	}
	for i := 0; i < e.st.hist.len(); i++ {
		if got, want := e.st.hist.at(i).key, keys[i/2]; got != want {
			t.Fatalf("event %d key %q, want %q", i, got, want)
		}
	}
}

// BenchmarkDedupCacheTurnover measures what a SET costs the response cache
// at its bound, the way the Azure client's requests reach it: the id of
// the dedup key and a lookup that misses (Prepare), then Apply's evict,
// find (a miss) and add, with keys of a 16-byte correlation id and a
// 73-byte response topic.
func BenchmarkDedupCacheTurnover(b *testing.B) {
	const max = 10000
	c := newDedupCache(max)
	topic := "clients/bench-client-17/services/statestore/_any_/command/invoke/response"
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = AppendDedupKey(nil, []byte(fmt.Sprintf("%016x", i)), topic)
	}
	now := int64(1000)
	r := Reply{Payload: []byte("+OK\r\n")}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := dedupIDOf(keys[i&(len(keys)-1)]) // Prepare's, once per request
		if _, ok := c.lookup(&id, now); ok {
			b.Fatal("hit")
		}
		c.evict(now)
		h := c.tagOf(&id)
		d := c.find(&id, h)
		c.add(d, &id, h, r, now+1_000_000)
		c.evict(now)
	}
}
