package controller

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/smartgo/smartgo/internal/fsutil"
)

// Raft log file format (raft.log in the controller's directory). Frozen.
//
// An append-only sequence of records; all integers big-endian:
//
//	0        4        8
//	+--------+--------+--------------------+
//	| len 4  | crc 4  | payload, len bytes |
//	+--------+--------+--------------------+
//
// crc is the CRC-32C (Castagnoli) of the payload; 1 <= len <= 64 MiB. The
// payload's first byte is its kind:
//
//	kind 1, entry:  index 8 | term 8 | type 1 | appendedAt 8 (Unix ns, 0 = unset)
//	                | dataLen 4 | data | extLen 4 | extensions
//	kind 2, delete: min 8 | max 8   (entries min..max, inclusive, are gone)
//
// Entries follow each other by index (each is the previous + 1, or any
// index when the log is empty); deleting a prefix (after a snapshot) or a
// suffix (a conflicting tail) appends a delete record. Opening replays the
// records. A record cut short at the end of the file, or the last record
// with a bad checksum, is a write the crash interrupted: it is cut off.
// A bad record with valid bytes after it is corruption (ErrCorrupt). When
// the file has grown to four times the live entries (and past 1 MiB) it is
// rewritten with the live entries only (temp file, fsync, rename).
//
// The stable state (raft.stable: Raft's current term and vote) is one JSON
// object {"format":1,"values":{"<key>":"<base64 value>",...}} replaced
// atomically on every change.
const (
	logFileName       = "raft.log"
	stableFileName    = "raft.stable"
	recHeaderSize     = 8
	maxRecordSize     = 64 << 20
	recEntry          = 1
	recDelete         = 2
	entryFixedSize    = 1 + 8 + 8 + 1 + 8 + 4 + 4
	compactMinSize    = 1 << 20
	stableFormat      = 1
	stableNotFoundMsg = "not found" // the text hashicorp/raft tests for
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errNotFound is what Get returns for a missing key (raft compares the text).
var errNotFound = errors.New(stableNotFoundMsg)

// logStore is a raft.LogStore and raft.StableStore on two files. The live
// log is kept in memory too (the controller's log is small: snapshots
// compact it).
type logStore struct {
	dir string
	log *slog.Logger

	mu      sync.Mutex
	f       *os.File          // raft.log, appending; protected by mu
	size    int64             // bytes in raft.log; protected by mu
	first   uint64            // first live index, 0 when empty; protected by mu
	entries []*raft.Log       // entries[i] has index first+i; protected by mu
	live    int64             // encoded bytes of the live entries; protected by mu
	stable  map[string][]byte // protected by mu
	werr    error             // sticky write error; protected by mu
	closed  bool              // protected by mu
	encBuf  []byte            // scratch; protected by mu
}

// openLogStore opens (creating) the log and stable files in dir.
func openLogStore(dir string, lg *slog.Logger) (*logStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("controller: create %s: %w", dir, err)
	}
	ls := &logStore{dir: dir, log: lg, stable: map[string][]byte{}}
	if err := ls.loadStable(); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, logFileName)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("controller: read %s: %w", path, err)
	}
	good, err := ls.replay(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("controller: open %s: %w", path, err)
	}
	if good < int64(len(data)) {
		lg.Warn("controller: raft log ends in an interrupted write; cut", "file", path, "at", good, "bytes", int64(len(data))-good)
		if err := f.Truncate(good); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("controller: cut %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("controller: fsync %s: %w", path, err)
		}
	}
	if _, err := f.Seek(good, 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("controller: seek %s: %w", path, err)
	}
	ls.f, ls.size = f, good
	return ls, nil
}

// replay applies the records in data and returns the length of the valid
// prefix.
func (ls *logStore) replay(data []byte) (int64, error) {
	pos := 0
	for pos < len(data) {
		payload, n, torn, err := readRecord(data[pos:])
		if torn {
			return int64(pos), nil
		}
		if err != nil {
			return 0, fmt.Errorf("%w: record at %d: %v", ErrCorrupt, pos, err)
		}
		if err := ls.applyRecord(payload); err != nil {
			return 0, fmt.Errorf("%w: record at %d: %v", ErrCorrupt, pos, err)
		}
		pos += n
	}
	return int64(pos), nil
}

