package statestore

import (
	"bytes"
	"container/heap"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"
	"unsafe"
)

// Request is one state store request as the front end received it: the
// RESP3 payload plus the MQTT properties that affect the engine.
type Request struct {
	Payload  []byte // RESP3 request payload
	ClientID string // MQTT client id of the sender; KEYNOTIFY registrations belong to it

	// Command, when not nil, is ParseCommand(Payload) done by the caller
	// (a front end that parsed the request to find its shard), so Prepare
	// does not parse the payload again. It must be the successful parse
	// of Payload; leave it nil when the parse failed (Prepare then
	// answers the parse error).
	Command *Command

	Timestamp       string // __ts user property, when HasTimestamp
	HasTimestamp    bool
	FencingToken    string // __ft user property, when HasFencingToken
	HasFencingToken bool

	// DedupKey identifies the request for the response cache (use
	// DedupKey(correlation data, response topic)); nil disables caching.
	// DedupTTL is how long the reply stays cached (the request's message
	// expiry interval); under one millisecond disables caching.
	DedupKey []byte
	DedupTTL time.Duration
}

// SetUserProperty records an MQTT user property of the request: __ts and
// __ft are kept (a repeated name keeps the last value), anything else is
// ignored. A front end calls it for every user property it received.
func (r *Request) SetUserProperty(key, value string) {
	switch key {
	case PropTimestamp:
		r.Timestamp, r.HasTimestamp = value, true
	case PropFencingToken:
		r.FencingToken, r.HasFencingToken = value, true
	}
}

// maxDedupKeyLen: longer dedup keys are not cached (a 16-byte correlation
// id and a 64 KiB response topic fit).
const maxDedupKeyLen = 1 << 17

// Outcome is what a command produced: the reply for the requester and the
// notifications to push to watching clients, in order.
type Outcome struct {
	Reply         Reply
	Notifications []Notification
}

// Engine is the state store of one shard: a deterministic state machine
// fed by a log. See the package documentation for the calling protocol.
// Its methods are safe for concurrent use.
type Engine struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	st      state      // protected by mu: everything Apply builds
	issued  HLC        // protected by mu: newest version Prepare issued (leader-local)
	watches watchTable // protected by mu: KEYNOTIFY registrations (leader-local)
}

// state is the replicated part of the engine: a function of the applied
// log (and of the snapshot it started from), written by Snapshot.
type state struct {
	keys    map[string]*item
	exp     expiryHeap // items with an expiry, earliest first
	bytes   int64      // sum of len(key)+len(value)
	applied HLC        // newest version of any applied change
	hist    history
	cache   dedupCache
}

// item is one key. It holds no more than it must (96 bytes, and the key
// after it when short: newItem), since the table grows by one per new
// key and every byte of it is a fresh page to fault in and a word for
// the collector to mark.
type item struct {
	key string
	// buf is the key's GET reply, "$<len>\r\n<value>\r\n" (its first
	// replyLen bytes, the value at their end before the CRLF), then the
	// version text, version.String(); one allocation built by setReply
	// and never written again, so the reply, the value and the text are
	// shared with every reader (GET answers, the history, notifications,
	// a frozen snapshot).
	buf      string
	replyLen uint32
	valueLen uint32
	version  HLC
	expireAt int64 // Unix ms at or after which the key is gone; 0 = never
	token    *HLC  // fencing token; nil = not fenced
	heapIdx  int   // index in state.exp, -1 when not there
}

// reply returns the key's GET reply (shared: do not modify).
func (it *item) reply() []byte {
	return unsafe.Slice(unsafe.StringData(it.buf), it.replyLen)
}

// value returns the key's value (shared: do not modify).
func (it *item) value() []byte {
	end := it.replyLen - 2
	return it.reply()[end-it.valueLen : end : end]
}

// versionText returns version.String().
func (it *item) versionText() string { return it.buf[it.replyLen:] }

