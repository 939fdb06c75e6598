package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/smartgo/smartgo/internal/fsutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// Metadata files live under <store root>/config/ as JSON, each replaced
// atomically (temp file, fsync, rename, fsync dir) on every persist:
//
//	topic.json              {"dataVersion":{...},"topicConfigTable":{"T":TopicConfig,...}}
//	subscriptionGroup.json  {"dataVersion":{...},"subscriptionGroupTable":{"G":SubscriptionGroupConfig,...}}
//	consumerOffset.json     {"offsetTable":{"topic@group":{"0":12,...},...}}
//	delayOffset.json        {"offsetTable":{"1":34,...}}   (delay level -> schedule queue offset)
//
// The same JSON is what a slave fetches from its master (GET_ALL_*). The
// two offset files each have a spare, <name>.spare, that keeps what a
// full disk did not let replace them (configspare.go).

// Config file names under <store root>/config.
const (
	TopicConfigFile       = "topic.json"
	SubscriptionGroupFile = "subscriptionGroup.json"
	ConsumerOffsetFile    = "consumerOffset.json"
	DelayOffsetFile       = "delayOffset.json"
)

// readConfig decodes path into v; a missing file leaves v untouched and
// returns false. An empty file is damage, not "no file": every write
// replaces the file atomically with at least "{}", so zero bytes mean the
// file was truncated outside the broker (an operator, fsck, a full disk
// under a tool that rewrote it). Reading it as empty would drop every
// topic, group or committed offset without a word; it is refused like
// any other damaged file.
func readConfig(path string, v any) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("broker: read %s: %w", path, err)
	}
	if err := decodeConfig(path, data, v); err != nil {
		return false, err
	}
	return true, nil
}

// decodeConfig decodes data, the content of the file at path, into v.
func decodeConfig(path string, data []byte, v any) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: %s: empty file (restore it from a backup or a slave, or delete it to start without it)", ErrCorruptConfig, path)
	}
	// Every write is a JSON object; "null" used to load as an empty table.
	if err := protocol.DecodeJSONObject(data, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorruptConfig, path, err)
	}
	return nil
}

// writeConfig encodes v and replaces path atomically.
func writeConfig(path string, v any) error {
	data, err := encodeConfig(path, v)
	if err != nil {
		return err
	}
	return writeConfigData(path, data)
}

// encodeConfig is v as the JSON of the file at path.
func encodeConfig(path string, v any) ([]byte, error) {
	data, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		return nil, fmt.Errorf("broker: encode %s: %w", path, err)
	}
	return data, nil
}

// writeConfigData replaces the file at path with data atomically.
func writeConfigData(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("broker: create config dir: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, data, 0o644); err != nil {
		return fmt.Errorf("broker: persist %s: %w", filepath.Base(path), err)
	}
	return nil
}

// dataVersion is a DataVersion bumped on every change: the timestamp of the
// change in ms and a counter that only grows.
type dataVersion struct {
	mu sync.Mutex
	v  protocol.DataVersion // protected by mu
	// onBump, when set (before the table is shared), runs after every
	// bump; it must not block (the broker's metadata notice, metasync.go).
	onBump func()
}

func (d *dataVersion) bump(now time.Time) protocol.DataVersion {
	d.mu.Lock()
	d.v.Counter++
	d.v.Timestamp = now.UnixMilli()
	v := d.v
	d.mu.Unlock()
	if d.onBump != nil {
		d.onBump()
	}
	return v
}

func (d *dataVersion) get() protocol.DataVersion {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.v
}

func (d *dataVersion) set(v protocol.DataVersion) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.v = v
}
