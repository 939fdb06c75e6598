package statestore

import (
	"slices"
	"sort"
	"strings"
	"unsafe"
)

// watchTable holds KEYNOTIFY registrations: exact keys and (extension) key
// prefixes, each a set of client ids. It is leader-local: registrations
// are not in the log or in snapshots, and clients register again after a
// reconnect.
type watchTable struct {
	exact     map[string]map[string]struct{} // key -> client ids
	prefix    map[string]map[string]struct{} // prefix -> client ids
	lens      []int                          // distinct lengths of the prefixes in use, ascending
	lenCount  map[int]int                    // prefix length -> number of prefixes of that length
	perClient map[string]*clientWatches
	count     int // registrations in total
}

type clientWatches struct {
	exact, prefix map[string]struct{}
}

func (w *watchTable) init() {
	w.exact = make(map[string]map[string]struct{})
	w.prefix = make(map[string]map[string]struct{})
	w.lenCount = make(map[int]int)
	w.perClient = make(map[string]*clientWatches)
}

// add registers (client, key or prefix). Registering twice is a no-op. It
// returns false when the client already has max registrations.
func (w *watchTable) add(client, key string, prefix bool, max int) bool {
	cw := w.perClient[client]
	if cw == nil {
		cw = &clientWatches{exact: map[string]struct{}{}, prefix: map[string]struct{}{}}
		w.perClient[client] = cw
	}
	own, table := cw.exact, w.exact
	if prefix {
		own, table = cw.prefix, w.prefix
	}
	if _, ok := own[key]; ok {
		return true
	}
	if len(cw.exact)+len(cw.prefix) >= max {
		if len(cw.exact)+len(cw.prefix) == 0 {
			delete(w.perClient, client)
		}
		return false
	}
	own[key] = struct{}{}
	set := table[key]
	if set == nil {
		set = make(map[string]struct{})
		table[key] = set
		if prefix {
			w.addLen(len(key), 1)
		}
	}
	set[client] = struct{}{}
	w.count++
	return true
}

// remove drops one registration and reports whether it existed.
func (w *watchTable) remove(client, key string, prefix bool) bool {
	cw := w.perClient[client]
	if cw == nil {
		return false
	}
	own := cw.exact
	if prefix {
		own = cw.prefix
	}
	if _, ok := own[key]; !ok {
		return false
	}
	delete(own, key)
	w.unlink(client, key, prefix)
	if len(cw.exact)+len(cw.prefix) == 0 {
		delete(w.perClient, client)
	}
	return true
}

// drop removes all of a client's registrations and returns how many.
func (w *watchTable) drop(client string) int {
	cw := w.perClient[client]
	if cw == nil {
		return 0
	}
	for k := range cw.exact {
		w.unlink(client, k, false)
	}
	for k := range cw.prefix {
		w.unlink(client, k, true)
	}
	delete(w.perClient, client)
	return len(cw.exact) + len(cw.prefix)
}

func (w *watchTable) unlink(client, key string, prefix bool) {
	table := w.exact
	if prefix {
		table = w.prefix
	}
	set := table[key]
	delete(set, client)
	if len(set) == 0 {
		delete(table, key)
		if prefix {
			w.addLen(len(key), -1)
		}
	}
	w.count--
}

func (w *watchTable) addLen(l, d int) {
	n := w.lenCount[l] + d
	i, found := slices.BinarySearch(w.lens, l)
	switch {
	case n == 0:
		delete(w.lenCount, l)
		if found {
			w.lens = slices.Delete(w.lens, i, i+1)
		}
	default:
		w.lenCount[l] = n
		if !found {
			w.lens = slices.Insert(w.lens, i, l)
		}
	}
}

