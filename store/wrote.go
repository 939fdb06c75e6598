package store

import (
	"unsafe"

	"github.com/smartgo/smartgo/store/record"
)

// What the writer knows, handed on: the writer has just encoded each
// record it appends, so it notes there what the dispatcher and the indexer
// need of it (queue, queue offset, tags code, store time, the KEYS and
// UNIQ_KEY values; dispEntryOf on the bytes still in the CPU's cache), and
// they take these notes instead of reading the record back from the
// mapping, where every record costs them a parse of bytes another CPU
// wrote (and a page fault every few records). The notes travel from the
// writer (Store.wq, under putMu) to the dispatcher (dispatcher.wq, once
// the records are committed), then with the dispatched ones to the
// indexer (Store.ixq under markMu, then indexer.q).
//
// A follower reads a record back wherever it has no note for it: at
// recovery, in raw (slave) mode, for replicated bytes, for fillers and
// when a queue was full and the writer noted nothing. Both ways build
// the entry with dispEntryOf from the same bytes, so they cannot differ
// (TestStoreWroteNotesMatchReadBack). Notes never outlive their records:
// records taken back (a full disk, discardPendLocked) take their notes
// along, and a truncation drops them all.

// wroteRec is the note of one record.
type wroteRec struct {
	phy, qoff, ts, tags int64
	at                  int // its bytes in the arena: topic, KEYS value, UNIQ_KEY value
	size, queueID       int32
	sysFlag             int32
	topicLen            int32
	keysLen, uniqLen    int32
}

func (r *wroteRec) end() int64 { return r.phy + int64(r.size) }

// wroteQueue is a queue of notes in commitlog order.
type wroteQueue struct {
	recs  []wroteRec
	arena []byte
	head  int // recs[head:] are queued
}

// Bounds of a queue (at most about 4 MiB of notes and 4 MiB of their
// bytes, only while the followers lag that far): past them the writer
// (or the dispatcher handing notes on) notes nothing and the follower
// reads the records back. Putters that do not wait for their answers run
// that far ahead in bursts: with 16,384 notes, BenchmarkStorePutCPU's
// unpaced putters had a third of the records read back in some runs.
const (
	maxWroteRecs  = 1 << 16
	maxWroteBytes = 4 << 20
)

func (q *wroteQueue) len() int { return len(q.recs) - q.head }

func (q *wroteQueue) full(extra int) bool {
	return len(q.recs)-q.head >= maxWroteRecs || len(q.arena)+extra > maxWroteBytes
}

// first returns the oldest note, nil if none.
func (q *wroteQueue) first() *wroteRec {
	if q.head == len(q.recs) {
		return nil
	}
	return &q.recs[q.head]
}

// pop drops the oldest note.
func (q *wroteQueue) pop() {
	q.head++
	if q.head == len(q.recs) {
		q.reset()
	}
}

func (q *wroteQueue) reset() {
	q.recs, q.arena, q.head = q.recs[:0], q.arena[:0], 0
}

func (q *wroteQueue) topic(r *wroteRec) []byte {
	return q.arena[r.at : r.at+int(r.topicLen)]
}

func (q *wroteQueue) keys(r *wroteRec) []byte {
	at := r.at + int(r.topicLen)
	return q.arena[at : at+int(r.keysLen)]
}

func (q *wroteQueue) uniq(r *wroteRec) []byte {
	at := r.at + int(r.topicLen) + int(r.keysLen)
	return q.arena[at : at+int(r.uniqLen)]
}

// note queues the note of the record at phy (size bytes) whose entry is e;
// it reports false when the queue is full.
func (q *wroteQueue) note(e *dispEntry, phy int64, size int32) bool {
	n := len(e.topic) + len(e.keys) + len(e.uniq)
	if q.full(n) {
		return false
	}
	at := len(q.arena)
	q.arena = append(append(append(q.arena, e.topic...), e.keys...), e.uniq...)
	q.recs = append(q.recs, wroteRec{}) // set in place (see entryTo)
	r := &q.recs[len(q.recs)-1]
	r.phy, r.qoff, r.ts, r.tags, r.at, r.size = phy, e.qoff, e.ts, e.tags, at, size
	r.queueID, r.sysFlag = e.queueID, e.sysFlag
	r.topicLen, r.keysLen, r.uniqLen = int32(len(e.topic)), int32(len(e.keys)), int32(len(e.uniq))
	return true
}

