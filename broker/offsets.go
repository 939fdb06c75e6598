package broker

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// OffsetManager holds the committed consume offset of every (group, topic,
// queue). Commits only touch memory; Persist writes consumerOffset.json
// (the broker calls it every few seconds and at shutdown).
type OffsetManager struct {
	path      string
	mu        sync.RWMutex
	table     map[string]map[int32]int64 // protected by mu; "topic@group" -> queue -> offset
	dirty     bool                       // protected by mu
	persistMu sync.Mutex
	spare     *spareFile // protected by persistMu (configspare.go)
	fromSpare bool       // the table was read from the spare, newer than the file
	// onChange, if set before first use, is called (outside mu, must not
	// block) after a commit, clone or delete changed the table; Replace
	// does not call it.
	onChange func()
	jr       offsetJournal // protected by mu: the changes since the last slave notice (offsetdelta.go)
}

func offsetKey(topic, group string) string { return topic + "@" + group }

// OpenOffsets loads consumerOffset.json from dir, if any.
func OpenOffsets(dir string) (*OffsetManager, error) {
	m := &OffsetManager{path: filepath.Join(dir, ConsumerOffsetFile), table: map[string]map[int32]int64{}}
	var w protocol.ConsumerOffsetSerializeWrapper
	_, fromSpare, sp, err := readConfigSpare(m.path, &w)
	if err != nil {
		return nil, err
	}
	m.spare, m.fromSpare, m.dirty = sp, fromSpare, fromSpare // the file gets it at the next save
	for k, q := range w.OffsetTable {
		if !strings.Contains(k, "@") || q == nil {
			return nil, fmt.Errorf("%w: %s: key %q is not topic@group", ErrCorruptConfig, m.path, k)
		}
		m.table[k] = q
	}
	return m, nil
}

// Commit records a consumer's offset for one queue. Negative offsets are
// ignored.
func (m *OffsetManager) Commit(group, topic string, queueID int32, offset int64) {
	if offset < 0 {
		return
	}
	k := offsetKey(topic, group)
	m.mu.Lock()
	q := m.table[k]
	if q == nil {
		q = map[int32]int64{}
		m.table[k] = q
	}
	changed := false
	if cur, ok := q[queueID]; !ok || cur != offset { // a first commit of 0 is an offset too
		q[queueID] = offset
		m.dirty, changed = true, true
		m.jr.note(k, queueID, offset)
	}
	m.mu.Unlock()
	if changed {
		m.changed()
	}
}

// changed calls onChange, if any.
func (m *OffsetManager) changed() {
	if m.onChange != nil {
		m.onChange()
	}
}

// Query returns the committed offset of a queue and whether there is one.
func (m *OffsetManager) Query(group, topic string, queueID int32) (int64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	off, ok := m.table[offsetKey(topic, group)][queueID]
	return off, ok
}

// QueueOffsets returns a copy of a (group, topic)'s offsets by queue.
func (m *OffsetManager) QueueOffsets(group, topic string) map[int32]int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[int32]int64, len(m.table[offsetKey(topic, group)]))
	for q, o := range m.table[offsetKey(topic, group)] {
		out[q] = o
	}
	return out
}

// MinConsumed returns the lowest offset any group committed for a queue,
// ok=false when none has.
func (m *OffsetManager) MinConsumed(topic string, queueID int32) (int64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	lowest, ok := int64(0), false
	for k, q := range m.table {
		if t, _, _ := strings.Cut(k, "@"); t != topic {
			continue
		}
		if off, has := q[queueID]; has && (!ok || off < lowest) {
			lowest, ok = off, true
		}
	}
	return lowest, ok
}

// GroupsOfTopic returns the groups with committed offsets on topic, sorted.
func (m *OffsetManager) GroupsOfTopic(topic string) []string {
	m.mu.RLock()
	var groups []string
	for k := range m.table {
		if t, g, _ := strings.Cut(k, "@"); t == topic {
			groups = append(groups, g)
		}
	}
	m.mu.RUnlock()
	sort.Strings(groups)
	return groups
}

// TopicsOfGroup returns the topics a group has committed offsets on, sorted.
func (m *OffsetManager) TopicsOfGroup(group string) []string {
	m.mu.RLock()
	var topics []string
	for k := range m.table {
		if i := strings.LastIndexByte(k, '@'); i >= 0 && k[i+1:] == group {
			topics = append(topics, k[:i])
		}
	}
	m.mu.RUnlock()
	sort.Strings(topics)
	return topics
}

// Clone copies src's offsets on topic to dst, replacing dst's; it
// reports whether src had any.
func (m *OffsetManager) Clone(src, dst, topic string) bool {
	m.mu.Lock()
	q, ok := m.table[offsetKey(topic, src)]
	if !ok {
		m.mu.Unlock()
		return false
	}
	c := make(map[int32]int64, len(q))
	for id, off := range q {
		c[id] = off
	}
	m.table[offsetKey(topic, dst)] = c
	m.dirty = true
	m.jr.noteWhole()
	m.mu.Unlock()
	m.changed()
	return true
}

// DeleteGroup forgets a group's offsets on every topic.
func (m *OffsetManager) DeleteGroup(group string) {
	changed := false
	m.mu.Lock()
	for k := range m.table {
		if i := strings.LastIndexByte(k, '@'); i >= 0 && k[i+1:] == group {
			delete(m.table, k)
			m.dirty, changed = true, true
			m.jr.noteWhole()
		}
	}
	m.mu.Unlock()
	if changed {
		m.changed()
	}
}

// DeleteTopic forgets every group's offsets on a deleted topic.
func (m *OffsetManager) DeleteTopic(topic string) {
	changed := false
	m.mu.Lock()
	for k := range m.table {
		if t, _, _ := strings.Cut(k, "@"); t == topic {
			delete(m.table, k)
			m.dirty, changed = true, true
			m.jr.noteWhole()
		}
	}
	m.mu.Unlock()
	if changed {
		m.changed()
	}
}