// readRecord reads one record at the start of b: its payload and length.
// torn reports an interrupted write at the end of b (nothing valid may
// follow); err a damaged record with more bytes after it.
func readRecord(b []byte) (payload []byte, n int, torn bool, err error) {
	if len(b) < recHeaderSize {
		return nil, 0, true, nil
	}
	size := binary.BigEndian.Uint32(b)
	if size == 0 && allZero(b) {
		return nil, 0, true, nil // pre-allocated or zero-filled tail
	}
	if size == 0 || size > maxRecordSize {
		return nil, 0, false, fmt.Errorf("record length %d", size)
	}
	end := recHeaderSize + int(size)
	if end > len(b) {
		return nil, 0, true, nil
	}
	payload = b[recHeaderSize:end]
	if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		if end == len(b) {
			return nil, 0, true, nil
		}
		return nil, 0, false, errors.New("checksum mismatch")
	}
	return payload, end, false, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// applyRecord applies one decoded record to the in-memory log.
func (ls *logStore) applyRecord(p []byte) error {
	switch p[0] {
	case recEntry:
		l, err := decodeEntry(p)
		if err != nil {
			return err
		}
		return ls.appendMem([]*raft.Log{l}, int64(len(p)+recHeaderSize))
	case recDelete:
		if len(p) != 17 {
			return fmt.Errorf("delete record of %d bytes", len(p))
		}
		return ls.deleteMem(binary.BigEndian.Uint64(p[1:]), binary.BigEndian.Uint64(p[9:]))
	}
	return fmt.Errorf("unknown record kind %d", p[0])
}

// decodeEntry decodes an entry payload (kind byte included).
func decodeEntry(p []byte) (*raft.Log, error) {
	if len(p) < entryFixedSize {
		return nil, fmt.Errorf("entry of %d bytes", len(p))
	}
	l := &raft.Log{Index: binary.BigEndian.Uint64(p[1:]), Term: binary.BigEndian.Uint64(p[9:]), Type: raft.LogType(p[17])}
	if ns := int64(binary.BigEndian.Uint64(p[18:])); ns != 0 {
		l.AppendedAt = time.Unix(0, ns)
	}
	rest := p[26:]
	dlen := binary.BigEndian.Uint32(rest)
	if uint64(dlen)+8 > uint64(len(rest)) {
		return nil, fmt.Errorf("entry data length %d exceeds the record", dlen)
	}
	l.Data = append([]byte(nil), rest[4:4+dlen]...)
	rest = rest[4+dlen:]
	elen := binary.BigEndian.Uint32(rest)
	if uint64(elen)+4 != uint64(len(rest)) {
		return nil, fmt.Errorf("entry extensions length %d does not match the record", elen)
	}
	if elen > 0 {
		l.Extensions = append([]byte(nil), rest[4:]...)
	}
	if l.Index == 0 {
		return nil, errors.New("entry index 0")
	}
	return l, nil
}

// appendEntryRecord appends l's record to dst.
func appendEntryRecord(dst []byte, l *raft.Log) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recHeaderSize)...)
	dst = append(dst, recEntry)
	dst = binary.BigEndian.AppendUint64(dst, l.Index)
	dst = binary.BigEndian.AppendUint64(dst, l.Term)
	dst = append(dst, byte(l.Type))
	var ns int64
	if !l.AppendedAt.IsZero() {
		ns = l.AppendedAt.UnixNano()
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(ns))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(l.Extensions)))
	dst = append(dst, l.Extensions...)
	return sealRecord(dst, start)
}

// sealRecord fills in the header of the record that starts at dst[start].
func sealRecord(dst []byte, start int) []byte {
	payload := dst[start+recHeaderSize:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, castagnoli))
	return dst
}