// push queues a copy of r, a note of src; it reports false when the queue
// is full.
func (q *wroteQueue) push(src *wroteQueue, r *wroteRec) bool {
	n := int(r.topicLen + r.keysLen + r.uniqLen)
	if q.full(n) {
		return false
	}
	c := *r
	c.at = len(q.arena)
	q.arena = append(q.arena, src.arena[r.at:r.at+n]...)
	q.recs = append(q.recs, c)
	return true
}

// moveTo moves the oldest notes of records that end at or below limit to
// dst (as many as dst takes; the ones it does not are dropped: their
// followers read them back).
func (q *wroteQueue) moveTo(dst *wroteQueue, limit int64) {
	n := q.len()
	for n > 0 && q.recs[q.head+n-1].end() > limit {
		n-- // from the newest: the notes past limit are few (records not written yet)
	}
	q.moveFirst(dst, n)
}

// moveFirst moves the n oldest notes of q behind dst's, as moveTo does.
// When dst is empty the queues swap their buffers and only the notes after
// the n are copied (back to q); else the n are copied in one piece. q
// keeps its remaining notes at the front of its buffers: a queue that is
// never emptied (the writer's, which goes on noting while the dispatcher
// takes the notes of written records) does not grow.
func (q *wroteQueue) moveFirst(dst *wroteQueue, n int) {
	if n <= 0 {
		return
	}
	if dst.len() == 0 {
		dst.reset()
		*q, *dst = *dst, *q
		if from := dst.head + n; from < len(dst.recs) {
			q.appendRange(dst, from, len(dst.recs)) // q is empty: it fits
			dst.dropFrom(dst.recs[from].phy)
		}
		return
	}
	dst.compact()
	if end := q.head + n; dst.appendRange(q, q.head, end) {
		q.head = end
	} else {
		for ; n > 0; n-- {
			dst.push(q, q.first())
			q.pop()
		}
	}
	q.compact()
}

// appendRange queues copies of src.recs[from:to], notes of src, with their
// bytes in one piece; it reports false, queueing nothing, when q has no
// room for them all.
func (q *wroteQueue) appendRange(src *wroteQueue, from, to int) bool {
	if from == to {
		return true
	}
	a0 := src.recs[from].at
	last := &src.recs[to-1]
	a1 := last.at + int(last.topicLen+last.keysLen+last.uniqLen)
	if q.len()+to-from > maxWroteRecs || len(q.arena)+a1-a0 > maxWroteBytes {
		return false
	}
	delta := len(q.arena) - a0
	q.arena = append(q.arena, src.arena[a0:a1]...)
	i := len(q.recs)
	q.recs = append(q.recs, src.recs[from:to]...)
	for ; i < len(q.recs); i++ {
		q.recs[i].at += delta
	}
	return true
}

// compact moves the queued notes to the front of the queue's buffers.
func (q *wroteQueue) compact() {
	if q.head == 0 {
		return
	}
	if q.head == len(q.recs) {
		q.reset()
		return
	}
	base := q.recs[q.head].at
	n := copy(q.recs, q.recs[q.head:])
	q.recs = q.recs[:n]
	q.head = 0
	m := copy(q.arena, q.arena[base:])
	q.arena = q.arena[:m]
	for i := range q.recs {
		q.recs[i].at -= base
	}
}

// dropFrom drops the notes of records at or after phy (taken back).
func (q *wroteQueue) dropFrom(phy int64) {
	i := len(q.recs)
	for i > q.head && q.recs[i-1].phy >= phy {
		i--
	}
	if i == q.head {
		q.reset()
		return
	}
	q.recs = q.recs[:i]
	q.arena = q.arena[:q.recs[i-1].at+int(q.recs[i-1].topicLen+q.recs[i-1].keysLen+q.recs[i-1].uniqLen)]
}