// Snapshot returns a copy of the whole table (GET_ALL_CONSUMER_OFFSET).
func (m *OffsetManager) Snapshot() protocol.ConsumerOffsetSerializeWrapper {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.snapshotLocked()
}

func (m *OffsetManager) snapshotLocked() protocol.ConsumerOffsetSerializeWrapper {
	w := protocol.ConsumerOffsetSerializeWrapper{OffsetTable: make(map[string]map[int32]int64, len(m.table))}
	for k, q := range m.table {
		c := make(map[int32]int64, len(q))
		for id, o := range q {
			c[id] = o
		}
		w.OffsetTable[k] = c
	}
	return w
}

// Replace installs a master's offsets on a slave (and marks them dirty).
func (m *OffsetManager) Replace(w protocol.ConsumerOffsetSerializeWrapper) {
	t := make(map[string]map[int32]int64, len(w.OffsetTable))
	for k, q := range w.OffsetTable {
		c := make(map[int32]int64, len(q))
		for id, o := range q {
			c[id] = o
		}
		t[k] = c
	}
	m.mu.Lock()
	m.table, m.dirty = t, true
	m.jr.noteWhole()
	m.mu.Unlock()
}

// Persist writes consumerOffset.json if anything changed since the last
// write. When the file cannot be replaced (a full disk) the table goes
// into its spare (configspare.go) and the error wraps ErrSavedInSpare;
// the next Persist tries the file again.
func (m *OffsetManager) Persist() error {
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	m.mu.Lock()
	dirty := m.dirty
	m.dirty = false
	m.mu.Unlock()
	if !dirty {
		return nil
	}
	if err := persistSpare(m.path, m.spare, m.Snapshot()); err != nil {
		m.mu.Lock()
		m.dirty = true // the file is written when it can be
		m.mu.Unlock()
		return err
	}
	return nil
}

// DelayOffsets holds the progress of the delay-level service: for each
// level, the next offset of its queue in SCHEDULE_TOPIC_XXXX.
type DelayOffsets struct {
	path      string
	mu        sync.Mutex
	table     map[int32]int64 // protected by mu
	dirty     bool            // protected by mu: table differs from the file
	persistMu sync.Mutex
	spare     *spareFile // protected by persistMu (configspare.go)
	fromSpare bool       // the table was read from the spare, newer than the file
	onChange  func()     // as OffsetManager.onChange, after a Set changed an offset
	seq       uint64     // protected by mu: counts the table's changes (offsetdelta.go)
}

type delayOffsetFile struct {
	OffsetTable map[int32]int64 `json:"offsetTable"`
}

// OpenDelayOffsets loads delayOffset.json from dir, if any.
func OpenDelayOffsets(dir string) (*DelayOffsets, error) {
	d := &DelayOffsets{path: filepath.Join(dir, DelayOffsetFile), table: map[int32]int64{}}
	var f delayOffsetFile
	found, fromSpare, sp, err := readConfigSpare(d.path, &f)
	if err != nil {
		return nil, err
	}
	d.spare, d.fromSpare = sp, fromSpare
	d.dirty = !found || fromSpare // the first Persist creates the file, or takes the spare's content
	for l, o := range f.OffsetTable {
		d.table[l] = o
	}
	return d, nil
}

// Get returns the next offset to process for a delay level.
func (d *DelayOffsets) Get(level int32) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.table[level]
}

// Set records the next offset to process for a delay level.
func (d *DelayOffsets) Set(level int32, offset int64) {
	d.mu.Lock()
	changed := false
	if old, ok := d.table[level]; !ok || old != offset {
		d.table[level] = offset
		d.dirty, changed = true, true
		d.seq++
	}
	d.mu.Unlock()
	if changed && d.onChange != nil {
		d.onChange()
	}
}

// Replace installs a master's delay offsets on a slave from their JSON.
func (d *DelayOffsets) Replace(data []byte) error {
	var f delayOffsetFile
	if err := protocol.DecodeJSON(data, &f); err != nil {
		return fmt.Errorf("%w: delay offsets: %v", ErrCorruptConfig, err)
	}
	d.replaceTable(f.OffsetTable)
	return nil
}

// replaceTable installs a master's delay offsets on a slave.
func (d *DelayOffsets) replaceTable(t map[int32]int64) {
	d.mu.Lock()
	d.table = make(map[int32]int64, len(t))
	for l, o := range t {
		d.table[l] = o
	}
	d.dirty = true
	d.seq++
	d.mu.Unlock()
}

func (d *DelayOffsets) snapshot() delayOffsetFile {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snapshotLocked()
}

func (d *DelayOffsets) snapshotLocked() delayOffsetFile {
	f := delayOffsetFile{OffsetTable: make(map[int32]int64, len(d.table))}
	for l, o := range d.table {
		f.OffsetTable[l] = o
	}
	return f
}

// Persist writes delayOffset.json if the offsets changed since it was
// last written (the housekeeping loop calls it every few seconds; an idle
// broker then makes no write and no fsync for it). A file that cannot be
// replaced is handled as by OffsetManager.Persist.
func (d *DelayOffsets) Persist() error {
	d.persistMu.Lock()
	defer d.persistMu.Unlock()
	d.mu.Lock()
	dirty := d.dirty
	d.dirty = false
	d.mu.Unlock()
	if !dirty {
		return nil
	}
	if err := persistSpare(d.path, d.spare, d.snapshot()); err != nil {
		d.mu.Lock()
		d.dirty = true // the file is written when it can be
		d.mu.Unlock()
		return err
	}
	return nil
}