// fenced returns the key's fencing token, the zero HLC when none.
func (it *item) fenced() HLC {
	if it.token == nil {
		return HLC{}
	}
	return *it.token
}

// newItem returns an item for key, not in any table yet. A key of up to
// 128 bytes is copied into the item's own allocation (itemWith), so a
// new key costs one allocation for both; it.key points into it, and
// whatever keeps the key string (the table, the history, a snapshot's
// copy) keeps the item's memory, which is never written there again.
func newItem(key []byte) *item {
	switch {
	case len(key) <= 16:
		return newItemWith[[16]byte](key)
	case len(key) <= 32:
		return newItemWith[[32]byte](key)
	case len(key) <= 64:
		return newItemWith[[64]byte](key)
	case len(key) <= 128:
		return newItemWith[[128]byte](key)
	}
	return &item{key: string(key), heapIdx: -1}
}

// itemWith is an item with room for its key after it.
type itemWith[K any] struct {
	item
	k K // the key's bytes, then unused room
}

func newItemWith[K any](key []byte) *item {
	p := &itemWith[K]{item: item{heapIdx: -1}}
	if len(key) > 0 {
		b := unsafe.Slice((*byte)(unsafe.Pointer(&p.k)), len(key))
		copy(b, key)
		p.key = unsafe.String(&b[0], len(b))
	}
	return &p.item
}

// New returns an empty engine. A nil logger discards.
func New(opts Options, log *slog.Logger) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{opts: opts, log: log}
	e.st = newState(&opts)
	e.watches.init()
	return e, nil
}

func newState(o *Options) state {
	return state{
		keys:  make(map[string]*item),
		hist:  history{maxLen: o.HistoryLen, maxBytes: o.HistoryBytes},
		cache: newDedupCache(o.DedupLen),
	}
}

// Options returns the engine's options with defaults filled in.
func (e *Engine) Options() Options { return e.opts }

func errOutcome(err error) Outcome {
	return Outcome{Reply: Reply{Payload: errorReply(serviceText(err))}}
}

// Prepare validates a request against the clock now (the store's wall
// clock) and decides how it is served:
//
//   - needsLog false: the request is answered now, by out (errors, GET,
//     KEYNOTIFY, and replies found in the response cache). KEYNOTIFY
//     registrations take effect here; a resumed watch (SINCE) returns its
//     backlog in out.Notifications.
//   - needsLog true: a mutation (SET, DEL, VDEL). entry is a self-contained
//     log entry carrying the version Prepare assigned; the caller appends
//     it to the log and then passes it to Apply, whose Outcome is the
//     reply. out is empty.
//
// Prepare changes no replicated state. Entries must reach Apply in the
// order Prepare produced them.
func (e *Engine) Prepare(req *Request, now time.Time) (entry []byte, out Outcome, needsLog bool) {
	return e.PrepareAppend(nil, req, now)
}