// dropBelow drops the notes of records before pos (a follower got past
// them another way).
func (q *wroteQueue) dropBelow(pos int64) {
	for r := q.first(); r != nil && r.phy < pos; r = q.first() {
		q.pop()
	}
}

// entry is the dispatch entry a note stands for.
func (q *wroteQueue) entry(r *wroteRec) dispEntry {
	var e dispEntry
	q.entryTo(r, &e)
	return e
}

// entryTo sets e to the dispatch entry r stands for, field by field: the
// dispatcher's and the indexer's loops read e's fields right after, and
// a returned entry was copied in 16-byte moves over the callee's 8-byte
// stores, which the CPU cannot forward (each move waited for the store
// buffer to drain: 1-2 % of a broker's CPU under compare-cpu).
func (q *wroteQueue) entryTo(r *wroteRec, e *dispEntry) {
	e.topic, e.keys, e.uniq = q.topic(r), q.keys(r), q.uniq(r)
	e.queueID, e.sysFlag = r.queueID, r.sysFlag
	e.qoff, e.ts, e.tags = r.qoff, r.ts, r.tags
}

// dispEntry is what the dispatcher and the indexer take from a record.
type dispEntry struct {
	topic      []byte
	keys, uniq []byte // KEYS and UNIQ_KEY values (nil without), for the index
	queueID    int32
	sysFlag    int32
	qoff       int64
	ts         int64
	tags       int64 // consume-queue tagsCode (0 for records no queue gets)
}

// keyed reports whether the index wants the record.
func (e *dispEntry) keyed() bool {
	return e.sysFlag&record.TxMask != record.TxRollback && (len(e.keys) > 0 || len(e.uniq) > 0)
}

// queued reports whether the record gets a consume-queue entry.
func (e *dispEntry) queued() bool {
	tx := e.sysFlag & record.TxMask
	return tx == record.TxNotType || tx == record.TxCommit
}

// indexedKeys are the properties dispEntryOf looks up, in one pass (TAGS,
// KEYS, UNIQ_KEY: those a record.KnownProperties knows).
var indexedKeys = record.KnownKeys

// dispEntryOf is the entry of a parsed record, the one way both the writer
// (for its notes) and a follower reading a record back make it.
func (s *Store) dispEntryOf(v *record.View) dispEntry {
	var vals [len(indexedKeys)][]byte
	record.LookupProperties(v.Properties, indexedKeys[:], vals[:])
	var e dispEntry
	s.dispEntryWith(v, &vals, &e)
	return e
}

// dispEntryWith sets e to dispEntryOf's entry, with the values of
// indexedKeys in the record's properties (nil for a key it has no pair
// of) already at hand. Field by field: the writer reads e right after
// (see wroteQueue.entryTo).
func (s *Store) dispEntryWith(v *record.View, vals *[len(indexedKeys)][]byte, e *dispEntry) {
	e.topic, e.queueID, e.sysFlag = v.Topic, v.QueueID, v.SysFlag
	e.qoff, e.ts, e.tags = v.QueueOffset, v.StoreTimestamp, 0
	e.keys, e.uniq = nil, nil
	if e.queued() {
		e.tags = s.tagsCode(v, vals[0])
	}
	if e.sysFlag&record.TxMask != record.TxRollback {
		e.keys, e.uniq = vals[1], vals[2]
	}
}

// indexEntryOf is dispEntryOf without the tags code, for the indexer.
func (s *Store) indexEntryOf(v *record.View) dispEntry {
	var vals [len(indexedKeys)][]byte
	record.LookupProperties(v.Properties, indexedKeys[1:], vals[1:])
	e := dispEntry{topic: v.Topic, queueID: v.QueueID, sysFlag: v.SysFlag, qoff: v.QueueOffset, ts: v.StoreTimestamp}
	if e.sysFlag&record.TxMask != record.TxRollback {
		e.keys, e.uniq = vals[1], vals[2]
	}
	return e
}

