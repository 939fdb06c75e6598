package broker

import (
	"fmt"
	"strconv"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Offset deltas: what an offset notice (metasync.go) carries.
//
// A master's offset notice used to make each slave copy the whole
// consumer-offset table (GET_ALL_CONSUMER_OFFSET): up to 4 copies a second
// while consumers commit, megabytes a second per slave with tens of
// thousands of entries. Now the notice carries what changed: the
// OffsetManager numbers its changes (offsetJournal.seq) and keeps the
// entries changed since the last notice; notifyOffsetsLoop drains them
// into a notice saying "changes (from, to] of run R", with the whole delay
// offset table (a few levels) and its own change count. A slave that
// applied the master's changes up to seq S (from a full copy, whose
// answer names its run and seq, or from earlier notices) applies a notice
// with from <= S < to; ignores one with to <= S (it has that already); and
// copies everything, as before, when the run differs (another master, or
// the master restarted) or from > S (it missed a notice). The master also
// sends the old, empty notice (a full copy) after a change it does not
// journal entry by entry (a clone, a delete, a slave's Replace) or after
// more than maxDeltaEntries changed entries. The fields are documented
// with the request code (remoting/protocol/metasync.go); a slave that does
// not know them copies everything, and so does a slave of a master that
// does not send them.

// maxDeltaEntries bounds the entries one notice carries (and the journal
// a broker without slaves keeps): past it the next notice asks for a
// full copy.
const maxDeltaEntries = 4096

// offsetJournal records an OffsetManager's changes since the last drain;
// its owner's mu protects it.
type offsetJournal struct {
	seq     uint64                     // changes made, ever, by this process
	drained uint64                     // seq at the last drain
	pending map[string]map[int32]int64 // "topic@group" -> queue -> offset changed since drained
	n       int                        // entries in pending
	whole   bool                       // a change pending does not describe: the next notice asks for a full copy
}

// note records one committed offset.
func (j *offsetJournal) note(key string, queue int32, offset int64) {
	j.seq++
	if j.whole {
		return
	}
	if j.n >= maxDeltaEntries {
		j.noteWholeAt()
		return
	}
	if j.pending == nil {
		j.pending = map[string]map[int32]int64{}
	}
	q := j.pending[key]
	if q == nil {
		q = map[int32]int64{}
		j.pending[key] = q
	}
	if _, ok := q[queue]; !ok {
		j.n++
	}
	q[queue] = offset
}

// noteWhole records a change the journal cannot describe entry by entry.
func (j *offsetJournal) noteWhole() {
	j.seq++
	j.noteWholeAt()
}

func (j *offsetJournal) noteWholeAt() { j.whole, j.pending, j.n = true, nil, 0 }

// offsetDelta is one drain of the journal: the changes (from, to], whole
// when they must be copied in full.
type offsetDelta struct {
	from, to uint64
	table    map[string]map[int32]int64
	whole    bool
}

// drainDelta takes the changes since the last drain.
func (m *OffsetManager) drainDelta() offsetDelta {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := &m.jr
	d := offsetDelta{from: j.drained, to: j.seq, table: j.pending, whole: j.whole}
	j.drained, j.pending, j.n, j.whole = j.seq, nil, 0, false
	return d
}

// snapshotSeq is Snapshot with the number of changes it includes.
func (m *OffsetManager) snapshotSeq() (protocol.ConsumerOffsetSerializeWrapper, uint64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.snapshotLocked(), m.jr.seq
}

// merge installs a master's changed entries on a slave.
func (m *OffsetManager) merge(t map[string]map[int32]int64) {
	if len(t) == 0 {
		return
	}
	m.mu.Lock()
	for k, q := range t {
		c := m.table[k]
		if c == nil {
			c = make(map[int32]int64, len(q))
			m.table[k] = c
		}
		for id, o := range q {
			c[id] = o
		}
	}
	m.dirty = true
	m.jr.noteWhole()
	m.mu.Unlock()
}

// snapshotSeq is the delay offsets' table with their change count.
func (d *DelayOffsets) snapshotSeq() (delayOffsetFile, uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snapshotLocked(), d.seq
}

// offsetsApplied is a slave's view of the master offsets it holds: those
// of the master process run up to change seq (consumer offsets) and dseq
// (delay offsets); known is false until a full copy from a master that
// names them.
type offsetsApplied struct {
	known          bool
	run, seq, dseq uint64
}

// offsetNotice makes the offset notice for this round's changes: the old
// empty one (a full copy) when they are not journalled entry by entry.
func (b *Broker) offsetNotice() (func() *protocol.Command, error) {
	d := b.offsets.drainDelta()
	if d.whole {
		return func() *protocol.Command {
			req := protocol.NewRequest(protocol.NotifyMetadataChanged, nil, nil)
			req.ExtFields = protocol.ExtFields{fieldNoticeScope: noticeScopeOffsets}
			return req
		}, nil
	}
	delay, dseq := b.delayOffsets.snapshotSeq()
	body, err := protocol.EncodeJSON(protocol.OffsetDelta{OffsetTable: d.table, DelayOffsetTable: delay.OffsetTable})
	if err != nil {
		return nil, fmt.Errorf("broker: offset notice: %w", err)
	}
	ext := protocol.ExtFields{
		fieldNoticeScope:         noticeScopeOffsets,
		protocol.FieldOffsetRun:  strconv.FormatUint(b.offsetRun, 10),
		protocol.FieldOffsetFrom: strconv.FormatUint(d.from, 10),
		protocol.FieldOffsetTo:   strconv.FormatUint(d.to, 10),
		protocol.FieldDelaySeq:   strconv.FormatUint(dseq, 10),
	}
	return func() *protocol.Command {
		req := protocol.NewRequest(protocol.NotifyMetadataChanged, nil, body)
		req.ExtFields = make(protocol.ExtFields, len(ext))
		for k, v := range ext {
			req.ExtFields[k] = v
		}
		return req
	}, nil
}

// uintFields parses the named ext fields; false when any is missing or
// malformed.
func uintFields(f protocol.ExtFields, names ...string) ([]uint64, bool) {
	out := make([]uint64, len(names))
	for i, n := range names {
		s, ok := f[n]
		if !ok {
			return nil, false
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// applyOffsetDelta applies an offset notice's delta on a slave; false when
// the slave must copy everything instead (no delta, another run, a missed
// notice, a bad body).
func (b *Broker) applyOffsetDelta(req *protocol.Command) bool {
	v, ok := uintFields(req.ExtFields, protocol.FieldOffsetRun, protocol.FieldOffsetFrom, protocol.FieldOffsetTo, protocol.FieldDelaySeq)
	if !ok {
		return false
	}
	run, from, to, dseq := v[0], v[1], v[2], v[3]
	var d protocol.OffsetDelta
	if err := protocol.DecodeJSON(req.Body, &d); err != nil {
		b.plog.Warn("a master's offset notice has a bad body", "err", err)
		return false
	}
	b.offApplyMu.Lock()
	defer b.offApplyMu.Unlock()
	st := &b.offApplied
	if !st.known || st.run != run || from > st.seq {
		return false
	}
	if to > st.seq {
		b.offsets.merge(d.OffsetTable)
		st.seq = to
	}
	if dseq > st.dseq && d.DelayOffsetTable != nil {
		b.delayOffsets.replaceTable(d.DelayOffsetTable)
		st.dseq = dseq
	}
	return true
}

// installOffsets installs a full copy of the master's consumer offsets
// (ext: the answer's fields). A copy older than a delta applied meanwhile
// (the periodic copy's answer crossed a notice) sets the slave back a
// little; it then copies again at once, not at the next notice (there
// may be none for long: consumers that stopped committing) nor the next
// periodic copy (SlaveSyncInterval): the master's count is past the
// delta's by then.
func (b *Broker) installOffsets(w protocol.ConsumerOffsetSerializeWrapper, ext protocol.ExtFields) {
	b.offApplyMu.Lock()
	defer b.offApplyMu.Unlock()
	st := &b.offApplied
	switch v, ok := uintFields(ext, protocol.FieldOffsetRun, protocol.FieldOffsetSeq); {
	case !ok: // a master that names no run: every notice is a full copy
		*st = offsetsApplied{}
	case st.known && st.run == v[0]:
		if v[1] < st.seq {
			kick(b.offsetSyncKick)
		}
		st.seq = v[1]
	default:
		*st = offsetsApplied{known: true, run: v[0], seq: v[1]}
	}
	b.offsets.Replace(w)
}

// installDelayOffsets is installOffsets for the delay offsets' JSON.
func (b *Broker) installDelayOffsets(body []byte, ext protocol.ExtFields) error {
	b.offApplyMu.Lock()
	defer b.offApplyMu.Unlock()
	if v, ok := uintFields(ext, protocol.FieldOffsetRun, protocol.FieldDelaySeq); ok && b.offApplied.known && b.offApplied.run == v[0] {
		if v[1] < b.offApplied.dseq {
			kick(b.offsetSyncKick) // older than a notice's table: as installOffsets
		}
		b.offApplied.dseq = v[1]
	}
	return b.delayOffsets.Replace(body)
}

// offsetsResponse answers GET_ALL_CONSUMER_OFFSET: the table, with this
// process's run and the changes it includes.
func (b *Broker) offsetsResponse() (*protocol.Command, error) {
	w, seq := b.offsets.snapshotSeq()
	resp, err := jsonResponse(w)
	if err != nil {
		return nil, err
	}
	resp.ExtFields = protocol.ExtFields{protocol.FieldOffsetRun: strconv.FormatUint(b.offsetRun, 10),
		protocol.FieldOffsetSeq: strconv.FormatUint(seq, 10)}
	return resp, nil
}

// delayOffsetsResponse answers GET_ALL_DELAY_OFFSET likewise.
func (b *Broker) delayOffsetsResponse() (*protocol.Command, error) {
	f, seq := b.delayOffsets.snapshotSeq()
	resp, err := jsonResponse(f)
	if err != nil {
		return nil, err
	}
	resp.ExtFields = protocol.ExtFields{protocol.FieldOffsetRun: strconv.FormatUint(b.offsetRun, 10),
		protocol.FieldDelaySeq: strconv.FormatUint(seq, 10)}
	return resp, nil
}
