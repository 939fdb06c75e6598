package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smartgo/smartgo/internal/fsutil"
)

// Epoch file (<root>/epochs), kept next to the commitlog for brokers whose
// master is chosen by a controller. Each time a broker becomes master it
// records the master epoch the controller gave it and the commitlog offset
// its first record of that epoch will have. Two replicas compare these
// histories to find the offset up to which their logs are the same bytes
// (ConsistentOffset); a replica truncates anything after that point before
// it replicates from a new master.
//
// Format (frozen), text, one entry per line, epochs strictly increasing and
// start offsets non-decreasing:
//
//	smartgo-epochs 1
//	<epoch> <startOffset>
//	...
//
// The first line names the format; epoch is a positive 31-bit integer,
// startOffset a non-negative commitlog offset, both decimal, separated by
// one space, each line ended by "\n". The file is replaced atomically
// (temp file, fsync, rename, fsync of the directory) on every change.
// TestStoreEpochFilePinned pins an example.
const (
	epochFileName   = "epochs"
	epochFileHeader = "smartgo-epochs 1"
	maxEpochEntries = 1 << 16
)

// EpochEntry is one master epoch of a log: the epoch number and the
// commitlog offset of its first record (its end is the next entry's start,
// or the log's end for the last one).
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// ErrEpoch: an epoch entry that does not follow the last one (an older
// epoch, or a start offset below the last).
var ErrEpoch = errors.New("store: epoch does not follow the last one")

// epochs is the in-memory copy of the epoch file.
type epochs struct {
	path    string
	mu      sync.Mutex
	entries []EpochEntry // protected by mu
}

func loadEpochs(root string) (*epochs, error) {
	e := &epochs{path: filepath.Join(root, epochFileName)}
	b, err := os.ReadFile(e.path)
	if errors.Is(err, os.ErrNotExist) {
		return e, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", e.path, err)
	}
	if e.entries, err = ParseEpochFile(b); err != nil {
		return nil, &CorruptError{File: e.path, Reason: "epoch file", Err: err}
	}
	return e, nil
}

// ParseEpochFile parses the bytes of an epoch file (see the format above).
func ParseEpochFile(b []byte) ([]EpochEntry, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() || sc.Text() != epochFileHeader {
		return nil, fmt.Errorf("first line is not %q", epochFileHeader)
	}
	var out []EpochEntry
	for line := 2; sc.Scan(); line++ {
		a, o, ok := strings.Cut(sc.Text(), " ")
		ep, err1 := strconv.ParseInt(a, 10, 32)
		off, err2 := strconv.ParseInt(o, 10, 64)
		if !ok || err1 != nil || err2 != nil || ep <= 0 || off < 0 {
			return nil, fmt.Errorf("line %d: %q is not \"<epoch> <startOffset>\"", line, sc.Text())
		}
		e := EpochEntry{Epoch: int32(ep), StartOffset: off}
		if n := len(out); n > 0 && (e.Epoch <= out[n-1].Epoch || e.StartOffset < out[n-1].StartOffset) {
			return nil, fmt.Errorf("line %d: epoch %d at %d does not follow epoch %d at %d", line, e.Epoch, e.StartOffset,
				out[n-1].Epoch, out[n-1].StartOffset)
		}
		if len(out) >= maxEpochEntries {
			return nil, fmt.Errorf("more than %d entries", maxEpochEntries)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return nil, errors.New("last line not terminated (interrupted write?)")
	}
	return out, nil
}

// AppendEpochFile encodes entries in the epoch file format.
func AppendEpochFile(dst []byte, entries []EpochEntry) []byte {
	dst = append(dst, epochFileHeader...)
	dst = append(dst, '\n')
	for _, e := range entries {
		dst = strconv.AppendInt(dst, int64(e.Epoch), 10)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, e.StartOffset, 10)
		dst = append(dst, '\n')
	}
	return dst
}

func (e *epochs) saveLocked(entries []EpochEntry) error {
	if err := fsutil.WriteFileAtomic(e.path, AppendEpochFile(nil, entries), 0o644); err != nil {
		return fmt.Errorf("store: save epochs: %w", err)
	}
	e.entries = entries
	return nil
}

// Epochs returns the log's epoch history, oldest first.
func (s *Store) Epochs() []EpochEntry {
	s.epochs.mu.Lock()
	defer s.epochs.mu.Unlock()
	return slices.Clone(s.epochs.entries)
}

// LastEpoch returns the newest epoch entry (false when there is none).
func (s *Store) LastEpoch() (EpochEntry, bool) {
	s.epochs.mu.Lock()
	defer s.epochs.mu.Unlock()
	if n := len(s.epochs.entries); n > 0 {
		return s.epochs.entries[n-1], true
	}
	return EpochEntry{}, false
}

