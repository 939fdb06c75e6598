package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/smartgo/smartgo/internal/fsutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// offsetStore keeps a consumer group's consume offsets: in memory, and
// durably on the brokers (clustering) or in a local file (broadcasting).
type offsetStore interface {
	// read returns the offset of mq, -1 when none is stored anywhere.
	read(ctx context.Context, mq MessageQueue, memoryFirst bool) (int64, error)
	update(mq MessageQueue, offset int64, increaseOnly bool)
	// persist writes the offsets of mqs durably.
	persist(ctx context.Context, mqs []MessageQueue) error
	remove(mq MessageQueue)
	memory(mq MessageQueue) (int64, bool)
}

type memOffsets struct {
	mu      sync.Mutex
	offsets map[MessageQueue]int64 // protected by mu
}

func (m *memOffsets) update(mq MessageQueue, off int64, increaseOnly bool) {
	if off < 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.offsets[mq]; ok && increaseOnly && cur >= off {
		return
	}
	m.offsets[mq] = off
}

func (m *memOffsets) memory(mq MessageQueue) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	off, ok := m.offsets[mq]
	return off, ok
}

func (m *memOffsets) remove(mq MessageQueue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.offsets, mq)
}

// remoteOffsets commits to the broker of each queue (clustering).
type remoteOffsets struct {
	memOffsets
	core  *core
	group string
}

func newRemoteOffsets(c *core, group string) *remoteOffsets {
	return &remoteOffsets{memOffsets: memOffsets{offsets: map[MessageQueue]int64{}}, core: c, group: group}
}

func (r *remoteOffsets) read(ctx context.Context, mq MessageQueue, memoryFirst bool) (int64, error) {
	if memoryFirst {
		if off, ok := r.memory(mq); ok {
			return off, nil
		}
	}
	off, err := queryConsumerOffset(ctx, r.core, r.group, mq)
	if err != nil {
		return 0, err
	}
	if off >= 0 {
		r.update(mq, off, false)
	}
	return off, nil
}

// queryConsumerOffset asks the queue's broker for the group's offset; -1
// means none (QUERY_NOT_FOUND).
func queryConsumerOffset(ctx context.Context, c *core, group string, mq MessageQueue) (int64, error) {
	// The master, else a slave (which keeps offsets while the master is
	// down, as Java's offset store does).
	addr := c.brokerAddr(mq.BrokerName, protocol.MasterID)
	if addr == "" {
		return 0, fmt.Errorf("%w: no broker for %s", ErrBrokerUnavailable, mq.BrokerName)
	}
	cctx, cancel := c.callCtx(ctx, 0)
	defer cancel()
	resp, err := c.invoke(cctx, "query offset", addr, protocol.NewRequest(protocol.QueryConsumerOffset,
		&protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: mq.Topic, QueueID: mq.QueueID}, nil))
	if err != nil {
		return 0, err
	}
	switch resp.Code {
	case protocol.Success:
		var h protocol.OffsetResponseHeader
		if err := resp.DecodeHeader(&h); err != nil {
			return 0, fmt.Errorf("client: query offset response: %w", err)
		}
		return h.Offset, nil
	case protocol.QueryNotFound:
		return -1, nil
	}
	return 0, newBrokerError("query offset", addr, resp)
}

// updateConsumerOffset commits one queue's offset to its broker.
func updateConsumerOffset(ctx context.Context, c *core, group string, mq MessageQueue, off int64) error {
	addr := c.brokerAddr(mq.BrokerName, protocol.MasterID)
	if addr == "" {
		return fmt.Errorf("%w: no broker for %s", ErrBrokerUnavailable, mq.BrokerName)
	}
	cctx, cancel := c.callCtx(ctx, 0)
	defer cancel()
	_, err := c.invokeOK(cctx, "commit offset", addr, protocol.NewRequest(protocol.UpdateConsumerOffset,
		&protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: mq.Topic, QueueID: mq.QueueID, CommitOffset: off}, nil))
	return err
}

func (r *remoteOffsets) persist(ctx context.Context, mqs []MessageQueue) error {
	var errs []error
	for _, mq := range mqs {
		off, ok := r.memory(mq)
		if !ok {
			continue
		}
		if err := updateConsumerOffset(ctx, r.core, r.group, mq, off); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// localOffsets keeps broadcasting offsets in a file.
//
// File format (UTF-8 JSON, keys sorted), at <OffsetDir>/<group>/offsets.json:
//
//	{"offsetTable":{"<topic>@<brokerName>@<queueId>":<offset>,...}}
//
// written with fsutil.WriteFileAtomic (temp file, fsync, rename, fsync dir).
// Pinned by TestClientLocalOffsetFileFormat.
type localOffsets struct {
	memOffsets
	path string
}

type localOffsetFile struct {
	OffsetTable map[string]int64 `json:"offsetTable"`
}

func offsetKey(mq MessageQueue) string {
	return mq.Topic + "@" + mq.BrokerName + "@" + strconv.Itoa(int(mq.QueueID))
}

func parseOffsetKey(k string) (MessageQueue, bool) {
	i := strings.LastIndexByte(k, '@')
	if i < 0 {
		return MessageQueue{}, false
	}
	q, err := strconv.Atoi(k[i+1:])
	if err != nil {
		return MessageQueue{}, false
	}
	rest := k[:i]
	j := strings.LastIndexByte(rest, '@')
	if j < 0 {
		return MessageQueue{}, false
	}
	return MessageQueue{Topic: rest[:j], BrokerName: rest[j+1:], QueueID: int32(q)}, true
}

func defaultOffsetDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".smartgo_offsets")
}

func newLocalOffsets(dir, group string) (*localOffsets, error) {
	l := &localOffsets{memOffsets: memOffsets{offsets: map[MessageQueue]int64{}}, path: filepath.Join(dir, group, "offsets.json")}
	data, err := os.ReadFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: read offsets: %w", err)
	}
	// Every write is a JSON object naming queues; anything else ("null",
	// an empty file, a key that names no queue) used to load as no
	// offsets, and the consumer started over from its first-start
	// position.
	var f localOffsetFile
	if err := protocol.DecodeJSONObject(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrOffsetFile, l.path, err)
	}
	for k, v := range f.OffsetTable {
		mq, ok := parseOffsetKey(k)
		if !ok {
			return nil, fmt.Errorf("%w: %s: key %q is not topic@broker@queueId", ErrOffsetFile, l.path, k)
		}
		l.offsets[mq] = v
	}
	return l, nil
}

func (l *localOffsets) read(ctx context.Context, mq MessageQueue, memoryFirst bool) (int64, error) {
	if off, ok := l.memory(mq); ok {
		return off, nil
	}
	return -1, nil
}

func (l *localOffsets) persist(ctx context.Context, mqs []MessageQueue) error {
	l.mu.Lock()
	f := localOffsetFile{OffsetTable: make(map[string]int64, len(l.offsets))}
	for mq, off := range l.offsets {
		f.OffsetTable[offsetKey(mq)] = off
	}
	l.mu.Unlock()
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("client: encode offsets: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return fmt.Errorf("client: offsets dir: %w", err)
	}
	if err := fsutil.WriteFileAtomic(l.path, data, 0o644); err != nil {
		return fmt.Errorf("client: write offsets: %w", err)
	}
	return nil
}

// remove keeps broadcasting offsets in the file (another start resumes
// from them); only memory of the current assignment is dropped.
func (l *localOffsets) remove(mq MessageQueue) {}
