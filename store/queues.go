package store

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/smartgo/smartgo/internal/fsutil"
)

// Queue manifest (<root>/queues), written by a clean Close after the
// consume queues were flushed and before the abort marker is removed:
// every consume queue with entries and its end. Text, one field separator
// a space (topic names have none), lines ending in '\n':
//
//	smartgo-queues 1
//	<topic> <queueId> <maxOffset>        one line per queue, sorted
//	crc <8 lowercase hex digits>         CRC32-IEEE of every byte before this line
//
// for example (TestStoreQueueManifestPinned):
//
//	smartgo-queues 1
//	TopicA 0 12
//	TopicA 3 7
//	crc 8ffcfab1
//
// After a clean shutdown recovery trusts the consume queues and
// re-dispatches only after their last entries; the manifest is what it
// checks them against: a queue the manifest lists that is missing (its
// directory or files deleted) or shorter than listed (its last files
// deleted) is re-dispatched from the commitlog, so its messages are not
// silently left out of every queue. After a crash the manifest is ignored
// (it describes an older shutdown; the crash recovery checks the queues
// against the log itself).
const (
	queueManifestName   = "queues"
	queueManifestHeader = "smartgo-queues 1"
)

// queueEnd is one line of the queue manifest.
type queueEnd struct {
	topic  string
	id     int32
	maxOff int64
}

// appendQueueManifest encodes queues (sorted here) in the manifest format.
func appendQueueManifest(dst []byte, queues []queueEnd) []byte {
	sort.Slice(queues, func(i, j int) bool {
		if queues[i].topic != queues[j].topic {
			return queues[i].topic < queues[j].topic
		}
		return queues[i].id < queues[j].id
	})
	start := len(dst)
	dst = append(dst, queueManifestHeader...)
	dst = append(dst, '\n')
	for _, q := range queues {
		dst = append(dst, q.topic...)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(q.id), 10)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, q.maxOff, 10)
		dst = append(dst, '\n')
	}
	return fmt.Appendf(dst, "crc %08x\n", crc32.ChecksumIEEE(dst[start:]))
}

// parseQueueManifest decodes a manifest; a torn or altered one fails.
func parseQueueManifest(b []byte) ([]queueEnd, error) {
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return nil, errors.New("last line not terminated (interrupted write?)")
	}
	i := bytes.LastIndexByte(b[:len(b)-1], '\n')
	if i < 0 {
		return nil, errors.New("no checksum line")
	}
	body, last := b[:i+1], string(b[i+1:len(b)-1])
	want := fmt.Sprintf("crc %08x", crc32.ChecksumIEEE(body))
	if last != want {
		return nil, fmt.Errorf("checksum line %q, computed %q", last, want)
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if lines[0] != queueManifestHeader {
		return nil, fmt.Errorf("first line is not %q", queueManifestHeader)
	}
	out := make([]queueEnd, 0, len(lines)-1)
	for n, line := range lines[1:] {
		f := strings.Split(line, " ")
		if len(f) != 3 || f[0] == "" {
			return nil, fmt.Errorf("line %d: %q is not \"<topic> <queueId> <maxOffset>\"", n+2, line)
		}
		id, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || id < 0 || off < 0 {
			return nil, fmt.Errorf("line %d: %q is not \"<topic> <queueId> <maxOffset>\"", n+2, line)
		}
		out = append(out, queueEnd{topic: f[0], id: int32(id), maxOff: off})
	}
	return out, nil
}

// writeQueueManifest records every queue with entries (clean Close).
func (s *Store) writeQueueManifest() error {
	var qs []queueEnd
	for _, cq := range s.allCQs() {
		if m := cq.maxOff.Load(); m > 0 {
			qs = append(qs, queueEnd{topic: cq.topic, id: cq.queueID, maxOff: m})
		}
	}
	path := filepath.Join(s.opts.Root, queueManifestName)
	if err := fsutil.WriteFileAtomic(path, appendQueueManifest(nil, qs), 0o644); err != nil {
		return fmt.Errorf("store: write queue manifest: %w", err)
	}
	return nil
}

// readQueueManifest returns the manifest of the last clean shutdown;
// ok=false when there is none (a store written before it existed). A
// damaged manifest is a *CorruptError.
func readQueueManifest(root string) ([]queueEnd, bool, error) {
	path := filepath.Join(root, queueManifestName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: read %s: %w", path, err)
	}
	qs, err := parseQueueManifest(b)
	if err != nil {
		return nil, false, &CorruptError{File: path, Reason: "queue manifest", Err: err}
	}
	return qs, true, nil
}