// PrepareAppend is Prepare appending the entry to dst: an owner that
// serializes its mutations reuses one buffer for them (the entry is not
// kept by Apply: it copies what it keeps).
func (e *Engine) PrepareAppend(dst []byte, req *Request, now time.Time) (entry []byte, out Outcome, needsLog bool) {
	nowMs := now.UnixMilli()
	var cmd Command
	var err error // ParseCommand's: it counts only after the cache lookup
	if req.Command != nil {
		cmd = *req.Command
	} else {
		cmd, err = ParseCommand(req.Payload) // outside the lock
	}
	dedup := req.DedupKey != nil
	ttl := req.DedupTTL.Milliseconds()
	if len(req.DedupKey) > maxDedupKeyLen || ttl <= 0 {
		dedup = false
	}
	var id dedupID
	if dedup {
		id = dedupIDOf(req.DedupKey) // outside the lock
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if dedup {
		if r, ok := e.st.cache.lookup(&id, nowMs); ok {
			return nil, Outcome{Reply: r}, false
		}
	}
	if err != nil {
		return nil, errOutcome(err), false
	}
	if len(cmd.Key) > e.opts.MaxKeySize || len(cmd.Value) > e.opts.MaxValueSize {
		return nil, errOutcome(ErrQuota), false
	}
	skew := e.opts.MaxClockSkew.Milliseconds()
	var ts HLC
	if req.HasTimestamp {
		if ts, err = ParseHLC(req.Timestamp); err != nil {
			return nil, errOutcome(ErrMalformedTimestamp), false
		}
		if tooFarAhead(ts, nowMs, skew) {
			return nil, errOutcome(ErrTimestampSkew), false
		}
	} else if cmd.Verb == VerbSet {
		return nil, errOutcome(ErrMissingTimestamp), false
	}
	var ft HLC
	if req.HasFencingToken && (cmd.Verb == VerbSet || cmd.Verb == VerbDel || cmd.Verb == VerbVDel) {
		if ft, err = ParseHLC(req.FencingToken); err != nil {
			return nil, errOutcome(ErrMalformedTimestamp), false
		}
		if tooFarAhead(ft, nowMs, skew) {
			return nil, errOutcome(ErrFencingSkew), false
		}
	}
	switch cmd.Verb {
	case VerbGet:
		return nil, Outcome{Reply: e.getLocked(cmd.Key, nowMs)}, false
	case VerbKeyNotify:
		return nil, e.keyNotifyLocked(req.ClientID, &cmd), false
	}
	le := logEntry{
		version:  e.issueLocked(ts, nowMs),
		cond:     cmd.Cond,
		expiryMs: cmd.Expiry.Milliseconds(),
		ft:       ft,
		key:      cmd.Key,
		value:    cmd.Value,
	}
	switch cmd.Verb {
	case VerbSet:
		le.op = opSet
	case VerbDel:
		le.op = opDel
	case VerbVDel:
		le.op = opVDel
	}
	var field [dedupFieldLen]byte
	if dedup {
		field = id.field()
		le.dedup, le.dedupTTL = field[:], ttl
	}
	return le.appendTo(slices.Grow(dst, le.size())), Outcome{}, true
}

func tooFarAhead(h HLC, nowMs, skewMs int64) bool {
	return nowMs <= math.MaxInt64-skewMs && h.Wall > nowMs+skewMs
}

// issueLocked assigns the version of a new entry: the HLC update of the
// store's clock with the request's __ts (zero when absent) at wall time
// nowMs. It is greater than remote and than every version issued or
// applied before.
func (e *Engine) issueLocked(remote HLC, nowMs int64) HLC {
	local := e.issued
	if e.st.applied.Compare(local) > 0 {
		local = e.st.applied
	}
	e.issued = hlcUpdate(local, remote, nowMs, e.opts.NodeID)
	return e.issued
}

func (e *Engine) getLocked(key []byte, nowMs int64) Reply {
	it := e.st.keys[string(key)]
	if it == nil || it.expiredAt(nowMs) {
		return Reply{Payload: replyNil}
	}
	return Reply{Payload: it.reply(), Version: it.version, versionText: it.versionText()}
}

func (it *item) expiredAt(ms int64) bool { return it.expireAt != 0 && it.expireAt <= ms }

// Get returns a key's value and version as of now, without a request. The
// value is shared: do not modify it.
func (e *Engine) Get(key []byte, now time.Time) (value []byte, version HLC, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	it := e.st.keys[string(key)]
	if it == nil || it.expiredAt(now.UnixMilli()) {
		return nil, HLC{}, false
	}
	return it.value(), it.version, true
}

// NextExpiry returns the earliest time at which a key expires, so the
// owner can schedule PrepareExpire.
func (e *Engine) NextExpiry() (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.st.exp) == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(e.st.exp[0].expireAt), true
}

