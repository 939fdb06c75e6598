package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/smartgo/smartgo/internal/fsutil"
)

// Shard snapshot file <Dir>/shard-<n>.snap (format 1). Integers
// big-endian.
//
//	size  field
//	   8  MAGIC     "SGSSHARD"
//	   4  FORMAT    1
//	   4  SHARD     uint32 shard number
//	   8  NEXT      int64 queue offset of the first log entry NOT in the snapshot
//	   n  STATE     statestore.Engine.Snapshot bytes (own format and CRC)
//	   4  CRC       CRC32-C (Castagnoli) of every byte before it
//
// It is written with fsutil.WriteFileAtomic, only when every entry it
// covers is flushed in the commitlog, so the log never lacks an entry
// below NEXT. Restart: Restore(STATE), then apply the queue from NEXT.
// TestStateStoreSnapshotFilePinned pins the header.
const (
	ssSnapMagic  = "SGSSHARD"
	ssSnapFormat = 1
	ssSnapHead   = 8 + 4 + 4 + 8
)

var ssCastagnoli = crc32.MakeTable(crc32.Castagnoli)

func (s *StateStore) snapPath(id int32) string {
	return filepath.Join(s.opts.Dir, fmt.Sprintf("shard-%d.snap", id))
}

// encodeShardSnapshot builds the snapshot file of a shard at next.
func encodeShardSnapshot(id int32, next int64, state []byte) []byte {
	b := make([]byte, 0, ssSnapHead+len(state)+4)
	b = append(b, ssSnapMagic...)
	b = binary.BigEndian.AppendUint32(b, ssSnapFormat)
	b = binary.BigEndian.AppendUint32(b, uint32(id))
	b = binary.BigEndian.AppendUint64(b, uint64(next))
	b = append(b, state...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, ssCastagnoli))
}

// decodeShardSnapshot checks a snapshot file and returns NEXT and STATE.
func decodeShardSnapshot(b []byte, id int32) (next int64, state []byte, err error) {
	if len(b) < ssSnapHead+4 || string(b[:8]) != ssSnapMagic {
		return 0, nil, errors.New("bad magic or too short")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, ssCastagnoli) != sum {
		return 0, nil, errors.New("checksum mismatch")
	}
	if f := binary.BigEndian.Uint32(b[8:]); f != ssSnapFormat {
		return 0, nil, fmt.Errorf("unsupported format %d", f)
	}
	if got := int32(binary.BigEndian.Uint32(b[12:])); got != id {
		return 0, nil, fmt.Errorf("snapshot of shard %d", got)
	}
	next = int64(binary.BigEndian.Uint64(b[16:]))
	if next < 0 {
		return 0, nil, fmt.Errorf("negative offset %d", next)
	}
	return next, body[ssSnapHead:], nil
}

// restore loads a shard from its snapshot (if any) and the log after it.
func (s *StateStore) restore(sh *ssShard) error {
	start := time.Now()
	data, err := os.ReadFile(s.snapPath(sh.id))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("broker: state store shard %d: %w", sh.id, err)
	default:
		next, state, derr := decodeShardSnapshot(data, sh.id)
		if derr == nil {
			derr = sh.eng.Restore(bytes.NewReader(state))
		}
		if derr != nil {
			// A bad snapshot is survivable while the whole log is there.
			if s.b.store.MinOffset(StateStoreTopic, sh.id) > 0 {
				return fmt.Errorf("broker: state store shard %d: snapshot unusable and log truncated: %v", sh.id, derr)
			}
			s.log.Warn("state store snapshot unusable, replaying the whole log", "shard", sh.id, "err", derr)
		} else {
			sh.next, sh.snapAt = next, next
		}
	}
	from := sh.next
	if err := s.catchUp(sh); err != nil {
		// Fail-stop for this shard only: it answers errors until an
		// operator repairs its log; the other shards serve.
		sh.fail(err)
		s.log.Error("state store shard stopped at replay", "shard", sh.id, "err", err)
		return nil
	}
	if sh.next > from || sh.next > 0 {
		s.log.Info("state store shard restored", "shard", sh.id, "snapshot", from, "replayed", sh.next-from,
			"keys", sh.eng.Stats().Keys, "took", time.Since(start))
	}
	return nil
}

// snapshotLocked writes the shard's snapshot if it changed and every entry
// it covers is flushed. Called with sh.mu held.
func (s *StateStore) snapshotLocked(sh *ssShard) error {
	if sh.next == sh.snapAt {
		return nil
	}
	if sh.lastEnd > s.b.store.FlushedPhysicalOffset() {
		return nil // not durable yet; the next round (or the log) covers it
	}
	var buf bytes.Buffer
	if err := sh.eng.Snapshot(&buf); err != nil {
		return fmt.Errorf("broker: state store shard %d snapshot: %w", sh.id, err)
	}
	if err := fsutil.WriteFileAtomic(s.snapPath(sh.id), encodeShardSnapshot(sh.id, sh.next, buf.Bytes()), 0o644); err != nil {
		return fmt.Errorf("broker: state store shard %d snapshot: %w", sh.id, err)
	}
	sh.snapAt = sh.next
	return nil
}

// Snapshot writes every shard's snapshot now (when its entries are
// flushed).
func (s *StateStore) Snapshot() error {
	var errs []error
	for _, sh := range s.shards {
		sh.mu.Lock()
		if sh.failed == nil {
			errs = append(errs, s.snapshotLocked(sh))
		}
		sh.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (s *StateStore) snapshotLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Snapshot(); err != nil {
				s.log.Error("state store snapshot", "err", err)
			}
		}
	}
}