func appendDeleteRecord(dst []byte, lo, hi uint64) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recHeaderSize)...)
	dst = append(dst, recDelete)
	dst = binary.BigEndian.AppendUint64(dst, lo)
	dst = binary.BigEndian.AppendUint64(dst, hi)
	return sealRecord(dst, start)
}

func (ls *logStore) lastLocked() uint64 {
	if len(ls.entries) == 0 {
		return 0
	}
	return ls.first + uint64(len(ls.entries)) - 1
}

// appendMem adds contiguous entries after the last one (any index when
// empty). Called with mu held (or during open).
func (ls *logStore) appendMem(logs []*raft.Log, bytes int64) error {
	for _, l := range logs {
		if len(ls.entries) == 0 {
			ls.first = l.Index
		} else if l.Index != ls.lastLocked()+1 {
			return fmt.Errorf("entry %d does not follow %d", l.Index, ls.lastLocked())
		}
		ls.entries = append(ls.entries, l)
	}
	ls.live += bytes
	return nil
}

// deleteMem removes entries lo..hi (inclusive), which must be a prefix or
// a suffix of the log.
func (ls *logStore) deleteMem(lo, hi uint64) error {
	if lo > hi {
		return fmt.Errorf("delete range %d..%d is empty", lo, hi)
	}
	if len(ls.entries) == 0 {
		return nil
	}
	first, last := ls.first, ls.lastLocked()
	lo, hi = max(lo, first), min(hi, last)
	if lo > hi {
		return nil
	}
	switch {
	case lo == first && hi == last:
		ls.entries, ls.first, ls.live = nil, 0, 0
	case lo == first:
		n := int(hi - first + 1)
		for _, l := range ls.entries[:n] {
			ls.live -= encodedSize(l)
		}
		ls.entries = append([]*raft.Log(nil), ls.entries[n:]...)
		ls.first = hi + 1
	case hi == last:
		n := int(lo - first)
		for _, l := range ls.entries[n:] {
			ls.live -= encodedSize(l)
		}
		ls.entries = ls.entries[:n:n]
	default:
		return fmt.Errorf("delete range %d..%d is inside the log %d..%d", lo, hi, first, last)
	}
	return nil
}

func encodedSize(l *raft.Log) int64 {
	return int64(recHeaderSize + entryFixedSize + len(l.Data) + len(l.Extensions))
}

// FirstIndex implements raft.LogStore (0 when empty).
func (ls *logStore) FirstIndex() (uint64, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.first, nil
}

// LastIndex implements raft.LogStore (0 when empty).
func (ls *logStore) LastIndex() (uint64, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.lastLocked(), nil
}

// GetLog implements raft.LogStore.
func (ls *logStore) GetLog(index uint64, out *raft.Log) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.entries) == 0 || index < ls.first || index > ls.lastLocked() {
		return raft.ErrLogNotFound
	}
	*out = *ls.entries[index-ls.first]
	return nil
}

// StoreLog implements raft.LogStore.
func (ls *logStore) StoreLog(l *raft.Log) error { return ls.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: the entries are durable when it
// returns.
func (ls *logStore) StoreLogs(logs []*raft.Log) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err := ls.writableLocked(); err != nil {
		return err
	}
	if len(logs) == 0 {
		return nil
	}
	buf := ls.encBuf[:0]
	cp := make([]*raft.Log, len(logs))
	for i, l := range logs {
		c := *l
		cp[i] = &c
		buf = appendEntryRecord(buf, l)
	}
	ls.encBuf = buf
	if err := ls.appendMem(cp, int64(len(buf))); err != nil {
		return fmt.Errorf("controller: raft log: %w", err)
	}
	if err := ls.writeLocked(buf); err != nil {
		return err
	}
	return ls.maybeCompactLocked()
}