// PrepareExpire returns an expire entry when some key is due at now. Its
// Apply removes every key whose expiry is at or before the entry's store
// time and emits their DELETE notifications; expiry is decided only there,
// so all replicas agree. (Every other entry expires due keys as well.)
func (e *Engine) PrepareExpire(now time.Time) (entry []byte, ok bool) {
	nowMs := now.UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.st.exp) == 0 || e.st.exp[0].expireAt > nowMs {
		return nil, false
	}
	le := logEntry{op: opExpire, version: e.issueLocked(HLC{}, nowMs)}
	return le.appendTo(make([]byte, 0, le.size())), true
}

// Apply applies a log entry that Prepare or PrepareExpire produced (here
// or on another replica). storeTime is the store time of the log record
// holding it; it is the only clock Apply uses. Applying the same entries
// with the same store times to equal engines yields equal engines. A
// malformed entry returns an error wrapping ErrCorrupt (or
// ErrUnsupportedFormat) and changes nothing.
func (e *Engine) Apply(entry []byte, storeTime time.Time) (Outcome, error) {
	le, err := decodeEntry(entry, e.opts.NodeID, true)
	if err != nil {
		return Outcome{}, err
	}
	return e.apply(&le, storeTime)
}

// ApplyOwn is Apply for an entry this engine's Prepare returned, whose
// bytes have stayed in the caller's memory since (not read back from the
// log or received from another node): it skips the entry's checksum,
// which guards the entry on disk and on the wire, and checks the rest as
// Apply does.
func (e *Engine) ApplyOwn(entry []byte, storeTime time.Time) (Outcome, error) {
	le, err := decodeEntry(entry, e.opts.NodeID, false)
	if err != nil {
		return Outcome{}, err
	}
	return e.apply(&le, storeTime)
}

func (e *Engine) apply(le *logEntry, storeTime time.Time) (Outcome, error) {
	nowMs := storeTime.UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	var out Outcome
	e.expireLocked(nowMs, le.version, &out.Notifications)
	e.st.cache.evict(nowMs)
	if le.op == opExpire {
		return out, nil
	}
	// One lookup of the dedup id: the entry found (answering, or
	// expired but not evicted yet) is the one add marks dead, as nothing
	// changes the cache in between.
	var cachedAt *dedupEntry
	var dedupTag uint32
	var id dedupID
	if le.dedup != nil {
		id = dedupIDOfField(le.dedup)
		dedupTag = e.st.cache.tagOf(&id)
		if cachedAt = e.st.cache.find(&id, dedupTag); cachedAt != nil && cachedAt.expireAt > nowMs {
			out.Reply = cachedAt.reply
			return out, nil
		}
	}
	out.Reply = e.execLocked(le, nowMs, &out.Notifications)
	if le.dedup != nil {
		// Not the version text: it lives in the key's buffer, which
		// the cache would keep after the key changes (a cached reply
		// is rarely read; VersionString formats it then).
		cached := out.Reply
		cached.versionText = ""
		e.st.cache.add(cachedAt, &id, dedupTag, cached, satAdd(nowMs, le.dedupTTL))
		e.st.cache.evict(nowMs)
	}
	return out, nil
}

// nextLocked returns the version of the next change of an entry whose
// assigned version is floor: floor itself if it is newer than anything
// applied, else the successor of the newest applied version. Versions of
// applied changes therefore strictly increase.
func (e *Engine) nextLocked(floor HLC) HLC {
	if floor.Compare(e.st.applied) > 0 {
		e.st.applied = floor
	} else {
		e.st.applied = e.st.applied.tick(floor.Node)
	}
	return e.st.applied
}

// expireLocked removes every key due at nowMs, earliest first (ties by
// key), recording DELETE changes.
func (e *Engine) expireLocked(nowMs int64, floor HLC, notes *[]Notification) {
	for len(e.st.exp) > 0 && e.st.exp[0].expireAt <= nowMs {
		it := e.st.exp[0]
		e.removeLocked(it)
		e.changedLocked(it.key, OpDelete, nil, e.nextLocked(floor), notes)
	}
}

func (e *Engine) removeLocked(it *item) {
	if it.heapIdx >= 0 {
		heap.Remove(&e.st.exp, it.heapIdx)
	}
	delete(e.st.keys, it.key)
	e.st.bytes -= int64(len(it.key)) + int64(it.valueLen)
}