// StartEpoch records that this log's records from the current commitlog
// end on belong to master epoch epoch, and returns that entry. The broker
// calls it when it becomes master, before its first write; epoch must be
// above the last one (ErrEpoch otherwise). Becoming master again in the
// same epoch returns the existing entry.
func (s *Store) StartEpoch(epoch int32) (EpochEntry, error) {
	s.putMu.Lock()
	defer s.putMu.Unlock()
	if _, err := s.checkWritable(); err != nil {
		return EpochEntry{}, err
	}
	if err := s.cl.drainLocked(); err != nil {
		return EpochEntry{}, s.drainFailed(err)
	}
	e := EpochEntry{Epoch: epoch, StartOffset: s.cl.writePos}
	s.epochs.mu.Lock()
	defer s.epochs.mu.Unlock()
	cur := s.epochs.entries
	if n := len(cur); n > 0 {
		last := cur[n-1]
		if last.Epoch == epoch {
			return last, nil
		}
		if epoch < last.Epoch || e.StartOffset < last.StartOffset {
			return EpochEntry{}, fmt.Errorf("%w: epoch %d at %d after epoch %d at %d", ErrEpoch, epoch, e.StartOffset, last.Epoch, last.StartOffset)
		}
	}
	if epoch <= 0 {
		return EpochEntry{}, fmt.Errorf("%w: epoch %d is not positive", ErrEpoch, epoch)
	}
	if len(cur) >= maxEpochEntries {
		cur = cur[1:] // the oldest epochs matter least
	}
	return e, s.epochs.saveLocked(append(slices.Clone(cur), e))
}

// RecordEpoch adds an entry of the master's history to a slave's: the
// slave holds (or is about to receive) records of that epoch from
// e.StartOffset on. Entries at or below the last epoch are ignored; a
// start beyond the commitlog end or below the last start is ErrEpoch.
func (s *Store) RecordEpoch(e EpochEntry) error {
	s.epochs.mu.Lock()
	defer s.epochs.mu.Unlock()
	cur := s.epochs.entries
	if n := len(cur); n > 0 && e.Epoch <= cur[n-1].Epoch {
		return nil
	}
	if e.Epoch <= 0 || e.StartOffset > s.MaxPhysicalOffset() || (len(cur) > 0 && e.StartOffset < cur[len(cur)-1].StartOffset) {
		return fmt.Errorf("%w: epoch %d at %d (log ends at %d, history %v)", ErrEpoch, e.Epoch, e.StartOffset, s.MaxPhysicalOffset(), cur)
	}
	if len(cur) >= maxEpochEntries {
		cur = cur[1:]
	}
	return s.epochs.saveLocked(append(slices.Clone(cur), e))
}

// truncateLocked drops the entries that start at or after offset (their
// epochs hold no record below offset).
func (e *epochs) truncateLocked(offset int64) error {
	keep := slices.Clone(e.entries)
	for len(keep) > 0 && keep[len(keep)-1].StartOffset >= offset {
		keep = keep[:len(keep)-1]
	}
	if len(keep) == len(e.entries) {
		return nil
	}
	return e.saveLocked(keep)
}

// ConsistentOffset returns the offset up to which two logs hold the same
// bytes, from their epoch histories and ends: the end (the smaller of the
// two) of the newest epoch both histories list with the same start. Bytes
// before any recorded epoch count as a common epoch 0 that starts at 0
// (logs written before controller mode, by one master). Two logs with no
// epoch in common agree up to the start of their first recorded epochs.
func ConsistentOffset(local []EpochEntry, localEnd int64, remote []EpochEntry, remoteEnd int64) int64 {
	end := func(h []EpochEntry, i int, logEnd int64) int64 {
		if i+1 < len(h) {
			return min(h[i+1].StartOffset, logEnd)
		}
		return logEnd
	}
	for i := len(local) - 1; i >= 0; i-- {
		for j := len(remote) - 1; j >= 0; j-- {
			if remote[j].Epoch == local[i].Epoch {
				if remote[j].StartOffset == local[i].StartOffset {
					return min(end(local, i, localEnd), end(remote, j, remoteEnd))
				}
				break
			}
		}
	}
	// Epoch 0: everything before the first recorded epoch of each side.
	first := func(h []EpochEntry, logEnd int64) int64 {
		if len(h) == 0 {
			return logEnd
		}
		return min(h[0].StartOffset, logEnd)
	}
	return min(first(local, localEnd), first(remote, remoteEnd))
}

// NextQueueOffset returns the queue offset the next message put to
// (topic, queueID) gets: past every record written, dispatched (visible
// to consumers) or not.
func (s *Store) NextQueueOffset(topic string, queueID int32) int64 {
	s.putMu.Lock()
	defer s.putMu.Unlock()
	return s.queueOffsetLocked(cqKey{topic, queueID})
}

// WaitIndexed waits up to d until the key index covers the log up to
// target (records past a dispatch limit are not indexed until it moves)
// and reports whether it does.
func (s *Store) WaitIndexed(target int64, d time.Duration) bool {
	s.waitIndexed(target, d)
	return s.indexed.Load() >= target
}
