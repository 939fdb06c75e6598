package statestore

import (
	"bytes"
	"slices"
	"strings"
	"time"
)

// KeyInfo is one key as Scan returns it. Value is shared with the engine:
// do not modify it.
type KeyInfo struct {
	Key      []byte
	Value    []byte
	Version  HLC
	ExpireAt int64 // Unix milliseconds; 0 = never
}

// Scan returns the keys live at now that start with prefix and sort after
// after (byte order; nil after = from the first), at most limit of them,
// and whether more keys follow. It is for operators browsing the store:
// it walks every key under the engine's lock, so it costs a few
// milliseconds per million keys of the shard.
func (e *Engine) Scan(prefix, after []byte, limit int, now time.Time) ([]KeyInfo, bool) {
	if limit <= 0 {
		return nil, false
	}
	ms := now.UnixMilli()
	p, a := string(prefix), string(after)
	var out []KeyInfo
	e.mu.Lock()
	for k, it := range e.st.keys {
		if strings.HasPrefix(k, p) && (after == nil || k > a) && !it.expiredAt(ms) {
			// A SET replaces an item's value slice, never its bytes: the
			// slice may be read after the lock.
			out = append(out, KeyInfo{Key: []byte(k), Value: it.value(), Version: it.version, ExpireAt: it.expireAt})
		}
	}
	e.mu.Unlock()
	slices.SortFunc(out, compareKeys)
	more := len(out) > limit
	out = out[:min(len(out), limit)]
	return out, more
}

// compareKeys orders KeyInfos by key (for merging shards' pages).
func compareKeys(x, y KeyInfo) int { return bytes.Compare(x.Key, y.Key) }