// changedLocked records a change in the history and appends the
// notifications for the clients watching the key.
func (e *Engine) changedLocked(key string, op Op, value []byte, v HLC, notes *[]Notification) {
	e.st.hist.add(newHistEvent(v, op, key, value))
	e.watches.notify(key, op, value, v, notes)
}

// fencedLocked checks the request's fencing token against the key's.
func fencedLocked(it *item, ft HLC) ServiceError {
	if it == nil || it.token == nil {
		return ""
	}
	if ft.IsZero() {
		return ErrFencingRequired
	}
	if ft.Compare(*it.token) < 0 {
		return ErrFencingStale
	}
	return ""
}

func (e *Engine) execLocked(le *logEntry, nowMs int64, notes *[]Notification) Reply {
	it := e.st.keys[string(le.key)]
	if se := fencedLocked(it, le.ft); se != "" {
		return Reply{Payload: errorReply(se)}
	}
	switch le.op {
	case opSet:
		return e.setLocked(it, le, nowMs, notes)
	case opVDel:
		if it != nil && !bytes.Equal(it.value(), le.value) {
			return Reply{Payload: replyNotDone, Version: it.version}
		}
	}
	// DEL, or VDEL whose value matches.
	if it == nil {
		return Reply{Payload: replyZero}
	}
	old := it.version
	e.removeLocked(it)
	e.changedLocked(it.key, OpDelete, nil, e.nextLocked(le.version), notes)
	return Reply{Payload: replyOne, Version: old}
}

func (e *Engine) setLocked(it *item, le *logEntry, nowMs int64, notes *[]Notification) Reply {
	switch {
	case it == nil:
	case le.cond == CondNX, le.cond == CondNEX && !bytes.Equal(it.value(), le.value):
		return Reply{Payload: replyNotDone, Version: it.version}
	}
	delta := int64(len(le.key) + len(le.value))
	if it == nil && len(e.st.keys) >= e.opts.MaxKeys {
		return Reply{Payload: errorReply(ErrQuota)}
	}
	if it != nil {
		delta -= int64(len(it.key)) + int64(it.valueLen)
	}
	if e.st.bytes+delta > e.opts.MaxBytes {
		return Reply{Payload: errorReply(ErrQuota)}
	}
	if it == nil {
		it = newItem(le.key)
		e.st.keys[it.key] = it
	}
	e.st.bytes += delta
	it.version = e.nextLocked(le.version)
	it.setReply(le.value)
	if !le.ft.IsZero() && le.ft.Compare(it.fenced()) > 0 {
		ft := le.ft
		it.token = &ft
	}
	var expireAt int64
	if le.expiryMs > 0 {
		expireAt = max(satAdd(nowMs, le.expiryMs), 1)
	}
	e.st.setExpiry(it, expireAt)
	e.changedLocked(it.key, OpSet, it.value(), it.version, notes)
	return Reply{Payload: replyOK, Version: it.version, versionText: it.versionText()}
}