// notify appends one notification per client watching key (exactly or by
// a prefix), clients in byte order, each client once.
func (w *watchTable) notify(key string, op Op, value []byte, v HLC, notes *[]Notification) {
	if w.count == 0 {
		return
	}
	var clients []string
	for c := range w.exact[key] {
		clients = append(clients, c)
	}
	for _, l := range w.lens {
		if l > len(key) {
			break
		}
		for c := range w.prefix[key[:l]] {
			clients = append(clients, c)
		}
	}
	if len(clients) == 0 {
		return
	}
	sort.Strings(clients)
	clients = slices.Compact(clients)
	for _, c := range clients {
		*notes = append(*notes, Notification{ClientID: c, Key: key, Op: op, Value: value, Version: v})
	}
}

// histEvent is one change in the history: 64 bytes, one cache line of
// the ring (whose backing array is line-aligned: its size is a multiple
// of 64). Each change evicts the oldest event, thousands of changes old
// and out of the CPU's caches, and reads its version and sizes: with the
// value as a slice the event was 80 bytes and that read missed on two
// lines, the clear of its pointers wrote both, and the new event's write
// touched two more.
type histEvent struct {
	version HLC
	key     string
	val     *byte  // OpSet: the value's first byte (value); nil for none
	valLen  uint32 // the value's length (MaxValueSize fits)
	op      Op
}

// newHistEvent returns the event of a change; value is kept, not copied
// (it is the key's shared, never written value).
func newHistEvent(v HLC, op Op, key string, value []byte) histEvent {
	return histEvent{version: v, op: op, key: key, val: unsafe.SliceData(value), valLen: uint32(len(value))}
}

// value returns the event's value as newHistEvent was given it (nil
// when nil).
func (h *histEvent) value() []byte {
	if h.val == nil {
		return nil
	}
	return unsafe.Slice(h.val, h.valLen)
}

func (h *histEvent) size() int64 { return int64(len(h.key)) + int64(h.valLen) }

// history is the bounded change history, oldest first, versions strictly
// increasing. It is replicated state (built by Apply, in snapshots). The
// events sit in a ring (buf, the oldest at head), so that evicting the
// oldest as each change arrives moves nothing: a slice shifted from its
// front copied the whole history each time append outgrew it.
type history struct {
	buf      []histEvent // len is 0 or a power of two (push), so at masks
	head     int         // index in buf of the oldest event
	n        int         // events held
	bytes    int64       // sum of size()
	floor    HLC         // version of the newest event evicted; zero if none
	maxLen   int
	maxBytes int64
}

// len returns the number of events held.
func (h *history) len() int { return h.n }

// at returns the i-th event, oldest first.
func (h *history) at(i int) *histEvent { return &h.buf[(h.head+i)&(len(h.buf)-1)] }

// push appends ev as the newest event, growing the ring when full.
func (h *history) push(ev histEvent) {
	if h.n == len(h.buf) {
		grown := make([]histEvent, max(16, 2*len(h.buf)))
		for i := 0; i < h.n; i++ {
			grown[i] = *h.at(i)
		}
		h.buf, h.head = grown, 0
	}
	*h.at(h.n) = ev
	h.n++
	h.bytes += ev.size()
}

// add appends ev and evicts the oldest events beyond the bounds.
func (h *history) add(ev histEvent) {
	h.push(ev)
	for h.n > 0 && (h.n > h.maxLen || h.bytes > h.maxBytes) {
		old := h.at(0)
		h.floor = old.version
		h.bytes -= old.size()
		*old = histEvent{}
		h.head = (h.head + 1) & (len(h.buf) - 1)
		h.n--
	}
}

// since returns, as notifications for client, the changes newer than v to
// key (or, with prefix, to keys starting with it). ok is false when some
// change newer than v may have left the history.
func (h *history) since(v HLC, client, key string, prefix bool) (notes []Notification, ok bool) {
	if h.floor.Compare(v) > 0 {
		return nil, false
	}
	i := sort.Search(h.n, func(i int) bool { return h.at(i).version.Compare(v) > 0 })
	for ; i < h.n; i++ {
		ev := h.at(i)
		if ev.key == key || prefix && strings.HasPrefix(ev.key, key) {
			notes = append(notes, Notification{ClientID: client, Key: ev.key, Op: ev.op, Value: ev.value(), Version: ev.version})
		}
	}
	return notes, true
}