// tagsCode is the consume-queue tagsCode of a record: the hook's value,
// else the Java hash of its TAGS value (tags), else 0.
func (s *Store) tagsCode(v *record.View, tags []byte) int64 {
	if s.opts.TagsCode != nil {
		if c, ok := s.opts.TagsCode(v.Topic, v.Properties, v.StoreTimestamp); ok {
			return c
		}
	}
	if tags != nil {
		return record.TagsHashBytes(tags)
	}
	return 0
}

// noteWrote notes the record the writer just put at rec (its bytes, at
// phy) for m, unless the store replicates (raw mode: the dispatcher reads
// every record back). The values of TAGS, KEYS and UNIQ_KEY come from
// m.Known when it holds those of m.Properties (a broker's send found them
// in its own pass over the properties), else from a lookup in the record;
// a message without properties has none of them.
// Caller holds putMu.
func (s *Store) noteWrote(rec []byte, phy int64, m *record.Message) {
	if s.rawMode.Load() {
		return
	}
	var v record.View // filled in place, not returned (see wroteQueue.entryTo)
	if !sealedView(rec, m, &v) {
		var err error
		if v, err = record.Parse(rec, false); err != nil {
			return // cannot happen (our own encoding); read back then
		}
	}
	var e dispEntry
	if len(m.Properties) == 0 {
		// The record's properties are the CRC trailer's pair alone (the
		// state store's entries, twin records): none of indexedKeys.
		var vals [len(indexedKeys)][]byte
		s.dispEntryWith(&v, &vals, &e)
	} else if known, ok := m.Known.Values(m.Properties); ok {
		var vals [len(indexedKeys)][]byte
		for i, k := range known {
			vals[i] = knownValue(k)
		}
		s.dispEntryWith(&v, &vals, &e)
	} else {
		e = s.dispEntryOf(&v)
	}
	s.wq.note(&e, phy, v.TotalSize)
}

// sealedView sets v (zero) to what noteWrote reads of record.Parse's
// view of rec, a record EncodeSealedTo has just encoded from m, without
// parsing it: the size, queue, queue offset and store time are m's, the
// system flag is read from its place (the encoder sets the host-width
// flags), and the topic and properties are sliced from the record's end,
// where TOPICLEN, the topic, PROPERTIESLEN and the properties end every
// record. The other fields are left zero (the notes do not read them).
// It reports false when the record does not hold the lengths m's topic
// and properties give where they would be (then the caller parses it).
func sealedView(rec []byte, m *record.Message, v *record.View) (ok bool) {
	var last byte
	if n := len(m.Properties); n > 0 {
		last = m.Properties[n-1]
	}
	pl := record.SealedPropertiesLen(len(m.Properties), last)
	ps := len(rec) - pl // the properties' start
	ts := ps - 2 - len(m.Topic)
	if ts-1 < record.OffsetBornHost || be.Uint16(rec[ps-2:]) != uint16(pl) || rec[ts-1] != byte(len(m.Topic)) {
		return false
	}
	v.TotalSize = int32(len(rec))
	v.Magic = record.MagicMessage
	v.QueueID, v.QueueOffset, v.StoreTimestamp = m.QueueID, m.QueueOffset, m.StoreTimestamp
	v.SysFlag = int32(be.Uint32(rec[record.OffsetSysFlag:]))
	v.Topic = rec[ts : ps-2 : ps-2]
	v.Properties = rec[ps:len(rec):len(rec)]
	return true
}

// knownValue is a value of record.KnownProperties as LookupProperties
// gives it: nil when there is none. The bytes alias the string: they are
// only read (and copied into a note).
func knownValue(v string) []byte {
	if v == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(v), len(v))
}

// dropNotes drops every note (the log was cut or moved). Caller holds
// dispMu, putMu and ix.run.
func (s *Store) dropNotes() {
	s.wq.reset()
	s.disp.wq.reset()
	s.disp.toIndex.reset()
	s.markMu.Lock()
	s.ixq.reset()
	s.markMu.Unlock()
	s.ix.q.reset()
}