// setReply sets the item's value, its GET reply and its version text
// (of it.version) in one allocation, it.buf: the reply
// "$<len>\r\n<value>\r\n" with the value inside it, then the version
// text. The buffer is never written again, so the three share it safely
// with every reader.
func (it *item) setReply(value []byte) {
	buf := make([]byte, 0, len(value)+16+22+len(it.version.Node))
	buf = appendBulk(buf, value)
	n := len(buf)
	buf = it.version.AppendText(buf)
	it.buf = unsafe.String(unsafe.SliceData(buf), len(buf))
	it.replyLen, it.valueLen = uint32(n), uint32(len(value))
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// setExpiry sets (0 clears) an item's expiry and keeps the heap in order.
func (s *state) setExpiry(it *item, expireAt int64) {
	it.expireAt = expireAt
	switch {
	case expireAt == 0 && it.heapIdx >= 0:
		heap.Remove(&s.exp, it.heapIdx)
	case expireAt != 0 && it.heapIdx >= 0:
		heap.Fix(&s.exp, it.heapIdx)
	case expireAt != 0:
		heap.Push(&s.exp, it)
	}
}

func (e *Engine) keyNotifyLocked(clientID string, c *Command) Outcome {
	if clientID == "" {
		return errOutcome(ErrMissingClientID)
	}
	key := string(c.Key)
	if c.Stop {
		if !e.watches.remove(clientID, key, c.Prefix) {
			return Outcome{Reply: Reply{Payload: replyZero}}
		}
		return Outcome{Reply: Reply{Payload: replyOK}}
	}
	if NotifyTopicLen(len(clientID), len(key)) > MaxTopicLen {
		// No notification of this key could reach the client: MQTT
		// cannot carry its topic. Refused, not registered to be dropped
		// at every change. (A PREFIX watch's longer keys may still not
		// fit; theirs are dropped by the MQTT server.)
		return errOutcome(ErrQuota)
	}
	var backlog []Notification
	if !c.Since.IsZero() {
		var ok bool
		if backlog, ok = e.st.hist.since(c.Since, clientID, key, c.Prefix); !ok {
			return errOutcome(ErrHistoryTooOld)
		}
	}
	if !e.watches.add(clientID, key, c.Prefix, e.opts.MaxWatchesPerClient) {
		return errOutcome(ErrQuota)
	}
	return Outcome{Reply: Reply{Payload: replyOK}, Notifications: backlog}
}

// Clock returns the shard's clock: the newest version issued or applied.
// A change that a replica (a slave promoted later) applies after the
// entries this engine had applied gets a greater version (HLCs of
// clocks that agree to within the failover time), and one this engine
// applies after Clock returns reaches the watches registered before; so a
// front end that registered a watch and then read Clock can register it
// on the replica with KEYNOTIFY ... SINCE <clock> and miss no change.
//
// A shard that has issued and applied nothing returns the smallest HLC
// that is not zero (wall time 0, this engine's node id): the beginning of
// its history, which SINCE accepts, where the zero HLC means no SINCE.
func (e *Engine) Clock() HLC {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.issued
	if e.st.applied.Compare(c) > 0 {
		c = e.st.applied
	}
	if c.IsZero() {
		c = HLC{Node: e.opts.NodeID}
	}
	return c
}

// DropClient removes every KEYNOTIFY registration of a client; the front
// end calls it when the client disconnects. It returns how many it removed.
func (e *Engine) DropClient(clientID string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.watches.drop(clientID)
}

// Stats is a point-in-time summary of an engine.
type Stats struct {
	Keys       int   // keys held (including expired ones not yet removed)
	Bytes      int64 // key plus value bytes held
	Expiring   int   // keys with an expiry
	History    int   // changes in the change history
	Cached     int   // replies in the response cache
	Watches    int   // KEYNOTIFY registrations
	Applied    HLC   // newest applied version
	HistoryMin HLC   // changes at or before this version are gone from the history
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Stats{
		Keys:       len(e.st.keys),
		Bytes:      e.st.bytes,
		Expiring:   len(e.st.exp),
		History:    e.st.hist.len(),
		Cached:     e.st.cache.len(),
		Watches:    e.watches.count,
		Applied:    e.st.applied,
		HistoryMin: e.st.hist.floor,
	}
}

// expiryHeap orders items by expiry time, then key.
type expiryHeap []*item

func (h expiryHeap) Len() int { return len(h) }
func (h expiryHeap) Less(i, j int) bool {
	if h[i].expireAt != h[j].expireAt {
		return h[i].expireAt < h[j].expireAt
	}
	return h[i].key < h[j].key
}
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}
func (h *expiryHeap) Push(x any) {
	it := x.(*item)
	it.heapIdx = len(*h)
	*h = append(*h, it)
}
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	it.heapIdx = -1
	*h = old[:len(old)-1]
	return it
}