// DeleteRange implements raft.LogStore.
func (ls *logStore) DeleteRange(lo, hi uint64) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err := ls.writableLocked(); err != nil {
		return err
	}
	if err := ls.deleteMem(lo, hi); err != nil {
		return fmt.Errorf("controller: raft log: %w", err)
	}
	if err := ls.writeLocked(appendDeleteRecord(ls.encBuf[:0], lo, hi)); err != nil {
		return err
	}
	return ls.maybeCompactLocked()
}

func (ls *logStore) writableLocked() error {
	if ls.closed {
		return ErrClosed
	}
	return ls.werr
}

// writeLocked appends b to the file and syncs it; a failure is sticky.
func (ls *logStore) writeLocked(b []byte) error {
	if _, err := ls.f.Write(b); err != nil {
		ls.werr = fmt.Errorf("controller: write raft log: %w", err)
		return ls.werr
	}
	if err := ls.f.Sync(); err != nil {
		ls.werr = fmt.Errorf("controller: fsync raft log: %w", err)
		return ls.werr
	}
	ls.size += int64(len(b))
	return nil
}

// maybeCompactLocked rewrites the file with the live entries when most of
// it is dead.
func (ls *logStore) maybeCompactLocked() error {
	if ls.size < compactMinSize || ls.size < 4*ls.live {
		return nil
	}
	var buf []byte
	for _, l := range ls.entries {
		buf = appendEntryRecord(buf, l)
	}
	path := filepath.Join(ls.dir, logFileName)
	if err := fsutil.WriteFileAtomic(path, buf, 0o644); err != nil {
		ls.werr = fmt.Errorf("controller: compact raft log: %w", err)
		return ls.werr
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		ls.werr = fmt.Errorf("controller: reopen raft log: %w", err)
		return ls.werr
	}
	_ = ls.f.Close()
	ls.f, ls.size = f, int64(len(buf))
	ls.log.Debug("controller: raft log compacted", "bytes", len(buf), "entries", len(ls.entries))
	return nil
}

// Set implements raft.StableStore.
func (ls *logStore) Set(key, val []byte) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err := ls.writableLocked(); err != nil {
		return err
	}
	ls.stable[string(key)] = append([]byte(nil), val...)
	return ls.saveStableLocked()
}

// Get implements raft.StableStore.
func (ls *logStore) Get(key []byte) ([]byte, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	v, ok := ls.stable[string(key)]
	if !ok {
		return nil, errNotFound
	}
	return append([]byte(nil), v...), nil
}

// SetUint64 implements raft.StableStore.
func (ls *logStore) SetUint64(key []byte, val uint64) error {
	return ls.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore.
func (ls *logStore) GetUint64(key []byte) (uint64, error) {
	v, err := ls.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable key %q holds %d bytes, not a uint64", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

type stableFile struct {
	Format int               `json:"format"`
	Values map[string]string `json:"values"`
}

func (ls *logStore) saveStableLocked() error {
	sf := stableFile{Format: stableFormat, Values: map[string]string{}}
	for k, v := range ls.stable {
		sf.Values[k] = base64.StdEncoding.EncodeToString(v)
	}
	b, err := json.Marshal(sf)
	if err != nil {
		return fmt.Errorf("controller: encode stable state: %w", err)
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(ls.dir, stableFileName), b, 0o644); err != nil {
		ls.werr = fmt.Errorf("controller: save stable state: %w", err)
		return ls.werr
	}
	return nil
}

func (ls *logStore) loadStable() error {
	path := filepath.Join(ls.dir, stableFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("controller: read %s: %w", path, err)
	}
	var sf stableFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	if sf.Format != stableFormat {
		return fmt.Errorf("%w: %s: format %d, want %d", ErrCorrupt, path, sf.Format, stableFormat)
	}
	for k, v := range sf.Values {
		d, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return fmt.Errorf("%w: %s: key %q: %v", ErrCorrupt, path, k, err)
		}
		ls.stable[k] = d
	}
	return nil
}

// Close closes the log file. It is idempotent.
func (ls *logStore) Close() error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return nil
	}
	ls.closed = true
	return ls.f.Close()
}
